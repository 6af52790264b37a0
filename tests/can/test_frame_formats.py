"""A frame id is (id, extended): a 29-bit frame is never read as the 11-bit message.

Another node on the bus sends the extended frame 0x00000100 next to the demo database's
11-bit EngineData (0x100); every reader must keep them apart.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

import can
from hwbridge import CanDriver, DriverResponse
from hwbridge.can.transport.adapter import build_message
from hwbridge.can.transport.monitor import BusMonitor
from tests.can.test_driver import DEMO
from tests.conftest import wait_until

pytestmark = pytest.mark.timeout(30)

ENGINE_2000_RPM = bytes.fromhex("401F190000000000")  # EngineSpeed 2000, CoolantTemp -40


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def extended_0x100(data: bytes = b"\xff" * 8) -> can.Message:
    return can.Message(arbitration_id=0x100, data=data, is_extended_id=True)


def test_read_tools_ignore_a_29_bit_frame_with_the_same_number(
    channel: str, peer: can.BusABC
) -> None:
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        monitor = d.networks["can"].monitor
        assert monitor is not None
        peer.send(extended_0x100())
        assert wait_until(lambda: monitor.frames_total == 1)

        read = call(d, "read_signals", signals=["EngineSpeed", "CoolantTemp"], timeout_ms=50)
        assert read.tool_call_result["values"] == {}
        assert set(read.tool_call_result["not_received"]) == {"EngineSpeed", "CoolantTemp"}
        waited = call(d, "wait_for_signal", signal="CoolantTemp", op=">", value=200, timeout_ms=50)
        assert waited.tool_call_result["met"] is False
        assert waited.tool_call_result["last_value"] is None
        message = call(d, "read_message", message="EngineData", timeout_ms=50)
        assert (message.call_detail or "").startswith("NOT_RECEIVED")
        status = call(d, "bus_status").tool_call_result
        assert status["ids_not_in_database"] == ["0x00000100"]

        peer.send(build_message(0x100, ENGINE_2000_RPM, extended=False))
        peer.send(extended_0x100())  # newer, and still not EngineData
        assert wait_until(lambda: monitor.frames_total == 3)
        read = call(d, "read_signals", signals=["EngineSpeed", "CoolantTemp"], timeout_ms=50)
        values = read.tool_call_result["values"]
        assert values["EngineSpeed"]["value"] == 2000
        assert values["CoolantTemp"]["value"] == -40
        message = call(d, "read_message", message="EngineData", timeout_ms=50)
        assert message.tool_call_result["id"] == "0x100"
        assert message.tool_call_result["data"] == ENGINE_2000_RPM.hex(" ").upper()


def test_capture_counts_each_format_as_its_own_frame(channel: str, peer: can.BusABC) -> None:
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        result: list[DriverResponse] = []

        def send_during_capture() -> None:
            for _ in range(3):
                peer.send(extended_0x100())
            peer.send(build_message(0x100, ENGINE_2000_RPM, extended=False))

        timer = threading.Timer(0.05, send_during_capture)
        timer.start()
        result.append(call(d, "capture", duration_ms=300))
        timer.join()
    summary = result[0].tool_call_result
    assert summary["messages"]["EngineData"]["count"] == 1
    assert summary["unknown_ids"] == {"0x00000100": 3}


def test_decode_frame_reads_eight_hex_digits_as_a_29_bit_id() -> None:
    with CanDriver.from_dbc(DEMO) as d:
        standard = call(d, "decode_frame", id="0x100", data=ENGINE_2000_RPM.hex())
        assert standard.tool_call_result["message"] == "EngineData"
        assert standard.tool_call_result["extended"] is False
        extended = call(d, "decode_frame", id="0x00000100", data=ENGINE_2000_RPM.hex())
        assert (extended.call_detail or "").startswith("UNKNOWN_MESSAGE")
        assert "29-bit" in (extended.call_detail or "")


def test_monitor_keys_latest_counts_and_waiters_by_format() -> None:
    monitor = BusMonitor()
    ext = extended_0x100(b"\x01")
    ext.timestamp = 1.0
    std = build_message(0x100, b"\x02", extended=False)
    std.timestamp = 2.0
    monitor.on_message(ext)
    assert monitor.latest(0x100) is None
    latest_ext = monitor.latest(0x100, extended=True)
    assert latest_ext is not None and latest_ext.data == b"\x01"
    assert monitor.wait_for(0x100, timeout_s=0, accept_latest=True) is None
    monitor.on_message(std)
    monitor.on_message(ext)
    assert monitor.frame_ids() == [(0x100, False), (0x100, True)]
    stats = monitor.stats()
    assert stats.ids[0x100].count == 1 and stats.ids[(0x100, True)].count == 2
    latest_std = monitor.latest(0x100)
    assert latest_std is not None and latest_std.data == b"\x02"
    assert [r.data for r in monitor.history(ids=[(0x100, True)])] == [b"\x01", b"\x01"]
    assert [r.data for r in monitor.history(ids=[0x100])] == [b"\x02"]


def test_database_lookups_by_id_text_respect_the_format(tmp_path: Any) -> None:
    from hwbridge.can.database.database import CanDatabase

    dbc = tmp_path / "both.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: A\n\n'
        'BO_ 256 Standard: 8 A\n SG_ x : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BO_ 2147483904 Extended: 8 A\n SG_ y : 0|8@1+ (1,0) [0|255] "" A\n'
    )
    db = CanDatabase.load(dbc)
    assert db.message("0x100").name == "Standard"
    assert db.message("0x00000100").name == "Extended"
    assert [m["name"] for m in db.list_messages("0x00000100")] == ["Extended"]
    extended, standard = db.message_for_frame(0x100, True), db.message_for_frame(0x100, False)
    assert extended is not None and extended.name == "Extended"
    assert standard is not None and standard.name == "Standard"
