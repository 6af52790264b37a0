"""The python-can internals hwbridge relies on (all in `can/transport/pycan_internals.py`)
still exist and mean what they meant: a python-can release that renames one fails here,
where the adapter would otherwise degrade quietly (no dead-socketcand detection, a receive
loop that never runs)."""

from __future__ import annotations

import inspect
import logging
import threading
import time

import pytest

import can
from firmware_sim.socketcand import SocketcandServer
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.can.transport.pycan_internals import RxNotifier, socketcand_socket


def test_the_notifier_keeps_the_hooks_the_receive_loop_overrides() -> None:
    assert "_rx_thread" in vars(can.Notifier)
    assert list(inspect.signature(can.Notifier._rx_thread).parameters) == ["self", "bus"]
    bus = can.Bus(interface="virtual", channel="pycan-internals-notifier")
    try:
        notifier = can.Notifier(bus, [])
        assert notifier._stopped is False
        assert any(isinstance(r, threading.Thread) for r in notifier._readers)
        notifier.stop()
        assert notifier._stopped is True
    finally:
        bus.shutdown()
    assert issubclass(RxNotifier, can.Notifier)


def test_a_bus_still_has_the_receive_internals_the_loop_reads() -> None:
    bus = can.Bus(interface="virtual", channel="pycan-internals-recv", receive_own_messages=True)
    try:
        assert callable(bus._recv_internal) and callable(bus._matches_filters)
        bus.set_filters([{"can_id": 0x123, "can_mask": 0x7FF}])
        assert bus._filters is not None
        bus.send(can.Message(arbitration_id=0x123, data=b"\x01"))
        msg, filtered = bus._recv_internal(1.0)
        assert msg is not None and msg.arbitration_id == 0x123
        assert isinstance(filtered, bool) and bus._matches_filters(msg)
    finally:
        bus.shutdown()


def test_the_socketcand_client_socket_is_found() -> None:
    with SocketcandServer({"vcan0": "pycan-internals-sc"}) as server:
        bus = can.Bus(interface="socketcand", host="127.0.0.1", port=server.port, channel="vcan0")
        try:
            deadline = time.monotonic() + 5
            sock = socketcand_socket(bus)
            while sock is None and time.monotonic() < deadline:
                time.sleep(0.05)
                sock = socketcand_socket(bus)
            assert sock is not None, "python-can's socketcand client hides its socket elsewhere"
        finally:
            bus.shutdown()


def test_a_socketcand_bus_opened_by_the_adapter_does_not_report_partial_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """python-can's client warns at every TCP read that ends inside a frame: on a busy link
    `hwbridge mcp` printed it without end, once into the middle of its "serving at" line."""
    with (
        SocketcandServer(["vcan0"]) as server,
        PythonCanAdapter(f"socketcand://127.0.0.1:{server.port}/vcan0"),
        caplog.at_level(logging.WARNING),
    ):
        log = logging.getLogger("can.interfaces.socketcand.socketcand")
        log.warning("Got incomplete message => waiting for more data")
        log.warning("the server said something else")
    assert [r.getMessage() for r in caplog.records] == ["the server said something else"]
