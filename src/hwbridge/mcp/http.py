"""Streamable HTTP for the MCP server: uvicorn on a socket bound first (so port 0 works and
the URL is known before the first client), an optional bearer token, loopback by default.

On a loopback socket (any spelling: 127.0.0.2, 127.1, the long IPv6 form) DNS-rebinding
protection is on: Host and Origin must name this machine. Off loopback, a browser's Origin
must be the server's own. A bearer token, when given, is compared in constant time
on every request; a request without it gets 401 and nothing else.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from mcp.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MCP_PATH", "BearerToken", "is_loopback", "parse_address", "run_http"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DEFAULT_PORT = 8000
MAX_CONNECTIONS = 64
"""Connections served at once (uvicorn answers 503 beyond): half-open ones cannot pile up
without end."""


class BearerToken:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the bearer token is empty")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            response = JSONResponse(
                {"error": "unauthorized", "error_description": "a bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="hwbridge"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self._token
                )
        return False


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
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `server` over streamable HTTP until SIGINT/SIGTERM; `ready(url)` is called
    once the socket listens."""
    if token is not None and not token.strip():  # an unset variable must not mean "open"
        raise ValueError("the bearer token is empty: give a token, or token=None for none")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
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
                "tools (put a token, or a reverse proxy with timeouts, in front)",
                url_of(sock),
            )
    if token is not None:
        app = BearerToken(app, token)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        access_log=False,
        limit_concurrency=MAX_CONNECTIONS,
    )
    if ready is not None:
        ready(url_of(sock))
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
