"""`hwbridge.mcp.build_server` in process, through the SDK's in-memory client: the same
answers as `process_llm_response`, any driver or orchestrator, progress, cancellation."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client

from hwbridge import (
    CanDriver,
    DriverMeta,
    HybridDriver,
    MCSToolDriver,
    Orchestrator,
    SendPolicy,
    Tool,
    ToolParameter,
)
from hwbridge.core.aio import PROGRESS
from hwbridge.mcp import build_server, serve
from hwbridge.mcp.calls import PROGRESS_MESSAGE_CHARS
from tests.conftest import BUSY_MARGIN_S
from tests.core.drivers import Thermostat
from tests.mcp.conftest import text_of

DEMO = "dbc/demo_vehicle.dbc"
T = TypeVar("T")


def served(driver: Any, fn: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    async def main() -> T:
        async with Client(build_server(driver, **options)) as client:
            return await fn(client)

    return anyio.run(main)


def text_call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


class Relay(HybridDriver):
    """A slow relay: a read that waits and a switch that changes state."""

    meta = DriverMeta(id="1d7c0b5e-3f2a-4e8d-9c61-5a0b7e2f4d83", name="Relay", version="1.0.0")

    def __init__(self, seconds: float = 0.4) -> None:
        super().__init__()
        self.seconds = seconds
        self.switched: list[bool] = []
        self.released = threading.Event()

    def list_tools(self) -> list[Tool]:
        on = ToolParameter(name="on", required=True, schema={"type": "boolean"})
        timeout = ToolParameter(name="timeout_ms", schema={"type": "integer", "minimum": 0})
        return [
            Tool(
                name="watch",
                description="Wait for the relay.",
                parameters=[timeout],
                read_only=True,
            ),
            Tool(name="switch", description="Switch the relay.", parameters=[on]),
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if tool_name == "watch":
            self.released.wait(arguments.get("timeout_ms", 1000) / 1000)
            return {"released": self.released.is_set()}
        time.sleep(self.seconds)
        self.switched.append(arguments["on"])
        return {"on": arguments["on"]}


def test_results_match_process_llm_response() -> None:
    thermostat = Thermostat()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("set_temperature", {"room": "kitchen", "celsius": 21.5}),
        ("set_temperature", {"room": "kitchen", "celsius": 99}),
        ("fail", {"kind": "tool_error"}),
        ("fail", {"kind": "crash"}),
        ("echo", {"text": "hi", "count": 2}),
    ]

    async def calls(client: Client) -> list[Any]:
        return [await client.call_tool(name, args) for name, args in cases]

    results = served(thermostat, calls)
    for (name, args), result in zip(cases, results, strict=True):
        expected = thermostat.process_llm_response(text_call(name, **args))
        assert result.is_error == expected.call_failed
        if expected.call_executed:
            assert result.structured_content == expected.tool_call_result
        else:
            assert expected.call_detail is not None
            code = expected.call_detail.split(":")[0]
            assert text_of(result).startswith(f"{code}: ")
            assert result.structured_content["error"]["code"] == code
            if code != "INTERNAL_ERROR":  # its reference number differs from call to call
                assert text_of(result).startswith(expected.call_detail)


def test_an_orchestrator_and_any_tool_driver_are_served() -> None:
    class Plain(MCSToolDriver):
        meta = DriverMeta(id="4b8e2c1d-7a3f-4e5b-8c9d-0e1f2a3b4c5d", name="Plain", version="1.0.0")

        def list_tools(self) -> list[Tool]:
            return [Tool(name="ping", description="Answer pong.", read_only=True)]

        def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
            return "pong"

    with CanDriver.from_dbc(DEMO) as car:
        bench = Orchestrator({"car": car, "home": Thermostat()})

        async def look(client: Client) -> tuple[set[str], set[str], Any]:
            tools = {t.name for t in (await client.list_tools()).tools}
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            spec = await client.read_resource("hwbridge://spec/car/can")
            return tools, uris, spec

        tools, uris, spec = served(bench, look)
        assert {"decode_frame", "set_temperature", "echo"} <= tools
        assert {"hwbridge://spec/car/can", "hwbridge://health"} <= uris
        assert spec.contents[0].text.startswith('VERSION "1.0"')

    async def ping(client: Client) -> Any:
        return await client.call_tool("ping", {})

    assert served(Plain(), ping).structured_content == {"result": "pong"}


def test_a_subset_of_tools_is_offered_and_the_rest_is_unknown() -> None:
    with CanDriver.from_dbc(DEMO) as car:

        async def look(client: Client) -> tuple[list[str], Any]:
            tools = [t.name for t in (await client.list_tools()).tools]
            hidden = await client.call_tool("read_signals", {"signals": ["EngineSpeed"]})
            return tools, hidden

        tools, hidden = served(car, look, tools=["list_messages", "decode_frame"])
        assert tools == ["list_messages", "decode_frame"]
        assert hidden.is_error and text_of(hidden).startswith("UNKNOWN_TOOL: ")
        assert "list_messages, decode_frame" in text_of(hidden)
        with pytest.raises(ValueError, match="read_everything"):
            build_server(car, tools=["read_everything"])


def test_progress_is_reported_while_a_call_runs() -> None:
    relay = Relay()

    async def watch(client: Client) -> tuple[Any, list[tuple[float, float | None]]]:
        reports: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total))

        result = await client.call_tool("watch", {"timeout_ms": 300}, progress_callback=on_progress)
        return result, reports

    result, progress = served(relay, watch, progress_interval_s=0.05)
    assert result.structured_content == {"released": False}
    assert len(progress) >= 3
    assert all(total == 0.3 for _, total in progress)
    values = [value for value, _ in progress]
    assert values == sorted(set(values)) and values[-1] <= 0.3  # increasing, never past


def test_a_cancelled_send_finishes_and_its_outcome_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    relay = Relay(seconds=0.4)
    said = "cancelled switch after it started; it executed"

    async def cancel_switch(client: Client) -> float:
        with anyio.move_on_after(0.1):
            await client.call_tool("switch", {"on": True})
        cancelled_at = time.monotonic()
        with anyio.fail_after(relay.seconds + BUSY_MARGIN_S):
            while said not in caplog.text:  # the switch, already under way, ends meanwhile
                await anyio.sleep(0.01)
        return cancelled_at

    with caplog.at_level(logging.WARNING, logger="hwbridge.mcp"):
        served(relay, cancel_switch)
    assert relay.switched == [True]  # it went out: never reported as not executed
    assert said in caplog.text


def test_a_cancelled_read_ends_at_once() -> None:
    relay = Relay()

    watch_ms = 20_000

    async def cancel_watch(client: Client) -> float:
        started = time.monotonic()
        with anyio.move_on_after(0.1):
            await client.call_tool("watch", {"timeout_ms": watch_ms})
        took = time.monotonic() - started
        assert (await client.call_tool("switch", {"on": False})).structured_content == {"on": False}
        return took

    assert served(relay, cancel_watch) < watch_ms / 1000 / 2  # at once, not when it ends
    relay.released.set()


def test_a_policy_refusal_is_an_error_with_the_policy_code() -> None:
    policy = SendPolicy(
        allow_messages=["ClimateCommand"], signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)}
    )
    with CanDriver.from_dbc(DEMO, bus="virtual:mcp-refusal", policy=policy) as car:

        async def send(client: Client) -> Any:
            return await client.call_tool("send_ClimateCommand", {"CabinSetpoint": 29})

        refused = served(car, send)
        assert refused.is_error
        assert text_of(refused).startswith("OUT_OF_RANGE: ")
        assert refused.structured_content["error"]["code"] == "OUT_OF_RANGE"


def test_a_token_needs_http() -> None:
    with pytest.raises(ValueError, match="HTTP"):
        serve(Thermostat(), token="secret")


def test_hostile_calls_are_refused_at_once_and_bounded() -> None:
    deep: dict[str, Any] = {}
    level = deep
    for _ in range(150):
        level["x"] = {}
        level = level["x"]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("x" * 1_000_000, {}, "UNKNOWN_TOOL: "),
        ("decode_frame", {"id": deep}, "INVALID_ARGUMENTS: "),
        ("search_signals", {"query": "a" * 1_000_000}, "INVALID_ARGUMENTS: "),
    ]
    with CanDriver.from_dbc(DEMO) as car:

        async def hostile(client: Client) -> list[tuple[float, Any]]:
            results = []
            for name, arguments, _ in cases:
                started = time.monotonic()
                result = await client.call_tool(name, arguments)
                results.append((time.monotonic() - started, result))
            return results

        for (_, _, code), (took, result) in zip(cases, served(car, hostile), strict=True):
            assert result.is_error and text_of(result).startswith(code)
            assert len(text_of(result)) < 2_000 and took < BUSY_MARGIN_S  # at once


def test_cancelled_reads_cannot_pile_up_without_end() -> None:
    relay = Relay(seconds=0.0)

    async def cancel_and_repeat(client: Client) -> tuple[str, Any, Any]:
        for _ in range(3):  # each cancelled read still waits out its 600 ms
            with anyio.move_on_after(0.05):
                await client.call_tool("watch", {"timeout_ms": 600})
        busy = await client.call_tool("switch", {"on": True})
        with anyio.fail_after(0.6 + BUSY_MARGIN_S):  # the abandoned reads end: room again
            while (again := await client.call_tool("switch", {"on": True})).is_error:
                assert text_of(again).startswith("BUSY"), text_of(again)
                await anyio.sleep(0.02)
        return text_of(busy), busy.is_error, again.structured_content

    busy, failed, again = served(relay, cancel_and_repeat, max_running=2)
    assert failed and busy.startswith("BUSY")
    assert again == {"on": True} and relay.switched == [True]  # the refused one never ran


def test_what_changes_state_is_logged_whoever_reads_the_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def switch(client: Client) -> Any:
        return await client.call_tool("switch", {"on": True})

    with caplog.at_level(logging.INFO, logger="hwbridge.mcp"):
        served(Relay(seconds=0.0), switch)
    assert "switch executed" in caplog.text  # an HTTP client that hung up leaves this behind


def test_an_empty_token_never_means_no_token() -> None:
    for empty in ("", "   "):
        with pytest.raises(ValueError, match="bearer token is empty"):
            serve(Relay(), http="127.0.0.1:0", token=empty)


class Chatty(HybridDriver):
    """A driver that hears its call's own progress (as McpToolDriver hears a bench's): 100
    reports of 100 kB each, 5 ms apart."""

    meta = DriverMeta(id="6b1e9d2c-4a7f-4c3b-8e05-2f9d1a6c7b84", name="Chatty", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [Tool(name="spin", description="Report progress, then answer.", read_only=True)]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        sink = PROGRESS.get()
        assert sink is not None
        sink.claim()
        for n in range(1, 101):
            sink.report(float(n), 100.0, "P" * 100_000)
            time.sleep(0.005)
        return {"reports": 100}


def test_a_driver_s_own_progress_is_passed_on_cut_and_paced() -> None:
    """`hwbridge mcp --remote` passed on 1 MB progress messages at 18 a second (issue 33,
    review 2 finding 8)."""

    async def spin(client: Client) -> list[tuple[float, str]]:
        said: list[tuple[float, str]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            said.append((progress, message or ""))

        await client.call_tool("spin", {}, progress_callback=on_progress)
        return said

    started = time.monotonic()
    said = served(Chatty(), spin, progress_interval_s=0.2)
    took = time.monotonic() - started
    assert said and all(len(message) <= PROGRESS_MESSAGE_CHARS for _, message in said)
    assert len(said) <= took / 0.2 + 2, (len(said), took)  # one per interval, not 100
    assert said[-1][0] == 100.0  # the latest is passed on before the result
