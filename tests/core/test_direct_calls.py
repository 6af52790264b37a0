"""execute_tool validates when called directly (spec section 4.2), as orchestrators and
decorators call it, with the message process_llm_response would give, and without a second
validation on process_llm_response's own path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hwbridge import CanDriver, ToolError
from tests.core.drivers import Thermostat


class Counting(Thermostat):
    """Counts the direct-call checks."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def check_call(self, tool_name: str, arguments: Any) -> None:
        self.checks += 1
        super().check_call(tool_name, arguments)


class Wrapping(Thermostat):
    """Overrides execute_tool and calls super(), the way users extend a driver."""

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return {"wrapped": super().execute_tool(tool_name, arguments)}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("set_temperature", {"room": "kitchen"}),
        ("set_temperature", {"room": "kitchen", "celsius": 99}),
        ("get_temperature", {"room": "garage"}),
        ("get_temperature", {"room": "kitchen", "floor": 2}),
    ],
)
def test_a_direct_call_fails_with_the_message_the_llm_would_get(
    tool: str, arguments: dict[str, Any]
) -> None:
    driver = Thermostat()
    with pytest.raises(ToolError) as caught:
        driver.execute_tool(tool, arguments)
    assert caught.value.code == "INVALID_ARGUMENTS"
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert caught.value.message == r.retry_prompt
    assert driver.executed == []


def test_unknown_tools_and_non_objects_are_refused() -> None:
    driver = Thermostat()
    with pytest.raises(ToolError, match="UNKNOWN_TOOL"):
        driver.execute_tool("open_window", {})
    with pytest.raises(ToolError, match="INVALID_ARGUMENTS"):
        driver.execute_tool("get_temperature", "kitchen")  # type: ignore[arg-type]
    assert driver.executed == []


def test_a_valid_direct_call_runs_and_process_llm_response_checks_once() -> None:
    driver = Counting()
    assert driver.execute_tool("get_temperature", {"room": "kitchen"}) == {
        "room": "kitchen",
        "celsius": 21.5,
    }
    assert driver.checks == 1
    r = driver.process_llm_response('{"tool": "get_temperature", "arguments": {"room": "kitchen"}}')
    assert r.call_executed
    assert driver.checks == 1  # validated once, by the driver's own path
    r = driver.process_llm_response('{"tool": "get_temperature", "arguments": {"room": 1}}')
    assert r.call_failed and driver.checks == 1


def test_an_overriding_subclass_is_validated_too() -> None:
    driver = Wrapping()
    assert driver.process_llm_response(
        '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    ).tool_call_result == {"wrapped": {"room": "kitchen", "celsius": 21.5}}
    with pytest.raises(ToolError, match="INVALID_ARGUMENTS"):
        driver.execute_tool("get_temperature", {"room": "attic"})
    assert len(driver.executed) == 1


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("decode_frame", {"id": "0x100"}, "parameter 'data' is required"),
        ("list_messages", {"filter": 5}, "'filter' must be of type string"),
        ("read_signals", {"signals": "EngineSpeed"}, "'signals' must be of type array"),
        ("send_message", {"message": "ClimateCommand"}, "read-only"),
    ],
)
def test_can_driver_direct_calls_are_validated(
    tool: str, arguments: dict[str, Any], says: str
) -> None:
    with (
        CanDriver.from_dbc("dbc/demo_vehicle.dbc", bus=None) as driver,
        pytest.raises(ToolError) as caught,
    ):
        driver.execute_tool(tool, arguments)
    assert says in caught.value.message
