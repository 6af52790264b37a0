"""A CanDriver reads J1939 messages longer than 8 bytes that its database describes: the
transport protocol (BAM, or RTS/CTS between two other nodes) is put back together passively,
and the frames that carried it stay what the history holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge.can import CanDriver
from hwbridge.can.database.database import CanDatabase
from hwbridge.j1939.transport.multipacket import describes_multipacket
from tests.shared_data import DATA, needs_shared

EC1_DBC = Path(__file__).parents[1] / "can" / "data" / "j1939_ec1.dbc"
# the engine configuration the real truck sends (PGN 65251, 39 bytes, from address 0)
EC1 = bytes.fromhex(
    "5014bd32418c201cdfc02be15834d3a041ffff5209e0470341d07de13041bc03ffff80e0ffffff"
)
EXPECTED = {
    "EngSpeedAtIdlePoint1": 650.0,
    "EngPercentTorqueAtIdlePoint1": 64,
    "EngSpeedAtPoint2": 2086.25,
    "EngPercentTorqueAtPoint2": 15,
}


def _call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def _values(driver: CanDriver, timeout_ms: int = 3000) -> dict[str, Any]:
    r = _call(driver, "read_signals", signals=list(EXPECTED), timeout_ms=timeout_ms)
    assert r.call_executed, r.call_detail
    return {k: v["value"] for k, v in r.tool_call_result["values"].items()}


@pytest.fixture
def peer(channel: str) -> Iterator[can.BusABC]:
    """A plain python-can bus on `channel` (not this folder's J1939 peer): raw TP frames."""
    bus = can.Bus(interface="virtual", channel=channel)
    yield bus
    bus.shutdown()


def _frame(frame_id: int, data: bytes) -> can.Message:
    return can.Message(arbitration_id=frame_id, data=data, is_extended_id=True)


def _bam(peer: can.BusABC, data: bytes, source: int = 0x00, packets: int | None = None) -> None:
    count = (len(data) + 6) // 7
    size = len(data)
    peer.send(
        _frame(0x1CECFF00 | source, bytes([32, size & 0xFF, size >> 8, count, 0xFF, 0xE3, 0xFE, 0]))
    )
    for i in range(packets if packets is not None else count):
        chunk = data[i * 7 : i * 7 + 7].ljust(7, b"\xff")
        peer.send(_frame(0x1CEBFF00 | source, bytes([i + 1]) + chunk))


def test_only_databases_with_long_j1939_messages_listen() -> None:
    assert describes_multipacket(CanDatabase.load(EC1_DBC))
    demo = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"
    assert not describes_multipacket(CanDatabase.load(demo))


def test_a_bam_is_read_like_any_frame_and_stays_out_of_the_history(
    channel: str, peer: can.BusABC
) -> None:
    with CanDriver.from_dbc(EC1_DBC, bus=f"virtual:{channel}") as driver:
        _bam(peer, EC1, source=0x00)
        assert _values(driver) == EXPECTED
        monitor = next(iter(driver.networks.values())).monitor
        assert monitor is not None
        ids = [f.arbitration_id for f in monitor.history()]
        # the history holds what was on the wire: the announcement and six packets
        assert ids == [0x1CECFF00] + [0x1CEBFF00] * 6
        assert monitor.latest(0x18FEE300, extended=True) is not None


def test_an_rts_cts_transfer_between_two_other_nodes_is_read(
    channel: str, peer: can.BusABC
) -> None:
    with CanDriver.from_dbc(EC1_DBC, bus=f"virtual:{channel}") as driver:
        size, count = len(EC1), (len(EC1) + 6) // 7
        # engine (0x00) to a service tool (0xF9): RTS, CTS, packets, end-of-message ack
        peer.send(_frame(0x1CECF900, bytes([16, size, 0, count, 0xFF, 0xE3, 0xFE, 0])))
        peer.send(_frame(0x1CEC00F9, bytes([17, count, 1, 0xFF, 0xFF, 0xE3, 0xFE, 0])))
        for i in range(count):
            chunk = EC1[i * 7 : i * 7 + 7].ljust(7, b"\xff")
            peer.send(_frame(0x1CEBF900, bytes([i + 1]) + chunk))
        peer.send(_frame(0x1CEC00F9, bytes([19, size, 0, count, 0xFF, 0xE3, 0xFE, 0])))
        assert _values(driver) == EXPECTED


def test_a_bam_that_stops_short_is_no_value(channel: str, peer: can.BusABC) -> None:
    with CanDriver.from_dbc(EC1_DBC, bus=f"virtual:{channel}") as driver:
        announced = bytes(1785)
        _bam(peer, announced, packets=3)  # announces 1,785 bytes, sends 21
        _bam(peer, EC1, packets=2)  # a new announcement replaces it; stops short too
        r = _call(driver, "read_signals", signals=["EngSpeedAtIdlePoint1"], timeout_ms=300)
        assert r.call_executed, r.call_detail
        assert r.tool_call_result["values"] == {}
        assert r.tool_call_result["not_received"]["EngSpeedAtIdlePoint1"]["message"] == "EC1"


@needs_shared
def test_the_real_truck_engine_configuration_over_a_replay() -> None:
    truck = DATA / "css" / "truck_j1939_gps.MF4"
    with CanDriver.from_dbc(EC1_DBC, bus=f"replay:{truck}?speed=20") as driver:
        assert _values(driver, timeout_ms=10_000) == EXPECTED


@pytest.mark.parametrize("source", [0x00, 0x17])
def test_any_source_address_is_read_by_pgn(channel: str, peer: can.BusABC, source: int) -> None:
    with CanDriver.from_dbc(EC1_DBC, bus=f"virtual:{channel}") as driver:
        _bam(peer, EC1, source=source)
        assert _values(driver) == EXPECTED


def test_an_announcement_naming_no_parameter_group_is_ignored(
    channel: str, peer: can.BusABC
) -> None:
    with CanDriver.from_dbc(EC1_DBC, bus=f"virtual:{channel}") as driver:
        # a BAM whose PGN bytes are FF FF FF (no parameter group is above 0x3FFFF)
        peer.send(_frame(0x1CECFF00, bytes([32, 9, 0, 2, 0xFF, 0xFF, 0xFF, 0xFF])))
        peer.send(_frame(0x1CEBFF00, bytes([1, 1, 2, 3, 4, 5, 6, 7])))
        peer.send(_frame(0x1CEBFF00, bytes([2, 8, 9, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])))
        _bam(peer, EC1)  # the listener lives on and reads what follows
        assert _values(driver) == EXPECTED
