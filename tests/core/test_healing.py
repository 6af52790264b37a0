"""Near-JSON is healed by the pack's rules; a broken call to our tool fails loudly, never silently."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbridge.core.healing import close_brackets, heal, python_literals
from hwbridge.core.prompts import PromptStrategy
from tests.core.drivers import Thermostat

KITCHEN = ("get_temperature", {"room": "kitchen"})


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('{"tool": "get_temperature", "arguments": {"room": "kitchen",},}', "trailing_commas"),
        ("{'tool': 'get_temperature', 'arguments': {'room': 'kitchen'}}", "python_literals"),
        ('{"tool": "get_temperature", "arguments": {"room": "kitchen"}', "close_brackets"),
        ('{"tool": "get_temperature", "arguments": {"room": "kitchen"', "close_brackets"),
        ('{"tool": "get_temperature", "arguments": {"room": "kitch', "close_brackets"),
        ("{“tool”: “get_temperature”, “arguments”: {“room”: “kitchen”}}", "smart_double_quotes"),
        (
            '```json\n{"tool": "get_temperature",\n // the room\n "arguments": {"room": "kitchen"}}\n```',
            "line_comments",
        ),
    ],
)
def test_healed_calls_execute(text: str, rule: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(text)
    if rule == "close_brackets" and text.endswith("kitch"):
        # a cut-off value heals into a different value, which validation then refuses
        assert r.call_failed and "room" in (r.retry_prompt or "")
        assert driver.executed == []
        return
    assert r.call_executed, r
    assert driver.executed == [KITCHEN]
    [call] = driver.detect_tool_call(text)
    assert call.healed


def test_python_literals_true_none() -> None:
    driver = Thermostat()
    text = "{'tool': 'echo', 'arguments': {'text': None, 'tags': ('a', 'b')}}"
    r = driver.process_llm_response(text)
    assert r.call_failed  # None is not a string: healed, then validated
    text = "{'tool': 'echo', 'arguments': {'text': 'it''s', 'count': 2, 'tags': ['a']}}"
    r = driver.process_llm_response(text)
    assert r.call_executed
    assert driver.executed[-1] == ("echo", {"text": "its", "count": 2, "tags": ["a"]})


@pytest.mark.parametrize("key", ["function", "tool_name", "name"])
def test_tool_key_aliases(key: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(
        f'{{"{key}": "get_temperature", "arguments": {{"room": "kitchen"}}}}'
    )
    assert r.call_executed and driver.executed == [KITCHEN]


@pytest.mark.parametrize("key", ["args", "parameters", "input"])
def test_argument_key_aliases(key: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(
        f'{{"tool": "get_temperature", "{key}": {{"room": "kitchen"}}}}'
    )
    assert r.call_executed and driver.executed == [KITCHEN]


def test_arguments_written_beside_the_tool_name() -> None:
    driver = Thermostat()
    r = driver.process_llm_response('{"tool": "get_temperature", "room": "kitchen"}')
    assert r.call_executed and driver.executed == [KITCHEN]


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "set_temperature", "arguments": {"room": "kitchen" "celsius": 20}}',
        'I will call {"tool": "get_temperature", "arguments": {"room": kitchen}}',
        "<tool_call>get_temperature please</tool_call>",
        '{"tool": "get_temperature", "arguments": ["kitchen"]}',
    ],
)
def test_unhealable_call_to_our_tool_fails_with_retry(text: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(text)
    assert r.call_failed and not r.call_executed
    assert r.retry_prompt and "temperature" in r.retry_prompt
    assert r.call_detail
    assert r.messages is not None and r.messages[-1]["content"] == r.retry_prompt
    assert driver.executed == []


def test_broken_openai_arguments_string_is_healed_or_reported() -> None:
    driver = Thermostat()
    healed = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "function": {"name": "get_temperature", "arguments": "{'room': 'kitchen'}"},
            }
        ],
    }
    assert driver.process_llm_response(healed).call_executed
    broken = {
        "role": "assistant",
        "tool_calls": [{"id": "c2", "function": {"name": "get_temperature", "arguments": "{room"}}],
    }
    r = driver.process_llm_response(broken)
    assert r.call_failed
    assert r.messages is not None and r.messages[1]["tool_call_id"] == "c2"


def test_healing_rules_come_from_the_pack() -> None:
    off = PromptStrategy.load(
        "json", overrides={"healing": {"trailing_commas": {"enabled": False}}}
    )
    text = '{"tool": "get_temperature", "arguments": {"room": "kitchen",}}'
    # without the rule, python_literals still reads it (Python allows trailing commas) ...
    assert Thermostat(prompt_strategy=off).process_llm_response(text).call_executed
    none = {
        "healing": {
            name: {"enabled": False} for name, _ in PromptStrategy.load("json").healing_rules
        }
    }
    bare = PromptStrategy.load("json", overrides=none)
    # ... and with no rules at all it is a failed call with a retry prompt
    assert Thermostat(prompt_strategy=bare).process_llm_response(text).call_failed
    custom = PromptStrategy.load(
        "json",
        overrides={"healing": {"semicolons": {"pattern": ";", "replacement": ","}}},
    )
    text = '{"tool": "set_temperature"; "arguments": {"room": "kitchen"; "celsius": 20}}'
    assert Thermostat(prompt_strategy=custom).process_llm_response(text).call_executed


def test_close_brackets_and_literals_units() -> None:
    assert close_brackets('{"a": [1, 2') == '{"a": [1, 2]}'
    assert close_brackets('{"a": "b') == '{"a": "b"}'
    assert close_brackets('{"a": 1,') == '{"a": 1}'
    assert (
        python_literals("{'a': True, 'b': None, 'c': (1,)}") == '{"a": true, "b": null, "c": [1]}'
    )
    assert python_literals("not python {") == "not python {"
    # backslashes keep their Python meaning (and raise no invalid-escape warning)
    assert json.loads(python_literals(r"{'re': '\d+\w', 'path': 'C:\\new'}")) == {
        "re": r"\d+\w",
        "path": "C:\\new",
    }


@given(st.text(max_size=200))
def test_heal_only_raises_value_error(text: str) -> None:
    rules = PromptStrategy.load("json").healing_rules
    try:
        heal(text, rules)
    except ValueError:
        pass
