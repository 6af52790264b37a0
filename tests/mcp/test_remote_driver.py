"""McpToolDriver against a server anyone could have written with the SDK (`remote_server.py`,
over stdio): a tool that lies in its annotations, errors with codes, progress and
cancellation through an aggregating server, tools that appear, and bad input refused."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from hwbridge import ConsentGate, Orchestrator, ToolError
from hwbridge.mcp import McpToolDriver, build_server
from hwbridge.mcp.tools import mcp_tools
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.mcp.conftest import ROOT
from tests.mcp.farm import free_port

pytestmark = pytest.mark.timeout(60)

SERVER = [sys.executable, str(ROOT / "tests" / "mcp" / "remote_server.py")]


def remote(**options: Any) -> McpToolDriver:
    return McpToolDriver(SERVER, label="liar", cwd=ROOT, **options)


@pytest.fixture(scope="module")
def liar() -> Iterator[McpToolDriver]:
    """The server with its marks not trusted: only the tools named here count as reads."""
    with remote(read_only=["counters", "slow_read"]) as driver:
        yield driver


def presses(driver: McpToolDriver) -> int:
    return int(driver.execute_tool("counters", {})["presses"])


def test_a_remote_that_lies_cannot_skip_the_consent_gate(liar: McpToolDriver) -> None:
    asked: list[str] = []

    def refuse(tool: str, arguments: dict[str, Any]) -> bool:
        asked.append(tool)
        return False

    gate = ConsentGate(Orchestrator([liar], names="dotted"), refuse)
    before = presses(liar)
    answer = gate.process_llm_response('{"tool": "liar.read_status", "arguments": {}}')
    assert answer.call_failed and (answer.call_detail or "").startswith("CONSENT_DENIED")
    assert asked == ["liar.read_status"]
    assert presses(liar) == before  # nothing reached the server
    # what it claimed is kept, and is not what this side goes by
    assert liar.annotations("read_status") == {"readOnlyHint": True, "destructiveHint": False}
    tools = {t.name: t for t in liar.list_tools()}
    assert not tools["read_status"].read_only and tools["counters"].read_only
    # an aggregating server says so to its own clients: not read-only, maybe destructive
    published = {t.name: t.annotations for t in mcp_tools(Orchestrator([liar], names="dotted"))}
    hints = published["liar.read_status"]
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint


def test_consent_given_runs_the_call_and_trust_is_the_user_s_choice(liar: McpToolDriver) -> None:
    gate = ConsentGate(Orchestrator([liar], names="dotted"), lambda tool, arguments: True)
    before = presses(liar)
    assert gate.process_llm_response('{"tool": "liar.read_status", "arguments": {}}').call_executed
    assert presses(liar) == before + 1
    # a user who trusts this server's marks lets its "reads" run without a question
    with remote(trust_annotations=True) as trusted:
        assert {t.name: t.read_only for t in trusted.list_tools()}["read_status"]
        asked: list[str] = []

        def ask(tool: str, arguments: dict[str, Any]) -> bool:
            asked.append(tool)
            return False

        gate = ConsentGate(trusted, ask)
        assert gate.process_llm_response('{"tool": "read_status", "arguments": {}}').call_executed
        assert asked == []


def test_a_tool_error_keeps_the_server_s_code(liar: McpToolDriver) -> None:
    with pytest.raises(ToolError) as caught:
        liar.execute_tool("fail", {"code": "BENCH_ON_FIRE"})
    assert caught.value.code == "BENCH_ON_FIRE" and "refused" in caught.value.message
    with pytest.raises(ToolError) as invalid:
        liar.execute_tool("slow_read", {"seconds": "soon"})  # checked here, before sending
    assert invalid.value.code == "INVALID_ARGUMENTS"


def test_progress_and_cancellation_reach_the_remote(liar: McpToolDriver) -> None:
    aggregate = build_server(Orchestrator([liar], names="dotted"))
    cancelled = liar.execute_tool("counters", {})["cancelled"]

    async def session() -> list[str]:
        said: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            said.append(message or "")

        async with Client(aggregate) as client:
            done = await client.call_tool(
                "liar.slow_read", {"seconds": 0.6}, progress_callback=on_progress
            )
            assert not done.is_error
            reading = anyio.Event()

            async def on_long_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                reading.set()

            async def long_read() -> None:
                await client.call_tool(
                    "liar.slow_read", {"seconds": 20}, progress_callback=on_long_progress
                )

            async with anyio.create_task_group() as group:
                group.start_soon(long_read)
                with anyio.fail_after(BUSY_MARGIN_S):
                    await reading.wait()  # the long read is under way on the server
                group.cancel_scope.cancel()  # the client gives up on the long read
        return said

    said = asyncio.run(session())
    # the server's own words, at most one each half second: the first, the last before
    # the result, and the second may go unsaid (a bench's reports are paced)
    assert all(message.startswith("slow_read ") for message in said), said
    assert said[0] == "slow_read 1" and "slow_read 3" in said[:3], said
    assert wait_until(lambda: liar.execute_tool("counters", {})["cancelled"] > cancelled, 5)


def test_a_tool_the_server_adds_appears_in_the_farm(liar: McpToolDriver) -> None:
    farm = Orchestrator([liar], names="dotted")
    gate = ConsentGate(farm, lambda tool, arguments: True)
    name = f"extra_{int(time.monotonic() * 1000) % 100000}"
    liar.execute_tool("add_tool", {"name": name})
    assert wait_until(lambda: f"liar.{name}" in {t.name for t in gate.list_tools()}, 5)
    answer = gate.process_llm_response(f'{{"tool": "liar.{name}", "arguments": {{}}}}')
    assert answer.call_executed and answer.tool_call_result == {"result": name}


def servers_running() -> int:
    """This process's children that run remote_server.py (Linux /proc)."""
    me = str(os.getpid())
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = stat.rsplit(")", 1)[1].split()[1]
        count += parent == me and b"remote_server.py" in command
    return count


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_closed_driver_says_so_and_its_server_process_ends(liar: McpToolDriver) -> None:
    running = servers_running()
    driver = remote()
    assert driver.healthcheck().details["state"] == "connected"
    assert servers_running() == running + 1
    driver.close()
    assert wait_until(lambda: servers_running() == running, 5)
    with pytest.raises(ToolError) as caught:
        driver.execute_tool("counters", {})
    assert caught.value.code == "REMOTE_DOWN"
    driver.close()  # twice is fine


def test_a_server_that_is_not_there_is_remote_down_at_once() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    connect_timeout_s = 20
    started = time.monotonic()
    with pytest.raises(ToolError) as caught:
        McpToolDriver(url, token="t", label="nobody", connect_timeout_s=connect_timeout_s)
    assert caught.value.code == "REMOTE_DOWN" and caught.value.retryable
    assert "nobody" in caught.value.message and "t" not in caught.value.message.split()
    assert time.monotonic() - started < connect_timeout_s / 2  # refused: no waiting


@pytest.mark.parametrize(
    ("target", "options", "words"),
    [
        (SERVER, {"token": "secret"}, "only applies to an http"),
        ("http://127.0.0.1:1/mcp", {"token": " "}, "token is empty"),
        ("http://127.0.0.1:1/mcp", {"label": "bench.1"}, "letters, digits"),
        ("http://127.0.0.1:1/mcp", {"timeout_s": 0}, "above 0"),
        ("", {}, "URL or a command"),
        ("http://127.0.0.1:1/mcp", {"env": {"A": "1"}}, "stdio command"),
    ],
)
def test_bad_arguments_are_refused_before_connecting(
    target: Any, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        McpToolDriver(target, **options)
