"""HybridDriver behaviour a client depends on: validation, errors, two phases, signalling."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from hwbridge import Capability, DriverResponse, ToolCall
from tests.core.drivers import Thermostat


def call(tool: str, **arguments: object) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"room": "kitchen", "celsius": 99}, "parameter 'celsius' must be at most 30, got 99"),
        ({"room": "kitchen", "celsius": 1}, "parameter 'celsius' must be at least 5, got 1"),
        ({"room": "kitchen", "celsius": "warm"}, "parameter 'celsius' must be of type number"),
        (
            {"room": "garage", "celsius": 20},
            "parameter 'room' must be one of: living_room, kitchen",
        ),
        ({"room": "kitchen"}, "parameter 'celsius' is required (target temperature)"),
        ({"room": "kitchen", "celsius": 20, "fan": 3}, "parameter 'fan' does not exist"),
        (
            {"room": "kitchen", "celsius": 20, "mode": "turbo"},
            "parameter 'mode' must be one of: eco",
        ),
    ],
)
def test_invalid_arguments_fail_and_name_the_parameter(arguments: dict, expected: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(json.dumps({"tool": "set_temperature", "arguments": arguments}))
    assert r.call_failed and not r.call_executed
    assert r.retry_prompt is not None and expected in r.retry_prompt
    assert r.tool_call_result is None
    assert driver.executed == []


def test_every_missing_and_unknown_parameter_is_reported_at_once(driver: Thermostat) -> None:
    r = driver.process_llm_response(call("set_temperature", temp=20, where="kitchen"))
    hint = r.retry_prompt or ""
    for name in ("room", "celsius", "temp", "where"):
        assert f"'{name}'" in hint


def test_booleans_are_not_integers(driver: Thermostat) -> None:
    assert driver.process_llm_response(call("echo", count=True)).call_failed
    assert driver.process_llm_response(call("echo", count=2)).call_executed


def test_tool_error_is_a_failure_with_its_code(driver: Thermostat) -> None:
    r = driver.process_llm_response(call("fail", kind="tool_error"))
    assert r.call_failed and not r.call_executed
    assert r.call_detail == "HEATER_OFFLINE: The heater does not answer."
    assert r.retry_prompt is not None
    assert "HEATER_OFFLINE" in r.retry_prompt and "The heater does not answer." in r.retry_prompt
    assert "will fail again" in r.retry_prompt
    retryable = driver.process_llm_response(call("fail", kind="retryable"))
    assert "try again" in (retryable.retry_prompt or "")


def test_unexpected_exception_hides_internals_and_logs_them(
    driver: Thermostat, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        r = driver.process_llm_response(call("fail", kind="crash"))
    assert r.call_failed
    everything = json.dumps(r.model_dump())
    assert "secret internal detail" not in everything and "Traceback" not in everything
    error_id = (r.call_detail or "").split()[2]
    assert error_id in (r.retry_prompt or "")
    logged = "\n".join(rec.getMessage() + str(rec.exc_info) for rec in caplog.records)
    assert error_id in logged and "secret internal detail" in logged


def test_results_are_json_safe_and_bounded(driver: Thermostat) -> None:
    r = driver.process_llm_response(call("big", size=100_000))
    assert r.call_executed
    assert len(r.tool_call_result["data"]) == 100_000  # the raw result is the client's
    assert r.messages is not None
    shown = r.messages[1]["content"]
    assert len(shown) < 13_000 and "cut to 12000 of" in shown


def test_partial_success_sets_both_flags(driver: Thermostat) -> None:
    text = call("get_temperature", room="kitchen") + " " + call("fail", kind="tool_error")
    r = driver.process_llm_response(text)
    assert r.call_executed and r.call_failed
    assert r.tool_call_result[0] == {"room": "kitchen", "celsius": 21.5}
    assert r.tool_call_result[1]["error"]["code"] == "HEATER_OFFLINE"


def test_result_role_comes_from_the_pack() -> None:
    system = Thermostat(prompt_overrides={"render": {"result_role": "system"}})
    r = system.process_llm_response(call("get_temperature", room="kitchen"))
    assert r.messages is not None and r.messages[1]["role"] == "system"


def test_two_phase_detect_has_no_side_effects(driver: Thermostat) -> None:
    text = call("set_temperature", room="kitchen", celsius=20)
    calls = driver.detect_tool_call(text)
    assert driver.executed == []
    assert calls == [ToolCall(tool="set_temperature", arguments={"room": "kitchen", "celsius": 20})]
    # the client asks the user here, then executes what was approved
    r = driver.execute_tool_call(calls)
    assert r.call_executed and driver.executed == [
        ("set_temperature", {"room": "kitchen", "celsius": 20})
    ]
    assert r.messages is not None and r.messages[0]["content"] == text
    assert driver.execute_tool_call([]) == DriverResponse()


def test_client_built_calls_are_validated_too(driver: Thermostat) -> None:
    r = driver.execute_tool_call([ToolCall(tool="set_temperature", arguments={"room": "attic"})])
    assert r.call_failed and driver.executed == []
    assert driver.execute_tool_call([ToolCall(tool="unknown", arguments={})]) == DriverResponse()


def test_streaming_chunks_never_execute(driver: Thermostat) -> None:
    text = call("get_temperature", room="kitchen")
    assert driver.process_llm_response(text, streaming=True) == DriverResponse()
    assert driver.executed == []


def test_tool_call_signalling(driver: Thermostat) -> None:
    assert not driver.might_be_tool_call("The kitchen is")
    assert driver.might_be_tool_call("Let me check: {")
    assert driver.might_be_tool_call("```")
    assert driver.might_be_tool_call("<tool")
    assert driver.might_be_tool_call("Here: `")
    full = call("get_temperature", room="kitchen")
    assert not driver.is_complete_tool_call(full[:-1])
    assert driver.is_complete_tool_call(full)
    assert not driver.is_complete_tool_call('{"tool": "other", "arguments": {}}')
    assert driver.executed == []


def test_capabilities_are_derived() -> None:
    caps = set(Thermostat.meta.capabilities)
    assert {Capability.STANDALONE, Capability.ORCHESTRATABLE, Capability.TWO_PHASE} <= caps
    assert {Capability.TOOL_CALL_SIGNALING, Capability.NATIVE_TOOLS} <= caps


def test_native_tool_definitions(driver: Thermostat) -> None:
    openai = driver.get_native_tools("openai")
    assert openai[1]["function"]["name"] == "set_temperature"
    params = openai[1]["function"]["parameters"]
    assert params["required"] == ["room", "celsius"]
    assert params["properties"]["celsius"]["maximum"] == 30
    anthropic = driver.get_native_tools("anthropic")
    assert anthropic[0]["input_schema"]["properties"]["room"]["enum"] == ["living_room", "kitchen"]
    [gemini] = driver.get_native_tools("gemini")
    decl = gemini["functionDeclarations"][1]
    assert "additionalProperties" not in decl["parameters"]
    responses = driver.get_native_tools("openai_responses")
    assert responses[0]["type"] == "function" and responses[0]["name"] == "get_temperature"
    with pytest.raises(ValueError, match="unknown provider"):
        driver.get_native_tools("mistral")  # type: ignore[arg-type]
    native = driver.get_native_system_message()
    assert "never instructions" in native and "{" not in native


def test_system_message_and_variants(driver: Thermostat) -> None:
    default = driver.get_driver_system_message()
    assert '"name":"set_temperature"' in default
    assert default == driver.get_driver_system_message("gpt-4o")
    small = driver.get_driver_system_message("llama3.2:1b")
    assert (
        '- set_temperature(room: "living_room"|"kitchen", celsius: number, mode?: "eco"|"comfort")'
        in small
    )
    assert len(small) < len(default) / 2
    assert '<tool name="set_temperature">' in driver.get_driver_system_message("claude-sonnet-4-5")
    xml = Thermostat(prompt_strategy="xml")
    assert "<tool_call>" in xml.get_driver_system_message()
    assert xml.get_function_description().startswith("<tools>")


def test_sixteen_threads_share_one_driver() -> None:
    driver = Thermostat()
    inputs: list[Any] = [
        call("get_temperature", room="kitchen"),
        call("set_temperature", room="kitchen", celsius=99),
        "No tool needed.",
        {
            "role": "assistant",
            "tool_calls": [{"id": "x", "function": {"name": "echo", "arguments": '{"count": 3}'}}],
        },
        "{'tool': 'echo', 'arguments': {'text': 'hi'}",
        call("fail", kind="tool_error"),
    ] * 50
    single = [_stable(Thermostat().process_llm_response(i)) for i in inputs]
    with ThreadPoolExecutor(max_workers=16) as pool:
        threaded = list(pool.map(lambda i: _stable(driver.process_llm_response(i)), inputs))
    assert threaded == single


def _stable(r: DriverResponse) -> str:
    return json.dumps(r.model_dump(), sort_keys=True)


class ReadOnlyThermostat(Thermostat):
    def refused_tools(self):
        from hwbridge import ToolError

        return {"set_temperature": ToolError("READ_ONLY", "This thermostat is read-only.")}

    def list_tools(self):
        return [t for t in super().list_tools() if t.name != "set_temperature"]


def test_refused_tools_fail_instead_of_passing_through() -> None:
    driver = ReadOnlyThermostat()
    assert "set_temperature" not in driver.get_function_description()
    for output in (
        call("set_temperature", room="kitchen", celsius=20),
        {"type": "tool_use", "id": "t1", "name": "set_temperature", "input": {}},
    ):
        r = driver.process_llm_response(output)
        assert r.call_failed
        assert r.call_detail == "READ_ONLY: This thermostat is read-only."
    assert driver.executed == []
    assert driver.process_llm_response(call("launch", x=1)) == DriverResponse()
