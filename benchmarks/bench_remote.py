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
    return _started(command, r"serving at (http://\S+)", "stderr")


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


def main() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("the mcp extra is not installed: pip install 'mcs-hwbridge[mcp]'")
        return
    with _processes() as held:
        _read_comparison(held)
    with _processes() as held:
        _spread(held)


if __name__ == "__main__":
    main()
