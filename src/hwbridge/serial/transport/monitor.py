"""LineMonitor: what the tools of a streaming device look at instead of the port.

A GNSS receiver or a logger's console talks without being asked. One background thread per
port reads every line and keeps, like `BusMonitor` does for frames, the latest line per kind
(a kind is what `kind_of(line)` says: an NMEA sentence type, a prefix) and a bounded history.
Lines are kept as text and parsed on demand by the tools.

Memory is bounded whatever the device sends: lines longer than the adapter's `max_frame` are
dropped by the adapter, at most `max_kinds` kinds get their own latest line (the others are
counted), and the history holds at most `history` lines. A port that goes down is waited
for; the thread ends when the monitor is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.serial.transport.adapter import PySerialAdapter

__all__ = ["KindOf", "LineMonitor", "LineRecord"]

log = logging.getLogger(__name__)

KindOf = Callable[[str], str | None]
"""line -> its kind (None: no kind; the line still goes into the history)."""

_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class LineRecord:
    """One received line: its number (counting from 1), when it arrived, its kind, its text."""

    seq: int
    timestamp: float  # time.monotonic() when it was read
    wall_time: float  # time.time() at the same moment
    kind: str | None
    text: str


class LineMonitor:
    """One reader thread for `adapter`; start it with `start()` (or use it as a context)."""

    def __init__(
        self,
        adapter: PySerialAdapter,
        kind_of: KindOf | None = None,
        *,
        history: int = 1000,
        max_kinds: int = 256,
        max_chars: int = 1024,
    ) -> None:
        if history < 1 or max_kinds < 1 or max_chars < 1:
            raise ValueError("history, max_kinds and max_chars must be positive")
        self.adapter = adapter
        self._kind_of = kind_of
        self._max_kinds = max_kinds
        self._max_chars = max_chars
        self._latest: dict[str, LineRecord] = {}
        self._history: deque[LineRecord] = deque(maxlen=history)
        self._seq = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.kinds_dropped = 0
        self.read_errors = 0
        self.started_at = time.monotonic()

    # -- lifetime ----------------------------------------------------------------------------

    def start(self) -> LineMonitor:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"hwbridge-serial-rx[{self.adapter.description}]"
            )
            self._thread.daemon = True
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(_POLL_S + 2.0)
        with self._changed:
            self._changed.notify_all()

    def __enter__(self) -> LineMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the reader thread -------------------------------------------------------------------

    def _run(self) -> None:
        adapter = self.adapter
        decode = adapter.decode
        while not self._stop.is_set():
            try:
                frames = adapter.read_frames(timeout_s=_POLL_S)
            except ToolError as exc:
                if exc.code == "PORT_DOWN":
                    adapter.wait_connected(_POLL_S)
                    if adapter.status().last_error and not adapter.connected:
                        self._stop.wait(_POLL_S / 10)
                elif exc.code != "NO_REPLY":
                    self.read_errors += 1
                continue
            except Exception:
                self.read_errors += 1
                log.exception("the line reader of %s failed", adapter.description)
                self._stop.wait(_POLL_S)
                continue
            self._ingest([decode(f).rstrip("\r") for f in frames])

    def _ingest(self, lines: list[str]) -> None:
        now, wall = time.monotonic(), time.time()
        kind_of = self._kind_of
        latest = self._latest
        limit = self._max_chars
        with self._changed:
            seq = self._seq
            for line in lines:
                seq += 1
                text = line if len(line) <= limit else line[:limit]
                kind = kind_of(text) if kind_of is not None else None
                record = LineRecord(seq, now, wall, kind, text)
                self._history.append(record)
                if kind is not None:
                    if kind in latest or len(latest) < self._max_kinds:
                        latest[kind] = record
                    else:
                        self.kinds_dropped += 1
            self._seq = seq
            self._changed.notify_all()

    # -- what the tools ask ------------------------------------------------------------------

    @property
    def lines_total(self) -> int:
        return self._seq

    def latest(self, kind: str) -> LineRecord | None:
        return self._latest.get(kind)

    def kinds(self) -> dict[str, LineRecord]:
        with self._changed:
            return dict(self._latest)

    def history(self, after_seq: int = 0, limit: int | None = None) -> list[LineRecord]:
        """Lines numbered above `after_seq`, oldest first (at most `limit`, the oldest)."""
        with self._changed:
            lines = [r for r in self._history if r.seq > after_seq]
        return lines if limit is None else lines[:limit]

    def wait_for(
        self,
        accept: Callable[[LineRecord], bool],
        *,
        after_seq: int,
        timeout_s: float,
    ) -> LineRecord | None:
        """The first line numbered above `after_seq` that `accept` takes, waiting up to
        `timeout_s`; None when none came."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        seen = after_seq
        with self._changed:
            while True:
                fresh: list[LineRecord] = []
                for record in reversed(self._history):  # newest first, back to `seen`
                    if record.seq <= seen:
                        break
                    fresh.append(record)
                for record in reversed(fresh):
                    seen = record.seq
                    if accept(record):
                        return record
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return None
                self._changed.wait(left)

    def stats(self) -> dict[str, Any]:
        with self._changed:
            latest = dict(self._latest)
            total = self._seq
        now = time.monotonic()
        return {
            "lines_total": total,
            "kinds": {k: round((now - r.timestamp) * 1000) for k, r in sorted(latest.items())},
            "kinds_dropped": self.kinds_dropped,
            "read_errors": self.read_errors,
            "last_line_age_ms": (None if not latest and not total else self._last_age_ms(now)),
        }

    def _last_age_ms(self, now: float) -> int | None:
        with self._changed:
            last = self._history[-1] if self._history else None
        return None if last is None else round((now - last.timestamp) * 1000)
