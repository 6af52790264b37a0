"""PySerialAdapter: one serial port behind a small, bounded, thread-safe surface.

It opens anything `serial.serial_for_url` opens: a device (`/dev/ttyUSB0`, `COM3`), a pty
path, `socket://HOST:PORT`, `rfc2217://HOST:PORT`, `loop://`, and `spy://PORT?file=LOG` for a
traffic trace. The promises are the CAN adapter's:

- every read has a timeout and a size bound: a device that stays silent gives
  `ToolError("NO_REPLY")` when the timeout passes; a frame longer than `max_frame` bytes is
  discarded (counted in `status().overlong_frames`), never buffered without end;
- a device that disappears gives `ToolError("PORT_DOWN")` at once, and the port is reopened
  in the background with capped exponential backoff when the device is back (a pty that is
  replaced under the same path, a USB adapter plugged in again, a TCP server restarted);
- one I/O lock: a `query` (write, then read the reply) is one transaction, so threads that
  share the adapter never read each other's replies.

    with PySerialAdapter("/dev/ttyUSB0", baudrate=115200) as port:
        port.query("*IDN?", timeout_s=1.0)       # 'HWB,PSU-3005,...'

Bytes are the unit of I/O (`write`, `read_frame`); `write_line`, `read_line` and `query` add
the write terminator and decode with `encoding` (undecodable bytes become U+FFFD).
"""

from __future__ import annotations

import logging
import os
import re
import select
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from typing import Any

import serial

from hwbridge.core.lifetime import Closing
from hwbridge.core.models import ToolError
from hwbridge.core.reconnect import Reconnector
from hwbridge.serial.transport.framing import Framing, as_bytes

__all__ = ["PySerialAdapter", "SerialStatus", "describe_url"]

log = logging.getLogger(__name__)

_POLL_S = 0.05  # pyserial's read timeout: how late a read can notice its deadline
_MAX_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class SerialStatus:
    """A snapshot of the port's health, cheap to take and JSON-safe via `to_dict`."""

    connected: bool
    port: str
    reconnecting: bool
    reconnects: int
    last_error: str | None
    bytes_in: int
    bytes_out: int
    frames_in: int
    overlong_frames: int
    generation: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe_url(url: str) -> str:
    """The port as a person reads it; a spy:// trace file's query string is kept."""
    return url


def _open_with_timeout(port: serial.SerialBase, timeout_s: float) -> None:
    """`port.open()` that gives up after `timeout_s` (a late open is closed again)."""
    done = threading.Event()
    failure: list[BaseException] = []
    abandoned = threading.Event()

    def work() -> None:
        try:
            port.open()
        except BaseException as exc:
            failure.append(exc)
        if abandoned.is_set():
            _close_quietly(port)
        done.set()

    worker = threading.Thread(target=work, name="hwbridge-serial-open", daemon=True)
    worker.start()
    if not done.wait(timeout_s):
        abandoned.set()
        raise TimeoutError(f"opening the port took longer than {timeout_s:g} s")
    if failure:
        raise failure[0]


class PySerialAdapter(Closing):
    """One serial port (see the module docstring).

    `url` is what `serial.serial_for_url` takes; `baudrate` and `serial_options` (bytesize,
    parity, stopbits, xonxoff, rtscts, ...) go to pyserial. `terminator` is how replies end
    (the default framing) and `write_terminator` what `write_line` appends (default: the
    same). `max_frame` bounds a frame in bytes. With `require_connection=False` a port that
    cannot be opened yet is retried in the background instead of raising PORT_DOWN.
    """

    def __init__(
        self,
        url: str,
        *,
        baudrate: int = 115200,
        terminator: str | bytes = b"\n",
        write_terminator: str | bytes | None = None,
        framing: Framing | None = None,
        encoding: str = "ascii",
        max_frame: int = 4096,
        timeout_s: float = 1.0,
        write_timeout_s: float = 1.0,
        open_timeout_s: float = 5.0,
        reconnect: bool = True,
        require_connection: bool = True,
        backoff_initial_s: float = 0.05,
        backoff_max_s: float = 2.0,
        serial_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise ValueError("a serial port is named by a path or a pyserial URL")
        if max_frame < 1 or timeout_s <= 0 or write_timeout_s <= 0:
            raise ValueError("max_frame, timeout_s and write_timeout_s must be positive")
        self.url = url
        self.description = describe_url(url)
        self.framing = framing or Framing.line(terminator)
        line_end = terminator if write_terminator is None else write_terminator
        self.write_terminator = as_bytes(line_end)
        self.encoding = encoding
        "".encode(encoding)  # LookupError for an unknown encoding, here rather than later
        self.max_frame = int(max_frame)
        self.timeout_s = float(timeout_s)
        self._write_timeout_s = float(write_timeout_s)
        self._open_timeout_s = float(open_timeout_s)
        self._options = {"baudrate": baudrate, **dict(serial_options or {})}

        self._state = threading.Lock()  # guards the fields below; never held during I/O
        self._io = threading.RLock()  # one transaction (write + read) at a time
        self._read_lock = threading.RLock()  # the buffer and reads
        self._reopening = _Pending()  # readers step aside while a reconnect waits
        self._connected = threading.Event()
        self._port: serial.SerialBase | None = None
        self._closed = False
        self._rc: Reconnector[serial.SerialBase] = Reconnector(
            f"serial port {self.description}",
            reopen=self._open,
            install=self._install,
            enabled=reconnect,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
            thread_name=f"hwbridge-serial-recover[{self.description}]",
            describe_error=_reason,
        )
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for `_scanned_for`
        self._scanned_for: bytes | None = None
        self._skipping = False  # discarding the rest of an overlong frame
        self._fragment = False  # a write stopped part way: no more writes until reconnect()
        self._bytes_in = self._bytes_out = 0
        self._frames_in = 0
        self._overlong = 0

        try:
            opened = self._open()
        except (ValueError, TypeError) as exc:  # a malformed URL or option: the caller's error
            raise ValueError(f"cannot open {self.description}: {exc}") from exc
        except Exception as exc:
            self._rc.note(f"open failed: {_reason(exc)}")
            if require_connection or not reconnect:
                raise ToolError(
                    "PORT_DOWN",
                    f"The serial port {self.description} cannot be opened ({_reason(exc)}).",
                    retryable=True,
                ) from exc
            self._rc.start()
            return
        self._install(opened)

    # -- opening and recovery ------------------------------------------------------------

    def _open(self) -> serial.SerialBase:
        port = serial.serial_for_url(
            self.url,
            do_not_open=True,
            timeout=_POLL_S,
            write_timeout=self._write_timeout_s,
            **self._options,
        )
        _open_with_timeout(port, self._open_timeout_s)
        return port

    def _install(self, port: serial.SerialBase) -> None:
        # the read lock before the state lock, as a reader takes them (read_frames holds the
        # read lock and asks _current for the port): the other order deadlocked a reconnect
        # against the monitor's reader. While the port is None no reader holds it for long.
        with self._read_lock, self._state:
            if self._closed:
                port.close()
                return
            self._rc.next_generation()
            self._port = port
            self._buffer.clear()
            self._scanned = 0
            self._skipping = False
            self._connected.set()

    def _on_failure(self, generation: int, reason: str) -> None:
        """Called by the thread whose I/O found the port dead."""
        with self._state:
            if self._closed or not self._rc.is_current(generation) or self._port is None:
                return
            log.warning("serial port %s is down: %s", self.description, reason)
            self._rc.note(reason)
            port, self._port = self._port, None
            self._connected.clear()
            self._rc.start(lambda: _close_quietly(port))

    def reconnect(self) -> None:
        """Close the port and open it again now (PORT_DOWN if that fails; then it keeps
        retrying in the background when `reconnect` is on)."""
        with self._reopening:
            self._reopen()

    def _reopen(self) -> None:
        with self._io, self._read_lock, self._state:
            if self._closed:
                raise self._down()
            self._fragment = False  # a deliberate reopen: the caller checked the device
            port, self._port = self._port, None
            self._connected.clear()
        if port is not None:
            _close_quietly(port)
        if self._rc.running:
            return  # already reopening
        try:
            opened = self._open()
        except Exception as exc:
            self._rc.note(f"reconnect failed: {_reason(exc)}")
            with self._state:
                if self._rc.enabled and not self._closed:
                    self._rc.start()
            raise self._down() from exc
        self._rc.counted()
        self._install(opened)

    def wait_connected(self, timeout_s: float) -> bool:
        """Block until the port is open (True) or `timeout_s` passes (False)."""
        return self._connected.wait(timeout_s) and not self._closed

    # -- I/O -------------------------------------------------------------------------------

    def down_error(self) -> ToolError:
        """The PORT_DOWN error that says why the port is down now."""
        return self._down()

    def _down(self) -> ToolError:
        subject = f"The serial port {self.description}"
        return self._rc.down_error("PORT_DOWN", subject, closed=self._closed, end=".")

    def _current(self) -> tuple[serial.SerialBase, int]:
        with self._state:
            port = self._port
            if port is None or self._closed:
                raise self._down()
            return port, self._rc.generation

    @contextmanager
    def transaction(self, timeout_s: float | None = None) -> Iterator[None]:
        """Hold the port for several steps (write, read, write again): other threads' I/O
        waits. PORT_BUSY when another transaction holds it longer than `timeout_s`."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        if not self._io.acquire(timeout=max(0.0, wait)):
            raise ToolError(
                "PORT_BUSY",
                f"The serial port {self.description} stayed busy with another exchange for "
                f"{wait:g} s.",
                retryable=True,
            )
        try:
            yield
        finally:
            self._io.release()

    def write(self, data: bytes) -> None:
        """Write `data` as it is, all of it or an error that says how much went out:
        PORT_DOWN when nothing did (the port is gone or took no byte in time: safe to
        retry); WRITE_INCOMPLETE when only a part did (the device holds a fragment, so the
        port is reopened); WRITE_UNCONFIRMED when the transport cannot tell. The last two
        are never retryable: the command may have reached the device."""
        port, generation = self._current()
        with self._io:
            if self._fragment:
                raise ToolError(
                    "PORT_DESYNC",
                    f"An earlier write to {self.description} stopped part way, so the device "
                    "holds an unfinished line: whatever came next would complete it into a "
                    "line nobody judged. Nothing was sent. Check the device, then reconnect "
                    "the port (reconnect()) to go on.",
                )
            try:
                fd = _posix_fd(port)
                if fd is None:
                    port.write(data)  # pyserial writes it all (or times out); no tcdrain
                else:
                    self._write_fd(fd, data)
            except _Partial as partial:
                self._bytes_out += partial.sent
                self._fragment = True
                self._rc.note("a write stopped part way (the device holds a fragment)")
                raise ToolError(
                    "WRITE_INCOMPLETE",
                    f"Only {partial.sent} of {len(data)} bytes reached {self.description} "
                    f"within {self._write_timeout_s:g} s (flow control or a stalled device). "
                    "The device holds the start of the line, so nothing more is written to "
                    "this port until it is reconnected; check the device's state first.",
                ) from None
            except serial.SerialTimeoutException as exc:
                raise ToolError(
                    "WRITE_UNCONFIRMED",
                    f"The write to {self.description} did not finish within "
                    f"{self._write_timeout_s:g} s; the device may have received the line, "
                    "whole or in part. Check the device's state before repeating it.",
                ) from exc
            except (serial.SerialException, OSError, ValueError, TypeError) as exc:
                self._on_failure(generation, f"write failed: {_reason(exc)}")
                raise self._down() from exc
        self._bytes_out += len(data)

    def _write_fd(self, fd: int, data: bytes) -> None:
        """A POSIX port's write with our own deadline, counting what the kernel took
        (pyserial raises a timeout even after every byte went out)."""
        view = memoryview(data)
        sent = 0
        deadline = time.monotonic() + self._write_timeout_s
        while sent < len(data):
            with suppress(BlockingIOError):
                sent += os.write(fd, view[sent:])
            if sent >= len(data):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                if sent == 0:
                    raise ToolError(
                        "PORT_DOWN",
                        f"The serial port {self.description} took no byte within "
                        f"{self._write_timeout_s:g} s (flow control or a stalled device); "
                        "nothing was sent.",
                        retryable=True,
                    )
                raise _Partial(sent)
            select.select([], [fd], [], min(left, _POLL_S))

    def write_line(self, line: str) -> None:
        """`line` encoded, then the write terminator."""
        self.write(self.encode(line) + self.write_terminator)

    def encode(self, text: str) -> bytes:
        try:
            return text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise ToolError(
                "INVALID_VALUE",
                f"The line holds a character that {self.encoding} cannot carry "
                f"(position {exc.start}).",
            ) from exc

    def decode(self, data: bytes) -> str:
        return data.decode(self.encoding, errors="replace")

    def reset_input(self) -> None:
        """Drop what was received and not read yet (stale replies before a new query)."""
        with self._read_lock:
            self._buffer.clear()
            self._scanned = 0
            self._skipping = False
            try:
                port, generation = self._current()
            except ToolError:
                return
            try:
                fd = _posix_fd(port)
                if fd is not None:  # one non-blocking read drops what is there
                    with suppress(BlockingIOError):
                        os.read(fd, _MAX_CHUNK)
                else:
                    waiting = port.in_waiting
                    if waiting:
                        port.read(min(waiting, _MAX_CHUNK))
            except (serial.SerialException, OSError, ValueError, TypeError) as exc:
                self._on_failure(generation, f"read failed: {_reason(exc)}")
                raise self._down() from exc

    def read_frame(
        self, framing: Framing | None = None, *, timeout_s: float | None = None
    ) -> bytes:
        """The next frame (terminator excluded); NO_REPLY when none completes in time."""
        frames = self.read_frames(framing, timeout_s=timeout_s, max_frames=1)
        return frames[0]

    def read_frames(
        self,
        framing: Framing | None = None,
        *,
        timeout_s: float | None = None,
        max_frames: int = 1024,
    ) -> list[bytes]:
        """Every complete frame received so far, at least one, at most `max_frames`; waits
        up to `timeout_s` (the adapter's default when None) for the first. NO_REPLY when
        none completes in time, PORT_DOWN when the port is gone."""
        framing = framing or self.framing
        wait = self.timeout_s if timeout_s is None else max(0.0, float(timeout_s))
        deadline = time.monotonic() + wait
        overlong = self._overlong
        self._reopening.wait_none(wait)
        if not self._read_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise ToolError(
                "PORT_BUSY",
                f"Another reader kept the serial port {self.description} for {wait:g} s.",
                retryable=True,
            )
        try:
            frames = self._take(framing, max_frames)
            first = True
            while not frames:
                port, generation = self._current()
                fd = _posix_fd(port)
                try:
                    if fd is not None:
                        chunk = self._read_fd(fd, deadline, first)
                    else:
                        waiting = port.in_waiting
                        expired = deadline - time.monotonic() <= 0
                        if expired and (not waiting or not first):
                            chunk = None
                        else:  # what is there, or block (at most the poll interval)
                            chunk = port.read(min(max(waiting, 1), _MAX_CHUNK))
                    if chunk is None:
                        raise self._no_reply(wait, self._overlong - overlong)
                    first = False
                except (serial.SerialException, OSError, ValueError, TypeError) as exc:
                    self._on_failure(generation, f"read failed: {_reason(exc)}")
                    raise self._down() from exc
                if chunk:
                    self._bytes_in += len(chunk)
                    self._buffer += chunk
                    frames = self._take(framing, max_frames)
            return frames
        finally:
            self._read_lock.release()

    @staticmethod
    def _read_fd(fd: int, deadline: float, first: bool) -> bytes | None:
        """What a POSIX port has, waiting at most the poll interval for a first byte (one
        select and one read, where pyserial asks the byte count first and reads through
        its own timeout objects). None when the deadline has passed: the deadline holds
        even while bytes keep coming (a device that talks without end), but what is already
        there is read once, even at timeout 0."""
        left = deadline - time.monotonic()
        if left <= 0 and not first:
            return None
        ready, _, _ = select.select([fd], [], [], min(max(left, 0.0), _POLL_S))
        if not ready:
            return None if left <= 0 else b""
        try:
            chunk = os.read(fd, _MAX_CHUNK)
        except BlockingIOError:
            return b""
        if not chunk:  # as pyserial says it: readable, yet nothing to read
            raise serial.SerialException(
                "device reports readiness to read but returned no data "
                "(device disconnected or multiple access on port?)"
            )
        return chunk

    def _no_reply(self, wait: float, overlong: int) -> ToolError:
        partial = len(self._buffer)
        if overlong or self._skipping:
            detail = f"a frame longer than {self.max_frame} bytes was discarded"
        elif partial:
            detail = f"{partial} byte(s) of an unfinished frame arrived"
        else:
            detail = "nothing arrived"
        return ToolError(
            "NO_REPLY",
            f"No complete reply from {self.description} within {wait * 1000:.0f} ms ({detail}).",
            retryable=True,
        )

    def _take(self, framing: Framing, max_frames: int) -> list[bytes]:
        """Complete frames cut from the buffer; overlong frames are dropped (caller holds
        the read lock)."""
        buffer = self._buffer
        frames: list[bytes] = []
        terminator = framing.terminator
        while len(frames) < max_frames and buffer:
            if self._skipping and terminator is not None:
                at = buffer.find(terminator)
                if at < 0:  # keep what could be the start of a split terminator
                    del buffer[: max(0, len(buffer) - (len(terminator) - 1))]
                    break
                del buffer[: at + len(terminator)]
                self._skipping = False
                self._scanned = 0
                continue
            start = 0
            if terminator is not None and terminator == self._scanned_for:
                start = max(0, self._scanned - (len(terminator) - 1))
            self._scanned_for = terminator
            found = framing.find(buffer, start)
            if found is None:
                self._scanned = len(buffer)
                if len(buffer) > self.max_frame:
                    self._overlong += 1
                    buffer.clear()
                    self._scanned = 0
                    self._skipping = framing.resyncs
                break
            end, consumed = found
            frame = bytes(buffer[:end])
            del buffer[:consumed]
            self._scanned = 0
            if end > self.max_frame:
                self._overlong += 1
                continue
            frames.append(frame)
        self._frames_in += len(frames)
        return frames

    def read_line(self, timeout_s: float | None = None) -> str:
        """The next line, decoded, without its terminator or a trailing CR."""
        return self.decode(self.read_frame(timeout_s=timeout_s)).rstrip("\r")

    def query(
        self,
        line: str,
        *,
        timeout_s: float | None = None,
        expect: Callable[[str], bool] | str | re.Pattern[str] | None = None,
        flush: bool = True,
    ) -> str:
        """Write `line` and return the first reply line that `expect` accepts (any line when
        None; a str is a regular expression searched in the line). Lines it does not
        accept are skipped until the timeout: NO_REPLY then. With `flush`, input that
        arrived before the query is dropped first."""
        wait = self.timeout_s if timeout_s is None else max(0.0, float(timeout_s))
        deadline = time.monotonic() + wait
        accept = _acceptor(expect)
        with self.transaction(wait):
            if flush:
                self.reset_input()
            self.write_line(line)
            skipped = 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0 and skipped:  # lines keep coming, none of the expected form
                    raise ToolError(
                        "NO_REPLY",
                        f"No reply of the expected form from {self.description} within "
                        f"{wait * 1000:.0f} ms ({skipped} other line(s) arrived).",
                        retryable=True,
                    )
                try:
                    reply = self.read_line(max(0.0, left))
                except ToolError as exc:
                    if exc.code == "NO_REPLY" and skipped:
                        raise ToolError(
                            "NO_REPLY",
                            f"No reply of the expected form from {self.description} within "
                            f"{wait * 1000:.0f} ms ({skipped} other line(s) arrived).",
                            retryable=True,
                        ) from exc
                    raise
                if accept is None or accept(reply):
                    return reply
                skipped += 1

    # -- status and lifetime ---------------------------------------------------------------

    def status(self) -> SerialStatus:
        with self._state:
            connected = self._port is not None
            reconnecting = self._rc.reconnecting(connected, self._closed)
            return SerialStatus(
                connected=connected,
                port=self.description,
                reconnecting=reconnecting,
                reconnects=self._rc.reconnects,
                last_error=self._rc.last_error,
                bytes_in=self._bytes_in,
                bytes_out=self._bytes_out,
                frames_in=self._frames_in,
                overlong_frames=self._overlong,
                generation=self._rc.generation,
            )

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and not self._closed

    @property
    def generation(self) -> int:
        """Increases every time the port is (re)opened: state learnt about the device (its
        identity) is only valid for one generation."""
        return self._rc.generation

    def close(self) -> None:
        """Close the port and stop reconnecting; idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            self._rc.closing.set()
            self._connected.clear()
            port, self._port = self._port, None
        if port is not None:
            _close_quietly(port)
        self._rc.stop(self._open_timeout_s + 1.0)


class _Pending:
    """Counts the threads waiting to reopen the port. A reader in a loop (the line monitor)
    takes the read lock again the moment it lets it go, and locks are not fair: a reconnect
    waiting for that lock could wait for ever, so readers wait here first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._none = threading.Event()
        self._none.set()

    def __enter__(self) -> None:
        with self._lock:
            self._count += 1
            self._none.clear()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._count -= 1
            if not self._count:
                self._none.set()

    def wait_none(self, timeout_s: float) -> None:
        """Until no reconnect is pending, at most `timeout_s`."""
        if not self._none.is_set():  # a read's usual case costs no lock
            self._none.wait(timeout_s)


class _Partial(Exception):
    """A write that stopped after `sent` bytes."""

    def __init__(self, sent: int) -> None:
        super().__init__(sent)
        self.sent = sent


def _posix_fd(port: serial.SerialBase) -> int | None:
    """The file descriptor of a POSIX device or pty port (pyserial opens it non-blocking),
    or None for URLs and other platforms, whose writes go through pyserial."""
    if type(port).__module__ != "serial.serialposix":
        return None
    fd = getattr(port, "fd", None)
    return fd if isinstance(fd, int) else None


def _close_quietly(port: serial.SerialBase) -> None:
    try:
        port.close()
    except Exception as exc:
        log.debug("closing %s failed: %s", getattr(port, "port", "?"), exc)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _acceptor(
    expect: Callable[[str], bool] | str | re.Pattern[str] | None,
) -> Callable[[str], bool] | None:
    if expect is None:
        return None
    if isinstance(expect, str | re.Pattern):
        pattern = re.compile(expect)
        return lambda line: pattern.search(line) is not None
    return expect
