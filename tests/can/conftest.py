"""Shared fixtures for the CAN tests: private virtual channels and a live socketcand server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

import can
from firmware_sim.socketcand import SocketcandServer


@pytest.fixture
def channel() -> str:
    """A virtual channel no other test uses (python-can virtual channels are process-wide)."""
    return f"hwb-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def peer(channel: str) -> Iterator[can.BusABC]:
    """A second virtual bus on `channel`: it sees what the code under test sends."""
    bus = can.Bus(interface="virtual", channel=channel)
    yield bus
    bus.shutdown()


@pytest.fixture
def socketcand(channel: str) -> Iterator[SocketcandServer]:
    """A running socketcand server serving bus `vcan0`, bridged to `channel`."""
    with SocketcandServer({"vcan0": channel}) as server:
        yield server


def recv_all(bus: can.BusABC, timeout_s: float = 0.3, max_s: float = 3.0) -> list[can.Message]:
    """Everything `bus` receives until it is quiet for `timeout_s` (or `max_s` passed)."""
    frames = []
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline and (msg := bus.recv(timeout_s)) is not None:
        frames.append(msg)
    return frames
