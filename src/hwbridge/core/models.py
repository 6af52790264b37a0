"""The data that crosses the MCS boundary: driver metadata, tools, calls and responses.

Every model is a frozen pydantic v2 model so a driver can hand them to any thread, and so
`hwbridge schema DIR` can publish their JSON Schema (spec section 14).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Literal, Protocol, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from hwbridge.core.errors import (
    ToolError,
    _rebuild_tool_error,  # noqa: F401  (pickles made before)
)

__all__ = [
    "Dialect",
    "DriverBinding",
    "DriverMeta",
    "DriverResponse",
    "NativeToolContext",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolParameter",
    "TrustManifest",
]

# Semantic Versioning 2.0.0, the official regular expression.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
# What a tool may be called: letters, digits, _ and -, with dots inside (an orchestrator's
# `bench1.read_signals`; MCP allows them). OpenAI and Anthropic refuse dots in function
# names, so native tool definitions carry a dot-free alias (`hwbridge.core.native`).
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_-])?$"
# The intersection of what OpenAI, Anthropic and Gemini accept as a function name.
NATIVE_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_TOOL_NAME = re.compile(NATIVE_TOOL_NAME_PATTERN)
_ANY_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)

Dialect = Literal[
    "text",
    "mcs",
    "openai",
    "openai_function_call",
    "openai_responses",
    "anthropic",
    "gemini",
    "ollama",
]
"""The wire format a tool call arrived in; responses are written back in the same one."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


_M = TypeVar("_M", bound=BaseModel)


class DriverBinding(_Frozen):
    """What a driver connects: a capability over an adapter, described in a spec format."""

    capability: str = Field(min_length=1, examples=["can-bus"])
    adapter: str = Field(min_length=1, examples=["python-can"])
    spec_format: str = Field(min_length=1, examples=["DBC"])


class TrustManifest(_Frozen):
    """Where a driver comes from, so a client can verify it before loading it."""

    author: str = Field(min_length=1)
    source_url: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")


class DriverMeta(_Frozen):
    """Identity and capabilities of a driver (spec section 3, `meta`)."""

    id: UUID
    name: str = Field(min_length=1)
    version: str = Field(
        description="Semantic version, e.g. 1.2.0", json_schema_extra={"pattern": _SEMVER.pattern}
    )
    bindings: list[DriverBinding] = Field(default_factory=list)
    supported_llms: list[str] | None = None
    capabilities: list[str] = Field(default_factory=list)
    trust: TrustManifest | None = None

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.match(value):
            raise ValueError(f"version {value!r} is not a semantic version such as 1.0.0")
        return value

    def has_capability(self, contract: type | str) -> bool:
        """True when the flag of `contract` is listed: a class with a `CAPABILITY` attribute
        (hwbridge's MCSDriver, or a contract of the MCS reference SDK such as
        `ToolCallSignaling`, whose flag is `tcs`), a `Capability` or a plain flag."""
        flag = contract if isinstance(contract, str) else getattr(contract, "CAPABILITY", None)
        return flag is not None and str(flag) in self.capabilities

    def with_capability(self, contract: type | str) -> DriverMeta:
        """A copy with the flag of `contract` added (itself when it is listed already), as
        the reference SDK's wrappers expect of a driver's meta."""
        flag = contract if isinstance(contract, str) else getattr(contract, "CAPABILITY", None)
        if flag is None or str(flag) in self.capabilities:
            return self
        return self.model_copy(update={"capabilities": [*self.capabilities, str(flag)]})


with warnings.catch_warnings():
    # `schema` is the MCS field name; it deliberately replaces pydantic's deprecated
    # BaseModel.schema() classmethod on this model.
    warnings.filterwarnings("ignore", message='Field name "schema"')

    class ToolParameter(_Frozen):
        """One argument of a tool; `schema` is its JSON Schema (type, enum, bounds...)."""

        name: str = Field(min_length=1, max_length=64)
        description: str | None = None
        required: bool = False
        schema: dict[str, Any] | None = None  # type: ignore[assignment]


class Tool(_Frozen):
    """A function the LLM may call: a name every provider accepts and typed parameters."""

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    title: str | None = None
    description: str | None = None
    parameters: list[ToolParameter] = Field(default_factory=list)
    read_only: bool = Field(
        default=False,
        description="True when the tool only reads: it changes nothing in the device or the "
        "world. Consent gates and MCP clients ask before any tool that is not read-only.",
    )
    destructive: bool | None = Field(
        default=None,
        description="MCP's destructiveHint for a tool that is not read-only: False when it "
        "only adds (never overwrites or deletes); None: every tool that is not read-only "
        "counts as destructive.",
    )

    @model_validator(mode="after")
    def _check(self) -> Tool:
        if not self.title and not self.description:
            raise ValueError(f"tool {self.name!r} needs a title or a description")
        seen: set[str] = set()
        for p in self.parameters:
            if p.name in seen:
                raise ValueError(f"tool {self.name!r} declares parameter {p.name!r} twice")
            seen.add(p.name)
        return self

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of this tool's arguments object (what native tool APIs expect)."""
        properties: dict[str, Any] = {}
        for p in self.parameters:
            prop = dict(p.schema) if p.schema else {}
            if p.description and "description" not in prop:
                prop["description"] = p.description
            properties[p.name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [p.name for p in self.parameters if p.required]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema


class ToolCall(_Frozen):
    """One call the LLM asked for, as found by `detect_tool_call` (nothing executed yet).

    `error` is set when the output clearly tried to call a tool but could not be parsed even
    after healing; executing such a call yields `call_failed` with a retry prompt.
    """

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    dialect: Dialect = "text"
    error: str | None = None
    healed: bool = False
    # The LLM output this call was found in; used to echo it back in `messages`.
    _origin: str | dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def origin(self) -> str | dict[str, Any] | None:
        private = self.__pydantic_private__
        return private.get("_origin") if private else None

    def __eq__(self, other: object) -> bool:
        """Calls are equal when they ask for the same thing, wherever they were found."""
        if not isinstance(other, ToolCall):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]  # arguments are a dict


class CallView(Protocol):
    """What executing a call needs: a ToolCall, or the driver's lighter internal record."""

    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def dialect(self) -> Dialect: ...
    @property
    def error(self) -> str | None: ...
    @property
    def healed(self) -> bool: ...
    @property
    def origin(self) -> str | dict[str, Any] | None: ...


class NativeToolContext(_Frozen):
    """What a client needs for one native function-calling request (the MCS reference SDK's
    `NativeToolContext`): the system message, and the tool definitions in the provider's
    format, or None when the tools are written into the system message (the text path)."""

    system_message: str
    tools: list[dict[str, Any]] | None = None


class DriverResponse(_Frozen):
    """The outcome of `process_llm_response`, with the spec's semantics (section 3).

    Neither flag set and `messages is None`: no call for this driver, the output is a final
    answer (or belongs to another driver). Both flags may be set when one output carried
    several calls and only some of them succeeded.
    """

    tool_call_result: Any = None
    call_executed: bool = False
    call_failed: bool = False
    call_detail: str | None = None
    retry_prompt: str | None = None
    messages: list[dict[str, Any]] | None = None

    @property
    def is_final_answer(self) -> bool:
        """True when no call was found: show the LLM output to the user."""
        return not self.call_executed and not self.call_failed


_new = object.__new__
_set = object.__setattr__


def trusted(
    cls: type[_M],
    values: dict[str, Any],
    private: dict[str, Any] | None = None,
    fields: frozenset[str] | None = None,
) -> _M:
    """Build a model from values the library itself produced, skipping validation.

    The hot path (`process_llm_response`) makes a ToolCall and a DriverResponse per call;
    `model_construct` costs several microseconds each, this a fraction of one. Every field
    must be given.
    """
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", fields if fields is not None else set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", private)
    return obj


def is_valid_tool_name(name: str) -> bool:
    """True when every major provider accepts `name` as a function name."""
    return bool(_TOOL_NAME.fullmatch(name))


def is_tool_name(name: str) -> bool:
    """True when `name` may name a Tool: a provider-safe name, or one with dots inside
    (`bench1.read_signals`), which native definitions carry under an alias."""
    return bool(_ANY_TOOL_NAME.fullmatch(name))
