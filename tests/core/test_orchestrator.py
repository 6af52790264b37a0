"""Orchestrator (spec section 4): many drivers as one, names that never change under a
conversation, pass-through of unknown tools, one prompt budget, one validation."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from hwbridge import (
    CanDriver,
    DriverBinding,
    DriverMeta,
    HybridDriver,
    Orchestrator,
    Tool,
    ToolError,
    ToolParameter,
)
from hwbridge.core.prompts import estimate_tokens
from tests.core.drivers import Thermostat

DEMO = "dbc/demo_vehicle.dbc"


def call(driver: Any, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


class Lights(HybridDriver):
    """A second small driver with one tool name in common with Thermostat ("echo")."""

    meta = DriverMeta(
        id="0c2f5b8e-4a61-4d3e-9b7a-1e5c8d2f6a90",
        name="Lights",
        version="1.0.0",
        bindings=[DriverBinding(capability="lights", adapter="memory", spec_format="Custom")],
    )

    def __init__(self, extra_tools: int = 0) -> None:
        super().__init__()
        self.extra_tools = extra_tools
        self.executed: list[tuple[str, dict[str, Any]]] = []

    def list_tools(self) -> list[Tool]:
        on = ToolParameter(name="on", required=True, schema={"type": "boolean"})
        text = ToolParameter(name="text", schema={"type": "string"})
        tools = [
            Tool(name="switch_lights", description="Switch the lights.", parameters=[on]),
            Tool(name="echo", description="Echo, the lights' way.", parameters=[text]),
        ]
        tools += [
            Tool(name=f"scene_{i}", description=f"Recall lighting scene number {i}.")
            for i in range(self.extra_tools)
        ]
        return tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.executed.append((tool_name, arguments))
        return {"lights": tool_name, **arguments}


def test_one_prompt_one_tool_list_and_each_call_reaches_its_driver() -> None:
    heat, lights = Thermostat(), Lights()
    orch = Orchestrator({"heat": heat, "lights": lights})
    names = [t.name for t in orch.list_tools()]
    assert "get_temperature" in names and "switch_lights" in names
    prompt = orch.get_driver_system_message()
    assert "get_temperature" in prompt and "switch_lights" in prompt
    assert call(orch, "switch_lights", on=True).tool_call_result == {
        "lights": "switch_lights",
        "on": True,
    }
    assert call(orch, "get_temperature", room="kitchen").call_executed
    assert heat.executed == [("get_temperature", {"room": "kitchen"})]
    assert lights.executed == [("switch_lights", {"on": True})]
    native = {t["function"]["name"] for t in orch.get_native_tools("openai")}
    assert native == set(names)
    calls = orch.detect_tool_call('{"tool": "switch_lights", "arguments": {"on": false}}')
    assert [c.tool for c in calls] == ["switch_lights"] and len(lights.executed) == 1
    assert orch.execute_tool_call(calls).call_executed


def test_unknown_tools_and_ordinary_json_pass_through() -> None:
    orch = Orchestrator([Thermostat(), Lights()])
    for output in (
        '{"tool": "open_window", "arguments": {}}',
        '{"name": "Alice", "age": 31}',
        "The kitchen is at 21.5 degC.",
    ):
        r = orch.process_llm_response(output)
        assert r.is_final_answer and r.messages is None and r.retry_prompt is None


def test_namespace_prefixes_only_the_later_colliding_tool_and_names_stay_put() -> None:
    orch = Orchestrator()
    orch.add_driver(Thermostat(), label="heat")
    orch.add_driver(Lights(), label="lights")
    names = {t.name for t in orch.list_tools()}
    assert "echo" in names and "lights__echo" in names
    assert call(orch, "lights__echo", text="hi").tool_call_result == {
        "lights": "echo",
        "text": "hi",
    }
    assert call(orch, "echo", text="hi").tool_call_result == {"text": "hi"}  # the thermostat's
    before = {t.name for t in orch.list_tools()}
    orch.add_driver(Thermostat(), label="upstairs")  # everything it has is taken: prefixed
    after = {t.name for t in orch.list_tools()}
    assert before <= after and "upstairs__get_temperature" in after
    orch.remove_driver("heat")
    remaining = {t.name for t in orch.list_tools()}
    assert "lights__echo" in remaining  # not renamed under a running conversation
    assert "get_temperature" not in remaining


def test_priority_keeps_the_first_and_reject_names_both_drivers() -> None:
    first = Orchestrator({"heat": Thermostat(), "lights": Lights()}, conflict="priority")
    assert [t.name for t in first.list_tools()].count("echo") == 1
    assert call(first, "echo", text="x").tool_call_result == {"text": "x"}
    strict = Orchestrator({"heat": Thermostat()}, conflict="reject")
    with pytest.raises(ValueError, match=r"'lights'.*'heat'"):
        strict.add_driver(Lights(), label="lights")
    assert "switch_lights" not in {t.name for t in strict.list_tools()}


def test_orchestrators_nest() -> None:
    inner = Orchestrator({"heat": Thermostat()})
    outer = Orchestrator({"home": inner, "lights": Lights()})
    assert call(outer, "get_temperature", room="kitchen").call_executed
    assert call(outer, "switch_lights", on=False).call_executed


def test_a_read_only_can_driver_still_refuses_sends_inside_an_orchestrator() -> None:
    with CanDriver.from_dbc(DEMO, bus=None) as can_driver:
        orch = Orchestrator({"car": can_driver, "heat": Thermostat()})
        r = call(orch, "send_message", message="ClimateCommand", signals={})
        assert r.call_failed and (r.call_detail or "").startswith("SEND_NOT_ALLOWED")
        r = call(orch, "decode_frame", id="0x100", data="00 00 00 00 00 00 00 00")
        assert r.call_executed


def test_a_large_database_does_not_push_the_other_drivers_out() -> None:
    with CanDriver.from_dbc(DEMO, bus=None) as can_driver:
        assert any(t.name.startswith("read_") for t in can_driver.list_tools())  # typed tools
        lights = Lights(extra_tools=40)
        orch = Orchestrator({"car": can_driver, "lights": lights})
        names = {t.name for t in orch.list_tools()}
        assert {t.name for t in lights.list_tools()} <= names  # every one of the others
        assert {t.name for t in can_driver.essential_tools()} <= names
        prompt = orch.get_driver_system_message()
        assert estimate_tokens(prompt) <= orch.prompt_strategy.token_budget
        assert not any(n.startswith("read_Engine") for n in names)  # typed tools trimmed


class Counting(Thermostat):
    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def check_call(self, tool_name: str, arguments: Any) -> None:
        self.checks += 1
        super().check_call(tool_name, arguments)


def test_a_call_is_validated_once_through_the_orchestrator() -> None:
    inner = Counting()
    orch = Orchestrator({"heat": inner})
    assert call(orch, "get_temperature", room="kitchen").call_executed
    assert inner.checks == 0
    bad = call(orch, "get_temperature", room="garage")
    assert bad.call_failed and "living_room" in (bad.retry_prompt or "")
    with pytest.raises(ToolError, match="INVALID_ARGUMENTS"):
        orch.execute_tool("get_temperature", {"room": "garage"})
    assert orch.execute_tool("get_temperature", {"room": "kitchen"})["celsius"] == 21.5
    assert inner.executed == [("get_temperature", {"room": "kitchen"})] * 2


@pytest.mark.slow
def test_drivers_come_and_go_while_calls_run() -> None:
    orch = Orchestrator({"heat": Thermostat()})
    errors: list[BaseException] = []
    stop = threading.Event()

    def caller() -> None:
        while not stop.is_set():
            try:
                r = call(orch, "get_temperature", room="kitchen")
                assert r.call_executed or r.call_failed or r.is_final_answer
            except BaseException as exc:  # pragma: no cover - the test reports it
                errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for t in threads:
        t.start()
    for i in range(30):
        orch.add_driver(Lights(), label=f"l{i}")
        orch.remove_driver(f"l{i}")
    stop.set()
    for t in threads:
        t.join()
    assert errors == []


def test_meta_lists_the_bindings_of_the_drivers_it_holds() -> None:
    orch = Orchestrator({"heat": Thermostat(), "lights": Lights()})
    capabilities = [b.capability for b in orch.meta.bindings]
    assert capabilities == ["thermostat", "lights"]
    assert "multi_connection" not in orch.meta.capabilities
    assert {"standalone", "orchestratable", "two_phase"} <= set(orch.meta.capabilities)
