"""The socketcand server against python-can's own socketcand client, over loopback TCP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import can
from firmware_sim.slcan_device import SlcanDevice
from firmware_sim.socketcand import SocketcandServer, format_frame, parse_send
from tests.conftest import wait_until

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_thread_leaks")]


@pytest.fixture
def client(socketcand: SocketcandServer) -> Iterator[can.BusABC]:
    bus = can.Bus(interface="socketcand", host="127.0.0.1", port=socketcand.port, channel="vcan0")
    yield bus
    bus.shutdown()


def _raw(server: SocketcandServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=2.0)
    assert sock.recv(64) == b"< hi >"
    return sock


FRAMES = [
    can.Message(arbitration_id=0x123, data=b"\x01\x02", is_extended_id=False),
    can.Message(arbitration_id=0x7FF, data=b"", is_extended_id=False),
    can.Message(arbitration_id=0x005, data=bytes(range(8)), is_extended_id=False),
    can.Message(arbitration_id=0x18FEF100, data=b"\xff" * 8, is_extended_id=True),
    can.Message(arbitration_id=0x1, data=b"\x00", is_extended_id=True),
]


def _recv(bus: can.BusABC) -> can.Message:
    msg = bus.recv(2.0)
    assert msg is not None, "nothing received within 2 s"
    return msg


def _same(a: can.Message, b: can.Message) -> bool:
    return (a.arbitration_id, bytes(a.data), a.is_extended_id) == (
        b.arbitration_id,
        bytes(b.data),
        b.is_extended_id,
    )


def test_virtual_to_client(client: can.BusABC, peer: can.BusABC) -> None:
    for msg in FRAMES:
        peer.send(msg)
    received = [_recv(client) for _ in FRAMES]
    assert all(_same(sent, got) for sent, got in zip(FRAMES, received, strict=True))
    # Timestamps travel as SECS.USECS.
    assert abs(received[0].timestamp - time.time()) < 5


def test_client_to_virtual(client: can.BusABC, peer: can.BusABC) -> None:
    for msg in FRAMES:
        client.send(msg)
    received = [_recv(peer) for _ in FRAMES]
    assert all(_same(sent, got) for sent, got in zip(FRAMES, received, strict=True))


def test_fd_frames_from_the_bus_are_not_forwarded(
    socketcand: SocketcandServer, client: can.BusABC, peer: can.BusABC
) -> None:
    """Raw mode carries classic frames: a 64-byte frame would reach python-can as a classic
    frame with 64 bytes, which its BLF/ASC writers cut to 8. It is counted, not sent."""
    peer.send(can.Message(arbitration_id=0x10, data=bytes(range(64)), is_fd=True))
    peer.send(can.Message(arbitration_id=0x11, data=bytes(12), is_fd=True, is_extended_id=True))
    peer.send(can.Message(arbitration_id=0x12, data=b"\x01\x02", is_extended_id=False))
    got = _recv(client)
    assert (got.arbitration_id, bytes(got.data)) == (0x12, b"\x01\x02")
    assert client.recv(0.2) is None
    assert socketcand.not_forwarded == {"CAN FD": 2}


def test_fd_and_remote_sends_are_refused_not_changed(client: can.BusABC, peer: can.BusABC) -> None:
    client.send(can.Message(arbitration_id=0x10, data=bytes(range(64)), is_fd=True))
    client.send(can.Message(arbitration_id=0x11, is_remote_frame=True, dlc=4, is_extended_id=False))
    client.send(can.Message(arbitration_id=0x12, data=b"\x07", is_extended_id=False))
    got = _recv(peer)
    assert (got.arbitration_id, bytes(got.data), got.is_remote_frame) == (0x12, b"\x07", False)
    assert peer.recv(0.2) is None
    with pytest.raises(ValueError, match="at most 8 bytes"):
        parse_send(["010", "40", *["0"] * 64])
    with pytest.raises(ValueError, match="does not match"):
        parse_send(["123", "4"])


def test_a_remote_frame_sent_over_slcan_is_not_forwarded_as_data(
    socketcand: SocketcandServer, client: can.BusABC, channel: str
) -> None:
    """slcan carries remote frames, socketcand's raw mode cannot: the RTR frame must not
    arrive as a zero-length data frame (a different frame than the one sent)."""
    with SlcanDevice(channel) as device:
        adapter = can.Bus(interface="slcan", channel=device.port_name, sleep_after_open=0)
        try:
            assert wait_until(lambda: device.is_open)
            adapter.send(
                can.Message(arbitration_id=0x321, is_remote_frame=True, dlc=4, is_extended_id=False)
            )
            adapter.send(can.Message(arbitration_id=0x321, data=b"\xaa", is_extended_id=False))
            got = _recv(client)
            assert (got.arbitration_id, bytes(got.data), got.dlc) == (0x321, b"\xaa", 1)
            assert client.recv(0.2) is None
            assert socketcand.not_forwarded == {"remote": 1}
        finally:
            adapter.shutdown()


@pytest.mark.parametrize("suffix", [".blf", ".asc"])
def test_python_can_logger_and_player_keep_every_frame(
    socketcand: SocketcandServer,
    client: can.BusABC,
    peer: can.BusABC,
    tmp_path: Path,
    suffix: str,
) -> None:
    """What python-can's logger records from socketcand is what was on the bus, and its
    player sends the recording back unchanged."""
    sent = [
        can.Message(
            arbitration_id=0x100 + i, data=bytes(range(i, i + i % 9)), is_extended_id=i % 2 == 1
        )
        for i in range(20)
    ]
    log_path = tmp_path / f"bus{suffix}"
    with can.Logger(log_path) as logger:
        for i, msg in enumerate(sent):
            peer.send(msg)
            if i == 5:  # an FD frame in the middle is not forwarded, so never recorded cut
                peer.send(can.Message(arbitration_id=0x99, data=bytes(64), is_fd=True))
        for _ in sent:
            logger(_recv(client))
    recorded = list(can.LogReader(log_path))
    assert [(m.arbitration_id, bytes(m.data), m.is_extended_id) for m in recorded] == [
        (m.arbitration_id, bytes(m.data), m.is_extended_id) for m in sent
    ]
    assert all(not m.is_fd and m.dlc == len(m.data) for m in recorded)
    for msg in can.MessageSync(recorded, timestamps=False, gap=0):
        client.send(msg)
    replayed = [_recv(peer) for _ in recorded]
    assert [(m.arbitration_id, bytes(m.data)) for m in replayed] == [
        (m.arbitration_id, bytes(m.data)) for m in sent
    ]


def test_client_frames_reach_other_clients_but_not_sender(
    socketcand: SocketcandServer, client: can.BusABC, peer: can.BusABC
) -> None:
    other = can.Bus(interface="socketcand", host="127.0.0.1", port=socketcand.port, channel="vcan0")
    try:
        client.send(can.Message(arbitration_id=0x42, data=b"\x42", is_extended_id=False))
        got = other.recv(2.0)
        assert got is not None and got.arbitration_id == 0x42
        got_peer = peer.recv(2.0)
        assert got_peer is not None and got_peer.arbitration_id == 0x42
        assert client.recv(0.3) is None
        # ...and the virtual side reaches both clients.
        peer.send(can.Message(arbitration_id=0x43, data=b"", is_extended_id=False))
        for bus in (client, other):
            msg = bus.recv(2.0)
            assert msg is not None and msg.arbitration_id == 0x43
        assert socketcand.client_count == 2
    finally:
        other.shutdown()


def test_many_frames_in_order(client: can.BusABC, peer: can.BusABC) -> None:
    for i in range(2000):
        peer.send(
            can.Message(arbitration_id=0x100, data=i.to_bytes(2, "big"), is_extended_id=False)
        )
    got: list[int] = []
    while len(got) < 2000 and (msg := client.recv(2.0)) is not None:
        got.append(int.from_bytes(msg.data, "big"))
    assert got == list(range(2000))


def test_unknown_bus_is_refused(socketcand: SocketcandServer) -> None:
    with pytest.raises(can.CanError, match="could not open bus"):
        can.Bus(interface="socketcand", host="127.0.0.1", port=socketcand.port, channel="nope")


def test_raw_protocol_echo_and_errors(socketcand: SocketcandServer) -> None:
    sock = _raw(socketcand)
    with sock:
        sock.sendall(b"< echo >")
        assert sock.recv(64) == b"< echo >"
        sock.sendall(b"< rawmode >")  # before open
        assert sock.recv(64).startswith(b"< error")
        sock.sendall(b"garbage without brackets < bogus >")
        assert sock.recv(64).startswith(b"< error")
        sock.sendall(b"< open vcan0 >")
        assert sock.recv(64) == b"< ok >"


def test_bad_sends_in_rawmode_are_ignored(
    socketcand: SocketcandServer, client: can.BusABC, peer: can.BusABC
) -> None:
    sock = _raw(socketcand)
    with sock:
        sock.sendall(b"< open vcan0 >")
        assert sock.recv(64) == b"< ok >"
        sock.sendall(b"< rawmode >")
        assert sock.recv(64) == b"< ok >"
        sock.sendall(b"< send 123 2 1 >< send zz 1 1 >< send 800 1 1 >< send 123 1 100 >")
        sock.sendall(b"< send 12 1 7 >")
        got = peer.recv(2.0)
        assert got is not None and got.arbitration_id == 0x12 and bytes(got.data) == b"\x07"
        assert peer.recv(0.2) is None
        # The well-behaved python-can client is unaffected.
        client.send(can.Message(arbitration_id=0x13, data=b"", is_extended_id=False))
        assert sock.recv(64).startswith(b"< frame 013 ")


def test_stop_disconnects_clients_and_frees_port(channel: str) -> None:
    server = SocketcandServer({"vcan0": channel}).start()
    port = server.port
    sock = _raw(server)
    server.stop()
    server.stop()  # idempotent
    sock.settimeout(2.0)
    assert sock.recv(64) == b""  # EOF
    sock.close()
    with SocketcandServer({"vcan0": channel}, port=port) as again:
        assert again.port == port
        assert again.url() == f"socketcand://127.0.0.1:{port}/vcan0"


def test_port_before_start_raises() -> None:
    with pytest.raises(RuntimeError):
        _ = SocketcandServer().port
    with pytest.raises(ValueError, match="bus names"):
        SocketcandServer({"bad name": "x"})


def test_frame_format_round_trips_through_python_can_parser() -> None:
    from can.interfaces.socketcand.socketcand import (
        convert_ascii_message_to_can_message,
        convert_can_message_to_ascii_message,
    )

    for msg in FRAMES:
        msg.timestamp = 1700000000.123456
        parsed = convert_ascii_message_to_can_message(format_frame(msg))
        assert _same(parsed, msg) and parsed.timestamp == pytest.approx(msg.timestamp)
        line = convert_can_message_to_ascii_message(msg)
        assert _same(parse_send(line[1:-1].split()[1:]), msg)


def test_server_runs_in_its_own_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim.socketcand", "--channel", "vcan0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("socketcand listening on 127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        buses = [
            can.Bus(interface="socketcand", host="127.0.0.1", port=port, channel="vcan0")
            for _ in range(2)
        ]
        try:
            buses[0].send(can.Message(arbitration_id=0x77, data=b"\x01", is_extended_id=False))
            got = buses[1].recv(2.0)
            assert got is not None and got.arbitration_id == 0x77
            proc.terminate()
            assert proc.wait(5) == 0  # SIGTERM is a clean shutdown
        finally:
            for bus in buses:
                bus.shutdown()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
