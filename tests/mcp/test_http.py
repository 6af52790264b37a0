"""`hwbridge mcp --http` as a remote client meets it: streamable HTTP on loopback, a bearer
token, the SDK's own client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.conftest import Session, elapsed, start_http, stop, text_of

TOKEN = "correct-horse-battery-staple"


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
                {"signal": "EngineSpeed", "op": ">", "value": 5000, "timeout_ms": 20_000},
                progress_callback=on_progress,
            )

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            with anyio.fail_after(5):
                await seen.wait()
            cancelled_at = time.monotonic()
            group.cancel_scope.cancel()
        return elapsed(cancelled_at), reports

    took, progress = server.run(cancelled)
    assert took < 1.0 and progress[0] == 0.5
    assert not call(server, "bus_status").is_error  # and the server serves on


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
