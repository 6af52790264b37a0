"""Every list a model reads says how much of it it got: `total`, `returned` and `truncated`
beside the list (existing keys such as `more`, `more_messages` and `count` stay)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hwbridge import CanDriver, DriverResponse
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.tools.tool_driver import MAX_LISTED
from tests.can.ecu import Ecu
from tests.can.test_driver import DEMO
from tests.conftest import wait_until

pytestmark = pytest.mark.timeout(30)


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def _counts(result: dict[str, Any]) -> tuple[int, int, bool]:
    return result["total"], result["returned"], result["truncated"]


def _many_messages(tmp_path: Path, n: int) -> Path:
    lines = ['VERSION ""', "BS_:", "BU_: ECU"]
    for i in range(n):
        lines += [
            f"BO_ {0x100 + i} Msg{i:03d}: 8 ECU",
            f' SG_ Speed{i:03d} : 0|16@1+ (1,0) [0|1] "km/h" ECU',
        ]
    path = tmp_path / "many.dbc"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_list_messages_and_search_signals_say_how_much_was_cut(tmp_path: Path) -> None:
    n = MAX_LISTED + 15
    with CanDriver.from_dbc(_many_messages(tmp_path, n), exposure="catalog") as driver:
        listed = call(driver, "list_messages").tool_call_result
        assert _counts(listed) == (n, MAX_LISTED, True)
        assert listed["more"] == n - MAX_LISTED and len(listed["messages"]) == MAX_LISTED
        few = call(driver, "list_messages", filter="Msg00*").tool_call_result
        assert _counts(few) == (10, 10, False) and "more" not in few
        found = call(driver, "search_signals", query="speed", limit=5).tool_call_result
        assert found["returned"] == len(found["results"]) == 5
        assert found["total"] >= n and found["truncated"] is True
        exact = call(driver, "search_signals", query="Speed007", limit=5).tool_call_result
        assert exact["results"][0]["signal"] == "Speed007"
        assert exact["total"] >= exact["returned"] >= 1
        nothing = call(driver, "search_signals", query="zzqqxx").tool_call_result
        assert _counts(nothing) == (0, 0, False) and nothing["results"] == []


def test_capture_counts_the_messages_it_summarised(channel: str) -> None:
    db = CanDatabase.load(DEMO)
    with (
        Ecu(db, channel, {"EngineData": {"EngineSpeed": 800}}, period_s=0.01),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as driver,
    ):
        monitor = driver.networks["can"].monitor
        assert monitor is not None
        assert wait_until(lambda: monitor.frames_total > 5)
        summary = call(driver, "capture", duration_ms=200).tool_call_result
    assert _counts(summary) == (1, 1, False)
    assert list(summary["messages"]) == ["EngineData"]
