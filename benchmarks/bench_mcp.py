"""A tool call through the MCP server against the same call made in process (issue 12).

The same `decode_frame` call on the demo vehicle's offline CanDriver, three ways, in one run:

- in process: `driver.process_llm_response(...)` (detect, validate, execute, messages);
- MCP in memory: `hwbridge.mcp.build_server(driver)` and the SDK's `Client(server)` in the
  same process (the MCP layer alone, no transport);
- MCP over stdio: `hwbridge mcp` started by the SDK's `Client` as Claude Desktop starts it
  (JSON-RPC framing, two pipes, a second process).

Each figure is the best of 5 repeats of N sequential calls, in microseconds per call, and
every result is checked to be the decoded frame. Reported, no goal: the transport costs
what a pipe round trip and two JSON encodings cost, which a model's seconds dwarf.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
REPEATS = 5
ARGUMENTS = {"id": "0x100", "data": "20 4E 50 82 20 00 01 2C"}
TEXT_CALL = json.dumps({"tool": "decode_frame", "arguments": ARGUMENTS})


def _in_process(driver: Any, number: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(number):
            response = driver.process_llm_response(TEXT_CALL)
        best = min(best, time.perf_counter() - start)
        assert response.call_executed
        assert response.tool_call_result["message"] == "EngineData"
    return best / number


async def _over_mcp(client: Any, number: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(number):
            result = await client.call_tool("decode_frame", ARGUMENTS)
        best = min(best, time.perf_counter() - start)
        assert not result.is_error
        assert result.structured_content["message"] == "EngineData"
    return best / number


def _timed(connect: Callable[[], Any], number: int) -> tuple[float, float]:
    """(seconds to connect, seconds per call) for a client the factory makes."""

    async def run() -> tuple[float, float]:
        start = time.perf_counter()
        async with connect() as client:
            ready = time.perf_counter() - start
            await _over_mcp(client, 5)  # warm up
            return ready, await _over_mcp(client, number)

    return asyncio.run(run())


def main() -> None:
    try:
        from mcp import Client, StdioServerParameters
    except ImportError:
        print("the mcp extra is not installed: pip install 'mcs-hwbridge[mcp]'")
        return
    from hwbridge import CanDriver
    from hwbridge.mcp import build_server

    with CanDriver.from_dbc(DEMO) as driver:
        _in_process(driver, 200)  # warm up
        direct = _in_process(driver, 5_000)
        _, memory = _timed(lambda: Client(build_server(driver)), 1_000)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "hwbridge", "mcp", "--dbc", str(DEMO)], cwd=ROOT
    )
    with open("/dev/null", "w") as quiet:
        from mcp.client.stdio import stdio_client

        started, stdio = _timed(lambda: Client(stdio_client(params, errlog=quiet)), 300)

    print(f"decode_frame, in process (process_llm_response): {direct * 1e6:8.1f} us/call")
    print(
        f"decode_frame, MCP in memory (SDK Client(server)): {memory * 1e6:8.1f} us/call "
        f"-> {memory / direct:.1f}x in process"
    )
    print(
        f"decode_frame, MCP over stdio (hwbridge mcp):      {stdio * 1e6:8.1f} us/call "
        f"-> {stdio / direct:.1f}x in process, {stdio / memory:.1f}x in memory "
        f"(reported, no goal); the server was ready {started:.2f} s after the client started it"
    )


if __name__ == "__main__":
    main()
