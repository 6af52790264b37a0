"""Ctrl-C and SIGTERM handled outside the signal handler, where taking a lock is safe.

Python runs a signal handler in the main thread between any two of its bytecodes, also
while that thread holds a lock: an `Event.wait` holds its event's lock for a moment each
time it wakes. A handler that then sets the same event waits for a lock its own thread
holds, for ever (a Ctrl-C that hung `hwbridge monitor` about once in fifty runs on a busy
machine). So the handler here only writes the signal's number to a pipe, which takes no
lock; a thread of ours reads it and calls the command's handler, which may then set
events, cancel tasks and log as any code may.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

__all__ = ["relayed_signals"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def relayed_signals(
    signals: Iterable[int],
    handler: Callable[[int], None],
    *,
    at_once: Callable[[int], None] | None = None,
) -> Iterator[None]:
    """While the block runs, each of `signals` calls `handler(signum)` on a thread of its
    own; the previous handlers come back after it. `at_once(signum)`, if given, runs in the
    signal handler itself, before the handler is called: it may raise (KeyboardInterrupt, to
    leave a blocking call; the handler is then not called) and read plain values, never
    take a lock. Only the main thread can set signal handlers:
    elsewhere the block runs without them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # at_once first: once written, the relay may run the handler before at_once looks
        # (os.write lets other threads run), and at_once would judge by what it did
        if at_once is not None:
            at_once(signum)
        with contextlib.suppress(OSError):  # a full pipe: stops enough are on their way
            os.write(write_end, bytes([signum]))

    def relay() -> None:
        try:
            while data := os.read(read_end, 64):
                for signum in data:
                    try:
                        handler(signum)
                    except Exception:
                        log.exception("the handler of signal %d failed", signum)
        finally:
            # closed here, never by the block's end: a number closed under a reading
            # thread is soon another file's, which it would then read from
            os.close(read_end)

    thread = threading.Thread(target=relay, name="hwbridge-signals", daemon=True)
    thread.start()
    previous: dict[int, object] = {}
    try:
        for number in signals:
            previous[number] = signal.signal(number, on_signal)
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)  # type: ignore[arg-type]
        os.close(write_end)  # the relay reads the end of the pipe and returns
        thread.join(5.0)
