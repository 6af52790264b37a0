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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _live_module(Path(item.path)):
            item.add_marker(pytest.mark.live)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = slow_first(items, workers)


def slow_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The same tests, ordered so that each xdist worker starts with its share of the slow.

    `--dist worksteal` gives each of the workers one contiguous slice of the collection and
    lets an idle worker take the second half of the longest queue: a slow test collected
    last (the docs pages and the demo are at the end of the alphabet) starts last and keeps
    one worker busy while the others wait. So the slow tests go to the front of the slices,
    a module's slow tests kept together (a module fixture is made once), dealt round-robin,
    longest module first. Every worker computes the same order from the same collection."""
    slow: dict[Path, list[pytest.Item]] = {}
    rest: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("slow") is not None:
            slow.setdefault(Path(item.path), []).append(item)
        else:
            rest.append(item)
    if workers < 2 or not slow:
        return [*(i for group in slow.values() for i in group), *rest]
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in sorted(slow.values(), key=len, reverse=True):
        min(heads, key=len).extend(group)
    ordered: list[pytest.Item] = []
    share = len(rest) / workers
    for index, head in enumerate(heads):
        ordered.extend(head)
        ordered.extend(rest[round(index * share) : round((index + 1) * share)])
    return ordered


BUSY_MARGIN_S = 4.0
"""What a busy 2-core machine may add to any wait: 5 xdist workers and a hogged core."""


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
