"""Awaiting driver calls without blocking the event loop (spec section 14, sync/async).

A call runs in a daemon worker thread of its own, so bus and port waits never block the
loop and an asyncio agent can run many drivers at once. The sync API stays the reference:
the worker runs exactly the sync code, so both give the same answers.

Cancellation never leaves an outcome half-reported:

- cancelled before the worker starts anything: nothing runs;
- cancelled while only read-only tools run: the await ends at once; the reads finish within
  their own timeouts in the background and their results are dropped (nothing changed);
- cancelled while a tool that changes state runs (a send, a periodic start): the await waits
  for it to finish (sends are bounded by their timeouts), then raises `ExecutionCancelled`
  carrying the DriverResponse, so the caller learns what went out.

Worker threads are daemons: an application that exits after a cancelled read does not wait
for the read's timeout. They run in a copy of the awaiting task's context, so what the caller
set there (`PROGRESS`, a server's slot) reaches the driver, and a driver that can stop early
(a remote call) learns of an abandoned read through `CURRENT_JOB`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

__all__ = [
    "CURRENT_JOB",
    "PROGRESS",
    "WORKER_SLOT",
    "CallJob",
    "ExecutionCancelled",
    "ProgressSink",
    "WorkerSlot",
    "run_in_worker",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class ExecutionCancelled(asyncio.CancelledError):
    """An awaited driver call was cancelled. `response` is the DriverResponse of calls that
    had started changing state and were waited for; None when nothing that changes state
    ran (nothing had started, or only reads were abandoned)."""

    def __init__(self, response: Any = None) -> None:
        super().__init__("the driver call was cancelled")
        self.response = response


class CallJob:
    """Shared between the awaiting coroutine and the worker: whether work may start, and
    whether what runs changes state."""

    __slots__ = ("_abandon", "_lock", "cancelled", "mutating")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self.mutating: bool | None = None  # None: nothing has started
        self._abandon: list[Callable[[], None]] = []

    def begin(self, mutating: bool) -> bool:
        """Called by the worker before any side effect; False: cancelled, do nothing."""
        with self._lock:
            if self.cancelled:
                return False
            self.mutating = mutating
            return True

    def cancel(self) -> bool | None:
        """Called on cancellation; returns whether state-changing work has started. Reads
        that are abandoned hear of it through `on_abandon`."""
        with self._lock:
            self.cancelled = True
            mutating = self.mutating
            callbacks = [] if mutating else self._abandon
            self._abandon = []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a callback for an abandoned call failed")
        return mutating

    def on_abandon(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` (once, from any thread) when the awaiting side abandons the
        reads this job runs, so they can stop early; never for work that changes state.
        Returns a function that withdraws it (call it once the read has ended)."""
        with self._lock:
            if not (self.cancelled and not self.mutating):
                self._abandon.append(callback)

                def withdraw() -> None:
                    with self._lock:
                        if callback in self._abandon:
                            self._abandon.remove(callback)

                return withdraw
        callback()  # abandoned already
        return lambda: None


class WorkerSlot:
    """One call's place among a server's running calls. It is held until the call's worker
    threads have ended, not merely until the call was answered or cancelled: a cancelled
    read's thread runs on to its own timeout, and a client that cancels and repeats must
    not pile such threads up without end. `release` runs once, from any thread."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._lock = threading.Lock()
        self._threads = 0
        self._answered = False
        self._released = False

    def thread_started(self) -> None:
        with self._lock:
            self._threads += 1

    def thread_ended(self) -> None:
        with self._lock:
            self._threads -= 1
            self._settle()

    def call_ended(self) -> None:
        with self._lock:
            self._answered = True
            self._settle()

    def _settle(self) -> None:
        if self._answered and self._threads == 0 and not self._released:
            self._released = True
            self._release()


WORKER_SLOT: ContextVar[WorkerSlot | None] = ContextVar("hwbridge_worker_slot", default=None)
"""The slot of the call being run in this context (set by a server that bounds its calls)."""

CURRENT_JOB: ContextVar[CallJob | None] = ContextVar("hwbridge_current_job", default=None)
"""The job of the awaited call this worker thread runs (None in a plain sync call)."""


class ProgressSink(Protocol):
    """Where a call reports how far it has come, from any thread."""

    def claim(self) -> None:
        """The call reports its own progress from now on (the waiter stops its clock)."""

    def report(self, progress: float, total: float | None, message: str | None) -> None:
        """How far the call has come (increasing; `total` when known)."""


PROGRESS: ContextVar[ProgressSink | None] = ContextVar("hwbridge_progress", default=None)
"""Where a driver that hears how far its call has come (a remote MCP server's progress
notifications) reports it; set by whoever waits for the call (an MCP server's call handler)."""


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def run_in_worker(work: Callable[[CallJob], T], *, name: str = "hwbridge-call") -> T:
    """Run `work(job)` in a daemon thread and await its result with the semantics above.

    `work` must call `job.begin(mutating)` before anything with a side effect and do
    nothing if it returns False.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    job = CallJob()
    slot = WORKER_SLOT.get()

    def target() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = work(job)
        except BaseException as exc:  # handed to the awaiting side, never lost
            error = exc
        finally:
            if slot is not None:
                slot.thread_ended()
        try:
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            log.debug("a driver call finished after its event loop closed")

    if slot is not None:
        slot.thread_started()
    context = contextvars.copy_context()
    context.run(CURRENT_JOB.set, job)
    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not job.cancel():
            raise ExecutionCancelled(None) from None
    # State-changing work is running: wait for its outcome whatever else is cancelled.
    while True:
        try:
            outcome = await asyncio.shield(future)
        except asyncio.CancelledError:
            continue
        except Exception as exc:
            raise ExecutionCancelled(None) from exc
        raise ExecutionCancelled(outcome)
