"""The simulated SLCAN adapter against python-can's own `slcan` client, over a real pty."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import serial
from can.interfaces.slcan import slcanBus
from hypothesis import given
from hypothesis import strategies as st

import can
from firmware_sim.slcan_device import SlcanDevice, format_frame, parse_frame
from hwbridge.can.transport.adapter import PythonCanAdapter
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def channel() -> str:
    return f"hwb-slcan-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def device(channel: str) -> Iterator[SlcanDevice]:
    with SlcanDevice(channel) as dev:
        yield dev


@pytest.fixture
def peer(channel: str) -> Iterator[can.BusABC]:
    """The other end of the virtual channel, where the vehicle would be."""
    bus = can.Bus(interface="virtual", channel=channel)
    yield bus
    bus.shutdown()


def _wait_open(device: SlcanDevice, state: bool) -> bool:
    return wait_until(lambda: device.is_open == state, BUSY_MARGIN_S)


def _client(device: SlcanDevice, **kwargs: Any) -> can.BusABC:
    # python-can sleeps 2 s after opening a real adapter; a pty needs no settling time.
    bus = can.Bus(interface="slcan", channel=device.port_name, sleep_after_open=0, **kwargs)
    # The client does not wait for the answer to its O: frames sent on the virtual
    # channel before the adapter has read it are not for this client, as on hardware.
    assert _wait_open(device, True)
    return bus


@pytest.fixture
def client(device: SlcanDevice) -> Iterator[can.BusABC]:
    bus = _client(device, bitrate=500_000)
    yield bus
    bus.shutdown()


@pytest.fixture
def raw(device: SlcanDevice) -> Iterator[serial.Serial]:
    port = serial.Serial(device.port_name, timeout=2.0)
    yield port
    port.close()


def _ask(port: serial.Serial, command: str) -> bytes:
    """One command, one answer (up to the CR or BELL that ends it)."""
    port.write(command.encode() + b"\r")
    answer = b""
    while not answer.endswith((b"\r", b"\a")):
        byte = port.read(1)
        assert byte, f"no answer to {command!r}, got {answer!r}"
        answer += byte
    return answer


def _recv(bus: can.BusABC) -> can.Message:
    deadline = time.monotonic() + BUSY_MARGIN_S
    while time.monotonic() < deadline:
        msg = bus.recv(0.5)
        if msg is not None:
            return msg
    raise AssertionError(f"no frame within {BUSY_MARGIN_S} s")


def _key(msg: can.Message) -> tuple[object, ...]:
    return (
        msg.arbitration_id,
        msg.is_extended_id,
        msg.is_remote_frame,
        msg.is_fd,
        msg.bitrate_switch,
        msg.dlc,
        bytes(msg.data),
    )


FRAMES = [
    can.Message(arbitration_id=0x123, data=b"\x01\x02", is_extended_id=False),
    can.Message(arbitration_id=0x7FF, data=b"", is_extended_id=False),
    can.Message(arbitration_id=0x7E8, data=bytes.fromhex("04410C1AF8AAAAAA"), is_extended_id=False),
    can.Message(arbitration_id=0x18DAF110, data=bytes(range(8)), is_extended_id=True),
    can.Message(arbitration_id=0x1, data=b"\xff", is_extended_id=True),
    can.Message(arbitration_id=0x321, is_remote_frame=True, dlc=4, is_extended_id=False),
    can.Message(arbitration_id=0x1ABCDE, is_remote_frame=True, dlc=8, is_extended_id=True),
]


def test_start_is_fast_and_stop_is_clean(channel: str) -> None:
    before = set(threading.enumerate())
    started = time.perf_counter()
    device = SlcanDevice(channel)
    port = device.start()
    elapsed = time.perf_counter() - started
    assert port.startswith("/dev/") and device.port_name == port
    assert elapsed < BUSY_MARGIN_S  # a pty and two threads: typically ~2 ms, no settling time
    with pytest.raises(RuntimeError):
        device.start()
    device.stop()
    device.stop()  # idempotent
    assert not device.running
    assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_client_to_virtual_standard_and_extended(client: can.BusABC, peer: can.BusABC) -> None:
    for msg in FRAMES:
        client.send(msg)
    assert [_key(_recv(peer)) for _ in FRAMES] == [_key(m) for m in FRAMES]


def test_virtual_to_client_standard_and_extended(client: can.BusABC, peer: can.BusABC) -> None:
    for msg in FRAMES:
        peer.send(msg)
    assert [_key(_recv(client)) for _ in FRAMES] == [_key(m) for m in FRAMES]


def test_fd_frames_both_ways(client: can.BusABC, peer: can.BusABC) -> None:
    sent = can.Message(arbitration_id=0x10, data=bytes(range(64)), is_fd=True, bitrate_switch=True)
    client.send(sent)
    assert _key(_recv(peer)) == _key(sent)
    back = can.Message(arbitration_id=0x1234567, data=bytes(12), is_fd=True, is_extended_id=True)
    peer.send(back)
    assert _key(_recv(client)) == _key(back)


def test_version_and_serial_number(client: can.BusABC) -> None:
    assert isinstance(client, slcanBus)
    assert client.get_version(2.0) == (10, 13)
    assert client.get_serial_number(2.0) == "HWB0"


def test_client_can_close_and_reopen(device: SlcanDevice, peer: can.BusABC) -> None:
    for round_ in range(2):
        bus = _client(device)
        try:
            peer.send(can.Message(arbitration_id=0x100 + round_, data=b"\x01"))
            assert _recv(bus).arbitration_id == 0x100 + round_
            bus.send(can.Message(arbitration_id=0x200 + round_, data=b"\x02"))
            assert _recv(peer).arbitration_id == 0x200 + round_
        finally:
            bus.shutdown()  # writes C: the channel closes with the client
        assert _wait_open(device, False)


def test_raw_protocol(raw: serial.Serial, peer: can.BusABC, device: SlcanDevice) -> None:
    assert _ask(raw, "t1230") == b"\a"  # channel closed
    assert _ask(raw, "S6") == b"\r"
    assert _ask(raw, "S") == b"\a"
    assert _ask(raw, "s031C") == b"\r"
    assert _ask(raw, "V") == b"V1013\r"
    assert _ask(raw, "N") == b"NHWB0\r"
    assert _ask(raw, "Z1") == b"\r"
    assert _ask(raw, "M00000000") == b"\r"
    assert _ask(raw, "O") == b"\r"
    assert _ask(raw, "O") == b"\a"  # already open
    assert _ask(raw, "S4") == b"\a"  # bitrate only while closed
    assert _ask(raw, "F") == b"F00\r"
    assert _ask(raw, "?") == b"\a"
    assert _ask(raw, "t1239") == b"\a"  # DLC above 8
    assert _ask(raw, "t12320") == b"\a"  # data shorter than the DLC
    assert _ask(raw, "t8000") == b"\a"  # standard ID above 0x7FF
    assert _ask(raw, "t1230102XX") == b"\a"
    assert _ask(raw, "x" * 500) == b"\a"  # overlong line
    assert _ask(raw, "t12320102") == b"z\r"
    assert _ask(raw, "T1FFFFFFF1AB") == b"Z\r"
    assert [_key(_recv(peer)) for _ in range(2)] == [
        _key(can.Message(arbitration_id=0x123, data=b"\x01\x02", is_extended_id=False)),
        _key(can.Message(arbitration_id=0x1FFFFFFF, data=b"\xab", is_extended_id=True)),
    ]
    peer.send(can.Message(arbitration_id=0x456, data=b"\xde\xad", is_extended_id=False))
    line = raw.read_until(b"\r")
    assert line[:9] == b"t4562DEAD" and len(line) == 14  # + 4 hex digits of milliseconds
    assert _ask(raw, "C") == b"\r"
    assert device.frames_from_client == 2 and device.frames_to_client == 1


def test_listen_only_refuses_to_send(raw: serial.Serial, peer: can.BusABC) -> None:
    assert _ask(raw, "L") == b"\r"
    assert _ask(raw, "t1230") == b"\a"
    peer.send(can.Message(arbitration_id=0x7, data=b"", is_extended_id=False))
    assert raw.read_until(b"\r") == b"t0070\r"


def test_nothing_reaches_a_closed_channel(raw: serial.Serial, peer: can.BusABC) -> None:
    peer.send(can.Message(arbitration_id=0x7, data=b"", is_extended_id=False))
    time.sleep(0.2)  # time for the frame to arrive, were the channel open
    assert _ask(raw, "F") == b"F00\r"  # the frame was not queued for later
    assert raw.in_waiting == 0


def test_hwbridge_adapter_receives(device: SlcanDevice, peer: can.BusABC) -> None:
    got: list[can.Message] = []
    arrived = threading.Event()

    def on_frame(msg: can.Message) -> None:
        got.append(msg)
        arrived.set()

    adapter = PythonCanAdapter(
        bus=f"slcan://{device.port_name}@115200?sleep_after_open=0", listeners=[on_frame]
    )
    try:
        assert _wait_open(device, True)
        peer.send(can.Message(arbitration_id=0x18FEF100, data=b"\x11" * 8, is_extended_id=True))
        assert arrived.wait(BUSY_MARGIN_S)
        assert _key(got[0]) == _key(
            can.Message(arbitration_id=0x18FEF100, data=b"\x11" * 8, is_extended_id=True)
        )
    finally:
        adapter.close()


_messages = st.one_of(
    st.builds(
        lambda ident, ext, data: can.Message(
            arbitration_id=ident & (0x1FFFFFFF if ext else 0x7FF), is_extended_id=ext, data=data
        ),
        st.integers(0, 0x1FFFFFFF),
        st.booleans(),
        st.binary(max_size=8),
    ),
    st.builds(
        lambda ident, ext, dlc: can.Message(
            arbitration_id=ident & (0x1FFFFFFF if ext else 0x7FF),
            is_extended_id=ext,
            is_remote_frame=True,
            dlc=dlc,
        ),
        st.integers(0, 0x1FFFFFFF),
        st.booleans(),
        st.integers(0, 8),
    ),
    st.builds(
        lambda ident, ext, brs, size: can.Message(
            arbitration_id=ident & (0x1FFFFFFF if ext else 0x7FF),
            is_extended_id=ext,
            is_fd=True,
            bitrate_switch=brs,
            data=bytes(range(size)),
        ),
        st.integers(0, 0x1FFFFFFF),
        st.booleans(),
        st.booleans(),
        st.sampled_from([0, 1, 8, 12, 16, 20, 24, 32, 48, 64]),
    ),
)


@given(_messages)
def test_format_and_parse_round_trip(msg: can.Message) -> None:
    line = format_frame(msg)
    assert line is not None and line.endswith("\r")
    assert _key(parse_frame(line[:-1])) == _key(msg)


def test_error_frames_are_not_shown() -> None:
    assert format_frame(can.Message(is_error_frame=True, arbitration_id=0x4)) is None
