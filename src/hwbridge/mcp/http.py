"""Streamable HTTP for the MCP server: uvicorn on a socket bound first (so port 0 works and
the URL is known before the first client), an optional bearer token, loopback by default.

On a loopback host the SDK's DNS-rebinding protection is on (only `127.0.0.1`, `localhost`
and `[::1]` as Host and Origin). A bearer token, when given, is compared in constant time
on every request; a request without it gets 401 and nothing else.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.server import Server
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MCP_PATH", "BearerToken", "is_loopback", "parse_address", "run_http"]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DEFAULT_PORT = 8000


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
    app: ASGIApp = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token:
        app = BearerToken(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, access_log=False
    )
    if ready is not None:
        ready(url_of(sock))
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        sock.close()
