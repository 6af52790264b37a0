"""Every wire format an LLM or its SDK writes a call in is recognised and answered in kind."""

from __future__ import annotations

import json

import pytest

from tests.core.drivers import Thermostat

GET = {"room": "kitchen"}
GET_JSON = json.dumps(GET)
RESULT = '{"room":"kitchen","celsius":21.5}'  # compact JSON: fewer tokens


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}',
        'Let me check that for you. {"tool": "get_temperature", "arguments": {"room": "kitchen"}} One moment.',
        'Sure:\n```json\n{"tool": "get_temperature", "arguments": {"room": "kitchen"}}\n```',
        '<tool_call>{"name": "get_temperature", "arguments": {"room": "kitchen"}}</tool_call>',
        '{"name": "get_temperature", "arguments": "{\\"room\\": \\"kitchen\\"}"}',
        '{"function": {"name": "get_temperature", "arguments": {"room": "kitchen"}}}',
    ],
)
def test_text_calls_anywhere_in_prose(driver: Thermostat, text: str) -> None:
    r = driver.process_llm_response(text)
    assert r.call_executed and not r.call_failed
    assert r.tool_call_result == {"room": "kitchen", "celsius": 21.5}
    assert driver.executed == [("get_temperature", GET)]
    assistant, result = r.messages or []
    assert assistant == {"role": "assistant", "content": text}
    assert result["role"] == "user"
    assert result["content"].endswith(RESULT)


def test_two_objects_in_one_text_are_two_calls_in_order(driver: Thermostat) -> None:
    text = (
        'First {"tool": "get_temperature", "arguments": {"room": "kitchen"}} then '
        '{"tool": "set_temperature", "arguments": {"room": "kitchen", "celsius": 20}}'
    )
    calls = driver.detect_tool_call(text)
    assert [c.tool for c in calls] == ["get_temperature", "set_temperature"]
    r = driver.process_llm_response(text)
    assert [name for name, _ in driver.executed] == ["get_temperature", "set_temperature"]
    assert r.tool_call_result == [
        {"room": "kitchen", "celsius": 21.5},
        {"room": "kitchen", "setpoint": 20},
    ]


def test_nested_objects_are_not_extra_calls(driver: Thermostat) -> None:
    text = '{"tool": "echo", "arguments": {"text": "hi", "tags": ["a"]}}'
    assert len(driver.detect_tool_call(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        'The user record is {"name": "Alice", "age": 31}.',
        '{"tool": "launch_rocket", "arguments": {}}',
        "Plain answer: it is 21.5 degrees in the kitchen.",
        "Use braces like {this} in templates.",
        "",
    ],
)
def test_no_call_for_this_driver_passes_through(driver: Thermostat, text: str) -> None:
    r = driver.process_llm_response(text)
    assert r.model_dump() == {
        "tool_call_result": None,
        "call_executed": False,
        "call_failed": False,
        "call_detail": None,
        "retry_prompt": None,
        "messages": None,
    }
    assert driver.executed == []


@pytest.mark.parametrize(
    "payload",
    [
        {"tool": "get_temperature", "arguments": GET},
        {"tool": "get_temperature", "arguments": GET_JSON},
        {"name": "get_temperature", "arguments": GET},
    ],
)
def test_mcs_dict(driver: Thermostat, payload: dict) -> None:
    r = driver.process_llm_response(payload)
    assert r.call_executed
    assert driver.executed == [("get_temperature", GET)]
    assert r.messages and r.messages[0]["role"] == "assistant"


def openai_message(*calls: tuple[str, str, str], content: str | None = None) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ],
    }


def test_openai_parallel_tool_calls_all_run_in_order(driver: Thermostat) -> None:
    msg = openai_message(
        ("call_1", "get_temperature", GET_JSON),
        ("call_2", "set_temperature", '{"room": "kitchen", "celsius": 19}'),
    )
    r = driver.process_llm_response(msg)
    assert [n for n, _ in driver.executed] == ["get_temperature", "set_temperature"]
    assert r.messages is not None
    assistant, tool1, tool2 = r.messages
    assert assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert tool1 == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": RESULT,
    }
    assert tool2["tool_call_id"] == "call_2"


def test_openai_whole_completion_and_other_drivers_calls(driver: Thermostat) -> None:
    msg = openai_message(("call_a", "weather", "{}"), ("call_b", "get_temperature", GET_JSON))
    completion = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": msg}]}
    r = driver.process_llm_response(completion)
    assert r.call_executed
    assert r.messages is not None
    # only the call this driver answered is echoed, so every call in history has a result
    assert [c["id"] for c in r.messages[0]["tool_calls"]] == ["call_b"]
    assert [m.get("tool_call_id") for m in r.messages[1:]] == ["call_b"]


def test_openai_only_other_drivers_calls_pass_through(driver: Thermostat) -> None:
    r = driver.process_llm_response(openai_message(("c", "weather", "{}")))
    assert not r.call_executed and not r.call_failed and r.messages is None


def test_openai_legacy_function_call(driver: Thermostat) -> None:
    msg = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_temperature", "arguments": GET_JSON},
    }
    r = driver.process_llm_response(msg)
    assert r.call_executed
    assert r.messages is not None
    assert r.messages[1] == {
        "role": "function",
        "name": "get_temperature",
        "content": RESULT,
    }


def test_openai_responses_api(driver: Thermostat) -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_9",
        "name": "get_temperature",
        "arguments": GET_JSON,
    }
    response = {"object": "response", "output": [{"type": "reasoning", "id": "rs_1"}, item]}
    for payload in (item, response):
        r = Thermostat().process_llm_response(payload)
        assert r.call_executed
        assert r.messages is not None
        assert r.messages[-1] == {
            "type": "function_call_output",
            "call_id": "call_9",
            "output": RESULT,
        }
        assert item in r.messages


def test_anthropic_message_and_bare_block(driver: Thermostat) -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_temperature", "input": GET}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "Checking."}, block],
        "stop_reason": "tool_use",
    }
    for payload in (message, block):
        r = Thermostat().process_llm_response(payload)
        assert r.call_executed
        assert r.messages is not None
        assistant, user = r.messages
        assert assistant["role"] == "assistant" and block in assistant["content"]
        assert user == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": RESULT,
                }
            ],
        }


def test_anthropic_error_result_is_flagged(driver: Thermostat) -> None:
    block = {"type": "tool_use", "id": "toolu_2", "name": "fail", "input": {"kind": "tool_error"}}
    r = driver.process_llm_response({"role": "assistant", "content": [block]})
    assert r.call_failed
    assert r.messages is not None
    result = r.messages[1]["content"][0]
    assert result["is_error"] is True and "HEATER_OFFLINE" in result["content"]


def test_gemini_parts_response_and_snake_case(driver: Thermostat) -> None:
    part = {"functionCall": {"name": "get_temperature", "args": GET}}
    content = {"role": "model", "parts": [part]}
    whole = {"candidates": [{"content": content, "finishReason": "STOP"}]}
    snake = {"function_call": {"name": "get_temperature", "args": GET}}
    for payload in (content, whole, part, snake):
        r = Thermostat().process_llm_response(payload)
        assert r.call_executed, payload
        assert r.messages is not None
        model, user = r.messages
        assert model["role"] == "model"
        assert user == {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_temperature",
                        "response": {"result": {"room": "kitchen", "celsius": 21.5}},
                    }
                }
            ],
        }


def test_ollama_arguments_as_dict(driver: Thermostat) -> None:
    response = {
        "model": "llama3.1",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_temperature", "arguments": GET}}],
        },
        "done": True,
    }
    r = driver.process_llm_response(response)
    assert r.call_executed
    assert r.messages is not None
    assert r.messages[1] == {
        "role": "tool",
        "content": RESULT,
        "tool_name": "get_temperature",
    }


def test_assistant_message_with_text_call_when_no_native_tools(driver: Thermostat) -> None:
    msg = {
        "role": "assistant",
        "content": '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}',
    }
    r = driver.process_llm_response(msg)
    assert r.call_executed
    assert r.messages is not None and r.messages[0]["content"] == msg["content"]


def test_sdk_objects_with_model_dump_are_accepted(driver: Thermostat) -> None:
    class SdkMessage:  # what openai/anthropic SDK objects offer
        def model_dump(self) -> dict:
            return openai_message(("call_1", "get_temperature", GET_JSON))

    assert driver.process_llm_response(SdkMessage()).call_executed  # type: ignore[arg-type]


def test_detected_calls_carry_dialect_and_ids(driver: Thermostat) -> None:
    [call] = driver.detect_tool_call(openai_message(("call_7", "get_temperature", GET_JSON)))
    assert (call.tool, call.arguments, call.call_id, call.dialect) == (
        "get_temperature",
        GET,
        "call_7",
        "openai",
    )
    [call] = driver.detect_tool_call(
        '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    )
    assert call.dialect == "text" and call.call_id is None
