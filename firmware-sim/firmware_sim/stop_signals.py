"""SIGINT and SIGTERM set a stop event, from a thread rather than the signal handler.

A signal handler runs in the main thread between two bytecodes, also while that thread
holds the lock of the very event it waits on (`Event.wait` does, each time it wakes):
setting the event there would wait for ever. The handler only writes to a pipe; a thread
reads it and sets the event.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` while inside (main thread only: elsewhere no handler
    can be set); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # a full pipe: the stop is on its way
            os.write(write_end, b"!")

    def relay() -> None:
        try:
            if os.read(read_end, 1):
                stop.set()
        finally:
            os.close(read_end)  # here: a number closed under a reader is soon another's

    thread = threading.Thread(target=relay, name="sim-signals", daemon=True)
    thread.start()
    previous: dict[int, object] = {}
    try:
        for number in (int(signal.SIGINT), int(signal.SIGTERM)):
            previous[number] = signal.signal(number, on_signal)
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)  # type: ignore[arg-type]
        os.close(write_end)
        thread.join(5.0)
