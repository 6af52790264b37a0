"""PythonCanAdapter on real python-can virtual buses and real loopback socketcand."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from firmware_sim.socketcand import SocketcandServer
from hwbridge.can.transport.adapter import (
    CanAdapter,
    PythonCanAdapter,
    build_message,
    normalize_outgoing,
)
from hwbridge.can.transport.bus_url import ACCEPTED_FORMS, parse_bus_url
from hwbridge.core.models import ToolError
from tests.can.conftest import recv_all
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_thread_leaks")]

POLL_S = 0.1
"""`PythonCanAdapter`'s poll_interval_s: how often its receive loop looks at the connection."""


@pytest.fixture
def adapter(channel: str) -> Iterator[PythonCanAdapter]:
    with PythonCanAdapter(f"virtual:{channel}") as opened:
        yield opened


class Collector:
    """A listener that keeps what it is given."""

    def __init__(self) -> None:
        self.frames: list[can.Message] = []

    def __call__(self, msg: can.Message) -> None:
        self.frames.append(msg)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- bus strings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("virtual:bench", {"interface": "virtual", "channel": "bench"}),
        ("virtual:1", {"interface": "virtual", "channel": "1"}),
        (
            "socketcand://127.0.0.1:29536/vcan0",
            {"interface": "socketcand", "host": "127.0.0.1", "port": 29536, "channel": "vcan0"},
        ),
        (
            "socketcand://pi.local/can1",
            {"interface": "socketcand", "host": "pi.local", "port": 29536, "channel": "can1"},
        ),
        (
            "slcan:///dev/pts/3@115200",
            {"interface": "slcan", "channel": "/dev/pts/3", "tty_baudrate": 115200},
        ),
        ("slcan://COM4@921600", {"interface": "slcan", "channel": "COM4", "tty_baudrate": 921600}),
        ("socketcan:vcan0", {"interface": "socketcan", "channel": "vcan0"}),
        ("pcan:PCAN_USBBUS1", {"interface": "pcan", "channel": "PCAN_USBBUS1"}),
        ("kvaser:0", {"interface": "kvaser", "channel": 0}),
        (
            "socketcan:can0?fd=true&bitrate=500000&data_bitrate=2000000&timeout=0.5",
            {
                "interface": "socketcan",
                "channel": "can0",
                "fd": True,
                "bitrate": 500000,
                "data_bitrate": 2000000,
                "timeout": 0.5,
            },
        ),
        (
            "udp_multicast:ff15:7079:7468:6f6e:6465:6d6f:6d63:6173",
            {"interface": "udp_multicast", "channel": "ff15:7079:7468:6f6e:6465:6d6f:6d63:6173"},
        ),
    ],
)
def test_bus_strings_parse(text: str, expected: dict[str, Any]) -> None:
    assert parse_bus_url(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "virtual",
        "virtual:",
        "nosuchiface:0",
        "socketcand://host:99999/vcan0",
        "socketcand://host:1/",
        "socketcand://host:1/a b",
        "socketcand://[::1]:1/vcan0",
        "slcan:///dev/ttyUSB0",
        "slcan://@115200",
        "virtual://x",
        "virtual:x?channel=y",
        "virtual:x?novalue",
        "virtual:x?a=1&a=2",
    ],
)
def test_bad_bus_strings_list_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match="accepted forms") as info:
        parse_bus_url(text)
    assert all(form in str(info.value) for form in ACCEPTED_FORMS)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.from_regex(r"(socketcand://|slcan://|virtual:|[a-z_]+:)\S*"))
def test_bus_string_parser_only_raises_value_error(text: str) -> None:
    try:
        kwargs = parse_bus_url(text)
    except ValueError:
        return
    assert kwargs["interface"] in can.interfaces.VALID_INTERFACES
    assert "channel" in kwargs


def test_bad_string_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="accepted forms"):
        PythonCanAdapter("definitely not a bus")


def test_python_can_environment_configures_the_bus(
    channel: str, peer: can.BusABC, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAN_INTERFACE", "virtual")
    monkeypatch.setenv("CAN_CHANNEL", channel)
    with PythonCanAdapter() as adapter:
        adapter.send(build_message(0x10, b"\x01"))
        got = peer.recv(1.0)
        assert got is not None and got.arbitration_id == 0x10


# --- listeners ---------------------------------------------------------------------------


def test_fan_out_to_every_listener(adapter: PythonCanAdapter, peer: can.BusABC) -> None:
    first, second, third = Collector(), Collector(), Collector()
    for listener in (first, second, third):
        adapter.add_listener(listener)
    for i in range(50):
        peer.send(build_message(0x100 + i, bytes([i])))
    assert wait_until(lambda: len(third.frames) == 50)
    assert [m.arbitration_id for m in first.frames] == [0x100 + i for i in range(50)]
    assert len(second.frames) == 50
    adapter.remove_listener(second)
    adapter.remove_listener(second)  # unknown: ignored
    peer.send(build_message(0x1, b""))
    # the listeners are called in order: once the last has the frame, every one has had it
    assert wait_until(lambda: len(first.frames) == len(third.frames) == 51)
    assert len(second.frames) == 50


@pytest.mark.parametrize("alone", [True, False])
def test_raising_listener_breaks_nothing(
    adapter: PythonCanAdapter, peer: can.BusABC, alone: bool
) -> None:
    calls = Collector()

    def broken(msg: can.Message) -> None:
        calls(msg)
        raise RuntimeError("listener bug")

    good = Collector()
    adapter.add_listener(broken)
    if not alone:
        adapter.add_listener(good)
    for i in range(20):
        peer.send(build_message(0x200, bytes([i])))
    assert wait_until(lambda: len(calls.frames) == 20)
    if not alone:
        assert wait_until(lambda: len(good.frames) == 20)
    status = adapter.status()
    assert status.connected and status.listener_errors == 20


def test_error_frames_are_counted(adapter: PythonCanAdapter, peer: can.BusABC) -> None:
    seen = Collector()
    adapter.add_listener(seen)
    peer.send(can.Message(is_error_frame=True, arbitration_id=0x4, is_extended_id=False))
    assert wait_until(lambda: len(seen.frames) == 1)
    assert adapter.status().error_frames == 1


# --- sending -----------------------------------------------------------------------------


def test_id_width_is_explicit_on_the_wire(adapter: PythonCanAdapter, peer: can.BusABC) -> None:
    adapter.send(build_message(0x123, b"\x01"))
    adapter.send(build_message(0x1ABCDE, b"\x02"))
    adapter.send(build_message(0x123, b"\x03", extended=True))
    # python-can defaults is_extended_id to True; the frame keeps what it says.
    adapter.send(can.Message(arbitration_id=0x55, data=b"\x04"))
    got = recv_all(peer)
    assert [(m.arbitration_id, m.is_extended_id) for m in got] == [
        (0x123, False),
        (0x1ABCDE, True),
        (0x123, True),
        (0x55, True),
    ]


@pytest.mark.parametrize("brs", [True, False])
def test_long_frames_go_out_as_can_fd(channel: str, peer: can.BusABC, brs: bool) -> None:
    with PythonCanAdapter(f"virtual:{channel}", bitrate_switch=brs) as adapter:
        adapter.send(can.Message(arbitration_id=0x300, data=bytes(range(12)), is_extended_id=False))
        adapter.send(can.Message(arbitration_id=0x301, data=bytes(8), is_extended_id=False))
        long_frame, short_frame = recv_all(peer)
    assert long_frame.is_fd and long_frame.bitrate_switch is brs and len(long_frame.data) == 12
    assert not short_frame.is_fd and not short_frame.bitrate_switch


@pytest.mark.parametrize(
    ("msg", "why"),
    [
        (can.Message(arbitration_id=0x800, is_extended_id=False), "11-bit"),
        (can.Message(arbitration_id=0x20000000, is_extended_id=True), "29-bit"),
        (can.Message(arbitration_id=1, data=bytes(65), is_extended_id=False), "at most 64"),
        (can.Message(arbitration_id=1, data=bytes(9), is_extended_id=False), "CAN-FD length"),
    ],
)
def test_invalid_frames_are_refused(adapter: PythonCanAdapter, msg: can.Message, why: str) -> None:
    with pytest.raises(ToolError, match=why) as info:
        adapter.send(msg)
    assert info.value.code == "INVALID_FRAME" and not info.value.retryable


def test_normalize_does_not_touch_the_callers_message() -> None:
    msg = can.Message(arbitration_id=0x10, data=bytes(16), is_extended_id=False)
    out = normalize_outgoing(msg, bitrate_switch=True)
    assert out is not msg and out.is_fd and out.bitrate_switch
    assert not msg.is_fd


def test_given_bus_is_not_shut_down_unless_owned(channel: str, peer: can.BusABC) -> None:
    bus = can.Bus(interface="virtual", channel=channel)
    with PythonCanAdapter(bus) as adapter:
        adapter.send(build_message(0x1, b""))
    bus.send(build_message(0x2, b""))  # still open
    assert [m.arbitration_id for m in recv_all(peer)] == [0x1, 0x2]
    with PythonCanAdapter(bus, own_bus=True):
        pass
    with pytest.raises(can.CanOperationError):
        bus.send(build_message(0x3, b""))


def test_given_bus_failing_is_reported_not_reopened(channel: str) -> None:
    bus = can.Bus(interface="virtual", channel=channel)
    with PythonCanAdapter(bus) as adapter:
        bus.shutdown()  # someone else closes it under us
        assert wait_until(lambda: not adapter.connected, timeout_s=POLL_S + BUSY_MARGIN_S)
        with pytest.raises(ToolError) as info:
            adapter.send(build_message(0x1, b""))
        status = adapter.status()
    assert info.value.code == "BUS_DOWN" and not info.value.retryable
    assert not status.reconnecting and "receive failed" in str(status.last_error)


def test_closed_adapter_refuses_to_send(channel: str) -> None:
    adapter = PythonCanAdapter(f"virtual:{channel}")
    assert isinstance(adapter, CanAdapter) and adapter.connected
    adapter.close()
    adapter.close()
    with pytest.raises(ToolError) as info:
        adapter.send(build_message(0x1, b""))
    assert info.value.code == "BUS_DOWN" and not info.value.retryable
    assert not adapter.status().connected


# --- periodic ----------------------------------------------------------------------------


def test_periodic_modifier_changes_frames_on_the_wire(
    adapter: PythonCanAdapter, peer: can.BusABC
) -> None:
    counter = 0
    rolled = 0

    def roll(msg: can.Message) -> None:
        nonlocal counter, rolled
        rolled += 1
        counter = (counter + 1) % 16
        msg.data[0] = counter
        msg.data[1] = (0x5A + counter) & 0xFF  # stand-in for a checksum

    handle = adapter.send_periodic(build_message(0x400, bytes(2)), 0.01, roll)
    assert handle.active and adapter.status().periodic_tasks == 1
    assert wait_until(lambda: rolled > 10)  # ten frames went out (the 11th may be cut short)
    handle.stop()
    handle.stop()
    frames = recv_all(peer, 0.1)
    assert len(frames) >= 10
    counters = [m.data[0] for m in frames]
    assert counters[:5] == [1, 2, 3, 4, 5]
    assert all(m.data[1] == (0x5A + m.data[0]) & 0xFF for m in frames)
    assert all(m.arbitration_id == 0x400 and not m.is_extended_id for m in frames)
    assert not handle.active and adapter.status().periodic_tasks == 0
    assert recv_all(peer, 0.05) == []


def test_close_stops_all_periodic_tasks(channel: str, peer: can.BusABC) -> None:
    adapter = PythonCanAdapter(f"virtual:{channel}")
    handles = [adapter.send_periodic(build_message(0x500 + i, b"\x00"), 0.01) for i in range(3)]
    assert peer.recv(BUSY_MARGIN_S) is not None  # the tasks are sending
    adapter.close()
    recv_all(peer, 0.05)
    assert recv_all(peer, 0.1) == []
    assert not any(h.active for h in handles)


def test_periodic_with_duration_expires(adapter: PythonCanAdapter, peer: can.BusABC) -> None:
    handle = adapter.send_periodic(build_message(0x600, b"\x00"), 0.01, duration_s=0.1)
    assert wait_until(lambda: not handle.active, timeout_s=0.1 + BUSY_MARGIN_S)
    frames = recv_all(peer, 0.05)
    assert 3 <= len(frames) <= 15


def test_failing_modifier_stops_its_task(adapter: PythonCanAdapter, peer: can.BusABC) -> None:
    def explode(msg: can.Message) -> None:
        raise ValueError("bad checksum hook")

    handle = adapter.send_periodic(build_message(0x700, b"\x00"), 0.01, explode)
    assert wait_until(lambda: not handle.active)
    assert handle.last_error is not None and "bad checksum hook" in handle.last_error
    assert recv_all(peer, 0.05) == []


# --- socketcand: a real transport that can die ------------------------------------------


def test_socketcand_both_directions(socketcand: SocketcandServer, peer: can.BusABC) -> None:
    with PythonCanAdapter(socketcand.url()) as adapter:
        seen = Collector()
        adapter.add_listener(seen)
        peer.send(build_message(0x18DAF110, b"\x02\x10\x03"))
        assert wait_until(lambda: len(seen.frames) == 1)
        assert seen.frames[0].is_extended_id and seen.frames[0].arbitration_id == 0x18DAF110
        adapter.send(build_message(0x7E0, b"\x02\x3e\x00"))
        got = peer.recv(2.0)
        assert got is not None and got.arbitration_id == 0x7E0 and not got.is_extended_id
        assert adapter.status().bus == socketcand.url()


def test_no_server_means_bus_down_fast() -> None:
    started = time.monotonic()
    with pytest.raises(ToolError) as info:
        PythonCanAdapter(f"socketcand://127.0.0.1:{_free_port()}/vcan0", open_timeout_s=1.0)
    assert info.value.code == "BUS_DOWN" and info.value.retryable
    assert time.monotonic() - started < 1.0 + BUSY_MARGIN_S  # its open_timeout_s (default 5 s)


def test_killed_server_gives_bus_down_then_recovers(channel: str, peer: can.BusABC) -> None:
    server = SocketcandServer({"vcan0": channel}).start()
    port = server.port
    adapter = PythonCanAdapter(server.url(), backoff_initial_s=0.05, backoff_max_s=0.2)
    try:
        seen = Collector()
        adapter.add_listener(seen)
        beat = adapter.send_periodic(build_message(0x100, b"\x01"), 0.02)
        assert wait_until(lambda: peer.recv(0.5) is not None)

        server.stop()
        started = time.monotonic()
        # the receive loop sees the closed connection within its poll interval
        assert wait_until(lambda: not adapter.connected, timeout_s=POLL_S + BUSY_MARGIN_S)
        with pytest.raises(ToolError) as info:
            adapter.send(build_message(0x101, b""))
        assert time.monotonic() - started < POLL_S + BUSY_MARGIN_S
        assert info.value.code == "BUS_DOWN" and info.value.retryable
        status = adapter.status()
        assert status.reconnecting and "closed the connection" in str(status.last_error)
        assert beat.active  # it resumes after the reconnect

        time.sleep(0.3)  # a few failed reconnect attempts against a closed port
        server = SocketcandServer({"vcan0": channel}, port=port).start()
        assert adapter.wait_connected(3.0)
        assert adapter.status().reconnects == 1
        peer.send(build_message(0x102, b"\x02"))
        assert wait_until(lambda: any(m.arbitration_id == 0x102 for m in seen.frames))
        adapter.send(build_message(0x103, b"\x03"))
        ids = {m.arbitration_id for m in recv_all(peer, 0.1, max_s=0.3)}
        assert {0x100, 0x103} <= ids  # the heartbeat is back, and sends work
    finally:
        adapter.close()
        server.stop()


def test_a_periodic_send_resumed_after_a_reconnect_keeps_its_period(
    socketcand: SocketcandServer, peer: can.BusABC
) -> None:
    """The re-armed task waits for its next tick: no two frames closer than one period."""
    adapter = PythonCanAdapter(socketcand.url(), backoff_initial_s=0.02, backoff_max_s=0.05)
    # the old task's thread is joined for up to 1 s and the backoff is 50 ms at most
    reconnect_s = 1.0 + 0.05
    period_s = 1.5  # longer would outlive the test: python-can's task sleeps uninterrupted
    try:
        beat = adapter.send_periodic(build_message(0x100, b"\x01"), period_s)
        first = peer.recv(BUSY_MARGIN_S)
        assert first is not None
        with socketcand._lock:
            clients = list(socketcand._clients)
        for client in clients:
            client.close()  # the server drops the connection: the adapter reconnects
        assert wait_until(
            lambda: adapter.status().reconnects == 1, timeout_s=reconnect_s + BUSY_MARGIN_S
        )
        reconnected = time.time()
        second = peer.recv(period_s + BUSY_MARGIN_S)
        assert second is not None and beat.active
        assert reconnected - first.timestamp < reconnect_s + BUSY_MARGIN_S
        # reconnected before the next tick (at once, unless the machine is busy), yet that
        # frame keeps the period instead of going out at once
        assert second.timestamp - first.timestamp >= period_s - 0.05
    finally:
        adapter.close()


def test_killed_server_process_gives_bus_down(channel: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim.socketcand", "--channel", "vcan0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    adapter: PythonCanAdapter | None = None
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        adapter = PythonCanAdapter(f"socketcand://127.0.0.1:{port}/vcan0")
        adapter.send(build_message(0x1, b""))
        proc.kill()  # SIGKILL: no goodbye from the server
        proc.wait(5)
        assert wait_until(lambda: not adapter.connected, timeout_s=POLL_S + BUSY_MARGIN_S)
        with pytest.raises(ToolError) as info:
            adapter.send(build_message(0x1, b""))
        assert info.value.code == "BUS_DOWN"
    finally:
        if adapter is not None:
            adapter.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def test_lazy_connection_waits_for_the_server(channel: str) -> None:
    port = _free_port()
    adapter = PythonCanAdapter(
        f"socketcand://127.0.0.1:{port}/vcan0",
        require_connection=False,
        backoff_initial_s=0.05,
        backoff_max_s=0.1,
    )
    try:
        assert not adapter.connected and adapter.status().reconnecting
        with pytest.raises(ToolError, match="BUS_DOWN"):
            adapter.send(build_message(0x1, b""))
        with SocketcandServer({"vcan0": channel}, port=port):
            assert adapter.wait_connected(3.0)
            adapter.send(build_message(0x1, b""))
    finally:
        adapter.close()


def test_server_that_never_greets_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ToolError, match="BUS_DOWN"):
            PythonCanAdapter(f"socketcand://127.0.0.1:{port}/vcan0", open_timeout_s=0.3)
        assert time.monotonic() - started < 0.3 + BUSY_MARGIN_S  # its open_timeout_s


def test_close_during_reconnect_is_prompt(channel: str) -> None:
    adapter = PythonCanAdapter(
        f"socketcand://127.0.0.1:{_free_port()}/vcan0",
        require_connection=False,
        backoff_initial_s=0.05,
        backoff_max_s=0.05,
    )
    time.sleep(0.2)  # the scenario: a few reconnect attempts, then close between two of them
    started = time.monotonic()
    adapter.close()
    # at once (the loop wakes on close); a loop that did not stop would hold close() for
    # the 7.1 s it joins it (open_timeout_s 5 s + poll 0.1 s + 2 s)
    assert time.monotonic() - started < BUSY_MARGIN_S
    assert not any(t.name.startswith("hwbridge-can") for t in threading.enumerate())
