"""What a remote MCP server says, read as hwbridge tools, results and errors: schemas with
references, names and schemas that cannot be carried, results of every shape, error codes
wherever a server puts them. Hostile input is bounded and never raises."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp import types
from mcp.shared.exceptions import MCPError

from hwbridge.core.images import image_of
from hwbridge.core.models import Tool, ToolError
from hwbridge.core.validation import ArgumentValidator
from hwbridge.mcp.remote_tools import (
    MAX_DESCRIPTION_CHARS,
    MAX_RESULT_CHARS,
    MAX_SCHEMA_BYTES,
    error_of,
    result_of,
    tool_of,
)


def listed(name: str = "set_voltage", schema: Any = None, **fields: Any) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"}, **fields)


def made(remote: types.Tool, read_only: bool = False, trust: bool = False) -> Tool:
    tool = tool_of(remote, read_only=read_only, trust_hints=trust)
    assert isinstance(tool, Tool), tool
    return tool


def test_parameters_come_from_the_schema_with_local_references_inlined() -> None:
    schema = {
        "type": "object",
        "$defs": {"Channel": {"type": "integer", "minimum": 1, "maximum": 4}},
        "properties": {
            "channel": {"$ref": "#/$defs/Channel", "description": "output channel"},
            "volts": {"type": "number", "description": "set point"},
            "profile": {"$ref": "https://example.com/profile.json"},  # never fetched
        },
        "required": ["channel", "volts"],
    }
    tool = made(listed(schema=schema, description="Set a channel's voltage."))
    by_name = {p.name: p for p in tool.parameters}
    assert by_name["channel"].schema == {"type": "integer", "minimum": 1, "maximum": 4}
    assert by_name["channel"].description == "output channel" and by_name["channel"].required
    assert by_name["profile"].schema is None and not by_name["profile"].required
    validator = ArgumentValidator(tool)
    assert validator.is_valid({"channel": 2, "volts": 12.0})
    assert not validator.is_valid({"channel": 9, "volts": 12.0})


def test_a_reference_to_itself_ends() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
    }
    assert made(listed(schema=schema, title="Tree")).parameters[0].name == "tree"


@pytest.mark.parametrize(
    ("remote", "reason"),
    [
        (listed("set voltage"), "is not 1-64"),
        (listed("x" * 65), "is not 1-64"),
        (listed("bench/psu"), "is not 1-64"),
        (listed(schema={"type": "array"}), "not an object"),
        (listed(schema={"type": "object", "required": ["a"]}), "does not describe"),
        (listed(schema={"type": "object", "properties": {"a" * 65: {}}}), "1-64 characters"),
        (
            listed(schema={"type": "object", "properties": {"a": {"enum": ["x" * 70_000]}}}),
            "bytes",
        ),
        (
            listed(schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
            "cannot be used",
        ),
    ],
)
def test_a_tool_that_cannot_be_carried_is_left_out_with_the_reason(
    remote: types.Tool, reason: str
) -> None:
    found = tool_of(remote, read_only=False, trust_hints=False)
    assert isinstance(found, str) and reason in found


def test_read_only_is_decided_here_and_the_destructive_hint_only_kept_when_trusted() -> None:
    hints = types.ToolAnnotations(read_only_hint=False, destructive_hint=False)
    remote = listed(annotations=hints, description="Add a note.")
    assert made(remote).destructive is None  # untrusted: counts as destructive
    assert made(remote, trust=True).destructive is False
    assert made(remote, read_only=True, trust=True).read_only


def test_descriptions_are_bounded_and_a_tool_without_one_is_named_by_its_title() -> None:
    long = made(listed(description="word " * 5000))
    assert long.description is not None and len(long.description) == MAX_DESCRIPTION_CHARS
    bare = made(listed("bare"))
    assert bare.title == "bare" and bare.description is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["type", "properties", "required", "$defs", "definitions", "x"]),
        json_values,
        max_size=5,
    ),
    st.text(max_size=30),
)
@example({"properties": None, "required": [[]]}, "0")  # a list among the required names
def test_any_schema_gives_a_tool_or_a_reason_never_an_error(
    schema: dict[str, Any], name: str
) -> None:
    try:
        remote = types.Tool(name=name, input_schema=schema)
    except ValueError:
        return  # the SDK refuses it before we see it
    found = tool_of(remote, read_only=False, trust_hints=False)
    if isinstance(found, Tool):
        ArgumentValidator(found)
    else:
        assert isinstance(found, str) and found


# -- results ----------------------------------------------------------------------------


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_a_result_of_hwbridge_s_server_comes_back_as_it_was() -> None:
    # hwbridge sends the JSON as text, and a non-object under "result" as structured content
    number = types.CallToolResult(content=[text("42")], structured_content={"result": 42})
    assert result_of(number) == 42
    values = {"values": {"EngineSpeed": {"value": 812.5}}}
    assert (
        result_of(
            types.CallToolResult(
                content=[text('{"values": {"EngineSpeed": {"value": 812.5}}}')],
                structured_content=values,
            )
        )
        == values
    )


def test_other_servers_results_structured_or_text() -> None:
    assert result_of(
        types.CallToolResult(content=[text("hi"), text("there")], structured_content={"n": 2})
    ) == {"n": 2}
    assert result_of(types.CallToolResult(content=[text("plain words")])) == "plain words"
    audio = types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav")
    mixed = result_of(types.CallToolResult(content=[text("a"), audio]))
    assert mixed == {"text": "a", "content": [{"type": "audio", "note": "not carried over"}]}
    huge = result_of(types.CallToolResult(content=[text("x" * (MAX_RESULT_CHARS + 5)), text("y")]))
    assert huge["truncated_from_chars"] == MAX_RESULT_CHARS + 7  # joined by a line break
    assert len(huge["text"]) == MAX_RESULT_CHARS


def test_a_picture_comes_back_as_an_image_result() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 100).decode()
    summary = {"signals": ["EngineSpeed"], "points": 120}
    result = types.CallToolResult(
        content=[
            text('{"signals": ["EngineSpeed"], "points": 120}'),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
        ],
        structured_content=summary,
    )
    image = image_of(result_of(result))
    assert image is not None and image.summary == summary and image.data == png
    odd = types.CallToolResult(
        content=[types.ImageContent(type="image", data=png, mime_type="image/gif")],
        structured_content=summary,
    )
    assert result_of(odd) == {**summary, "image": "image/gif (not carried over)"}


# -- errors -----------------------------------------------------------------------------


def failure(content: str, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[text(content)], structured_content=structured, is_error=True
    )


@pytest.mark.parametrize(
    ("result", "code", "message", "retryable"),
    [
        (
            failure(
                "SEND_NOT_ALLOWED: read-only\nsend_message failed (SEND_NOT_ALLOWED): ...",
                {"error": {"code": "SEND_NOT_ALLOWED", "message": "read-only"}},
            ),
            "SEND_NOT_ALLOWED",
            "read-only",
            False,
        ),
        (failure("BUSY: 32 calls are running"), "BUSY", "32 calls are running", True),
        (
            failure("Error executing tool psu_set: OVER_CURRENT: limit reached"),
            "OVER_CURRENT",
            "limit reached",
            False,
        ),
        (failure("it broke"), "REMOTE_TOOL_ERROR", "it broke", False),
        (failure(""), "REMOTE_TOOL_ERROR", "the remote tool failed without saying why", False),
        (
            failure("x", {"error": {"code": "lower case", "message": "m", "retryable": True}}),
            "REMOTE_TOOL_ERROR",
            "m",
            True,
        ),
    ],
)
def test_a_tool_error_keeps_the_server_s_code(
    result: types.CallToolResult, code: str, message: str, retryable: bool
) -> None:
    with pytest.raises(ToolError) as caught:
        result_of(result)
    assert (caught.value.code, caught.value.message, caught.value.retryable) == (
        code,
        message,
        retryable,
    )


@pytest.mark.parametrize(
    ("code", "expected", "retryable"),
    [
        (-32000, "REMOTE_DOWN", True),  # the connection closed under a read
        (-32001, "REMOTE_TIMEOUT", True),
        (-32602, "INVALID_ARGUMENTS", False),
        (-32601, "REMOTE_UNSUPPORTED", False),
        (-32603, "REMOTE_ERROR", True),
        (-1, "REMOTE_ERROR", False),
    ],
)
def test_mcp_errors_become_tool_errors(code: int, expected: str, retryable: bool) -> None:
    error = error_of(MCPError(code, "why"), where="bench1 (url)", changes_state=False)
    assert (error.code, error.retryable) == (expected, retryable)
    assert "bench1" in error.message


def test_a_call_that_changes_state_and_loses_its_answer_is_not_retryable() -> None:
    for code in (-32000, -32001):
        error = error_of(MCPError(code, "gone"), where="bench1", changes_state=True)
        assert not error.retryable and "check before repeating" in error.message


# -- bounds (issue 33) ---------------------------------------------------------------------


def _multiplying(fan_out: int, key: str = "properties") -> dict[str, Any]:
    """A schema of a few hundred bytes whose one definition refers to itself `fan_out` times."""
    node: dict[str, Any] = {"type": "object"}
    refs = [{"$ref": "#/$defs/N"} for _ in range(fan_out)]
    node[key] = {f"p{i}": r for i, r in enumerate(refs)} if key == "properties" else refs
    return {"type": "object", "$defs": {"N": node}, "properties": {"n": {"$ref": "#/$defs/N"}}}


def _wide_chain(levels: int, width: int) -> dict[str, Any]:
    """Definitions D0..Dn, each naming the next `width` times: wide, not deep."""
    defs = {
        f"D{i}": {
            "type": "object",
            "properties": {f"w{j}": {"$ref": f"#/$defs/D{i + 1}"} for j in range(width)},
        }
        for i in range(levels)
    }
    defs[f"D{levels}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/D0"}}}


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "schema",
    [
        _multiplying(8),  # 8^9 nodes unbounded: it never returned
        _multiplying(8, key="anyOf"),
        _multiplying(3, key="allOf"),
        _wide_chain(6, 40),
    ],
)
def test_a_schema_whose_references_multiply_is_left_out_with_the_reason(
    schema: dict[str, Any],
) -> None:
    assert len(orjson.dumps(schema)) < 8000  # small as sent
    found = tool_of(listed(schema=schema), read_only=False, trust_hints=False)
    assert isinstance(found, str) and "$ref" in found


ref_nodes = st.recursive(
    st.sampled_from([{"$ref": f"#/$defs/D{i}"} for i in range(4)] + [{"type": "string"}]),
    lambda inner: (
        st.lists(inner, max_size=6).map(lambda items: {"anyOf": items})
        | st.dictionaries(st.sampled_from("abcdef"), inner, max_size=6).map(
            lambda props: {"type": "object", "properties": props}
        )
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ref_nodes, min_size=4, max_size=4), ref_nodes)
@pytest.mark.timeout(60)
def test_any_web_of_references_gives_a_bounded_tool_or_a_reason(
    definitions: list[Any], root: Any
) -> None:
    schema = {
        "type": "object",
        "$defs": {f"D{i}": d for i, d in enumerate(definitions)},
        "properties": {"x": root},
    }
    found = tool_of(listed(schema=schema), read_only=False, trust_hints=False)
    if isinstance(found, Tool):
        assert len(orjson.dumps([p.schema for p in found.parameters])) <= MAX_SCHEMA_BYTES
    else:
        assert isinstance(found, str) and found


def test_a_schema_nested_deeper_than_the_bound_is_left_out() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "array", "items": deep}
    found = tool_of(
        listed(schema={"type": "object", "properties": {"a": deep}}),
        read_only=False,
        trust_hints=False,
    )
    assert isinstance(found, str) and "deep" in found


def test_structured_content_over_the_cap_is_cut_and_says_its_size() -> None:
    blob = {"blob": "x" * (MAX_RESULT_CHARS + 100)}
    answer = result_of(types.CallToolResult(content=[], structured_content=blob))
    size = len(orjson.dumps(blob))
    assert answer["truncated_from_chars"] == size
    assert len(orjson.dumps(answer)) < MAX_RESULT_CHARS + 1000
    small = {"values": [1, 2, 3]}
    assert result_of(types.CallToolResult(content=[], structured_content=small)) == small


def test_structured_content_too_deep_to_carry_is_replaced_by_a_note() -> None:
    deep: Any = "x"
    for _ in range(400):
        deep = {"in": deep}
    answer = result_of(types.CallToolResult(content=[], structured_content=deep))
    orjson.dumps(answer)
    assert "not carried" in json_text(answer)


def json_text(value: Any) -> str:
    return orjson.dumps(value).decode()
