"""A farm of simulated benches (`python -m firmware_sim` + `hwbridge mcp --http` each, on
loopback, with a bearer token) behind one Orchestrator of McpToolDrivers: every bench under
its label, a slow bench beside a fast one, a hanging bench, a bench killed mid-call and
restarted, and `hwbridge mcp --remote` serving the farm as one MCP endpoint."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from hwbridge import Orchestrator, ToolError
from hwbridge.mcp import McpToolDriver
from hwbridge.mcp.remote import DEFAULT_CONNECT_TIMEOUT_S
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.mcp.conftest import Session, start_http, stop
from tests.mcp.farm import TOKEN, Bench, start_bench, start_benches

pytestmark = pytest.mark.timeout(90)

NEVER = {"signal": "EngineSpeed", "op": ">", "value": 100000}
"""A condition the simulated engine never meets: wait_for_signal waits its whole timeout."""
SLOW_S = 2 * BUSY_MARGIN_S
"""The slow bench's wait: a fast read held up by it would take about as long."""
SIDE_S = 5.0
"""Each of two waits answered side by side: one after the other, 10 s."""
HANG_S = 1.0
"""The timeout_s of the driver of the hanging bench."""
KILLED_WAIT_S = 20.0
"""The wait under way when its bench is killed."""


@pytest.fixture(scope="module")
def benches() -> Iterator[list[Bench]]:
    started = start_benches(2)
    yield started
    for bench in started:
        bench.stop()


@pytest.fixture(scope="module")
def farm(benches: list[Bench]) -> Iterator[Orchestrator]:
    drivers = [
        McpToolDriver(b.url, token=TOKEN, label=f"bench{i}", trust_annotations=True)
        for i, b in enumerate(benches, start=1)
    ]
    yield Orchestrator(drivers, names="dotted")
    for driver in drivers:
        driver.close()


def elapsed(since: float) -> float:
    return time.monotonic() - since


def test_every_bench_answers_under_its_label(farm: Orchestrator) -> None:
    names = {t.name for t in farm.list_tools()}
    assert {"bench1.read_signals", "bench2.read_signals", "bench2.wait_for_signal"} <= names
    assert not any(n.endswith("send_message") for n in names)  # the benches are read-only
    for label in ("bench1", "bench2"):
        read = farm.execute_tool(
            f"{label}.read_signals", {"signals": ["EngineSpeed"], "timeout_ms": 2000}
        )
        assert "EngineSpeed" in read["values"]
    bench1 = farm.drivers["bench1"]
    assert isinstance(bench1, McpToolDriver)
    assert bench1.annotations("read_signals") == {"readOnlyHint": True, "destructiveHint": False}
    tools = {t.name: t for t in farm.list_tools()}
    assert tools["bench1.read_signals"].read_only  # trusted: the benches' own marks


def test_a_bench_error_keeps_the_bench_code(farm: Orchestrator) -> None:
    with pytest.raises(ToolError) as caught:
        farm.execute_tool("bench2.read_signals", {"signals": ["NoSuchSignal"]})
    assert caught.value.code == "UNKNOWN_SIGNAL"
    assert "NoSuchSignal" in caught.value.message
    answer = farm.process_llm_response(
        json.dumps({"tool": "bench1.read_signals", "arguments": {"signals": ["NoSuchSignal"]}})
    )
    assert answer.call_failed and (answer.call_detail or "").startswith("UNKNOWN_SIGNAL")


def test_health_reports_each_bench_and_its_bus(farm: Orchestrator) -> None:
    health = farm.health()
    assert set(health.parts) == {"bench1", "bench2"}
    for part in health.parts.values():
        assert part.details["state"] == "connected" and part.details["tools"] > 10
        bench = part.parts["remote"]  # the bench's own report: its CAN bus
        assert bench.status == "ok" and bench.parts["can"].details["bus_state"] == "active"
        assert TOKEN not in json.dumps(part.model_dump(mode="json"))


@pytest.mark.slow
def test_a_slow_bench_does_not_stall_a_fast_one(farm: Orchestrator) -> None:
    slow: dict[str, Any] = {}

    def wait() -> None:
        started = time.monotonic()
        slow["result"] = farm.execute_tool(
            "bench1.wait_for_signal", {**NEVER, "timeout_ms": int(SLOW_S * 1000)}
        )
        slow["took"] = elapsed(started)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)  # the slow call is under way (nothing to see of it from here)
    fast = []
    for _ in range(3):
        started = time.monotonic()
        farm.execute_tool("bench2.read_signals", {"signals": ["EngineSpeed"], "timeout_ms": 1000})
        fast.append(elapsed(started))
    assert thread.is_alive()  # the slow call was still running all along
    thread.join()
    assert max(fast) < SLOW_S / 2, fast  # held up, a read would wait for the slow call
    assert slow["took"] >= SLOW_S and slow["result"]["met"] is False


@pytest.mark.slow
def test_one_answer_waits_on_two_benches_at_once(farm: Orchestrator) -> None:
    # one model answer with a call to each bench (native, under the aliases OpenAI takes)
    calls = [
        {
            "id": f"call_{label}",
            "type": "function",
            "function": {
                "name": f"{label}__wait_for_signal",
                "arguments": json.dumps({**NEVER, "timeout_ms": int(SIDE_S * 1000)}),
            },
        }
        for label in ("bench1", "bench2")
    ]
    started = time.monotonic()
    answer = farm.process_llm_response({"role": "assistant", "tool_calls": calls})
    took = elapsed(started)
    assert answer.call_executed and not answer.call_failed
    # side by side; one after the other takes twice as long, more than a busy machine adds
    assert SIDE_S <= took < SIDE_S + BUSY_MARGIN_S, took


def test_a_hanging_bench_times_out_alone(benches: list[Bench], farm: Orchestrator) -> None:
    hanging = McpToolDriver(
        benches[1].url, token=TOKEN, label="hang", timeout_s=HANG_S, trust_annotations=True
    )
    benches[1].freeze()
    try:
        started = time.monotonic()
        with pytest.raises(ToolError) as caught:
            hanging.execute_tool("bus_status", {})
        took = elapsed(started)
        fine = time.monotonic()
        assert farm.execute_tool("bench1.bus_status", {})["state"] == "connected"
        # not held up by the hanging bench (it never answers)
        assert elapsed(fine) < BUSY_MARGIN_S
    finally:
        benches[1].thaw()
    assert caught.value.code == "REMOTE_TIMEOUT" and caught.value.retryable
    assert HANG_S <= took < HANG_S + BUSY_MARGIN_S, took  # its timeout_s
    assert wait_until(lambda: _answers(hanging), 10)  # thawed: the same driver goes on
    hanging.close()


def _answers(driver: McpToolDriver) -> bool:
    try:
        return bool(driver.execute_tool("bus_status", {}))
    except ToolError:
        return False


def test_a_bench_killed_mid_call_then_restarted(benches: list[Bench], farm: Orchestrator) -> None:
    bench = start_bench(beside=benches[0])
    driver = McpToolDriver(bench.url, token=TOKEN, label="bench3", trust_annotations=True)
    both = Orchestrator({"bench3": driver, "bench1": farm.drivers["bench1"]}, names="dotted")
    try:
        outcome: dict[str, Any] = {}

        def wait() -> None:
            started = time.monotonic()
            try:
                both.execute_tool(
                    "bench3.wait_for_signal", {**NEVER, "timeout_ms": int(KILLED_WAIT_S * 1000)}
                )
            except ToolError as exc:
                outcome["error"] = exc
            outcome["took"] = elapsed(started)

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.5)  # the wait is under way (nothing to see of it from here)
        bench.kill_server()
        thread.join(KILLED_WAIT_S / 2)
        error = outcome["error"]
        assert error.code == "REMOTE_DOWN" and error.retryable  # a read: it may be repeated
        assert outcome["took"] < KILLED_WAIT_S / 2  # ended by the kill, not by the wait
        assert "bench3" in error.message
        # the other bench did not notice; the dead one says it is down, at once
        assert both.execute_tool("bench1.bus_status", {})["state"] == "connected"
        started = time.monotonic()
        with pytest.raises(ToolError) as down:
            both.execute_tool("bench3.bus_status", {})
        # at once, not after a try to connect again (its connect_timeout_s)
        assert down.value.code == "REMOTE_DOWN"
        assert elapsed(started) < DEFAULT_CONNECT_TIMEOUT_S / 2
        health = both.healthcheck()
        assert health.status == "down" and health.parts["bench3"].details["state"] == "down"
        assert health.parts["bench1"].details["state"] == "connected"

        bench.serve()  # the bench comes back on its port; nothing here is restarted
        assert wait_until(lambda: _answers(driver), 10)
        read = both.execute_tool(
            "bench3.read_signals", {"signals": ["EngineSpeed"], "timeout_ms": 2000}
        )
        assert "EngineSpeed" in read["values"]
        assert driver.healthcheck().details["connections"] == 2
        assert both.healthcheck().parts["bench3"].details["state"] == "connected"
    finally:
        driver.close()
        bench.stop()


@pytest.fixture(scope="module")
def aggregate(benches: list[Bench]) -> Iterator[Session]:
    process, url = start_http(
        *(word for b in benches for word in ("--remote", b.url)),
        "--remote-read-only",
        "read_signals",
        "wait_for_signal",
        env={"HWBRIDGE_REMOTE_TOKEN": TOKEN},
    )

    def connect() -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client()))

    session = Session(connect)
    yield session
    session.close()
    stop(process)


def test_hwbridge_mcp_remote_serves_the_farm_as_one_endpoint(aggregate: Session) -> None:
    tools = {t.name: t for t in aggregate.run(lambda c: c.list_tools()).tools}
    assert {"bench1.read_signals", "bench2.read_signals", "bench1.bus_status"} <= set(tools)
    # what the aggregate will run without asking is what it says is read-only
    hints = {name: tool.annotations for name, tool in tools.items()}
    reading, status = hints["bench1.read_signals"], hints["bench1.bus_status"]
    assert reading is not None and reading.read_only_hint is True
    assert status is not None and status.read_only_hint is False and status.destructive_hint
    read = aggregate.run(
        lambda c: c.call_tool(
            "bench2.read_signals", {"signals": ["EngineSpeed"], "timeout_ms": 2000}
        )
    )
    assert not read.is_error and "EngineSpeed" in read.structured_content["values"]
    failed = aggregate.run(
        lambda c: c.call_tool("bench1.read_signals", {"signals": ["NoSuchSignal"]})
    )
    assert failed.is_error and failed.structured_content["error"]["code"] == "UNKNOWN_SIGNAL"


def test_the_benches_progress_reaches_the_aggregate_s_client(aggregate: Session) -> None:
    async def waited(client: Client) -> list[str]:
        said: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            said.append(message or "")

        await client.call_tool(
            "bench1.wait_for_signal",
            {**NEVER, "timeout_ms": 1300},
            progress_callback=on_progress,
        )
        return said

    said = aggregate.run(waited)
    # the bench's own words ("wait_for_signal: 0.5 s of at most 1.3 s"), not the aggregate's
    assert said and all(m.startswith("wait_for_signal: ") for m in said), said
