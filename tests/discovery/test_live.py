"""The discovery tools on a live bus: the simulated demo vehicle with a GNSS module, read by a
driver that has no database of the vehicle (CanDriver.from_bus) or only part of it
(CanDriver.from_dbc(discovery=True)). They listen only: nothing is ever sent."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cantools
import pytest

import can
from firmware_sim import VirtualVehicle
from hwbridge import CanDriver
from hwbridge.discovery.bits import cantools_chain
from hwbridge.resources import bundled_dbc

REPO = Path(__file__).resolve().parents[2]
GNSS = bundled_dbc("gnss_module.dbc")


@pytest.fixture(scope="module")
def channel() -> Iterator[str]:
    """The demo vehicle pulling away, a GNSS module on its bus."""
    name = f"discover-{uuid.uuid4().hex[:8]}"
    with VirtualVehicle([bundled_dbc(), GNSS], channel=name, drive=False) as car:
        car.set_gear("D")
        car.set_throttle(25)
        yield name


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def test_a_known_signal_finds_the_field_that_moves_with_it(channel: str) -> None:
    """correlate_signal ranks the vehicle's own speed first, scaled to the GNSS unit; it is
    then defined and read, waited on and captured like any signal of a database."""
    with CanDriver.from_bus(f"virtual:{channel}", reference=GNSS) as driver:
        found = call(driver, "correlate_signal", signal="GnssSpeedKmh", duration_ms=2500)
        top = found["candidates"][0]
        assert (top["id"], top["start_bit"], top["byte_order"]) == (0x110, 0, "little_endian")
        assert top["r"] > 0.99 and abs(top["scale"] / 0.01 - 1) < 0.02
        assert found["unit"] == "km/h"
        assert found["returned"] == len(found["candidates"]) <= found["total"]
        assert found["truncated"] is (found["returned"] < found["total"])
        defined = call(driver, "define_signal", name="Speed", id=top["id"], start_bit=0, length=16,
                       byte_order="little_endian", scale=0.01, unit="km/h")  # fmt: skip
        assert defined["message"] == "MSG_110" and defined["value"] >= 0
        waited = call(driver, "wait_for_signal", signal="Speed", op=">=", value=0, timeout_ms=1000)
        assert waited["met"] is True
        captured = call(driver, "capture", duration_ms=200, messages=["MSG_110"])
        assert "MSG_110" in json.dumps(captured)
        assert "Speed" in {s.name for m in driver.database.messages for s in m.signals}


def test_a_partial_database_is_never_rediscovered(channel: str, tmp_path: Path) -> None:
    """With the demo DBC's EngineData and VehicleDynamics known, survey_bus offers no field
    over their signals' bits and lists them as known; the other ids get fields."""
    full = cantools.database.load_file(bundled_dbc(), strict=False)
    assert isinstance(full, cantools.database.can.Database)
    known = [m for m in full.messages if m.name in ("EngineData", "VehicleDynamics")]
    partial = cantools.database.can.Database(messages=known)
    path = tmp_path / "partial.dbc"
    path.write_text(partial.as_dbc_string())
    with CanDriver.from_dbc(path, bus=f"virtual:{channel}", discovery=True) as driver:
        assert "survey_bus" in {t.name for t in driver.list_tools()}
        assert "survey_bus" in driver.get_driver_system_message()
        survey = call(driver, "survey_bus", duration_ms=1500)
        assert {"EngineData", "VehicleDynamics"} <= set(survey["known_messages"])
        assert survey["returned"] == len(survey["messages"]) <= survey["total"]
        assert survey["truncated"] is (survey["returned"] < survey["total"])
        explained = {
            (int(m.frame_id), b)
            for m in known
            for s in m.signals
            for b in cantools_chain(s.start, s.length, s.byte_order)
        }
        for m in survey["messages"]:
            for f in m["signals"]:
                bits = cantools_chain(f["start_bit"], f["length"], f["byte_order"])
                assert not {(m["id"], b) for b in bits} & explained, f
        assert any(m["id"] == 0x650 and m["signals"] for m in survey["messages"])


def test_the_discovery_tools_send_nothing(channel: str) -> None:
    quiet = f"{channel}-quiet"
    listener = can.Bus(interface="virtual", channel=quiet)
    try:
        with CanDriver.from_bus(f"virtual:{quiet}") as driver:
            for tool, args in [
                ("survey_bus", {"duration_ms": 100}),
                ("snapshot_bus", {"name": "a", "duration_ms": 100}),
                ("correlate_signal", {"signal": "Nope", "duration_ms": 100}),
                ("define_signal", {"name": "X", "id": 5, "start_bit": 0, "length": 4, "byte_order": "little_endian"}),
                ("draft_dbc", {}),
                ("mark_event", {"name": "brake pressed"}),
                ("rank_events", {"window_ms": 100}),
            ]:  # fmt: skip
                driver.process_llm_response(json.dumps({"tool": tool, "arguments": args}))
        assert listener.recv(0.2) is None
    finally:
        listener.shutdown()


@pytest.mark.slow
def test_the_example_runs_as_written() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "discover_demo.py")],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "recorded, not produced by a live model" in out.stdout
    assert " SG_ VehicleSpeed : 0|16@1+ (0.01,0" in out.stdout
    assert "discovery demo finished" in out.stdout
