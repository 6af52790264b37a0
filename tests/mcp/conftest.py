"""MCP tests: the SDK's own client, held open in a thread of its own so one server process
serves a whole test module, and the `hwbridge mcp` processes it talks to."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from mcp import Client, StdioServerParameters

from tests.cli.conftest import run  # noqa: F401  (the `hwbridge` runner fixture)

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class Session:
    """An MCP `Client` entered in a background event loop: `run(fn)` awaits `fn(client)`
    there and returns its result, from any test."""

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.client: Client | None = None
        self._held = asyncio.run_coroutine_threadsafe(self._hold(connect), self.loop)
        if not self._ready.wait(20):
            error = self._held.exception(5) if self._held.done() else None
            self.close()
            raise RuntimeError(f"the MCP client did not connect: {error!r}")

    async def _hold(self, connect: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        self._stop = asyncio.Event()
        try:
            async with connect() as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        finally:
            self._ready.set()

    def run(self, fn: Callable[[Client], Awaitable[T]], timeout_s: float = 30.0) -> T:
        assert self.client is not None

        async def call() -> T:
            assert self.client is not None
            return await fn(self.client)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout_s)

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._held.result(10)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _bare_environment() -> dict[str, str]:
    """A client's bare environment, keeping PYTHONPATH: in a worktree it names the code
    under test, which the installed (editable) package otherwise shadows."""
    env = {"PYTHONUNBUFFERED": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def stdio_session(*options: str, stderr: Path) -> Session:
    """`hwbridge mcp OPTIONS` started over stdio by the SDK's client, its stderr in a file."""
    log = stderr.open("w")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hwbridge", "mcp", *options],
        cwd=ROOT,
        env=_bare_environment(),
    )
    from mcp.client.stdio import stdio_client

    return Session(lambda: Client(stdio_client(params, errlog=log)))


def start_http(
    *options: str, env: dict[str, str] | None = None, address: str = "127.0.0.1:0"
) -> tuple[subprocess.Popen[str], str]:
    """`hwbridge mcp --http ADDRESS OPTIONS` in its own process; (process, URL)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "hwbridge", "mcp", "--http", address, *options],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(20.0, process.kill)
    timer.start()
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            match = re.search(r"serving at (http://[^\s/]+/mcp)", line)
            if match:
                return process, match.group(1)
    finally:
        timer.cancel()
    process.kill()
    raise RuntimeError(f"hwbridge mcp --http did not start: {''.join(seen)}")


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


HALF_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def connect_raw(url: str, data: bytes = b"") -> socket.socket:
    """A plain socket to the server at `url` (loopback only) that has sent `data`."""
    where = urlsplit(url)
    assert where.hostname == "127.0.0.1" and where.port is not None
    sock = socket.create_connection(("127.0.0.1", where.port), timeout=5)
    try:
        sock.sendall(data)
    except BaseException:
        sock.close()
        raise
    return sock


def half_heads(url: str, count: int) -> list[socket.socket]:
    """`count` connections to the server at `url`, each having sent half a request head and
    nothing more."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            held.append(connect_raw(url, HALF_HEAD))
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return held


def read_until_closed(sock: socket.socket, timeout_s: float = 5.0) -> bytes:
    """All the server sends until it closes the connection (within `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        except TimeoutError:
            raise AssertionError(f"the server did not close the connection: {data!r}") from None
        if not chunk:
            return data
        data += chunk


def elapsed(since: float) -> float:
    return time.monotonic() - since


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp")


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
