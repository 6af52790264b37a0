"""The simulator's frames are pinned: the same seed on a `SimulatedClock` sends the very same
frames (ids, payloads, timestamps, order), on the demo vehicle and on databases it was not
written for, with scenarios and faults. Tests, captures and documentation are made from these
frames, so a change that is meant to be only faster (issue 37's cost per frame) must leave
every one of them as it was.

A digest that changes on purpose (a new motion, another period) is updated here, with the
reason in the commit that changes it.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import can
from firmware_sim.clock import SimulatedClock
from firmware_sim.scenario import parse_scenario
from firmware_sim.vehicle import VirtualVehicle
from tests.shared_data import DATA, HAVE_SHARED, SHARED_REASON
from tests.sim.test_any_database import USER_DBC
from tests.sim.test_scenario import DRIVE

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
GNSS = ROOT / "dbc" / "gnss_module.dbc"
OPENDBC = DATA / "opendbc"

Step = Callable[[VirtualVehicle], None]


def frames_digest(
    dbc: Any, seconds: float, *, steps: dict[float, Step] | None = None, **options: Any
) -> tuple[int, str]:
    """(frames, SHA-256 of every frame) the vehicle sends in `seconds` on a `SimulatedClock`;
    `steps` are done to the vehicle at their moments (seconds from the start)."""
    channel = f"pinned-{uuid.uuid4().hex[:12]}"
    clock = SimulatedClock()
    digest = hashlib.sha256()
    count = 0
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(dbc, channel=channel, clock=clock, obd=False, **options) as car,
    ):
        now = 0.0
        for moment, step in [*sorted((steps or {}).items()), (seconds, None)]:
            clock.advance(moment - now)
            now = moment
            for frame in iter(lambda: peer.recv(0), None):
                count += 1
                digest.update(
                    struct.pack(
                        "<dI5?B",
                        frame.timestamp,
                        frame.arbitration_id,
                        frame.is_extended_id,
                        frame.is_fd,
                        frame.bitrate_switch,
                        frame.is_error_frame,
                        frame.is_remote_frame,
                        frame.dlc,
                    )
                    + bytes(frame.data)
                )
            if step is not None:
                step(car)
    return count, digest.hexdigest()


def _demo_faults() -> dict[float, Step]:
    return {
        1.5: lambda car: car.inject_fault("out_of_range", signal="VehicleSpeed"),
        2.5: lambda car: car.inject_fault("silence", message="EngineData"),
        3.0: lambda car: car.inject_fault("error_frames"),
        4.0: lambda car: car.clear_faults(),
    }


def _user_faults() -> dict[float, Step]:
    return {
        4.0: lambda car: car.inject_fault("out_of_range", signal="GAS_PEDAL"),
        6.0: lambda car: car.inject_fault("silence", message="WHEEL_SPEEDS"),
        9.0: lambda car: car.clear_faults(),
    }


# name -> (frames, digest), taken on the simulator before it was made cheaper per frame
PINNED: dict[str, tuple[int, str]] = {
    "demo": (1763, "e38eab9e965e431fb82268b77995ce3c2c56c91fae4ca588f05d63c0f65ab184"),
    "demo-faults": (1633, "93366c55e4da8de84819f21abcfa9d3c4c49bd0897dd36323020044ed8008cf5"),
    "demo-gnss": (1220, "fdc753c0b6731ffff445f11346a523b6003ae9f4f6e1480548f908bbaa9bade6"),
    "user-scenario": (742, "606732d466addd28687762197333eff69eaac88509a79e655fbe8b3183ee8a66"),
    "ford_lincoln_base_pt.dbc": (
        19525,
        "bff6d1b7cc0fa2a5dd7acd8e7cda5ec6d318454db01c04175c6b9a331eee612f",
    ),
    "toyota_prius_2010_pt.dbc": (
        1326,
        "37513c4331d6c00dcf15571979462c05f7f1c57a5fce42515933993c5caa62dc",
    ),
    "acura_ilx_2016_nidec.dbc": (
        1836,
        "361cd51096048e677dcf46eb507d2ec4143c43ede9270b6b41b0b229398c7c0b",
    ),
    "tesla_model3_party.dbc": (
        1071,
        "98f387539e9492f920e0357593af86b0442491377eb3d9b79373686524c1dd93",
    ),
    "chrysler_pacifica_2017_hybrid_private_fusion.dbc": (
        1581,
        "e109804fab66657bb8f42a5579fba323a2be2e697b1ceae6e6bde5e4f352c4f2",
    ),
    "vw_mqb.dbc": (5763, "2e294ea871070349403183e2e9150c3cf765e3f552bc1a66eb7859e1f7ce4a29"),
    "FORD_CADS_64.dbc": (4061, "c5db1a330b3f8b1c7ed1214ae459750cb943374f44e03d600e396e80b7b1b10a"),
}

OPENDBC_CASES = [
    "ford_lincoln_base_pt.dbc",  # 331 messages: the benchmark's database
    "toyota_prius_2010_pt.dbc",  # toyota checksums
    "acura_ilx_2016_nidec.dbc",  # honda checksums
    "tesla_model3_party.dbc",  # tesla checksums, multiplexed
    "chrysler_pacifica_2017_hybrid_private_fusion.dbc",  # chrysler checksums
    "vw_mqb.dbc",  # multiplexed messages
    "FORD_CADS_64.dbc",  # CAN FD
]


def test_the_demo_vehicle_sends_the_same_frames() -> None:
    assert frames_digest(DEMO, 6.0, seed=0) == PINNED["demo"]


def test_the_demo_vehicle_with_faults_sends_the_same_frames() -> None:
    assert frames_digest(DEMO, 6.0, seed=5, steps=_demo_faults()) == PINNED["demo-faults"]


def test_the_demo_vehicle_and_gnss_module_send_the_same_frames() -> None:
    assert frames_digest([DEMO, GNSS], 4.0, seed=1) == PINNED["demo-gnss"]


def test_a_user_database_with_a_scenario_sends_the_same_frames(tmp_path: Path) -> None:
    path = tmp_path / "theirs.dbc"
    path.write_text(USER_DBC)
    found = frames_digest(
        str(path), 24.0, seed=3, scenario=parse_scenario(DRIVE), steps=_user_faults()
    )
    assert found == PINNED["user-scenario"]


@pytest.mark.skipif(not HAVE_SHARED, reason=SHARED_REASON)
@pytest.mark.parametrize("name", OPENDBC_CASES)
def test_a_real_database_sends_the_same_frames(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's own checksums, whether the opendbc package is installed or not (where
    it is, opendbc's functions compute them: tests/sim/test_opendbc_parser.py)."""
    monkeypatch.setattr("firmware_sim.checksums._opendbc_state", lambda name: None)
    assert frames_digest(OPENDBC / name, 5.0, seed=2) == PINNED[name]
