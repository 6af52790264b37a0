"""A simulated serial device on a pseudo-terminal, bridged to a python-can `virtual` channel.

CI has no USB adapters, so the serial devices (SLCAN, ELM327) live on ptys: a client opens
the slave path (`/dev/pts/N`) exactly as it would open `/dev/ttyUSB0`. The device keeps both
ends open for its whole life: the held slave keeps the master readable and writable while
no client is attached (no EIO storm, no lost termios settings), and pyserial flushes stale
input when a client opens the port, so clients may close and reopen it freely.

Two threads per device: one reads the master (select on it and a wake pipe, so `stop` is
immediate) and hands bytes to `_on_input`; one drains the virtual channel (python-can
queues without bound) and hands frames to `_on_frame`. Subclasses implement those two.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import termios
import threading
import time
import tty
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

import can
from firmware_sim.stop_signals import stop_on_signals

__all__ = ["PtyDevice", "serve_forever"]

log = logging.getLogger(__name__)

_POLL_S = 0.1  # idle threads look at the stop flag this often; also the back-off on EIO
_READ_CHUNK = 4096
_WRITE_STALL_S = 0.2  # how long a write waits for a client that stopped reading
_JOIN_S = 2.0


class _Mark(can.Message):
    """A place in a device's receive queue (never on the bus)."""


class PtyDevice(ABC):
    """Lifetime and I/O of one pty device; `start()` returns the path a client opens."""

    kind = "pty-device"  # thread names and log lines

    def __init__(self, channel: str | None) -> None:
        # None: a device with no CAN side (a bench instrument), so no bus and no bus thread
        if channel is not None and (not isinstance(channel, str) or not channel):
            raise ValueError("channel must name a python-can virtual channel")
        self.channel = channel
        self.overflows = 0  # times unread output was discarded (see `_write`)
        self._lifecycle = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._master: int | None = None
        self._slave: int | None = None
        self._wake: tuple[int, int] | None = None
        self._port: str | None = None
        self._bus: can.BusABC | None = None
        self._threads: list[threading.Thread] = []

    # -- lifetime -----------------------------------------------------------------------

    @property
    def port_name(self) -> str:
        """The slave path a client opens, e.g. `/dev/pts/7`."""
        if self._port is None:
            raise RuntimeError(f"{self.kind} not started")
        return self._port

    @property
    def running(self) -> bool:
        return self._master is not None and not self._stop.is_set()

    def start(self) -> str:
        """Open the pty and the virtual bus, start the threads; returns the port path."""
        with self._lifecycle:
            if self._master is not None:
                raise RuntimeError(f"{self.kind} already started")
            master, slave = os.openpty()
            fds = [master, slave]
            try:
                tty.setraw(slave)  # no CR/LF translation, no echo, no signal characters
                os.set_blocking(master, False)
                port = os.ttyname(slave)
                wake = os.pipe()
                fds.extend(wake)
                bus = None
                if self.channel is not None:
                    bus = can.Bus(interface="virtual", channel=self.channel)
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
            self._stop.clear()
            self._master, self._slave, self._wake = master, slave, wake
            self._port, self._bus = port, bus
            self._reset()
            self._threads = [
                threading.Thread(target=self._read_loop, name=f"{self.kind}-pty[{port}]"),
            ]
            if bus is not None:
                self._threads.append(
                    threading.Thread(target=self._bus_loop, name=f"{self.kind}-bus[{port}]")
                )
            for thread in self._threads:
                thread.daemon = True
                thread.start()
        log.info("%s on %s, virtual channel %s", self.kind, port, self.channel)
        return port

    def stop(self) -> None:
        """Join the threads, close every fd, shut the virtual bus; idempotent."""
        with self._lifecycle:
            if self._master is None:
                return
            self._stop.set()
            assert self._wake is not None
            with contextlib.suppress(OSError):
                os.write(self._wake[1], b"x")
            deadline = time.monotonic() + _JOIN_S
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))
            self._threads = []
            if self._bus is not None:
                self._bus.shutdown()
                self._bus = None
            with self._write_lock:
                for fd in (self._master, self._slave, *self._wake):
                    if fd is not None:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                self._master = self._slave = self._wake = None
        # `port_name` stays readable after stop, for messages about the old device.

    def __enter__(self) -> Self:
        if self._master is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- subclass hooks -----------------------------------------------------------------

    @abstractmethod
    def _reset(self) -> None:
        """Power-on state; called by `start` before the threads run."""

    @abstractmethod
    def _on_input(self, data: bytes) -> None:
        """Bytes the client wrote (pty thread)."""

    @abstractmethod
    def _on_frame(self, msg: can.Message) -> None:
        """A frame seen on the virtual channel (bus thread)."""

    def _on_mark(self, mark: can.Message) -> None:
        """The bus thread reached `mark` (see `_mark`): every frame before it was handed
        to `_on_frame`, and every frame after it is still to come."""
        del mark  # nothing by default

    # -- I/O for subclasses -------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """Write to the client; a client that stops reading loses old output, not the device.

        Output is only ever lost as a whole backlog, never as part of a line: when nobody
        has read for `_WRITE_STALL_S`, everything pending (which may end in the first part
        of `data`) is flushed and the rest of `data` dropped, so the next read starts on a
        line boundary, as after a real adapter's buffer overflow.
        """
        with self._write_lock:
            master, slave = self._master, self._slave
            view = memoryview(data)
            deadline: float | None = None
            while view and master is not None:
                try:
                    view = view[os.write(master, view) :]
                    continue
                except BlockingIOError:
                    pass
                except OSError as exc:
                    log.debug("%s: write failed: %s", self.kind, exc)
                    break
                if deadline is None:
                    deadline = time.monotonic() + _WRITE_STALL_S
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    if slave is not None:
                        with contextlib.suppress(OSError, termios.error):
                            termios.tcflush(slave, termios.TCIFLUSH)
                    self.overflows += 1
                    break
                select.select([], [master], [], min(remaining, _POLL_S))

    def _read_input(self, timeout_s: float) -> bytes | None:
        """Bytes the client wrote within `timeout_s` (b"" if none); None once stopping.

        For subclasses that must watch the port while busy (the ELM327 is interrupted by
        any character); only call it from the pty thread.
        """
        master, wake = self._master, self._wake
        if master is None or wake is None or self._stop.is_set():
            return None
        try:
            ready, _, _ = select.select([master, wake[0]], [], [], max(0.0, timeout_s))
        except (OSError, ValueError):
            return None
        if wake[0] in ready:
            return None
        if master not in ready:
            return b""
        try:
            return os.read(master, _READ_CHUNK)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno != errno.EIO:  # EIO: no process has the slave open
                log.debug("%s: read failed: %s", self.kind, exc)
            return None if self._stop.wait(_POLL_S) else b""

    def _mark(self) -> can.Message:
        """Put a mark in the device's own receive queue and return it; `_on_mark` runs when
        the bus thread gets to it. On a busy machine the bus thread hands frames over late,
        so the time a frame arrives cannot tell whether it was on the bus before something
        the device did; its place behind the mark can. Without a queue to mark (not a
        virtual bus), `_on_mark` runs at once."""
        mark = _Mark()
        queue_ = getattr(self._bus, "queue", None)
        if queue_ is None:
            self._on_mark(mark)
        else:
            queue_.put(mark)
        return mark

    def _send(self, msg: can.Message) -> bool:
        """Put a frame on the virtual channel; False if the bus refused it."""
        bus = self._bus
        if bus is None:
            return False
        try:
            bus.send(msg)
        except can.CanError as exc:
            log.warning("%s: send on %s failed: %s", self.kind, self.channel, exc)
            return False
        return True

    # -- threads ------------------------------------------------------------------------

    def _read_loop(self) -> None:
        while (data := self._read_input(_POLL_S * 10)) is not None:
            if not data:
                continue
            try:
                self._on_input(data)
            except Exception:  # a device bug must not take the port away
                log.exception("%s: input handling failed", self.kind)

    def _bus_loop(self) -> None:
        bus = self._bus
        assert bus is not None
        while not self._stop.is_set():
            try:
                msg = bus.recv(_POLL_S)
            except can.CanError as exc:
                log.warning("%s: receive on %s failed: %s", self.kind, self.channel, exc)
                return
            if msg is None:
                continue
            try:
                if isinstance(msg, _Mark):
                    self._on_mark(msg)
                else:
                    self._on_frame(msg)
            except Exception:
                log.exception("%s: frame handling failed", self.kind)


def serve_forever(device: PtyDevice) -> None:
    """Run `device` until SIGINT/SIGTERM, printing `KIND on PORT` once it is up."""
    stop = threading.Event()
    with stop_on_signals(stop), device:
        print(f"{device.kind} on {device.port_name}", flush=True)
        while not stop.wait(0.5):
            pass
