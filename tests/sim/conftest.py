"""Fixtures for the simulator tests: private virtual channels, a peer bus, an OBD tester."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import isotp
import pytest

import can
from hwbridge.can.database.database import CanDatabase

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"


@pytest.fixture(scope="session")
def demo_db() -> CanDatabase:
    return CanDatabase.load(DEMO)


@pytest.fixture
def channel() -> str:
    """A virtual channel no other test uses (python-can virtual channels are process-wide)."""
    return f"sim-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def peer(channel: str) -> Iterator[can.BusABC]:
    """A second bus on `channel`: it sees what the vehicle sends."""
    bus = can.Bus(interface="virtual", channel=channel)
    yield bus
    bus.shutdown()


def collect(bus: can.BusABC, seconds: float) -> list[can.Message]:
    """Everything `bus` receives during `seconds`."""
    frames = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        msg = bus.recv(left)
        if msg is not None:
            frames.append(msg)
    return frames


def signals(db: CanDatabase, message: str, data: bytes | bytearray) -> dict[str, Any]:
    """The decoded signals of one frame of `message` (JSON values, labels as dicts)."""
    return dict(db.decode(message, bytes(data)).signals)


def latest(
    bus: can.BusABC, db: CanDatabase, message: str, timeout_s: float = 2.0
) -> dict[str, Any]:
    """The signals of the next frame of `message` on `bus` (older frames are skipped)."""
    frame_id = db.message(message).frame_id
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        msg = bus.recv(left)
        if msg is not None and msg.arbitration_id == frame_id and not msg.is_error_frame:
            return signals(db, message, msg.data)
    raise AssertionError(f"no {message} frame within {timeout_s} s")


def drain(bus: can.BusABC) -> None:
    while bus.recv(0) is not None:
        pass


class ObdTester:
    """An OBD-II scan tool on its own bus: ISO-TP on 0x7E0/0x7E8, raw functional requests."""

    def __init__(self, channel: str) -> None:
        self.bus = can.Bus(interface="virtual", channel=channel)
        self.notifier = can.Notifier(self.bus, [], timeout=0.1)
        self.stack = isotp.NotifierBasedCanStack(
            self.bus,
            self.notifier,
            address=isotp.Address(isotp.AddressingMode.Normal_11bits, txid=0x7E0, rxid=0x7E8),
            params={"tx_padding": 0x55, "tx_data_min_length": 8},
        )
        self.stack.start()
        self._lock = threading.Lock()

    def request(self, payload: bytes, timeout_s: float = 2.0) -> bytes | None:
        """Send `payload` physically (0x7E0) and return the reassembled answer."""
        with self._lock:
            while self.stack.available():
                self.stack.recv()
            self.stack.send(payload)
            answer = self.stack.recv(block=True, timeout=timeout_s)
        return bytes(answer) if answer is not None else None

    def receive(self, timeout_s: float = 2.0) -> bytes | None:
        """The next answer that arrives (after a "response pending", say)."""
        answer = self.stack.recv(block=True, timeout=timeout_s)
        return bytes(answer) if answer is not None else None

    def functional(self, payload: bytes, timeout_s: float = 2.0) -> bytes | None:
        """Send a single frame to 0x7DF; the answer comes back through the ISO-TP stack."""
        with self._lock:
            while self.stack.available():
                self.stack.recv()
            data = bytes([len(payload)]) + payload
            self.bus.send(
                can.Message(arbitration_id=0x7DF, data=data.ljust(8, b"\x55"), is_extended_id=False)
            )
            answer = self.stack.recv(block=True, timeout=timeout_s)
        return bytes(answer) if answer is not None else None

    def close(self) -> None:
        self.stack.stop()
        self.notifier.stop()
        self.bus.shutdown()


@pytest.fixture
def tester(channel: str) -> Iterator[ObdTester]:
    client = ObdTester(channel)
    yield client
    client.close()
