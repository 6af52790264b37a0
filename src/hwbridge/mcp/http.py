"""Streamable HTTP for the MCP server: uvicorn on a socket bound first (so port 0 works and
the URL is known before the first client), an optional bearer token, loopback by default.

On a loopback socket (any spelling: 127.0.0.2, 127.1, the long IPv6 form) DNS-rebinding
protection is on: Host and Origin must name this machine. Off loopback, a browser's Origin
must be the server's own. A bearer token, when given, is compared in constant time
on every request, as soon as its head is parsed; a request without it gets 401 and its
connection is closed. Request heads and bodies have a deadline, and connections that have
not shown the token are closed first to make room (`hwbridge.mcp.guard`).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from hwbridge.mcp.guard import Gate, HttpLimits, guarded_protocol

__all__ = ["MCP_PATH", "BearerToken", "HttpLimits", "is_loopback", "parse_address", "run_http"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DEFAULT_PORT = 8000


def carries_token(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """`Authorization: Bearer <token>` among `headers`, compared in constant time."""
    for key, value in headers:
        if key.lower() == b"authorization":
            scheme, _, given = bytes(value).partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
    return False


class BearerToken:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`; a
    request without it gets 401 and the connection is closed (its body is never read)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token is empty")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.proves(scope.get("headers", ())):
            response = JSONResponse(
                {"error": "unauthorized", "error_description": "a bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="hwbridge"', "Connection": "close"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def proves(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """The token among a request's headers: here, and in the server's protocol as soon
        as it has parsed a head (`hwbridge.mcp.guard`)."""
        return carries_token(headers, self._token)


def _anyone(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Without a token, every whole request head proves its connection."""
    return True


def local_only(bound: str) -> TransportSecuritySettings:
    """DNS-rebinding protection for a loopback socket, whatever loopback spelling it was
    given (127.0.0.2, 127.1, the long IPv6 form): Host and Origin must name this machine."""
    shown = f"[{bound}]" if ":" in bound else bound
    hosts = sorted({"127.0.0.1", "localhost", "[::1]", shown})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


class SameOrigin:
    """ASGI middleware off loopback: a request that carries an Origin (a browser's) must come
    from the page of this very server (Origin's host:port equals Host); others get 403."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {bytes(k).lower(): bytes(v) for k, v in scope.get("headers", ())}
            origin = headers.get(b"origin")
            if origin is not None and urlsplit(origin.decode("latin-1")).netloc.encode(
                "latin-1"
            ) != headers.get(b"host"):
                response = JSONResponse({"error": "forbidden origin"}, status_code=403)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, `PORT` or `[::1]:PORT` -> (host, port); the host defaults to
    127.0.0.1 (loopback)."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text) if port_text else DEFAULT_PORT
    except ValueError:
        raise ValueError(f"{text!r} is not HOST:PORT (the port is not a number)") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is outside 0-65535")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


async def run_http(
    server: Server[Any],
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    token: str | None = None,
    limits: HttpLimits | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `server` over streamable HTTP until SIGINT/SIGTERM; `ready(url)` is called
    once the socket listens. `limits`: the read timeout and connection caps (the defaults
    of `HttpLimits` without it)."""
    if token is not None and not token.strip():  # an unset variable must not mean "open"
        raise ValueError("the bearer token is empty: give a token, or token=None for none")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so that asyncio turns Nagle's algorithm off on every connection
    # (it only does for sockets that say they are TCP): a response's head and body are two
    # writes, and the second must not wait out the client's delayed ACK (40 ms a call)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    bound = str(sock.getsockname()[0])  # what really listens: 127.1 is 127.0.0.1, 0 is 0.0.0.0
    loopback = is_loopback(bound)
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=bound,
        transport_security=local_only(bound) if loopback else None,
    )
    if not loopback:
        app = SameOrigin(app)  # a browser page elsewhere cannot drive the tools
        if token is None:
            log.warning(
                "serving on %s without a bearer token: anyone who can reach it can call its "
                "tools (give it a token, or put a reverse proxy that authenticates in front)",
                url_of(sock),
            )
    proves: Callable[[Iterable[tuple[bytes, bytes]]], bool] = _anyone
    if token is not None:
        bearer = BearerToken(app, token)
        app, proves = bearer, bearer.proves
    config = uvicorn.Config(
        app,
        http=guarded_protocol(Gate(limits or HttpLimits(), proves)),
        ws="none",  # an upgraded connection would leave the gate's accounting
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        access_log=False,
    )
    if ready is not None:
        ready(url_of(sock))
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
