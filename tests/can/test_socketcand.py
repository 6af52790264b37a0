"""The socketcand server against python-can's own socketcand client, over loopback TCP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import can
from firmware_sim.socketcand import SocketcandServer, format_frame, parse_send

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


def test_fd_payload_crosses_as_fd(client: can.BusABC, peer: can.BusABC) -> None:
    client.send(can.Message(arbitration_id=0x10, data=bytes(range(64)), is_extended_id=False))
    got = peer.recv(2.0)
    assert got is not None and got.is_fd and bytes(got.data) == bytes(range(64))


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
