"""The MCS models accept what the spec allows and refuse the rest with a clear message."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from hwbridge import DriverMeta, DriverResponse, Tool, ToolError, ToolParameter

META = {"id": "6f0e1a52-8d3b-4c1e-9a57-2b1f0c3d4e5f", "name": "X"}


@pytest.mark.parametrize("version", ["1.0.0", "0.1.2-rc.1", "2.0.0+build.7", "10.20.30"])
def test_semver_accepted(version: str) -> None:
    assert DriverMeta(**META, version=version).version == version


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "latest"])
def test_semver_refused(version: str) -> None:
    with pytest.raises(ValidationError, match="not a semantic version"):
        DriverMeta(**META, version=version)


def test_meta_is_frozen() -> None:
    meta = DriverMeta(**META, version="1.0.0")
    with pytest.raises(ValidationError):
        meta.name = "Y"  # type: ignore[misc]


@pytest.mark.parametrize(
    "name", ["read signals", "a" * 65, "", "räd", ".read", "read.", "bench1/read", "a.b\n"]
)
def test_tool_names_are_refused_unless_a_provider_or_mcp_accepts_them(name: str) -> None:
    with pytest.raises(ValidationError):
        Tool(name=name, title="t")


@pytest.mark.parametrize("name", ["read_signals", "bench1.read_signals", "a.b.c", "a" * 64])
def test_dots_inside_a_name_are_allowed(name: str) -> None:
    # an orchestrator's labelled names; native definitions carry a dot-free alias
    assert Tool(name=name, title="t").name == name


def test_tool_needs_title_or_description_and_unique_parameters() -> None:
    with pytest.raises(ValidationError, match="needs a title or a description"):
        Tool(name="t")
    with pytest.raises(ValidationError, match="declares parameter 'a' twice"):
        Tool(name="t", title="t", parameters=[ToolParameter(name="a"), ToolParameter(name="a")])


def test_parameter_schema_field_is_named_schema() -> None:
    p = ToolParameter(name="a", schema={"type": "integer"})
    assert p.schema == {"type": "integer"}
    assert p.model_dump()["schema"] == {"type": "integer"}


def test_empty_response_means_final_answer() -> None:
    r = DriverResponse()
    assert r.is_final_answer and r.messages is None


def test_tool_error_carries_code_message_retryable_and_pickles() -> None:
    err = ToolError("BUS_DOWN", "no bus", retryable=True)
    again = pickle.loads(pickle.dumps(err))
    assert (again.code, again.message, again.retryable) == ("BUS_DOWN", "no bus", True)
    assert str(err) == "BUS_DOWN: no bus"
