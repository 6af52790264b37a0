"""Hostile LLM output: bounded work, one bound on calls, honest outcomes, bounded hints.

Each test here reproduces a finding of the adversarial review (issue 7) that failed before
the fix: quadratic parsing, calls dropped silently past 256, a deep argument that turned a
call that ran into "not executed", retry prompts a megabyte long, interpreter messages in
the LLM's hints, and failures whose `call_detail` carried no code.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hwbridge import DriverResponse, PromptStrategy, ToolError
from tests.core.drivers import Thermostat

MB = 1_000_000
SET = '{"tool": "set_temperature", "arguments": {"room": "kitchen", "celsius": 21}}'


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def _openai(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ],
    }


def _answered_ids(r: DriverResponse) -> list[str]:
    assert r.messages is not None
    return [m["tool_call_id"] for m in r.messages if m.get("role") == "tool"]


# -- bounded time: every shape from the review, at a megabyte ---------------------------------

HOSTILE_SHAPES = {
    "truncated call, then spaces": '{"tool": "get_temperature", "arguments": {"room": "x"'
    + " " * MB,
    "truncated call, then newlines": '{"tool": "get_temperature", "arguments": {"room": "x"'
    + "\n" * MB,
    "open fence, then spaces": '```json\n{"tool": "get_temperature", "arguments": {' + " " * MB,
    "tag openings": "<tool_call " * (MB // 11),
    "named spots under braces": ("{" * 64 + '"tool": "get_temperature", ') * (MB // 90),
    "a name per brace": '{"tool": "get_temperature" ' * (MB // 28),
    "unterminated array under objects": '{"a":' * 300 + "[" + "1," * (MB // 2),
    "open braces": "{" * MB,
    "open brackets in a call": '{"tool": "get_temperature", "arguments": ' + "[" * MB,
    "escaped quotes": '{"tool": "get_temperature", "arguments": {"room": "' + '\\"' * (MB // 2),
    "closed objects then a broken call": '{"x": 1} ' * (MB // 9) + '{"tool": "get_temperature"',
}


@pytest.mark.slow
@pytest.mark.timeout(30)  # a hang detector: quadratic code took hours on these at 1 MB
@pytest.mark.parametrize("shape", sorted(HOSTILE_SHAPES))
def test_megabyte_of_hostile_text_is_answered(shape: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(HOSTILE_SHAPES[shape])
    assert isinstance(r, DriverResponse)
    assert not r.call_executed
    assert driver.executed == []
    if r.retry_prompt is not None:
        assert len(r.retry_prompt) < 2_000


def test_a_valid_call_after_a_megabyte_of_braces_still_runs() -> None:
    driver = Thermostat()
    r = driver.process_llm_response("{" * MB + " " + SET)
    assert r.call_executed
    assert driver.executed == [("set_temperature", {"room": "kitchen", "celsius": 21})]


# -- one bound on the number of calls, and it is said --------------------------------------


@pytest.mark.parametrize("quote", ['"', "'"])
def test_calls_beyond_the_limit_are_reported_not_dropped(quote: str) -> None:
    driver = Thermostat()
    limit = driver.prompt_strategy.parsing.max_calls
    call = SET.replace('"', quote)
    r = driver.process_llm_response("\n".join([call] * (limit + 8)))
    assert len(driver.executed) == limit  # the same bound for JSON and for healed calls
    assert r.call_executed and r.call_failed
    assert r.call_detail is not None and r.call_detail.startswith("TOO_MANY_CALLS")
    assert r.retry_prompt is not None and "8 call(s)" in r.retry_prompt
    assert r.messages is not None and "8 call(s)" in r.messages[-1]["content"]


def test_every_native_call_id_is_answered_beyond_the_limit() -> None:
    driver = Thermostat()
    limit = driver.prompt_strategy.parsing.max_calls
    calls = [(f"c{i}", "get_temperature", '{"room": "kitchen"}') for i in range(limit + 5)]
    r = driver.process_llm_response(_openai(*calls))
    assert len(driver.executed) == limit
    assert _answered_ids(r) == [cid for cid, _, _ in calls]
    assert r.retry_prompt is not None and r.retry_prompt.count("not executed") == 1


def test_the_two_phase_api_applies_the_same_bound() -> None:
    driver = Thermostat()
    limit = driver.prompt_strategy.parsing.max_calls
    calls = driver.detect_tool_call("\n".join([SET] * (limit + 1)))
    assert len(calls) == limit + 1  # detection reports everything ...
    r = driver.execute_tool_call(calls)
    assert len(driver.executed) == limit  # ... execution runs at most the limit
    assert r.call_detail is not None and "TOO_MANY_CALLS" in r.call_detail


# -- honest outcomes: what ran is reported as run -------------------------------------------


@pytest.mark.parametrize("levels", [600, 1_000, 5_000])
def test_a_deep_argument_fails_alone_and_the_call_that_ran_is_reported(levels: int) -> None:
    driver = Thermostat()
    deep = '{"text": ' + '{"a": ' * levels + "1" + "}" * levels + "}"
    r = driver.process_llm_response(
        _openai(
            ("c1", "set_temperature", '{"room": "kitchen", "celsius": 21}'),
            ("c2", "echo", deep),
        )
    )
    assert driver.executed == [("set_temperature", {"room": "kitchen", "celsius": 21})]
    assert r.call_executed and r.call_failed
    assert r.call_detail is not None and "INVALID_ARGUMENTS" in r.call_detail
    assert _answered_ids(r) == ["c1", "c2"]
    json.dumps(r.messages)  # the messages can be sent on as they are


def test_deep_arguments_given_as_a_dict_fail_before_running() -> None:
    driver = Thermostat()
    block = {"type": "tool_use", "id": "t1", "name": "echo", "input": {"text": _deep(3_000)}}
    r = driver.process_llm_response({"role": "assistant", "content": [block]})
    assert r.call_failed and not r.call_executed
    assert driver.executed == []
    assert r.retry_prompt is not None and "nest" in r.retry_prompt


class _Unwritable(Thermostat):
    """A tool whose side effect happens, then returns something no JSON writer can hold."""

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        super().execute_tool(tool_name, arguments)
        return _deep(5_000)


def test_a_result_that_cannot_be_written_does_not_unrun_the_call() -> None:
    driver = _Unwritable()
    r = driver.process_llm_response(_openai(("c1", "get_temperature", '{"room": "kitchen"}')))
    assert r.call_executed and not r.call_failed
    assert driver.executed
    assert _answered_ids(r) == ["c1"]
    assert "ran" in r.messages[-1]["content"]  # type: ignore[index]


# -- bounded, plain hints with a code -------------------------------------------------------


class _Quoting(Thermostat):
    """Quotes the LLM's input in its error, as a tool that says 'unknown name X' does."""

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        raise ToolError("UNKNOWN_NAME", f"there is no room called {arguments.get('text')!r}")


def test_a_megabyte_argument_gives_a_short_retry_prompt() -> None:
    r = _Quoting().process_llm_response(
        json.dumps({"tool": "echo", "arguments": {"text": "x" * MB}})
    )
    assert r.call_failed
    assert r.retry_prompt is not None and len(r.retry_prompt) < 2_000
    assert r.call_detail is not None and r.call_detail.startswith("UNKNOWN_NAME: ")
    assert len(r.call_detail) < 2_000


def test_a_megabyte_parameter_name_gives_a_short_retry_prompt() -> None:
    args = {"y" * MB: 1, "room": "kitchen"}
    r = Thermostat().process_llm_response(
        json.dumps({"tool": "get_temperature", "arguments": args})
    )
    assert r.call_failed
    assert r.retry_prompt is not None and len(r.retry_prompt) < 2_000


@pytest.mark.parametrize(
    "output",
    [
        '{"tool": "echo", "arguments": {"count": ' + "9" * 5_000 + "}}",
        '{"tool": "echo", "arguments": {"count": ' + "9" * 5_000 + "}",  # broken: healed path
        "{'tool': 'echo', 'arguments': {'count': " + "9" * 5_000 + "}}",
        _openai(("c1", "echo", '{"count": ' + "9" * 5_000 + "}")),
    ],
)
def test_interpreter_messages_never_reach_the_llm(output: Any) -> None:
    r = Thermostat().process_llm_response(output)
    assert r.call_failed
    ours = [m for m in r.messages or [] if m.get("role") != "assistant"]  # not the echo
    said = json.dumps([r.retry_prompt, r.call_detail, ours, r.tool_call_result], default=str)
    assert "set_int_max_str_digits" not in said
    assert "Exceeds the limit" not in said
    assert len(said) < 2_000


@pytest.mark.parametrize(
    ("output", "code"),
    [
        (
            '{"tool": "set_temperature", "arguments": {"room": "kitchen", "celsius": 99}}',
            "INVALID_ARGUMENTS",
        ),
        (
            '{"tool": "set_temperature", "arguments": {"room": "kitchen", "celsius": }',
            "INVALID_CALL",
        ),
        ('{"tool": "fail", "arguments": {"kind": "crash"}}', "INTERNAL_ERROR"),
        ('{"tool": "fail", "arguments": {"kind": "tool_error"}}', "HEATER_OFFLINE"),
    ],
)
def test_every_failure_detail_starts_with_its_code(output: str, code: str) -> None:
    r = Thermostat().process_llm_response(output)
    assert r.call_failed
    assert r.call_detail is not None and r.call_detail.startswith(code + ": ")


def test_pack_limits_can_be_changed_but_not_removed() -> None:
    few = PromptStrategy.load("json", overrides={"parsing": {"max_calls": 2}})
    driver = Thermostat(prompt_strategy=few)
    r = driver.process_llm_response("\n".join([SET] * 3))
    assert len(driver.executed) == 2 and r.call_failed
    with pytest.raises(ValueError, match="max_calls"):
        PromptStrategy.load("json", overrides={"parsing": {"max_calls": 0}})


# -- holes found by the review of the first fixes ---------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "text",
    [
        "{x} " * (MB // 4),  # braces in prose or code that are not JSON
        "f'{name!r} {value:>8}' " * (MB // 24),
        "}{" * (MB // 2),
        "{'tool': 'get_temperature', 'arguments': {'room': 'kitchen'}}\n" * (MB // 64),
    ],
    ids=["prose", "f-strings", "close-open", "single-quoted calls"],
)
def test_non_json_braces_do_not_make_parsing_quadratic(text: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(text)
    assert len(driver.executed) <= driver.prompt_strategy.parsing.max_calls
    assert isinstance(r, DriverResponse)


def test_gemini_calls_beyond_the_limit_each_get_an_answer() -> None:
    driver = Thermostat()
    limit = driver.prompt_strategy.parsing.max_calls
    parts = [
        {"functionCall": {"name": "get_temperature", "args": {"room": "kitchen"}}}
        for _ in range(limit + 8)
    ]
    r = driver.process_llm_response({"role": "model", "parts": parts})
    assert r.messages is not None
    echoed, answered = r.messages[0]["parts"], r.messages[1]["parts"]
    assert len(echoed) == len(answered) == limit + 8
    assert len(driver.executed) == limit


@pytest.mark.parametrize("dialect", ["anthropic", "gemini"])
def test_arguments_too_deep_are_not_echoed_back(dialect: str) -> None:
    deep = _deep(300)
    if dialect == "anthropic":
        block = {"type": "tool_use", "id": "t1", "name": "echo", "input": {"text": deep}}
        output: dict[str, Any] = {"role": "assistant", "content": [block]}
    else:
        output = {"role": "model", "parts": [{"functionCall": {"name": "echo", "args": deep}}]}
    r = Thermostat().process_llm_response(output)
    assert r.call_failed
    r.model_dump_json()  # every JSON writer takes the response
    json.dumps(r.messages)


def test_lone_surrogates_never_reach_the_response() -> None:
    lone = "caf\ud800e"
    outputs: list[Any] = [
        f'{{"tool": "echo", "arguments": {{"text": "{lone}"}}}}  ',
        {"role": "model", "parts": [{"text": lone}, {"functionCall": {
            "name": "echo", "args": {"text": "x", "note" + lone: 1}}}]},
        _openai(("c1", "echo", '{"text": "' + lone + '"}')),
    ]  # fmt: skip
    for output in outputs:
        r = Thermostat().process_llm_response(output)
        r.model_dump_json()


@pytest.mark.timeout(30)
def test_a_flood_of_invalid_items_is_explained_in_a_few_hints() -> None:
    text = json.dumps({"tool": "echo", "arguments": {"tags": [1] * 300_000}})
    r = Thermostat().process_llm_response(text)
    assert r.call_failed
    assert r.retry_prompt is not None and r.retry_prompt.count("must be") <= 6


def test_a_flood_of_bad_items_is_explained_from_each_list_s_first_items() -> None:
    """A million items each out of range: jsonschema-rs built an error for every one of
    them (13 s for the 7 MB, more than linear in it; six hints are shown). A failing call is
    now explained from each list's first items only, and still says what was wrong."""
    from hwbridge.core.models import Tool, ToolParameter
    from hwbridge.core.validation import ArgumentValidator

    ids = {"type": "array", "items": {"type": "integer", "maximum": 65535}, "maxItems": 64}
    tool = Tool(
        name="pick", description="pick ids", parameters=[ToolParameter(name="ids", schema=ids)]
    )
    checker = ArgumentValidator(tool)
    compiled = checker._validator
    shown: list[int] = []

    class Watched:
        def iter_errors(self, arguments: dict[str, Any]) -> Any:
            shown.append(len(arguments["ids"]))
            return compiled.iter_errors(arguments)

    checker._validator = Watched()  # type: ignore[assignment]
    hints = checker.problems({"ids": list(range(70_000, 1_070_000))}, PromptStrategy.default())
    assert shown and max(shown) <= 257
    text = " ".join(hints)
    assert "at most 64" in text and "at most 65535" in text
