"""Shared fixtures for the CAN tests: private virtual channels and a live socketcand server."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

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


def wait_until(condition: Callable[[], bool], timeout_s: float = 3.0) -> bool:
    """Poll `condition` (tests only); True as soon as it holds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def recv_all(bus: can.BusABC, timeout_s: float = 0.3, max_s: float = 3.0) -> list[can.Message]:
    """Everything `bus` receives until it is quiet for `timeout_s` (or `max_s` passed)."""
    frames = []
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline and (msg := bus.recv(timeout_s)) is not None:
        frames.append(msg)
    return frames


@pytest.fixture
def no_thread_leaks() -> Iterator[None]:
    """Fail the test if threads it started are still alive shortly after it ends."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3.0
    leaked: list[threading.Thread] = []
    while time.monotonic() < deadline:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked:
            return
        time.sleep(0.02)
    pytest.fail(f"threads still running after the test: {[t.name for t in leaked]}")
