"""`hwbridge mcp --http` as a remote client meets it: streamable HTTP on loopback, a bearer
token, the SDK's own client."""

from __future__ import annotations

import json
import re
import select
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from hwbridge.mcp import PROGRESS_INTERVAL_S, HttpLimits
from tests.conftest import BUSY_MARGIN_S
from tests.mcp.conftest import (
    HALF_HEAD,
    Session,
    connect_raw,
    elapsed,
    half_heads,
    read_until_closed,
    start_http,
    stop,
    text_of,
)

TOKEN = "correct-horse-battery-staple"
QUICK_S = 1.0
"""The read timeout of the `quick_url` server."""
READ_TIMEOUT_S = HttpLimits().read_timeout_s
"""The read timeout of the `url` server (the default, 10 s)."""
WAIT_MS = 20_000
"""A wait that a cancellation must not wait out."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "hwbridge-test", "version": "0"},
    },
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    process, address = start_http(
        "--bus",
        f"virtual:mcp-http-{uuid.uuid4().hex[:8]}",
        "--token-env",
        "HWB_TEST_TOKEN",
        env={"HWB_TEST_TOKEN": TOKEN},
    )
    yield address
    stop(process)


@pytest.fixture(scope="module")
def quick_url() -> Iterator[str]:
    process, address = start_http(
        "--bus",
        f"virtual:mcp-quick-{uuid.uuid4().hex[:8]}",
        "--token-env",
        "HWB_TEST_TOKEN",
        "--read-timeout",
        str(QUICK_S),
        env={"HWB_TEST_TOKEN": TOKEN},
    )
    yield address
    stop(process)


@pytest.fixture(scope="module")
def server(url: str) -> Iterator[Session]:
    def connect() -> Client:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        return Client(streamable_http_client(url, http_client=http))

    session = Session(connect)
    yield session
    session.close()


def call(session: Session, tool: str, **arguments: Any) -> Any:
    return session.run(lambda c: c.call_tool(tool, arguments))


def test_it_listens_on_loopback_and_wants_the_token(url: str) -> None:
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert httpx2.post(url, json=body).status_code == 401
    wrong = httpx2.post(url, json=body, headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
    # a page on another site cannot reach it through DNS rebinding
    rebound = httpx2.post(
        url, json=body, headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
    )
    assert rebound.status_code in (403, 421)


def test_list_call_and_refusal_over_http(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    assert "read_signals" in tools and "send_message" not in tools  # read-only: no send tool
    decoded = call(server, "decode_frame", id="0x100", data="00 00 00 00 00 00 00 00")
    assert not decoded.is_error and decoded.structured_content["message"] == "EngineData"
    refused = call(server, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 22})
    assert refused.is_error
    assert text_of(refused).startswith("SEND_NOT_ALLOWED: The send policy is read-only")


def test_a_cancelled_wait_over_http(server: Session) -> None:
    async def cancelled(client: Client) -> tuple[float, list[float]]:
        reports: list[float] = []
        seen = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append(progress)
            seen.set()

        async def wait() -> None:
            await client.call_tool(
                "wait_for_signal",
                {"signal": "EngineSpeed", "op": ">", "value": 5000, "timeout_ms": WAIT_MS},
                progress_callback=on_progress,
            )

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            with anyio.fail_after(PROGRESS_INTERVAL_S + BUSY_MARGIN_S):  # the first report
                await seen.wait()
            cancelled_at = time.monotonic()
            group.cancel_scope.cancel()
        return elapsed(cancelled_at), reports

    took, progress = server.run(cancelled)
    assert took < WAIT_MS / 1000 / 2  # at once, not when the wait ends
    # seconds waited, once per PROGRESS_INTERVAL_S: never sooner, later on a busy machine
    assert PROGRESS_INTERVAL_S <= progress[0] < PROGRESS_INTERVAL_S + BUSY_MARGIN_S
    assert not call(server, "bus_status").is_error  # and the server serves on


def test_half_heads_without_the_token_cannot_crowd_out_the_token_holder(url: str) -> None:
    # more connections than the server holds at once, each stuck halfway through its head
    held = half_heads(url, 80)
    try:
        started = time.monotonic()
        answer = httpx2.post(
            url,
            json=INITIALIZE,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
            },
            timeout=5,
        )
        assert answer.status_code == 200, answer.text
        # not held up until the half heads' read timeout ends
        assert elapsed(started) < READ_TIMEOUT_S / 2
    finally:
        for sock in held:
            sock.close()


def test_a_wrong_token_is_refused_before_the_body_is_sent(url: str) -> None:
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer guess\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
    )
    with connect_raw(url, head) as sock:
        started = time.monotonic()
        answer = read_until_closed(sock, READ_TIMEOUT_S / 2)
    assert answer.startswith(b"HTTP/1.1 401 "), answer
    # refused on its head: neither the body nor the 10 s read timeout awaited
    assert elapsed(started) < READ_TIMEOUT_S / 2


def test_one_client_holds_at_most_16_connections_without_the_token(url: str) -> None:
    held = half_heads(url, 17)
    try:
        # the oldest makes room for the newest; the 16 newer ones are still held
        assert read_until_closed(held[0], BUSY_MARGIN_S).startswith(b"HTTP/1.1 503 ")
        readable, _, _ = select.select(held[1:], [], [], 0.3)
        assert readable == []
    finally:
        for sock in held:
            sock.close()


def test_a_half_head_is_closed_after_the_read_timeout(quick_url: str) -> None:
    with connect_raw(quick_url, HALF_HEAD) as sock:
        started = time.monotonic()
        answer = read_until_closed(sock, QUICK_S + BUSY_MARGIN_S)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert QUICK_S * 0.8 <= elapsed(started) < QUICK_S + BUSY_MARGIN_S


def test_a_missing_body_is_closed_after_the_read_timeout(quick_url: str) -> None:
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n{"
    ).encode()
    with connect_raw(quick_url, head) as sock:
        started = time.monotonic()
        answer = read_until_closed(sock, QUICK_S + BUSY_MARGIN_S)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert QUICK_S * 0.8 <= elapsed(started) < QUICK_S + BUSY_MARGIN_S


def test_a_trickled_second_request_is_closed_too(quick_url: str) -> None:
    first = f"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    with connect_raw(quick_url, first.encode()) as sock:
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 404 ") and b"connection: close" not in answer.lower()
        sock.sendall(b"G")  # a keep-alive connection that starts its next head, and stops
        started = time.monotonic()
        rest = read_until_closed(sock, QUICK_S + BUSY_MARGIN_S)
    assert b"HTTP/1.1 408 " in rest, rest
    assert QUICK_S * 0.8 <= elapsed(started) < QUICK_S + BUSY_MARGIN_S


def test_every_loopback_spelling_keeps_the_rebinding_protection() -> None:
    process, address = start_http(
        "--bus", f"virtual:mcp-alias-{uuid.uuid4().hex[:8]}", address="127.0.0.2:0"
    )
    try:
        assert address.startswith("http://127.0.0.2:")
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        evil = {"Host": "evil.example", "Origin": "http://evil.example"}
        assert httpx2.post(address, json=body, headers=evil).status_code in (403, 421)
        hostile_origin = httpx2.post(address, json=body, headers={"Origin": "http://evil.example"})
        assert hostile_origin.status_code in (403, 421)
    finally:
        stop(process)


def initialize_head(url: str, *, token: str | None = TOKEN, close: bool = False) -> bytes:
    """A whole POST /mcp of `INITIALIZE`, as bytes for a raw socket."""
    body = json.dumps(INITIALIZE).encode()
    port = urlsplit(url).port
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n"
    )
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


def status_of(sock: socket.socket, timeout_s: float = 5.0) -> int:
    """The status of the response the server sends on `sock` (0 if it closes first)."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n" not in data:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            return 0
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ", 2)[1])


def silent(url: str, source: str) -> socket.socket:
    """A connection from loopback address `source` that sends nothing."""
    sock = socket.socket()
    try:
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", urlsplit(url).port or 0))
    except BaseException:
        sock.close()
        raise
    return sock


def test_silent_connections_cannot_close_a_token_holder_that_has_not_spoken_yet(
    url: str,
) -> None:
    # the server accepts connections in batches before it reads any of them: a client with
    # the token that connected first must not be the one closed to make room for them
    statuses = []
    for _ in range(5):
        holder = connect_raw(url)
        crowd = [silent(url, source) for source in ("127.0.0.1", "127.0.0.2") for _ in range(20)]
        try:
            time.sleep(0.05)
            holder.sendall(initialize_head(url))
            statuses.append(status_of(holder))
        finally:
            holder.close()
            for sock in crowd:
                sock.close()
    assert statuses == [200] * 5


def event_stream(url: str) -> socket.socket:
    """A session initialized with the token, then its GET event stream, held open."""
    with connect_raw(url, initialize_head(url, close=True)) as sock:
        answer = read_until_closed(sock)
    found = re.search(rb"mcp-session-id: (\S+)", answer, re.IGNORECASE)
    assert found, answer
    port = urlsplit(url).port
    head = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {TOKEN}\r\nmcp-session-id: {found.group(1).decode()}\r\n"
        "mcp-protocol-version: 2025-06-18\r\n\r\n"
    )
    stream = connect_raw(url, head.encode())
    assert status_of(stream) == 200
    return stream


def test_event_streams_that_fill_the_server_give_way_to_a_new_token_holder() -> None:
    process, address = start_http(
        "--bus",
        f"virtual:mcp-streams-{uuid.uuid4().hex[:8]}",
        "--token-env",
        "HWB_TEST_TOKEN",
        env={"HWB_TEST_TOKEN": TOKEN},
    )
    streams: list[socket.socket] = []
    try:
        for _ in range(HttpLimits().max_connections):
            streams.append(event_stream(address))
        # without the token: refused, and no stream is closed for it
        with connect_raw(address, initialize_head(address, token=None)) as stranger:
            assert status_of(stranger) == 503
        readable, _, _ = select.select(streams, [], [], 0.2)
        assert readable == []
        # with the token: the oldest stream makes room
        with connect_raw(address, initialize_head(address)) as holder:
            assert status_of(holder) == 200
        read_until_closed(streams[0], 3)  # closed (it raises if not)
        readable, _, _ = select.select(streams[1:], [], [], 0.2)
        assert readable == []
    finally:
        for sock in streams:
            sock.close()
        stop(process)


def test_strangers_cannot_flood_the_log() -> None:
    process, address = start_http(
        "--bus",
        f"virtual:mcp-log-{uuid.uuid4().hex[:8]}",
        "--token-env",
        "HWB_TEST_TOKEN",
        env={"HWB_TEST_TOKEN": TOKEN},
    )
    requests = [
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        b"GARBAGE\x00\r\n\r\n",
    ]
    try:
        for request in requests * 30:
            with connect_raw(address, request) as sock:
                assert status_of(sock) in (400, 401)
    finally:
        stop(process)
    assert process.stderr is not None
    lines = process.stderr.read().splitlines()
    assert len(lines) <= 3, lines
