"""How a transport that went down comes back: one reconnect loop for every adapter.

The CAN adapter (python-can) and the serial adapter (pyserial) both own a connection that
can die under them (a socketcand server restarts, a USB adapter is pulled). Both then do the
same: mark which connection failed (its generation, so a late failure of an old connection
is ignored), release it, and reopen in one background thread with capped exponential
backoff and jitter until the device is back or the adapter closes; a call meanwhile fails
with a "down" error that says why and whether a retry can help. `Reconnector` is that loop
and that bookkeeping; what a connection is, how it opens and what installing it means stay
the adapter's.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from hwbridge.core.models import ToolError

__all__ = ["Reconnector"]

log = logging.getLogger(__name__)

C = TypeVar("C")


class Reconnector(Generic[C]):
    """The reconnect loop of one adapter.

    `reopen` opens a new connection (raising when the device is not back); `install` makes
    it current (and bumps the adapter's generation through `next_generation`). `what` names
    the transport in log lines and errors ("CAN bus vcan0"). Thread-safe: `failed` and
    `start` may be called from any thread, once per failure, under the adapter's own lock.
    """

    def __init__(
        self,
        what: str,
        *,
        reopen: Callable[[], C],
        install: Callable[[C], None],
        enabled: bool,
        backoff_initial_s: float,
        backoff_max_s: float,
        thread_name: str,
        describe_error: Callable[[BaseException], str] = str,
    ) -> None:
        self.what = what
        self.enabled = enabled
        self._reopen = reopen
        self._install = install
        self._initial_s = backoff_initial_s
        self._max_s = backoff_max_s
        self._thread_name = thread_name
        self._describe = describe_error
        self._lock = threading.Lock()  # the counters below; never held while opening
        self.closing = threading.Event()
        self.generation = 0
        self.reconnects = 0
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None

    # -- generations ---------------------------------------------------------------------

    def next_generation(self) -> int:
        """A new connection is current: its generation (a failure of an older one is
        stale)."""
        with self._lock:
            self.generation += 1
            return self.generation

    def is_current(self, generation: int) -> bool:
        return generation == self.generation

    # -- the loop ------------------------------------------------------------------------

    def start(self, release: Callable[[], None] | None = None) -> None:
        """Release the failed connection (`release`) and reopen in the background; one
        thread per failure (the caller holds the adapter's lock, or is its constructor)."""
        thread = threading.Thread(
            target=self._run, args=(release,), name=self._thread_name, daemon=True
        )
        self._thread = thread
        thread.start()

    def _run(self, release: Callable[[], None] | None) -> None:
        if release is not None:
            release()
        if not self.enabled:
            return
        delay = self._initial_s
        while not self.closing.wait(delay * random.uniform(0.8, 1.0)):
            try:
                opened = self._reopen()
            except Exception as exc:
                self.note(f"reconnect failed: {self._describe(exc)}")
                log.debug("reconnect to %s failed: %s", self.what, exc)
                delay = min(delay * 2.0, self._max_s)
                continue
            self.counted()
            log.info("%s reconnected", self.what)
            self._install(opened)
            return

    def note(self, reason: str) -> None:
        """Why the transport is down (shown in its "down" error and its status)."""
        with self._lock:
            self.last_error = reason

    def counted(self) -> None:
        """One more successful reconnect (the loop's, or a deliberate reopen's)."""
        with self._lock:
            self.reconnects += 1

    # -- status --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a reconnect thread is at work now."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def reconnecting(self, connected: bool, closed: bool) -> bool:
        """Whether the transport is down and being reopened."""
        return not connected and not closed and self.enabled and self.running

    def down_error(self, code: str, subject: str, *, closed: bool, end: str = "") -> ToolError:
        """The error a call meets while the transport is down: `subject` ("CAN bus X")
        is down, why, and whether it is being reopened (then a retry can help)."""
        if closed:
            return ToolError(code, f"{subject} is closed{end}")
        reason = self.last_error or "not connected"
        hint = "; reconnecting" if self.enabled else ""
        return ToolError(code, f"{subject} is down ({reason}){hint}{end}", retryable=self.enabled)

    # -- lifetime ------------------------------------------------------------------------

    def stop(self, join_timeout_s: float) -> None:
        """Stop reconnecting and wait for the loop to end (not from the loop itself)."""
        self.closing.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_timeout_s)
