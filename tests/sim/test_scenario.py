"""Scenarios (issue 37): a drive scripted in phases, validated as user input, that the vehicle
model follows (speed, gear, engine, OBD-II answers) and that holds signals of any database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import cantools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from firmware_sim import cli
from firmware_sim.clock import SimulatedClock
from firmware_sim.scenario import (
    MAX_SCENARIO_BYTES,
    ScenarioError,
    bundled_scenarios,
    load_scenario,
    parse_scenario,
)
from firmware_sim.vehicle import VirtualVehicle
from tests.sim.test_any_database import USER_DBC

DRIVE = """
[[phase]]
name = "park"
seconds = 3
speed_kmh = 0

[[phase]]
name = "accelerate"
seconds = 10
speed_kmh = 50
signals = { HUMIDITY = 42.5, "BODY.SEATBELT_UNLATCHED" = true }

[[phase]]
name = "stop and get out"
seconds = 10
speed_kmh = 0
doors = { front_left = true }
fault = "overheat"
"""


@pytest.fixture
def theirs(tmp_path: Path) -> Path:
    path = tmp_path / "theirs.dbc"
    path.write_text(USER_DBC)
    return path


def _run(theirs: Path, scenario: Any, checkpoints: list[float], seed: int = 0) -> list[Any]:
    """(state, BODY decoded) at each checkpoint (seconds from the start)."""
    db: Any = cantools.database.load_file(str(theirs), strict=False)
    body = db.get_message_by_name("BODY")
    clock = SimulatedClock()
    channel = f"scenario-{time.monotonic_ns()}"
    out = []
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(
            str(theirs), channel=channel, clock=clock, scenario=scenario, seed=seed, obd=False
        ) as car,
    ):
        now = 0.0
        for moment in checkpoints:
            clock.advance(moment - now)
            now = moment
            frames = [m for m in iter(lambda: peer.recv(0), None) if m.arbitration_id == 514]
            out.append((car.state, body.decode(bytes(frames[-1].data), decode_choices=False)))
    return out


def test_the_vehicle_follows_the_scenario(theirs: Path) -> None:
    (parked, _), (moving, held), (stopped, out) = _run(
        theirs, parse_scenario(DRIVE), [2.5, 12.5, 24.0]
    )
    assert parked.vehicle_speed_kmh == 0 and parked.gear_lever == "P"
    assert parked.drive_phase == "park"
    assert moving.drive_phase == "accelerate" and moving.gear_lever == "D"
    assert 40 <= moving.vehicle_speed_kmh <= 55 and moving.current_gear >= 2
    assert moving.engine_speed_rpm > 1000
    assert held["HUMIDITY"] == 42.5 and held["SEATBELT_UNLATCHED"] == 1  # held in the phase
    assert stopped.vehicle_speed_kmh < 1 and stopped.doors["front_left"]
    assert out["DOOR_OPEN_FL"] == 1 and out["HUMIDITY"] != 42.5  # released after it
    assert stopped.overheating and stopped.coolant_temp_c > 100


def test_the_same_seed_drives_the_same_frames(theirs: Path) -> None:
    first = _run(theirs, parse_scenario(DRIVE), [5.0, 9.0], seed=4)
    second = _run(theirs, parse_scenario(DRIVE), [5.0, 9.0], seed=4)
    assert [b for _, b in first] == [b for _, b in second]
    assert [s.vehicle_speed_kmh for s, _ in first] == [s.vehicle_speed_kmh for s, _ in second]


def test_bundled_scenarios_load_and_name_the_drive() -> None:
    assert {"park_accelerate_door", "stop_and_go", "overheat_on_motorway"} <= set(
        bundled_scenarios()
    )
    scenario = load_scenario("park_accelerate_door")
    assert scenario.phase[-1].doors == {"front_left": True}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[phase]]\nseconds = 3\n", "phase 1.speed_kmh: Field required"),
        ("[[phase]]\nseconds = -1\nspeed_kmh = 0\n", "phase 1.seconds"),
        ("[[phase]]\nseconds = 1\nspeed_kmh = 0\nfualt = 'x'\n", "phase 1.fualt"),
        ("[[phase]]\nseconds = 1\nspeed_kmh = 0\nfault = 'meltdown'\n", "unknown fault"),
        ("[[phase]]\nseconds = 1\nspeed_kmh = 0\nfault = 'silence'\n", "silence:MESSAGE"),
        ("[[phase]]\nseconds = 1\nspeed_kmh = 900\n", "phase 1.speed_kmh"),
        ("phase = 3", "phase"),
        ("[[phase]\n", "not valid TOML"),
        ("", "phase: Field required"),
    ],
)
def test_a_bad_scenario_is_one_clear_error(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_scenario_file_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * MAX_SCENARIO_BYTES + "\n")
    with pytest.raises(ScenarioError, match="larger than"):
        load_scenario(big)
    with pytest.raises(ScenarioError, match="bundled scenarios: "):
        load_scenario("no_such_scenario")


def test_a_scenario_naming_a_signal_the_database_lacks_is_refused(theirs: Path) -> None:
    text = "[[phase]]\nseconds = 1\nspeed_kmh = 0\nsignals = { NO_SUCH = 1 }\n"
    with pytest.raises(ScenarioError, match="NO_SUCH"):
        VirtualVehicle(str(theirs), channel="unused", scenario=parse_scenario(text))


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_scenario_or_a_scenario_error(text: str) -> None:
    problem = ""
    try:
        parse_scenario(text)
    except ScenarioError as exc:
        problem = str(exc)
    assert "\n" not in problem


def test_the_cli_refuses_a_bad_scenario_with_one_line(
    theirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[phase]]\nseconds = 0\nspeed_kmh = 10\n")
    assert cli.main(["--dbc", str(theirs), "--scenario", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "phase 1.seconds" in err and err.count("\n") == 1
