"""Timed work of the simulated truck: one thread runs every callback at its time.

Periodic messages, DM1 every second, the gaps between BAM packets and the transport
protocol's timeouts are all timers on one `Scheduler`, so the truck has one sending thread
that sleeps until the next thing is due. The transport protocol sees only the `Timers`
protocol (`now`, `call_at`), which lets its tests drive time by hand.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Scheduler", "Timer", "Timers"]

log = logging.getLogger(__name__)


class Timer:
    """A callback due at `when` (monotonic seconds); `cancel()` before it runs skips it."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers(Protocol):
    """What timed code needs: the clock and a way to be called back later."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...


class Scheduler:
    """Runs callbacks at their time on one daemon thread; callbacks must be quick.

    `call_at` is thread-safe. A callback that raises is logged and the others go on.
    `every` repeats a callback at a fixed period; a late run is not caught up in a burst,
    the schedule slips instead.
    """

    def __init__(self, name: str = "j1939-scheduler") -> None:
        self._name = name
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        with self._wake:
            heapq.heappush(self._heap, (when, next(self._order), timer))
            if self._heap[0][2] is timer:
                self._wake.notify()
        return timer

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        return self.call_at(self.now() + delay_s, callback)

    def every(
        self, period_s: float, callback: Callable[[], None], first_s: float = 0.0
    ) -> Callable[[], None]:
        """Call `callback` every `period_s`, the first time after `first_s`; returns a
        function that stops the repetition."""
        if period_s <= 0.0:
            raise ValueError(f"a period must be positive, got {period_s}")
        state: dict[str, Timer] = {}
        stopped = threading.Event()

        def run() -> None:
            if stopped.is_set():
                return
            due = state["timer"].when + period_s
            try:
                callback()
            finally:
                now = self.now()
                state["timer"] = self.call_at(due if due > now else now + period_s, run)

        def stop() -> None:
            stopped.set()
            state["timer"].cancel()

        state["timer"] = self.call_at(self.now() + first_s, run)
        return stop

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("scheduler already started")
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread (callbacks not yet due never run); idempotent."""
        with self._wake:
            self._stopping = True
            self._heap.clear()
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _next(self) -> Timer | None:
        """The next timer due, waiting for it; None once stopping."""
        with self._wake:
            while not self._stopping:
                if self._heap:
                    delay = self._heap[0][0] - time.monotonic()
                    if delay <= 0.0:
                        return heapq.heappop(self._heap)[2]
                    self._wake.wait(delay)
                else:
                    self._wake.wait()
            return None

    def _run(self) -> None:
        while (timer := self._next()) is not None:
            if timer.cancelled:
                continue
            try:
                timer.callback()
            except Exception:  # one failing callback must not end the truck's sending
                log.exception("%s: a timed callback failed", self._name)
