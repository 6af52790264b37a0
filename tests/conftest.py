"""What every test directory shares: waiting for a condition, and catching leaked threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest


def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll `condition` until it holds or the deadline passes (tests only)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


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
