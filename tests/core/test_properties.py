"""Whatever an LLM writes, process_llm_response returns a DriverResponse and runs only valid calls."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge import DriverResponse
from tests.core.drivers import Thermostat

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=15,
)
TOOL_NAMES = ["get_temperature", "set_temperature", "echo", "fail", "big", "other"]
KEYS = [
    "tool",
    "name",
    "function",
    "arguments",
    "args",
    "input",
    "tool_calls",
    "content",
    "role",
    "type",
    "parts",
    "functionCall",
    "id",
    "call_id",
    "output",
    "choices",
    "message",
]
json_like = st.recursive(
    json_values,
    lambda inner: (
        st.dictionaries(
            st.sampled_from(KEYS) | st.text(max_size=8),
            inner | st.sampled_from(TOOL_NAMES),
            max_size=5,
        )
        | st.lists(inner, max_size=3)
    ),
    max_leaves=20,
)
VALID_SET = '{"tool": "set_temperature", "arguments": {"room": "kitchen", "celsius": 21}}'


def check_invariants(driver: Thermostat, response: DriverResponse) -> None:
    assert isinstance(response, DriverResponse)
    json.dumps(response.model_dump())  # JSON-safe, always
    if not response.call_executed and not response.call_failed:
        assert response.messages is None
    if response.call_failed:
        assert response.retry_prompt
    # every executed call had arguments valid for its tool
    for name, args in driver.executed:
        if name == "set_temperature":
            assert args["room"] in ("living_room", "kitchen") and 5 <= args["celsius"] <= 30
        if name == "echo":
            assert set(args) <= {"text", "count", "tags"}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    driver = Thermostat()
    check_invariants(driver, driver.process_llm_response(text))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_like)
def test_arbitrary_json_like_input(value: Any) -> None:
    driver = Thermostat()
    payload = value if isinstance(value, dict) else {"content": value}
    check_invariants(driver, driver.process_llm_response(payload))
    check_invariants(driver, driver.process_llm_response(json.dumps(value)))


@given(st.integers(min_value=0, max_value=len(VALID_SET)), st.text(max_size=20))
def test_truncated_valid_calls(cut: int, tail: str) -> None:
    driver = Thermostat()
    r = driver.process_llm_response(VALID_SET[:cut] + tail)
    check_invariants(driver, r)
    if driver.executed:
        assert driver.executed == [("set_temperature", {"room": "kitchen", "celsius": 21})] or all(
            n == "set_temperature" for n, _ in driver.executed
        )


@given(
    st.dictionaries(
        st.sampled_from(["room", "celsius", "mode", "extra"]),
        json_values | st.sampled_from(["kitchen", "eco", 5, 30, 30.5, 4.9]),
        max_size=4,
    )
)
def test_never_executes_invalid_arguments(arguments: dict[str, Any]) -> None:
    driver = Thermostat()
    r = driver.process_llm_response({"tool": "set_temperature", "arguments": arguments})
    valid = (
        set(arguments) <= {"room", "celsius", "mode"}
        and arguments.get("room") in ("living_room", "kitchen")
        and isinstance(arguments.get("celsius"), int | float)
        and not isinstance(arguments.get("celsius"), bool)
        and 5 <= arguments["celsius"] <= 30
        and arguments.get("mode", "eco") in ("eco", "comfort")
    )
    assert r.call_executed == valid
    assert r.call_failed == (not valid)
    assert bool(driver.executed) == valid


@given(
    st.sampled_from(["get_temperature", "set_temperature", "echo", "fail", "nope"]),
    st.dictionaries(
        st.sampled_from(["room", "celsius", "text", "count", "kind", "mode"]),
        st.sampled_from(["kitchen", "attic", 21, 99, "tool_error", "retryable", "eco", True, None]),
        max_size=3,
    ),
    st.sampled_from(["", "  ", "\n"]),
)
def test_process_is_exactly_detect_then_execute(
    tool: str, arguments: dict[str, Any], pad: str
) -> None:
    """The fast path for a bare JSON call gives what the two public phases give."""
    text = pad + json.dumps({"tool": tool, "arguments": arguments}) + pad
    one, two = Thermostat(), Thermostat()
    fused = one.process_llm_response(text)
    phased = two.execute_tool_call(two.detect_tool_call(text))
    assert fused == phased
    assert one.executed == two.executed
