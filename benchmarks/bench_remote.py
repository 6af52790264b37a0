"""A farm of benches behind one Orchestrator of McpToolDrivers (issue 26), in one run:

- a read through the farm against the same read with the MCP SDK's own client: `read_signals`
  on a bench (`python -m firmware_sim` + `hwbridge mcp --http`, a bearer token, loopback),
  as `farm.process_llm_response(call)` (detect, validate, the remote call, messages) and as
  `client.call_tool(...)` on one open session; best of 5 repeats of N sequential calls.
  Goal: at most 1.2x. Beside it, for reference, the same call through `hwbridge mcp --remote`
  (an aggregating server: one more MCP hop; no goal).
- 16 calls at once, from 16 threads, spread over 1, 4 and 16 benches (`hwbridge mcp --http`
  each, on a virtual bus): each call a `wait_for_signal` of 300 ms that is never met, as a
  bench read that waits. Goal: the 16 take at most 2x one call. Beside it, the 16 as ONE model
  answer with 16 parallel calls (`process_llm_response`), over 16 benches.
- memory per connected bench: the resident memory of this process before and after
  connecting 16 McpToolDrivers, per driver (one thread and one HTTP connection pool each).
- start-up against a hostile bench (issue 33): the time for `McpToolDriver(...)` (labelled
  bench1) to start a stdio server, connect and take a listing of 512 bad tools (self-
  referencing `$ref`s, 60-character names, schemas over 64,000 bytes, wide and deep
  reference webs) and skip them all, beside the same against 512 good tools, median of 3
  each in the same run, as a ratio (reported; before issue 33 the bad start-up never
  ended). Beside each: the size of the listing (the bad one carries 128 schemas of 65,000
  bytes, which cost their transfer whatever is done with them) and the time to read it
  alone (`_take_tools`: what the bounds cost). `python benchmarks/bench_remote.py
  --serve-tools good|bad` is that server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-remote-token"
REPEATS = 5
READ_GOAL = 1.2
SPREAD_GOAL = 2.0
WAIT = {"signal": "EngineSpeed", "op": ">", "value": 100000, "timeout_ms": 300}
READ = {"signals": ["EngineSpeed"], "timeout_ms": 2000}
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "HWB_BENCH_TOKEN": TOKEN}


def _started(command: list[str], pattern: str, stream: str) -> tuple[subprocess.Popen[str], str]:
    """Start `command`; (process, the first group of `pattern` in its `stream`)."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
        text=True,
    )
    timer = threading.Timer(60.0, process.kill)
    timer.start()
    try:
        lines = process.stdout if stream == "stdout" else process.stderr
        assert lines is not None
        for line in lines:
            found = re.search(pattern, line)
            if found:
                # keep reading what it says, so a full pipe never blocks it
                threading.Thread(target=lambda: [None for _ in lines], daemon=True).start()
                return process, found.group(1)
    finally:
        timer.cancel()
    process.kill()
    raise RuntimeError(f"{' '.join(command[:4])} did not start")


def _server(*options: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "hwbridge", "mcp", "--http", "127.0.0.1:0", *options]
    return _started(command, r"serving at (http://[^\s/]+/mcp)", "stderr")


def _bench(bus: str) -> tuple[subprocess.Popen[str], str]:
    return _server("--bus", bus, "--token-env", "HWB_BENCH_TOKEN")


@contextmanager
def _processes() -> Iterator[list[subprocess.Popen[str]]]:
    held: list[subprocess.Popen[str]] = []
    try:
        yield held
    finally:
        for process in held:
            process.terminate()
        for process in held:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def _rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def _best(run: Callable[[], None], number: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(number):
            run()
        best = min(best, time.perf_counter() - start)
    return best / number


def _client_time(
    url: str, tool: str, arguments: dict[str, Any], number: int, token: str | None
) -> float:
    """Seconds per call with the SDK's own client on one open session."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def run() -> float:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        http = create_mcp_http_client(headers=headers)
        async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
            for _ in range(10):
                await client.call_tool(tool, arguments)
            best = float("inf")
            for _ in range(REPEATS):
                start = time.perf_counter()
                for _ in range(number):
                    result = await client.call_tool(tool, arguments)
                best = min(best, time.perf_counter() - start)
                assert not result.is_error, result
                assert "EngineSpeed" in (result.structured_content or {}).get("values", {})
            return best / number

    return asyncio.run(run())


def _read_comparison(held: list[subprocess.Popen[str]]) -> None:
    from hwbridge import Orchestrator
    from hwbridge.mcp import McpToolDriver

    sim, bus = _started([sys.executable, "-m", "firmware_sim"], r"socketcand: (\S+)", "stdout")
    held.append(sim)
    bench, url = _bench(bus)
    held.append(bench)
    number = 200
    direct = _client_time(url, "read_signals", READ, number, TOKEN)
    with McpToolDriver(url, token=TOKEN, label="bench1", trust_annotations=True) as driver:
        farm = Orchestrator([driver], names="dotted")
        call = json.dumps({"tool": "bench1.read_signals", "arguments": READ})

        def through_farm() -> None:
            response = farm.process_llm_response(call)
            assert response.call_executed, response.call_detail
            assert "EngineSpeed" in response.tool_call_result["values"]

        for _ in range(10):
            through_farm()
        farmed = _best(through_farm, number)
    aggregate, aggregate_url = _server(
        "--remote", url, "--trust-remote", "--remote-token-env", "HWB_BENCH_TOKEN"
    )
    held.append(aggregate)
    hop = _client_time(aggregate_url, "bench1.read_signals", READ, number, None)
    ratio = farmed / direct
    verdict = "goal met" if ratio <= READ_GOAL else "GOAL MISSED"
    print(f"read_signals, the SDK's client on the bench:        {direct * 1e3:6.2f} ms/call")
    print(
        f"read_signals, through the farm (process_llm_response): {farmed * 1e3:6.2f} ms/call "
        f"-> {ratio:.2f}x (goal <= {READ_GOAL}x: {verdict})"
    )
    print(
        f"read_signals, through hwbridge mcp --remote (two hops): {hop * 1e3:6.2f} ms/call "
        f"-> {hop / direct:.2f}x (reported, no goal)"
    )


def _spread(held: list[subprocess.Popen[str]]) -> None:
    from hwbridge import Orchestrator
    from hwbridge.mcp import McpToolDriver

    with ThreadPoolExecutor(4) as pool:
        started = list(pool.map(lambda n: _bench(f"virtual:bench-remote-{n}"), range(16)))
    held.extend(p for p, _ in started)
    urls = [url for _, url in started]
    before = _rss_mb()
    drivers = [
        McpToolDriver(url, token=TOKEN, label=f"bench{n}", trust_annotations=True)
        for n, url in enumerate(urls, start=1)
    ]
    after = _rss_mb()
    try:
        farm = Orchestrator(drivers, names="dotted")

        def one(label: str) -> None:
            result = farm.execute_tool(f"{label}.wait_for_signal", WAIT)
            assert result["met"] is False

        one("bench1")
        single = statistics.median(_timed(lambda: one("bench1")) for _ in range(5))
        print(f"one wait_for_signal of {WAIT['timeout_ms']} ms: {single * 1e3:.0f} ms")
        with ThreadPoolExecutor(16) as pool:
            for benches in (1, 4, 16):
                labels = [f"bench{1 + n % benches}" for n in range(16)]

                def sixteen(labels: list[str] = labels) -> None:
                    list(pool.map(one, labels))

                sixteen()
                took = statistics.median(_timed(sixteen) for _ in range(3))
                ratio = took / single
                verdict = "goal met" if ratio <= SPREAD_GOAL else "GOAL MISSED"
                print(
                    f"16 at once over {benches:2d} bench(es): {took * 1e3:5.0f} ms -> "
                    f"{ratio:.2f}x one call (goal <= {SPREAD_GOAL}x: {verdict})"
                )
        answer = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {
                        "name": f"bench{n}__wait_for_signal",
                        "arguments": json.dumps(WAIT),
                    },
                }
                for n in range(1, 17)
            ],
        }
        took = statistics.median(
            _timed(lambda: _executed(farm.process_llm_response(answer))) for _ in range(3)
        )
        print(
            f"one model answer with 16 calls, one per bench: {took * 1e3:.0f} ms -> "
            f"{took / single:.2f}x one call (reported)"
        )
    finally:
        for driver in drivers:
            driver.close()
    print(
        f"memory per connected bench: {(after - before) / len(drivers):.2f} MB resident "
        f"({after - before:.1f} MB for {len(drivers)} McpToolDrivers; a thread each)"
    )


def _executed(response: Any) -> None:
    assert response.call_executed, response.call_detail
    assert not response.call_failed, response.call_detail


def _timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


LISTED = 512


def _listing(kind: str) -> list[Any]:
    """512 tools: good ones (a few arguments, one small `$ref`), or bad ones of four kinds."""
    from mcp import types

    def tool(name: str, schema: dict[str, Any]) -> types.Tool:
        return types.Tool(name=name, description=f"The tool {name}.", input_schema=schema)

    tools = []
    for n in range(LISTED):
        if kind == "good":
            schema: dict[str, Any] = {
                "type": "object",
                "$defs": {"Channel": {"type": "integer", "minimum": 1, "maximum": 4}},
                "properties": {
                    "channel": {"$ref": "#/$defs/Channel"},
                    "volts": {"type": "number", "minimum": 0, "maximum": 30},
                },
                "required": ["channel"],
            }
            tools.append(tool(f"set_voltage_{n}", schema))
        elif n % 4 == 0:  # a definition that names itself 3..9 times: 3^9 to 9^9 nodes inlined
            node = {
                "type": "object",
                "properties": {f"p{i}": {"$ref": "#/$defs/N"} for i in range(3 + n % 7)},
            }
            tools.append(
                tool(
                    f"bomb_{n}",
                    {
                        "type": "object",
                        "$defs": {"N": node},
                        "properties": {"n": {"$ref": "#/$defs/N"}},
                    },
                )
            )
        elif n % 4 == 1:  # 60 characters: `bench1.` makes 67
            tools.append(tool(f"long_{n:04d}_" + "x" * 50, {"type": "object"}))
        elif n % 4 == 2:  # 65,000 bytes as sent
            tools.append(
                tool(f"huge_{n}", {"type": "object", "properties": {"a": {"enum": ["x" * 65_000]}}})
            )
        else:  # wide: 8 definitions each naming the next 30 times; or 100 levels of arrays
            defs = {
                f"D{i}": {
                    "type": "object",
                    "properties": {f"w{j}": {"$ref": f"#/$defs/D{i + 1}"} for j in range(30)},
                }
                for i in range(8)
            }
            deep: dict[str, Any] = {"type": "string"}
            for _ in range(100):
                deep = {"type": "array", "items": deep}
            tools.append(
                tool(
                    f"web_{n}",
                    {
                        "type": "object",
                        "$defs": defs,
                        "properties": {"x": {"$ref": "#/$defs/D0"}, "d": deep},
                    },
                )
            )
    return tools


def serve_tools(kind: str) -> None:
    """A stdio MCP server listing `_listing(kind)`."""
    from mcp.server.mcpserver import MCPServer

    listed = _listing(kind)

    class Listing(MCPServer):
        async def list_tools(self) -> list[Any]:
            return listed

    Listing("listing", version="1.0.0").run("stdio")


def _hostile_startup() -> None:
    from hwbridge.mcp import McpToolDriver
    from hwbridge.mcp.remote_listing import Listed

    def start(kind: str) -> tuple[float, float, int, int, int]:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve-tools", kind]
        started = time.perf_counter()
        with McpToolDriver(command, label="bench1", cwd=ROOT, connect_timeout_s=60) as driver:
            took = time.perf_counter() - started
            listed = driver._link.tools
            again = time.perf_counter()
            driver._tools, driver._skipped = {}, {}
            driver._take_tools(Listed(listed))
            read = time.perf_counter() - again
            size = len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in listed]))
            return took, read, len(driver.list_tools()), len(driver.skipped_tools()), size

    runs: dict[str, list[tuple[float, float, int, int, int]]] = {"good": [], "bad": []}
    for _ in range(3):
        for kind, taken in runs.items():
            taken.append(start(kind))
    median = {kind: statistics.median(r[0] for r in taken) for kind, taken in runs.items()}
    for kind, taken in runs.items():
        read = statistics.median(r[1] for r in taken)
        _, _, offered, skipped, size = taken[0]
        ratio = (
            f" -> {median[kind] / median['good']:.2f}x the good start-up" if kind == "bad" else ""
        )
        print(
            f"start-up against {LISTED} {kind} tools ({size / 1e6:.2f} MB listed): "
            f"{median[kind] * 1e3:5.0f} ms (reading the listing: {read * 1e3:.0f} ms; "
            f"{offered} offered, {skipped} skipped){ratio}"
        )


def main() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("the mcp extra is not installed: pip install 'mcs-hwbridge[mcp]'")
        return
    _hostile_startup()
    with _processes() as held:
        _read_comparison(held)
    with _processes() as held:
        _spread(held)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-tools"]:
        serve_tools(sys.argv[2])
    else:
        main()
