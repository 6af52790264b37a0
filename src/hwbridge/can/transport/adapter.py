"""The CAN transport port and its python-can implementation.

`CanAdapter` is the small surface the tools need (send, listen, periodic, status, close).
`PythonCanAdapter` opens any python-can interface, owns the single `can.Notifier` for its
bus, fans frames out to plain callables, reports a dead bus as `ToolError("BUS_DOWN")` and
reopens buses it opened itself with capped exponential backoff.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Self

import can
from hwbridge.can.transport.bus_url import bus_kwargs, describe_bus
from hwbridge.can.transport.pycan_internals import (
    LivenessProbe,
    RxNotifier,
    quiet_socketcand,
    socketcand_probe,
    socketcand_socket,
)
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import ToolError
from hwbridge.core.reconnect import Reconnector

__all__ = [
    "CAN_FD_LENGTHS",
    "AdapterStatus",
    "BusSpec",
    "CanAdapter",
    "FrameListener",
    "ModifierCallback",
    "PeriodicHandle",
    "PythonCanAdapter",
    "build_message",
    "normalize_outgoing",
]

log = logging.getLogger(__name__)

FrameListener = Callable[[can.Message], object]
"""A listener is any callable taking the received `can.Message`; it must not mutate it."""

ModifierCallback = Callable[[can.Message], None]
"""Called before every periodic transmission; may rewrite `msg.data` in place (counters, CRCs)."""

BusSpec = str | Mapping[str, Any] | can.BusABC | None
"""What `PythonCanAdapter(bus=...)` accepts; see `hwbridge.can.bus_url.ACCEPTED_FORMS`."""

CAN_FD_LENGTHS = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64})
"""Payload lengths a CAN-FD frame can carry (DLC codes 0-15)."""

_MAX_STANDARD_ID = 0x7FF
_MAX_EXTENDED_ID = 0x1FFFFFFF


def build_message(
    arbitration_id: int,
    data: bytes | bytearray | Iterable[int] = b"",
    *,
    extended: bool | None = None,
    fd: bool | None = None,
    bitrate_switch: bool = False,
    remote: bool = False,
    dlc: int | None = None,
) -> can.Message:
    """A frame with every flag set explicitly (python-can defaults `is_extended_id` to True).

    `extended=None` means extended exactly when the ID does not fit in 11 bits; `fd=None`
    means CAN-FD exactly when the payload is longer than 8 bytes.
    """
    payload = bytes(data)
    is_ext = arbitration_id > _MAX_STANDARD_ID if extended is None else extended
    is_fd = len(payload) > 8 if fd is None else fd
    return can.Message(
        arbitration_id=arbitration_id,
        data=payload,
        is_extended_id=is_ext,
        is_fd=is_fd,
        bitrate_switch=bitrate_switch and is_fd,
        is_remote_frame=remote,
        dlc=dlc if dlc is not None else len(payload),
    )


def _invalid(message: str) -> ToolError:
    return ToolError("INVALID_FRAME", message)


def normalize_outgoing(msg: can.Message, *, bitrate_switch: bool) -> can.Message:
    """A validated copy of `msg` with explicit ID width and FD flags, ready for `bus.send`."""
    data = bytes(msg.data or b"")
    length = len(data)
    is_ext = bool(msg.is_extended_id)
    limit = _MAX_EXTENDED_ID if is_ext else _MAX_STANDARD_ID
    if not 0 <= msg.arbitration_id <= limit:
        kind = "29-bit" if is_ext else "11-bit"
        raise _invalid(f"arbitration ID 0x{msg.arbitration_id:X} does not fit a {kind} ID")
    if length > 64:
        raise _invalid(f"{length} data bytes; a CAN-FD frame carries at most 64")
    is_fd = bool(msg.is_fd) or length > 8
    if is_fd and length not in CAN_FD_LENGTHS:
        valid = ", ".join(str(n) for n in sorted(CAN_FD_LENGTHS) if n > 8)
        raise _invalid(f"{length} data bytes is not a CAN-FD length ({valid})")
    if msg.is_remote_frame and is_fd:
        raise _invalid("CAN-FD has no remote frames")
    dlc = msg.dlc if msg.is_remote_frame else length
    return can.Message(
        timestamp=msg.timestamp,
        arbitration_id=msg.arbitration_id,
        data=data,
        is_extended_id=is_ext,
        is_fd=is_fd,
        bitrate_switch=bitrate_switch if is_fd else False,
        is_remote_frame=bool(msg.is_remote_frame),
        dlc=dlc,
        channel=msg.channel,
    )


@dataclass(frozen=True, slots=True)
class AdapterStatus:
    """A snapshot of the transport's health, cheap to take and JSON-safe via `to_dict`."""

    connected: bool
    bus: str
    interface: str | None
    bus_state: str
    error_frames: int
    last_error: str | None
    reconnecting: bool
    reconnects: int
    periodic_tasks: int
    listener_errors: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PeriodicHandle(ABC):
    """A running periodic transmission; `stop()` is idempotent."""

    @property
    @abstractmethod
    def message(self) -> can.Message:
        """The frame being sent (the modifier callback edits this object)."""

    @property
    @abstractmethod
    def period_s(self) -> float: ...

    @property
    @abstractmethod
    def active(self) -> bool:
        """False once stopped, expired, or failed in its modifier callback."""

    @property
    @abstractmethod
    def last_error(self) -> str | None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class CanAdapter(Closing, ABC):
    """The port the CAN tools talk to; implementations own their transport's threads."""

    @abstractmethod
    def send(self, msg: can.Message, timeout_s: float | None = None) -> None:
        """Transmit one frame or raise `ToolError` (BUS_DOWN, SEND_FAILED, INVALID_FRAME)."""

    @abstractmethod
    def add_listener(self, callback: FrameListener) -> None:
        """Call `callback(msg)` for every received frame, on the receive thread."""

    @abstractmethod
    def remove_listener(self, callback: FrameListener) -> None:
        """Stop calling `callback`; unknown callbacks are ignored."""

    @abstractmethod
    def send_periodic(
        self,
        msg: can.Message,
        period_s: float,
        modifier_callback: ModifierCallback | None = None,
        *,
        duration_s: float | None = None,
    ) -> PeriodicHandle:
        """Send `msg` every `period_s` until the handle is stopped or the adapter closed."""

    @abstractmethod
    def status(self) -> AdapterStatus: ...

    @abstractmethod
    def close(self) -> None:
        """Stop periodic tasks and receive threads; idempotent."""

    @property
    def connected(self) -> bool:
        return self.status().connected

    @property
    def carries_fd(self) -> bool:
        """Whether CAN FD frames can cross this transport (socketcand's protocol: no)."""
        return True


# --- python-can implementation -------------------------------------------------------


def _preflight_socketcand(host: str, port: int, timeout_s: float) -> None:
    """Fail fast when no socketcand server answers.

    python-can's client retries a refused connect in a busy loop for 10 s and waits for the
    greeting without a timeout; a short probe of our own keeps opening bounded.
    """
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        received = b""
        while not received.rstrip().endswith(b">"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no socketcand greeting from {host}:{port}")
            sock.settimeout(left)
            chunk = sock.recv(64)
            if not chunk:
                raise ConnectionError(f"{host}:{port} closed the connection before greeting")
            received += chunk
            if len(received) > 64:
                break
    if received.strip() != b"< hi >":
        raise ConnectionError(f"{host}:{port} is not a socketcand server: {received[:64]!r}")


_CONFIG_ERRORS = (ValueError, TypeError, ImportError, can.CanInterfaceNotImplementedError)


def _open_with_timeout(kwargs: Mapping[str, Any], timeout_s: float) -> can.BusABC:
    """`can.Bus(**kwargs)` that gives up after `timeout_s`; a late bus is shut down."""
    result: list[can.BusABC | BaseException] = []
    lock = threading.Lock()
    done = threading.Event()
    abandoned = False

    def work() -> None:
        try:
            bus: can.BusABC | BaseException = can.Bus(**kwargs)
        except BaseException as exc:
            bus = exc
        with lock:
            if abandoned:
                if isinstance(bus, can.BusABC):
                    bus.shutdown()
                return
            result.append(bus)
        done.set()

    worker = threading.Thread(target=work, name="hwbridge-can-open", daemon=True)
    worker.start()
    finished = done.wait(timeout_s)
    with lock:
        if not finished:
            abandoned = True
            raise TimeoutError(f"opening the bus took longer than {timeout_s:g} s")
    worker.join()
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


# Interfaces (by configured name or bus class) whose protocol has no CAN FD or remote frames.
_CLASSIC_ONLY = frozenset({"socketcand", "SocketCanDaemonBus"})


def _noop(msg: can.Message) -> None:
    return None


class _Periodic(PeriodicHandle):
    """A periodic transmission that survives reconnects by re-arming on the new bus."""

    def __init__(
        self,
        adapter: PythonCanAdapter,
        msg: can.Message,
        period_s: float,
        modifier: ModifierCallback | None,
        duration_s: float | None,
    ) -> None:
        self._adapter = adapter
        self._msg = msg
        self._period_s = period_s
        self._modifier = modifier
        self._deadline = None if duration_s is None else time.monotonic() + duration_s
        self._task: can.broadcastmanager.CyclicSendTaskABC | None = None
        self._timer: threading.Timer | None = None
        self._anchor: float | None = None  # when the schedule's first frame was due
        self._stopped = False
        self._error: str | None = None
        self._lock = threading.Lock()

    @property
    def message(self) -> can.Message:
        return self._msg

    @property
    def period_s(self) -> float:
        return self._period_s

    @property
    def active(self) -> bool:
        if self._stopped:
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    @property
    def last_error(self) -> str | None:
        return self._error

    def _modify(self, msg: can.Message) -> None:
        assert self._modifier is not None
        try:
            self._modifier(msg)
        except Exception as exc:
            # Raising makes python-can skip this transmission, so no stale frame goes out.
            self._error = f"modifier callback failed: {exc!r}"
            self._stopped = True
            raise

    def _on_task_error(self, exc: Exception) -> bool:
        """python-can's hook: False stops the task. Only a failed modifier stops it; a
        transport error is retried each period until the adapter re-arms the task."""
        if self._stopped:
            return False
        self._error = f"send failed: {exc}"
        return True

    def attach(self, bus: can.BusABC) -> None:
        """Start the python-can task on `bus`, or restart it after a reconnect.

        A restart keeps the schedule: its first frame waits for the next tick of the
        period rather than going out at once, so a bus that drops and comes back never
        puts two frames closer than one period apart (the rate the policy reserved).
        """
        with self._lock:
            if not self.active:
                return
            now = time.monotonic()
            if self._anchor is not None:
                ticks = math.ceil((now - self._anchor) / self._period_s)
                delay = self._anchor + ticks * self._period_s - now
                if delay > 0.001:
                    timer = threading.Timer(delay, self._attach_later, args=(bus,))
                    timer.daemon = True
                    self._timer = timer
                    timer.start()
                    return
            self._arm(bus, now)

    def _attach_later(self, bus: can.BusABC) -> None:
        with self._lock:
            if self._timer is not threading.current_thread() or not self.active:
                return  # detached (or re-attached) meanwhile
            self._timer = None
            try:
                self._arm(bus, time.monotonic())
            except Exception as exc:
                self._error = f"restart after a reconnect failed: {exc}"
                log.warning("could not restart periodic 0x%X: %s", self._msg.arbitration_id, exc)

    def _arm(self, bus: can.BusABC, now: float) -> None:
        """Create and start the python-can task (the caller holds the lock)."""
        self._anchor = now
        duration = None
        if self._deadline is not None:
            duration = self._deadline - now
            if duration <= 0:
                return
        task = bus.send_periodic(
            self._msg,
            self._period_s,
            duration=duration,
            autostart=False,
            modifier_callback=self._modify if self._modifier is not None else None,
        )
        if hasattr(task, "on_error"):
            # Without it python-can re-raises in its thread (an unhandled exception).
            task.on_error = self._on_task_error
        if isinstance(task, can.broadcastmanager.RestartableCyclicTaskABC):
            task.start()
        self._task = task

    def detach(self, join_timeout_s: float = 1.0) -> None:
        """Stop the python-can task and wait (bounded) for its thread."""
        with self._lock:
            task, self._task = self._task, None
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if task is None:
            return
        try:
            task.stop()
        except Exception as exc:
            log.debug("stopping periodic task failed: %s", exc)
        thread = getattr(task, "thread", None)
        if isinstance(thread, threading.Thread) and thread is not threading.current_thread():
            thread.join(join_timeout_s)

    def stop(self) -> None:
        self._stopped = True
        self._adapter._forget_periodic(self)
        self.detach()


class PythonCanAdapter(CanAdapter):
    """Any python-can bus behind the `CanAdapter` port.

    `bus` is a bus string (`virtual:CH`, `socketcand://HOST:PORT/CH`, `slcan://PORT@BAUD`,
    `socketcan:CH`, `INTERFACE:CH`), a python-can keyword dict, None (python-can's config
    files and environment decide), or an open `can.BusABC`. A given bus is not shut down on
    close unless `own_bus=True`, and cannot be reopened after a failure. `listeners` are
    registered before the first frame is read.
    """

    def __init__(
        self,
        bus: BusSpec = None,
        *,
        listeners: Iterable[FrameListener] = (),
        bitrate_switch: bool = True,
        own_bus: bool | None = None,
        reconnect: bool = True,
        require_connection: bool = True,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        open_timeout_s: float = 5.0,
        send_timeout_s: float = 1.0,
        poll_interval_s: float = 0.1,
    ) -> None:
        self._bitrate_switch = bitrate_switch
        self._open_timeout_s = open_timeout_s
        self._send_timeout_s = send_timeout_s
        self._poll_interval_s = poll_interval_s

        self._lock = threading.Lock()
        self._connected_event = threading.Event()
        self._bus: can.BusABC | None = None
        self._notifier: RxNotifier | None = None
        self._closed = False
        self._periodic: list[_Periodic] = []
        self._listeners: tuple[FrameListener, ...] = tuple(listeners)
        self._dispatch: FrameListener = _noop
        self._rebuild_dispatch()  # before the first frame can arrive
        self._error_frames = 0
        self._listener_errors = 0

        if isinstance(bus, can.BusABC):
            self._kwargs: dict[str, Any] | None = None
            self._interface: str | None = type(bus).__name__
            self.description = str(bus.channel_info)
            self._owns_bus = bool(own_bus)
            self._rc = self._reconnector(False, backoff_initial_s, backoff_max_s)
            self._install(bus)
            return

        kwargs = bus_kwargs(bus)
        # Resolve python-can's config files and environment once, so that a bad
        # configuration fails here and we know which interface we are opening.
        config = dict(can.util.load_config(config=kwargs))
        self._kwargs = config
        self._interface = config.get("interface")
        self.description = describe_bus(config)
        self._owns_bus = True if own_bus is None else own_bus
        self._rc = self._reconnector(reconnect, backoff_initial_s, backoff_max_s)
        try:
            opened = self._open()
        except _CONFIG_ERRORS:
            raise
        except Exception as exc:
            self._rc.note(f"open failed: {exc}")
            if require_connection or not reconnect:
                raise ToolError(
                    "BUS_DOWN", f"cannot open {self.description}: {exc}", retryable=True
                ) from exc
            self._rc.start()
            return
        self._install(opened)

    # -- opening and recovery ---------------------------------------------------------

    def _reconnector(self, enabled: bool, initial_s: float, max_s: float) -> Reconnector[Any]:
        """The reconnect loop; a bus given open (no configuration to reopen) has none."""
        return Reconnector(
            f"CAN bus {self.description}",
            reopen=self._open,
            install=self._install,
            enabled=enabled and self._kwargs is not None,
            backoff_initial_s=initial_s,
            backoff_max_s=max_s,
            thread_name=f"hwbridge-can-recover[{self.description}]",
        )

    def _open(self) -> can.BusABC:
        assert self._kwargs is not None
        config = self._kwargs
        deadline = time.monotonic() + self._open_timeout_s
        if config.get("interface") == "socketcand":
            quiet_socketcand()
            _preflight_socketcand(str(config["host"]), int(config["port"]), self._open_timeout_s)
        bus = _open_with_timeout(config, max(0.1, deadline - time.monotonic()))
        sock = socketcand_socket(bus)
        if sock is not None:
            # Bounds sendall() when the server stops reading; recv() is select()-guarded.
            sock.settimeout(self._send_timeout_s)
        return bus

    def _probe_for(self, bus: can.BusABC) -> LivenessProbe | None:
        sock = socketcand_socket(bus)
        return socketcand_probe(sock) if sock is not None else None

    def _install(self, bus: can.BusABC) -> None:
        """Make `bus` current: notifier, periodic tasks, connected flag."""
        with self._lock:
            if self._closed:
                if self._owns_bus:
                    bus.shutdown()
                return
            generation = self._rc.next_generation()
            self._bus = bus
            self._notifier = RxNotifier(
                bus, self, generation, self._poll_interval_s, self._probe_for(bus)
            )
            periodic = list(self._periodic)
            self._connected_event.set()
        for handle in periodic:
            try:
                handle.attach(bus)
            except Exception as exc:
                log.warning(
                    "could not restart periodic 0x%X: %s", handle.message.arbitration_id, exc
                )

    def _on_transport_failure(self, generation: int, reason: str) -> None:
        """Called from any thread when the current bus is found dead."""
        with self._lock:
            if self._closed or not self._rc.is_current(generation) or self._bus is None:
                return
            log.warning("CAN bus %s is down: %s", self.description, reason)
            self._rc.note(reason)
            bus, notifier = self._bus, self._notifier
            self._bus = None
            self._notifier = None
            self._connected_event.clear()
            self._rc.start(lambda: self._teardown(bus, notifier))

    def _teardown(self, bus: can.BusABC | None, notifier: RxNotifier | None) -> None:
        for handle in list(self._periodic):
            handle.detach()
        if notifier is not None:
            notifier.stop(timeout=self._poll_interval_s + 1.0)
        if bus is not None and self._owns_bus:
            try:
                bus.shutdown()
            except Exception as exc:
                log.debug("shutting down %s failed: %s", self.description, exc)

    # -- listeners ----------------------------------------------------------------------

    def _fanout(self, msg: can.Message) -> None:
        for callback in self._listeners:
            try:
                callback(msg)
            except Exception:
                self._on_listener_error()

    def _on_listener_error(self) -> None:
        self._listener_errors += 1
        count = self._listener_errors
        if count <= 10 or count % 1000 == 0:
            log.exception("CAN listener raised (error #%d); other listeners still run", count)

    def _rebuild_dispatch(self) -> None:
        listeners = self._listeners
        if not listeners:
            self._dispatch = _noop
        elif len(listeners) == 1:
            # The receive loop catches and logs a lone listener's exceptions itself.
            self._dispatch = listeners[0]
        else:
            self._dispatch = self._fanout

    def add_listener(self, callback: FrameListener) -> None:
        with self._lock:
            self._listeners = (*self._listeners, callback)
            self._rebuild_dispatch()

    def remove_listener(self, callback: FrameListener) -> None:
        with self._lock:
            listeners = list(self._listeners)
            if callback in listeners:
                listeners.remove(callback)
            self._listeners = tuple(listeners)
            self._rebuild_dispatch()

    # -- sending ------------------------------------------------------------------------

    def _down_error(self) -> ToolError:
        return self._rc.down_error("BUS_DOWN", f"CAN bus {self.description}", closed=self._closed)

    def _current(self) -> tuple[can.BusABC, int]:
        with self._lock:
            bus = self._bus
            if bus is None or self._closed:
                raise self._down_error()
            return bus, self._rc.generation

    def wait_connected(self, timeout_s: float) -> bool:
        """Block until the bus is up (True) or `timeout_s` passes (False)."""
        return self._connected_event.wait(timeout_s) and not self._closed

    def _carriable(self, msg: can.Message) -> None:
        """Refuse a frame the transport cannot carry, rather than report it sent: the
        socketcand protocol carries classic data frames only, and its server answers a frame
        it refuses with nothing a client can see."""
        classic_only = not self.carries_fd
        if classic_only and (msg.is_fd or msg.is_remote_frame or len(msg.data) > 8):
            kind = "remote" if msg.is_remote_frame else "CAN FD"
            raise ToolError(
                "UNSUPPORTED",
                f"{self.description} carries classic data frames only; a {kind} frame cannot "
                "be sent over it (nothing was sent).",
            )

    def send(self, msg: can.Message, timeout_s: float | None = None) -> None:
        out = normalize_outgoing(msg, bitrate_switch=self._bitrate_switch)
        self._carriable(out)
        bus, generation = self._current()
        try:
            bus.send(out, timeout=self._send_timeout_s if timeout_s is None else timeout_s)
        except (ValueError, TypeError) as exc:
            raise _invalid(f"the interface rejected the frame: {exc}") from exc
        except (can.CanError, OSError) as exc:
            probe = self._probe_for(bus)
            reason = probe() if probe is not None else None
            if reason is None and isinstance(exc, can.CanError):
                raise ToolError("SEND_FAILED", f"send failed: {exc}", retryable=True) from exc
            self._on_transport_failure(generation, reason or f"send failed: {exc}")
            raise self._down_error() from exc

    def send_periodic(
        self,
        msg: can.Message,
        period_s: float,
        modifier_callback: ModifierCallback | None = None,
        *,
        duration_s: float | None = None,
    ) -> PeriodicHandle:
        if not period_s > 0:
            raise ValueError("period_s must be positive")
        out = normalize_outgoing(msg, bitrate_switch=self._bitrate_switch)
        self._carriable(out)
        bus, _ = self._current()
        handle = _Periodic(self, out, period_s, modifier_callback, duration_s)
        with self._lock:
            if self._closed:
                raise ToolError("BUS_CLOSED", "The adapter is closed; nothing can be sent.")
            self._periodic.append(handle)
        try:
            handle.attach(bus)
        except (can.CanError, OSError) as exc:
            handle.stop()
            raise ToolError("SEND_FAILED", f"periodic send failed: {exc}", retryable=True) from exc
        if self._closed:  # close() ran while the task was being attached: it must not outlive it
            handle.stop()
            raise ToolError("BUS_CLOSED", "The adapter is closed; nothing can be sent.")
        return handle

    def _forget_periodic(self, handle: _Periodic) -> None:
        with self._lock:
            if handle in self._periodic:
                self._periodic.remove(handle)

    # -- status and lifetime ------------------------------------------------------------

    @property
    def carries_fd(self) -> bool:
        return self._interface not in _CLASSIC_ONLY

    def status(self) -> AdapterStatus:
        with self._lock:
            bus = self._bus
            reconnecting = self._rc.reconnecting(bus is not None, self._closed)
            periodic = sum(1 for handle in self._periodic if handle.active)
            last_error = self._rc.last_error
        state = "unknown"
        if bus is not None:
            try:
                state = bus.state.name.lower()
            except Exception:
                state = "unknown"
        return AdapterStatus(
            connected=bus is not None,
            bus=self.description,
            interface=self._interface,
            bus_state=state if bus is not None else ("closed" if self._closed else "down"),
            error_frames=self._error_frames,
            last_error=last_error,
            reconnecting=reconnecting,
            reconnects=self._rc.reconnects,
            periodic_tasks=periodic,
            listener_errors=self._listener_errors,
        )

    @property
    def bus(self) -> can.BusABC | None:
        """The current python-can bus (None while down); for diagnostics, not for sending."""
        return self._bus

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._rc.closing.set()
            self._connected_event.clear()
            bus, notifier = self._bus, self._notifier
            self._bus = None
            self._notifier = None
            periodic = list(self._periodic)
            self._periodic.clear()
        for handle in periodic:
            handle._stopped = True
            handle.detach()
        self._teardown(bus, notifier)
        self._rc.stop(self._open_timeout_s + self._poll_interval_s + 2.0)
