"""Everything hwbridge takes from python-can beyond its public API, in one place.

The CAN adapter needs three things python-can does not offer publicly: a receive loop
leaner than `can.Notifier`'s that reports a dead transport (it overrides the Notifier's
`_rx_thread` and reads `_readers`, `_stopped`), frames without `BusABC.recv`'s per-frame
bookkeeping (`_recv_internal`, `_matches_filters`, `_filters`), and the socket of the
socketcand client (`_SocketCanDaemonBus__socket`), whose closed connection python-can never
reports. tests/can/test_pycan_internals.py fails when a python-can release changes any of
them, before the adapter silently degrades.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

import can

__all__ = [
    "LivenessProbe",
    "Receive",
    "RxNotifier",
    "RxOwner",
    "quiet_socketcand",
    "socketcand_probe",
    "socketcand_socket",
]


class RxOwner(Protocol):
    """The adapter the receive loop serves (its private side: the loop is its own, kept
    here only because it is built on python-can's internals). `_dispatch` is read per frame,
    so a change of listeners takes effect at the next one without a lock."""

    description: str
    _dispatch: Callable[[can.Message], object]
    _error_frames: int

    def _on_transport_failure(self, generation: int, reason: str) -> None: ...

    def _on_listener_error(self) -> None: ...


LivenessProbe = Callable[[], str | None]
"""Returns a reason when the transport is dead, None while it looks alive."""


def socketcand_socket(bus: can.BusABC) -> socket.socket | None:
    # python-can's socketcand client never reports a closed TCP connection: recv() just
    # returns None forever. Reaching its socket is the only way to see the EOF.
    sock = getattr(bus, "_SocketCanDaemonBus__socket", None)
    return sock if isinstance(sock, socket.socket) else None


def socketcand_probe(sock: socket.socket) -> LivenessProbe:
    flags = socket.MSG_PEEK | socket.MSG_DONTWAIT

    def probe() -> str | None:
        try:
            peeked = sock.recv(1, flags)
        except (BlockingIOError, InterruptedError, TimeoutError):
            return None
        except OSError as exc:
            return f"socketcand connection lost: {exc}"
        return None if peeked else "socketcand server closed the connection"

    return probe


Receive = Callable[[float], tuple[can.Message | None, bool]]
"""Like python-can's `_recv_internal`: (frame or None, whether filters were applied)."""


def _receiver(bus: can.BusABC) -> Receive:
    """How the receive loop reads `bus`, without python-can's per-frame bookkeeping when
    that changes nothing.

    `BusABC.recv` wraps the interface's `_recv_internal` in a timing loop, a filter check
    and a log call at level 9: about a quarter of a virtual bus's receive cost. When the
    interface keeps python-can's `recv` and that log level is off, frames come from
    `_recv_internal` directly and the loop applies the bus's filters itself. An interface
    with its own `recv` (or a `ThreadSafeBus`) keeps it.
    """
    if type(bus).recv is can.BusABC.recv and not logging.getLogger("can.bus").isEnabledFor(
        bus.RECV_LOGGING_LEVEL
    ):
        return bus._recv_internal
    recv = bus.recv

    def receive(timeout: float) -> tuple[can.Message | None, bool]:
        return recv(timeout), True

    return receive


class RxNotifier(can.Notifier):
    """python-can's Notifier with a leaner receive loop and failure reporting.

    The stock loop takes a lock and walks a listener list per frame; here each frame costs
    one call of the adapter's current dispatcher, and frames come from `_receiver`
    (benchmarks/bench_monitor.py compares adapter plus monitor against a bare `bus.recv()`
    loop). A listener exception is logged and the loop goes on (the stock loop would die);
    a receive exception or a failed liveness probe is reported to the adapter.
    """

    def __init__(
        self,
        bus: can.BusABC,
        owner: RxOwner,
        generation: int,
        timeout: float,
        probe: LivenessProbe | None,
    ) -> None:
        # Set before super().__init__, which starts the thread.
        self._owner = owner
        self._generation = generation
        self._probe = probe
        super().__init__(bus, [], timeout=timeout)
        for reader in self._readers:
            if isinstance(reader, threading.Thread):
                reader.name = f"hwbridge-can-rx[{owner.description}]"

    def _rx_thread(self, bus: can.BusABC) -> None:
        owner = self._owner
        generation = self._generation
        receive = _receiver(bus)
        matches = bus._matches_filters
        timeout = self.timeout
        probe = self._probe
        clock = time.monotonic
        next_probe = 0.0
        while not self._stopped:
            try:
                msg, filtered = receive(timeout)
            except Exception as exc:
                if not self._stopped:
                    self.exception = exc
                    owner._on_transport_failure(generation, f"receive failed: {exc}")
                return
            if msg is None:
                if probe is not None and not self._stopped:
                    now = clock()
                    if now >= next_probe:
                        # A dead socketcand link makes recv() return None at once, so
                        # this runs often exactly when it matters.
                        next_probe = now + 0.002
                        reason = probe()
                        if reason is not None:
                            owner._on_transport_failure(generation, reason)
                            return
                continue
            if not filtered and bus._filters and not matches(msg):
                continue
            if msg.is_error_frame:
                owner._error_frames += 1
            try:
                owner._dispatch(msg)
            except Exception:
                owner._on_listener_error()


_SOCKETCAND_LOG = "can.interfaces.socketcand.socketcand"


class _PartialReads(logging.Filter):
    """python-can's socketcand client warns whenever a TCP read ends inside a frame and
    then simply reads on: ordinary on a busy link, and no news to the user. The warning
    becomes a debug line, kept only while hwbridge's own debug logging is on (`--debug`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Got incomplete message"):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger("hwbridge").isEnabledFor(logging.DEBUG)


def quiet_socketcand() -> None:
    """Make the client's partial-read warning a debug line (its other warnings stay): every
    command that opens a socketcand bus (monitor, record, chat, mcp) printed it on a busy
    link."""
    logger = logging.getLogger(_SOCKETCAND_LOG)
    if not any(isinstance(f, _PartialReads) for f in logger.filters):
        logger.addFilter(_PartialReads())
