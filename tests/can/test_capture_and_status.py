"""capture and bus_status stay honest under attack: a bus that dies mid-capture, a flood of
invented ids."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import can
from firmware_sim.socketcand import SocketcandServer
from hwbridge import CanDriver, DriverResponse
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.tools.capture import MAX_CAPTURE_MS
from tests.can.ecu import Ecu
from tests.can.test_driver import DEMO
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = pytest.mark.timeout(30)


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


DOWN_AFTER_S = 0.5
"""When the socketcand server is stopped under a capture."""
CAPTURE_MS = MAX_CAPTURE_MS
"""What the capture asks for: far longer than the bus stays up, plus a busy machine's margin."""


def test_a_capture_during_which_the_bus_goes_down_says_so(channel: str) -> None:
    db = CanDatabase.load(DEMO)
    server = SocketcandServer({"vcan0": channel}).start()
    try:
        with (
            Ecu(db, channel, {"EngineData": {"EngineSpeed": 800}}, period_s=0.01),
            CanDriver.from_dbc(DEMO, bus=server.url("vcan0")) as d,
        ):
            monitor = d.networks["can"].monitor
            assert monitor is not None
            assert wait_until(lambda: monitor.frames_total > 5)
            killer = threading.Timer(DOWN_AFTER_S, server.stop)
            started = time.monotonic()
            killer.start()
            r = call(d, "capture", duration_ms=CAPTURE_MS)
            elapsed = time.monotonic() - started
            killer.join()
    finally:
        server.stop()
    assert r.call_executed, r.call_detail
    summary = r.tool_call_result
    # the capture ends with the bus ("at once", capture.py), not after its 10 s
    assert elapsed < DOWN_AFTER_S + BUSY_MARGIN_S
    assert summary["complete"] is False
    assert summary["bus_down"]["requested_ms"] == CAPTURE_MS
    assert 400 <= summary["duration_ms"] < (DOWN_AFTER_S + BUSY_MARGIN_S) * 1000
    engine = summary["messages"]["EngineData"]
    # the rate is over the time the bus was up: about 100 Hz, not count / 3 s
    rate = engine["count"] / (summary["duration_ms"] / 1000)
    assert engine["rate_hz"] == pytest.approx(rate, rel=0.01)
    assert engine["rate_hz"] > 40


def test_bus_status_reports_unknown_ids_that_were_dropped(channel: str, peer: can.BusABC) -> None:
    from hwbridge.can.transport.monitor import DEFAULT_MAX_UNKNOWN_IDS

    flood = DEFAULT_MAX_UNKNOWN_IDS + 500
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        monitor = d.networks["can"].monitor
        assert monitor is not None
        for i in range(flood):
            peer.send(can.Message(arbitration_id=0x1000000 + i, data=b"\x00", is_extended_id=True))
        peer.send(can.Message(arbitration_id=0x100, data=bytes(8), is_extended_id=False))
        assert wait_until(lambda: monitor.frames_total == flood + 1, timeout_s=10)
        status = call(d, "bus_status").tool_call_result
        read = call(d, "read_signals", signals=["EngineSpeed"], timeout_ms=50).tool_call_result
    assert read["values"]["EngineSpeed"]["value"] == 0  # the database's id is still tracked
    assert status["frames_total"] == flood + 1
    assert status["frames_of_dropped_ids"] == 500
    assert status["unknown_ids_dropped"] == pytest.approx(500, rel=0.05)
    assert status["unknown_ids_seen"] == pytest.approx(flood, rel=0.01)
    assert status["ids_seen"] == pytest.approx(flood + 1, rel=0.01)
    assert len(status["ids_not_in_database"]) == 100  # listed up to 100
    assert len(json.dumps(status)) < 8_000
