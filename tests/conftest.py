"""What every test directory shares: waiting for a condition, catching leaked threads, and the
`live` marker on every module that depends on real time or real processes.

`make test-fast` runs what is neither `live` nor `slow` (the inner loop); `make test` runs
everything. A module is `live` when its source starts a simulator, a server, a subprocess or
a pty, opens sockets, or sleeps: its results can depend on how busy the machine is, so its
bounds are stated as a configured timeout plus a margin. Mark one by hand with
`pytestmark = pytest.mark.live` when it is live some other way.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest

_LIVE = re.compile(
    r"subprocess|Popen|VirtualVehicle|SocketcandServer|socketcand|\bpty\b|start_http|"
    r"stdio_session|firmware_sim|\bserve\(|HTTPServer|httpserver|\bsleep\("
)
"""What in a test module's source makes it live."""


@cache
def _live_module(path: Path) -> bool:
    try:
        return bool(_LIVE.search(path.read_text(encoding="utf-8")))
    except OSError:
        return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _live_module(Path(item.path)):
            item.add_marker(pytest.mark.live)


BUSY_MARGIN_S = 4.0
"""What a busy 2-core machine may add to any wait: 4 xdist workers and a hogged core."""


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
