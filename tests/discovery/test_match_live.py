"""`match_known_databases` on a live bus: the simulated demo vehicle and a GNSS module on a
python-can virtual bus, a driver with no database of either (CanDriver.from_bus) that is
given the vehicle's DBC among the databases to match. It listens only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firmware_sim import VirtualVehicle
from hwbridge import CanDriver
from hwbridge.resources import bundled_dbc

GNSS = bundled_dbc("gnss_module.dbc")
DEMO = bundled_dbc()


@pytest.fixture(scope="module")
def channel() -> Iterator[str]:
    name = f"match-{uuid.uuid4().hex[:8]}"
    with VirtualVehicle([DEMO, GNSS], channel=name, drive=False) as car:
        car.set_gear("D")
        car.set_throttle(20)
        yield name


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def test_the_vehicles_database_is_ranked_first_and_adopted(channel: str) -> None:
    """Ranked first and named the best fit; with adopt=true its messages join the session's
    database: read by name at once, and no longer searched by survey_bus."""
    with CanDriver.from_bus(f"virtual:{channel}", known_databases=[DEMO]) as driver:
        tool = next(t for t in driver.list_tools() if t.name == "match_known_databases")
        assert tool.read_only
        assert "match_known_databases" in driver.get_driver_system_message()
        ranked = call(driver, "match_known_databases", duration_ms=1500)
        best = ranked["matches"][0]
        assert best["database"] == DEMO.name and best["checked"]
        assert best["checks"]["length_ok"] == 1.0 and best["checks"]["bits_covered"] == 1.0
        assert ranked["best_fit"] == DEMO.name and "adopted" not in ranked
        assert ranked["returned"] == len(ranked["matches"]) <= ranked["total"]
        assert "EngineData" not in driver.database  # ranking alone adopts nothing
        adopted = call(driver, "match_known_databases", duration_ms=1500, adopt=True)
        assert adopted["adopted"] == DEMO.name
        assert "EngineData" in adopted["messages_added"]
        assert "EngineData" in driver.database
        read = call(driver, "read_signals", signals=["EngineSpeed"])
        assert read["values"]["EngineSpeed"]["value"] > 0
        survey = call(driver, "survey_bus", duration_ms=1000)
        assert "EngineData" in survey["known_messages"]
        assert all(m["id"] != 0x100 for m in survey["messages"])  # EngineData's id
        again = call(driver, "match_known_databases", duration_ms=500, adopt=True)
        assert again["messages_added"] == []  # nothing left to add


def test_a_database_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such database file or folder"):
        CanDriver.from_bus("virtual:nowhere", known_databases=[tmp_path / "missing.dbc"])
