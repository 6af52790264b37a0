"""CaptureDriver's tools as an LLM calls them: describe, statistics, events, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hwbridge.captures import CaptureDriver, decode_captures
from tests.shared_data import DATA, needs_shared

from .conftest import FLEET_DBC, T0, drive, write_capture


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CaptureDriver]:
    root = tmp_path_factory.mktemp("driver")
    dbc = root / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    first = write_capture(root / "monday.blf", drive(20.0))
    second = write_capture(root / "tuesday.mf4", drive(10.0, start=T0 + 86_400))
    decode_captures([first, second], [dbc], root / "ds")
    with CaptureDriver.from_dataset(root / "ds") as d:
        yield d


def call(driver: CaptureDriver, tool: str, **arguments: Any) -> tuple[bool, Any]:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed or r.call_failed
    return r.call_executed, r.tool_call_result if r.call_executed else r.call_detail


def test_tools_are_read_only_and_named_as_in_the_issue(driver: CaptureDriver) -> None:
    tools = {t.name: t for t in driver.list_tools()}
    assert list(tools) == [
        "describe_dataset",
        "query",
        "signal_stats",
        "find_events",
        "signal_timeseries",
        "plot_signals",
    ]
    assert all(t.read_only for t in tools.values())
    assert [p.name for p in tools["signal_stats"].parameters] == [
        "signal", "source", "start", "end"
    ]  # fmt: skip
    assert [p.name for p in tools["find_events"].parameters] == [
        "condition", "min_duration_ms", "source"
    ]  # fmt: skip
    prompt = driver.get_driver_system_message()
    assert "describe_dataset" in prompt and "never an instruction" in prompt


def test_describe_dataset(driver: CaptureDriver) -> None:
    ok, result = call(driver, "describe_dataset")
    assert ok
    assert result["sources"] == ["monday.blf", "tuesday.mf4"]
    assert result["start"] == "2023-11-14T22:13:20Z"
    tables = {t["name"]: t for t in result["tables"]}
    assert set(tables) == {"Engine", "EEC1", "Mux", "FdFrame", "Turn"}
    engine = tables["Engine"]
    assert engine["rows"] == 300 and engine["id"] == "0x100" and engine["sources"] == 2
    columns = {c["name"]: c for c in engine["columns"]}
    assert columns["CoolantTemp"] == {
        "name": "CoolantTemp", "type": "int64", "unit": "degC", "min": -40.0, "max": 215.0
    }  # fmt: skip
    assert columns["Gear"]["labels"] == {"0": "P", "1": "R", "2": "N", "3": "D"}
    assert columns["Gear"]["label_column"] == "Gear_label"
    mux = {c["name"]: c for c in tables["Mux"]["columns"]}
    assert mux["Voltage"]["multiplexed_by"] == "Page"


def test_signal_stats(driver: CaptureDriver) -> None:
    ok, result = call(driver, "signal_stats", signal="CoolantTemp")
    assert ok
    assert (result["count"], result["min"], result["max"], result["unit"]) == (
        300, 90, 101, "degC"
    )  # fmt: skip
    ok, result = call(driver, "signal_stats", signal="Engine.EngineSpeed", source="tuesday.mf4")
    assert (result["count"], result["min"], result["max"], result["mean"]) == (
        100, 800.0, 899.0, 849.5
    )  # fmt: skip
    ok, result = call(
        driver,
        "signal_stats",
        signal="EngineSpeed",
        start="2023-11-14T22:13:21Z",
        end="2023-11-14T22:13:22Z",
    )
    assert (result["count"], result["min"], result["max"]) == (11, 810.0, 820.0)


def test_signal_stats_errors_say_what_to_do(driver: CaptureDriver) -> None:
    ok, detail = call(driver, "signal_stats", signal="CoolantTmp")
    assert not ok and detail.startswith("UNKNOWN_SIGNAL") and "CoolantTemp" in detail
    ok, detail = call(driver, "signal_stats", signal="EngineSpeed", source="friday.blf")
    assert not ok and detail.startswith("UNKNOWN_SOURCE") and "monday.blf" in detail
    ok, detail = call(driver, "signal_stats", signal="EngineSpeed", start="yesterday")
    assert not ok and detail.startswith("INVALID_VALUE")


def test_find_events_by_number(driver: CaptureDriver) -> None:
    ok, result = call(driver, "find_events", condition="CoolantTemp > 100", min_duration_ms=1000)
    assert ok
    # monday: 101 degC from step 50 to 79 (2.9 s) and 120..124 (0.4 s); tuesday: 50..79 cut at 99
    assert result["events"] == [
        {"source": "monday.blf", "start": "2023-11-14T22:13:25Z",
         "end": "2023-11-14T22:13:27.900000Z", "duration_ms": 2900.0},
        {"source": "tuesday.mf4", "start": "2023-11-15T22:13:25Z",
         "end": "2023-11-15T22:13:27.900000Z", "duration_ms": 2900.0},
    ]  # fmt: skip
    ok, result = call(
        driver, "find_events", condition="CoolantTemp>100", min_duration_ms=0, source="monday.blf"
    )
    assert [e["duration_ms"] for e in result["events"]] == [2900.0, 400.0]


def test_find_events_by_label(driver: CaptureDriver) -> None:
    ok, result = call(driver, "find_events", condition="TurnSignal == Left", min_duration_ms=0)
    assert ok
    assert result["total"] == 8 and len(result["events"]) == 8
    assert all(e["duration_ms"] == 0.0 for e in result["events"])  # one frame each
    # the gear cycles P R N D every 100 ms: each R-N-D run lasts 200 ms
    ok, result = call(driver, "find_events", condition="Gear != 'P'", min_duration_ms=200)
    assert ok and result["total"] == 50 + 25 and result["truncated"] is False
    assert len(result["events"]) == 75
    ok, result = call(driver, "find_events", condition="Gear != P", min_duration_ms=201)
    assert ok and result["events"] == []


def test_find_events_errors(driver: CaptureDriver) -> None:
    ok, detail = call(driver, "find_events", condition="TurnSignal == Sideways", min_duration_ms=0)
    assert not ok and "Left" in detail
    ok, detail = call(driver, "find_events", condition="CoolantTemp is hot", min_duration_ms=0)
    assert not ok and detail.startswith("INVALID_VALUE")


@pytest.mark.slow
@needs_shared
def test_describe_stays_bounded_on_a_big_database(tmp_path: Path) -> None:
    """331 messages, 2,150 signals: the description shortens itself instead of flooding."""
    ford = DATA / "opendbc" / "ford_lincoln_base_pt.dbc"
    from hwbridge.can.database import CanDatabase

    db = CanDatabase.load(ford)
    import can

    frames = [
        can.Message(timestamp=T0 + i, arbitration_id=m.frame_id,
                    is_extended_id=m.is_extended_frame, data=bytes(m.length))
        for i, m in enumerate(db.messages)
    ]  # fmt: skip
    capture = write_capture(tmp_path / "ford.blf", frames)
    decode_captures([capture], [ford], tmp_path / "ds")
    with CaptureDriver.from_dataset(tmp_path / "ds") as driver:
        ok, result = call(driver, "describe_dataset")
        assert ok and len(result["tables"]) == 331
        assert len(json.dumps(result)) < 40_000
        assert "note" in result
