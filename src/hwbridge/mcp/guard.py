"""Deadlines and caps on the HTTP server's connections, enforced below the ASGI app in
uvicorn's own h11 protocol, where a connection that never completes its request head is
visible (uvicorn itself times out only idle keep-alive connections).

Each connection must deliver a whole request head within `read_timeout_s` of its first byte
(of connecting, for the first request), and the body within `read_timeout_s` after the head;
otherwise it gets 408 and is closed. The token is checked as soon as a head is parsed, before
any of the body reaches the app: a connection whose head carries it is proven. A connection
waits apart, *silent*, until its first bytes are read, and only then competes for a place;
`hwbridge.mcp.admission` decides which connections are closed to make room for new ones.
Between requests, uvicorn's keep-alive timeout closes an idle connection; a proven one gets
TCP keep-alive probes, so one whose client vanished without a word is closed in minutes.
The warnings uvicorn logs about requests (malformed, an `Upgrade:` header), which anyone can
provoke before any token is checked, are let through at most once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import math
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

from hwbridge.mcp.admission import MAX_SILENT, SILENT_GRACE_S, Admission, check_caps

__all__ = ["Gate", "HttpLimits", "guarded_protocol", "keep_alive", "no_delay"]

log = logging.getLogger("hwbridge.mcp.http")

READ_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
MAX_UNPROVEN_PER_CLIENT = 16
WARN_EVERY_S = 60.0
"""At most one warning a minute about connections closed by the limits, and one of uvicorn's
about requests: an attack must not flood the log."""
KEEPALIVE = (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))
"""TCP keep-alive on a proven connection: probed after 60 s without traffic, closed after 3
unanswered probes 10 s apart (where the system lets these be set)."""

Headers = Iterable[tuple[bytes, bytes]]
Phase = Literal["head", "body", "busy", "idle", "closed"]


@dataclass(frozen=True)
class HttpLimits:
    """How long a client may take to send a request, and how many connections it may hold.

    read_timeout_s: for the request head (from its first byte), then for the body.
    max_connections: held at once, by everyone.
    max_unproven_per_client: held at once by one client address before any of them has
    sent a request with the token (a newer one closes the oldest).
    max_silent: held at once before they have sent a byte, apart from max_connections.
    silent_grace_s: how long a connection that has not sent a byte yet is safe from being
    closed to make room for newer ones (when all are younger, a newcomer is refused).
    """

    read_timeout_s: float = READ_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_unproven_per_client: int = MAX_UNPROVEN_PER_CLIENT
    max_silent: int = MAX_SILENT
    silent_grace_s: float = SILENT_GRACE_S

    def __post_init__(self) -> None:
        if not (math.isfinite(self.read_timeout_s) and self.read_timeout_s > 0):
            raise ValueError(f"read_timeout_s must be above 0, not {self.read_timeout_s}")
        check_caps(
            self.max_connections, self.max_unproven_per_client, self.max_silent, self.silent_grace_s
        )


@dataclass
class Gate:
    """What every connection of one server shares: the limits, who holds a connection, and
    the token check (`proves(headers)`; always true without a token)."""

    limits: HttpLimits
    proves: Callable[[Headers], bool]
    admission: Admission = field(init=False)
    timed_out: int = field(default=0, init=False)
    _warned_at: float = field(default=-math.inf, init=False)

    def __post_init__(self) -> None:
        limits = self.limits
        self.admission = Admission(
            limits.max_connections,
            limits.max_unproven_per_client,
            limits.max_silent,
            limits.silent_grace_s,
        )

    def note(self) -> None:
        """Say, at most once a minute, that the limits are closing connections."""
        now = time.monotonic()
        if now - self._warned_at < WARN_EVERY_S:
            return
        self._warned_at = now
        log.warning(
            "HTTP connections closed by the limits so far: %d to make room (no token shown), "
            "%d idle or streaming with the token to make room for another with it, %d refused "
            "(nothing could make room), %d past the %gs read timeout",
            self.admission.evicted,
            self.admission.evicted_proven,
            self.admission.refused,
            self.timed_out,
            self.limits.read_timeout_s,
        )


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the gate's deadlines and admission (one per connection).

    Phases: `head` (a request head is due: deadline), `body` (its body is due: deadline),
    `busy` (the app has the request: no deadline), `idle` (between requests: uvicorn's
    keep-alive timeout)."""

    gate: ClassVar[Gate]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._phase: Phase = "head"
        self._deadline: asyncio.TimerHandle | None = None
        self._seen: RequestResponseCycle | None = None  # the request whose head was checked
        self._since = time.monotonic()  # when the phase began
        self.heard = False  # its first bytes have been read
        self.proven = False  # a request head of it carried the token
        self.logger = HUSHED_LOG  # uvicorn's own warnings, at most one a minute

    @property
    def peer(self) -> str:
        return self.client[0] if self.client else ""

    @property
    def idle_since(self) -> float | None:
        """See `hwbridge.mcp.admission.Held`."""
        if self._phase == "idle":
            return self._since
        cycle: RequestResponseCycle | None = self.cycle
        if (
            self._phase == "busy"
            and cycle is not None
            and cycle.scope["method"] == "GET"
            and cycle.response_started
            and not cycle.response_complete
        ):
            return self._since
        return None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        super().connection_made(transport)
        if not self.gate.admission.arrive(self):
            self.gate.note()
            self._answer(http.HTTPStatus.SERVICE_UNAVAILABLE)
            return
        self._enter("head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter("closed")
        self.gate.admission.leave(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        first, self.heard = not self.heard, True
        if self._phase == "idle":  # the first bytes of the next request
            self._enter("head")
        super().data_received(data)
        self._follow()
        # out of the silent room: now it competes for a place, as proven or not
        if (
            first
            and not self.transport.is_closing()
            and not self.gate.admission.admit(self, self.proven)
        ):
            self.gate.note()
            self._answer(http.HTTPStatus.SERVICE_UNAVAILABLE)

    def on_response_complete(self) -> None:
        if self._phase == "busy":
            self._enter("idle")
        super().on_response_complete()  # may parse a request the client sent ahead
        self._follow()

    def evict(self) -> None:
        """Admission closes this connection to make room (silent or unproven; or proven, but
        idle or streaming)."""
        self.gate.note()
        if self._phase == "head":
            self._answer(http.HTTPStatus.SERVICE_UNAVAILABLE)
        else:
            self.transport.close()

    def _follow(self) -> None:
        """After h11 has parsed what came: check a new request's token, move the deadline."""
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is None:
            return
        body_due = self.conn.their_state is h11.SEND_BODY
        if cycle is not self._seen:  # a request head has just been parsed
            self._seen = cycle
            if self.gate.proves(cycle.scope["headers"]) and not self.proven:
                self.proven = True
                self.gate.admission.prove(self)  # (if admitted yet: see `data_received`)
                keep_alive(self.transport)
            # (without the token, the app's first middleware answers 401 and closes)
            self._enter("body" if body_due else "busy")
        elif self._phase == "body" and not body_due:
            # the body is in; if the response went out first, the next head is due now
            self._enter("head" if cycle.response_complete else "busy")

    def _enter(self, phase: Phase) -> None:
        self._phase = phase
        self._since = time.monotonic()
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if phase in ("head", "body"):
            self._deadline = self.loop.call_later(self.gate.limits.read_timeout_s, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.gate.timed_out += 1
        self.gate.note()
        if self._phase == "head" or not self.cycle.response_started:
            self._answer(http.HTTPStatus.REQUEST_TIMEOUT)
        else:
            self.transport.close()

    def _answer(self, status: http.HTTPStatus) -> None:
        """A response written straight to the socket (no request was handed to the app),
        then the connection is closed."""
        body = status.phrase.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status.value, body, len(body), body)
        )
        self.transport.close()


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Nagle's algorithm off: a response's head and its body are two writes, and the body
    must not wait for the client's delayed ACK (40 ms a call). asyncio turns it off only on
    sockets made with IPPROTO_TCP named, which a socket bound by hand may not be."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError):  # not TCP, or closed meanwhile
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def keep_alive(transport: asyncio.BaseTransport) -> None:
    """TCP keep-alive probes on the connection (`KEEPALIVE`), so that a connection whose
    client vanished without a word is closed by the system, not held forever."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in KEEPALIVE:
            option = getattr(socket, name, None)
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:  # not TCP, or closed meanwhile: nothing to probe
        pass


class Hushed(logging.Filter):
    """Lets through at most one warning every `every_s` seconds (errors always), and says
    how many it held back."""

    def __init__(self, every_s: float = WARN_EVERY_S) -> None:
        super().__init__()
        self.every_s = every_s
        self.held_back = 0
        self._passed_at = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        now = time.monotonic()
        if now - self._passed_at < self.every_s:
            self.held_back += 1
            return False
        self._passed_at = now
        if self.held_back:
            record.msg = (
                f"{record.getMessage()} (and {self.held_back} more such warnings about "
                f"requests not logged; at most one every {self.every_s:g} s)"
            )
            record.args = None
            self.held_back = 0
        return True


HUSHED_LOG = logging.getLogger("uvicorn.error.hwbridge")
"""uvicorn's log for the server's connections: its warnings about requests, which anyone
can provoke before the token is checked (malformed, `Upgrade:`), at most once a minute."""
HUSHED_LOG.addFilter(Hushed())


def guarded_protocol(gate: Gate) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn's `Config(http=...)`: one per server (one gate)."""

    class Guarded(GuardedH11Protocol):
        pass

    Guarded.gate = gate
    return Guarded
