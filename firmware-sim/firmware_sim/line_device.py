"""A line-oriented bench device on a pty (no CAN side): the base of the simulated power supply
and GNSS receiver.

Input is cut into lines (LF, CR or CRLF ends one); each line goes to `_on_line`, whose answer
is written back with the device's terminator. A streaming device also gets `_tick()` calls
from a timer thread. Faults make it misbehave as real devices do, so clients can be tested
against them: `silence` (no answers, no stream), `garbage` (bytes that are not a reply),
`partial` (a reply without its terminator), `overlong` (a reply longer than any buffer).

`link` names a stable path (a symlink to the pty, as udev makes `/dev/serial/by-id/...`):
it is removed on `stop` and made again on `start`, so a client can watch the device go away
and come back under the same name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from pathlib import Path

import can
from firmware_sim.pty_device import PtyDevice

__all__ = ["FAULTS", "LineDevice"]

log = logging.getLogger(__name__)

FAULTS = ("silence", "garbage", "partial", "overlong")
_MAX_LINE = 1024  # longer input lines are dropped whole (a real device's buffer overflows)


class LineDevice(PtyDevice):
    """Override `_on_line` (and `_tick` with `tick_hz` for a streaming device)."""

    kind = "line-device"
    terminator = b"\n"

    def __init__(self, *, link: str | Path | None = None, tick_hz: float = 0.0) -> None:
        super().__init__(None)
        self.link = Path(link) if link is not None else None
        self.fault: str | None = None
        self.lines_received = 0
        self._tick_hz = float(tick_hz)
        self._pending = bytearray()
        self._dropping = False
        self._state_lock = threading.RLock()  # the device's state: input and timer threads
        self._ticker: threading.Thread | None = None
        self._ticker_stop = threading.Event()
        self._random = random.Random(0)

    # -- lifetime ----------------------------------------------------------------------------

    def start(self) -> str:
        port = super().start()
        if self.link is not None:
            temporary = self.link.with_name(self.link.name + ".new")
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            os.symlink(port, temporary)
            os.replace(temporary, self.link)
        if self._tick_hz > 0:
            self._ticker_stop.clear()
            self._ticker = threading.Thread(
                target=self._tick_loop, name=f"{self.kind}-tick[{port}]", daemon=True
            )
            self._ticker.start()
        return str(self.link) if self.link is not None else port

    def stop(self) -> None:
        self._ticker_stop.set()
        ticker, self._ticker = self._ticker, None
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(2.0)
        if self.link is not None:
            with contextlib.suppress(FileNotFoundError):
                self.link.unlink()
        super().stop()

    @property
    def tick_hz(self) -> float:
        return self._tick_hz

    @tick_hz.setter
    def tick_hz(self, value: float) -> None:
        if not 0 < value <= 1000:
            raise ValueError("tick_hz must be in (0, 1000]")
        self._tick_hz = float(value)

    def inject_fault(self, name: str | None) -> None:
        """Misbehave from now on (one of FAULTS), or behave again (None)."""
        if name is not None and name not in FAULTS:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
        self.fault = name

    # -- subclass hooks ------------------------------------------------------------------------

    def _on_line(self, line: str) -> str | None:
        """The answer to one line (without terminator), or None for no answer."""
        return None

    def _tick(self) -> None:
        """Called `tick_hz` times a second while running (streaming devices)."""

    def _on_frame(self, msg: can.Message) -> None:  # no CAN side
        return None

    # -- I/O -----------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._pending.clear()
        self._dropping = False

    def _on_input(self, data: bytes) -> None:
        for byte in data:
            if byte in (0x0A, 0x0D):
                if self._dropping:
                    self._dropping = False
                elif self._pending:
                    text = self._pending.decode("latin-1")
                    self._pending.clear()
                    self.lines_received += 1
                    with self._state_lock:
                        answer = self._on_line(text)
                    if answer is not None:
                        self.emit(answer)
                continue
            if len(self._pending) >= _MAX_LINE:
                self._pending.clear()
                self._dropping = True
            elif not self._dropping:
                self._pending.append(byte)

    def emit(self, line: str) -> None:
        """Write one line as the device would, faults applied."""
        fault = self.fault
        if fault == "silence":
            return
        if fault == "garbage":
            noise = bytes(self._random.randrange(256) for _ in range(24))
            self._write(noise.replace(b"\n", b"\x00") + self.terminator)
            return
        if fault == "partial":
            self._write(line[: max(1, len(line) // 2)].encode("latin-1"))
            return
        if fault == "overlong":
            self._write(b"9" * 70_000 + self.terminator)
            return
        self._write(line.encode("latin-1") + self.terminator)

    def _tick_loop(self) -> None:
        next_at = 0.0
        while not self._ticker_stop.is_set():
            now = time.monotonic()
            if now < next_at:
                self._ticker_stop.wait(next_at - now)
                continue
            next_at = max(next_at + 1.0 / self._tick_hz, now)
            try:
                with self._state_lock:
                    self._tick()
            except Exception:
                log.exception("%s: tick failed", self.kind)
