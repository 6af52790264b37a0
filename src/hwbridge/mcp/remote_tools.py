"""A remote MCP server's tools and answers in hwbridge's terms, for `McpToolDriver`.

- An MCP tool becomes a `Tool`: its name (dots allowed), title, description and input schema
  split into parameters (local `$ref`s inlined, remote ones dropped: nothing is fetched).
  What the server says is bounded: descriptions are cut, oversized schemas (as sent, or as
  they grow when their `$ref`s are inlined) and names no provider could carry leave the
  tool out (it is logged and listed in the health details).
- Whether a tool counts as read-only *here* is decided by the caller (`McpToolDriver`'s
  trust rules), not by the server: its annotations are kept beside (`RemoteAnnotations`).
- A result becomes the JSON value hwbridge's own server sent (the text of its one JSON
  block), else the structured content, else the text; a picture comes back as an image
  result. A tool error (`isError`) and an MCP error become `ToolError`s with the server's
  code: hwbridge's servers put it in `structuredContent.error.code`, others often start
  the text with `CODE: `; otherwise `REMOTE_TOOL_ERROR`. Text and structured content alike
  are cut past MAX_RESULT_CHARS, saying how large they were.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson
from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
)

from hwbridge.core.images import IMAGE_MIME_TYPES, image_of
from hwbridge.core.jsonsafe import clean_text
from hwbridge.core.models import Tool, ToolError, ToolParameter, is_tool_name
from hwbridge.core.validation import ArgumentValidator

__all__ = [
    "MAX_CATALOGUE_BYTES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_INLINED_NODES",
    "MAX_RESULT_CHARS",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_TOOLS",
    "RETRYABLE_CODES",
    "RemoteAnnotations",
    "cut_text",
    "error_of",
    "past_catalogue",
    "result_of",
    "size_of",
    "too_large",
    "tool_of",
]

log = logging.getLogger(__name__)

MAX_TOOLS = 512
"""Tools read from one server's listing; the rest are not read (only counted)."""
MAX_CATALOGUE_BYTES = 256_000
"""What one server's tools may take, their input schemas (with `$ref`s inlined) and
descriptions together: every request to the model carries them. Tools past it are skipped
(and listed with the reason). A real bench's catalogue is a few kilobytes; 100 tools of
64 KB schemas put 6.4 MB into every request."""
MAX_DESCRIPTION_CHARS = 4000
"""A remote tool's description is cut to this length: it goes into the model's prompt."""
MAX_SCHEMA_BYTES = 64_000
"""A tool whose input schema is larger than this (as JSON) is left out: as sent, and again
with its `$ref`s inlined (what reaches the prompt)."""
MAX_INLINED_NODES = 10_000
"""The objects, arrays and values a schema may have with its `$ref`s inlined; past it the
tool is left out. A few hundred bytes whose definition names itself eight times would
otherwise grow to 8^9 nodes: the bound caps the work, not only the result."""
MAX_SCHEMA_DEPTH = 64
"""How deep a schema may nest, with its `$ref`s inlined (a recursive tree of 8 levels of
references nests about 32 deep)."""
MAX_RESULT_CHARS = 1_000_000
"""A result whose text, or structured content as JSON, is longer is cut (and says so):
results stay bounded (invariant 4)."""
MAX_ERROR_CHARS = 4000
"""A remote tool's error message is cut to this length."""
RETRYABLE_CODES = frozenset(
    {"BUSY", "RATE_LIMITED", "REMOTE_DOWN", "REMOTE_TIMEOUT", "TIMEOUT", "BUS_DOWN"}
)
"""Codes a remote error may be retried after when the server does not say."""

_CODE = re.compile(r"^([A-Z][A-Z0-9_]{1,63}): ?(.*)", re.DOTALL)
# how the SDK's MCPServer words a tool's own error: the tool's message after it
_SDK_PREFIX = re.compile(r"^Error executing tool [^\s:]{1,128}: ")
_MAX_REF_DEPTH = 8


class RemoteAnnotations(NamedTuple):
    """What the server said about a tool, kept as it said it (None: not said)."""

    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None

    @classmethod
    def of(cls, tool: types.Tool) -> RemoteAnnotations:
        hints = tool.annotations
        if hints is None:
            return cls(None, None, None, None)
        return cls(
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        )

    def as_dict(self) -> dict[str, bool]:
        """The hints that were given, under their MCP names."""
        names = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
        return {name: value for name, value in zip(names, self, strict=True) if value is not None}


def tool_of(
    remote: types.Tool, *, read_only: bool, trust_hints: bool, room: int = MAX_CATALOGUE_BYTES
) -> Tool | str:
    """The Tool for a remote MCP tool, or the reason it cannot be offered.

    `read_only`: whether this side treats it as read-only (decided by the caller).
    `trust_hints`: whether the server's destructiveHint is kept (else: destructive).
    `room`: the bytes of MAX_CATALOGUE_BYTES the server's tools before it left (its schema,
    `$ref`s inlined, and description must fit).
    """
    name = remote.name
    if not isinstance(name, str) or not is_tool_name(name):
        return f"its name {str(name)[:80]!r} is not 1-64 letters, digits, _, - or inner dots"
    schema = remote.input_schema if isinstance(remote.input_schema, dict) else {}
    try:
        size = len(orjson.dumps(schema))
    except TypeError:
        return "its input schema is not JSON"
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is {size} bytes (at most {MAX_SCHEMA_BYTES})"
    try:
        parameters = _parameters(schema)
    except _Unbounded as exc:
        return str(exc)
    if isinstance(parameters, str):
        return parameters
    description = cut_text(remote.description, MAX_DESCRIPTION_CHARS)
    if size_of(parameters, description) > room:
        return past_catalogue()
    title = cut_text(
        remote.title or (remote.annotations.title if remote.annotations else None), 200
    )
    hints = RemoteAnnotations.of(remote)
    destructive = hints.destructive if trust_hints and not read_only else None
    try:
        tool = Tool(
            name=name,
            title=title or (None if description else name),
            description=description,
            parameters=parameters,
            read_only=read_only,
            destructive=destructive,
        )
        ArgumentValidator(tool)  # a schema no validator takes would break every call
    except (ValueError, TypeError) as exc:
        return f"its description cannot be used: {str(exc).splitlines()[0][:200]}"
    return tool


def _parameters(schema: Mapping[str, Any]) -> list[ToolParameter] | str:
    kind = schema.get("type", "object")
    if kind != "object":
        return f"its arguments are not an object (type {str(kind)[:40]})"
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        return "its input schema's properties are not an object"
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return "its input schema's required list is not a list of names"
    if any(r not in properties for r in required):
        return "its input schema requires arguments it does not describe"
    definitions = {
        **_mapping(schema.get("definitions")),
        **_mapping(schema.get("$defs")),
    }
    inliner = _Inliner(definitions)
    out: list[ToolParameter] = []
    for key, value in properties.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 64:
            return f"its argument name {str(key)[:80]!r} is not 1-64 characters"
        prop = inliner.inline(value if isinstance(value, dict) else {})
        text = prop.pop("description", None)
        out.append(
            ToolParameter(
                name=key,
                description=cut_text(text, 1000),
                required=key in required,
                schema=prop or None,
            )
        )
    size = len(orjson.dumps([p.schema for p in out]))
    if size > MAX_SCHEMA_BYTES:
        return (
            f"its input schema is {size} bytes with its $refs inlined (at most {MAX_SCHEMA_BYTES})"
        )
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class _Unbounded(Exception):
    """A schema that grows past a bound as its `$ref`s are inlined (the reason is the text)."""


class _Size(NamedTuple):
    """What a part of a schema grows to with its `$ref`s inlined: its nodes, about its bytes
    as JSON, and how many levels it nests below itself."""

    nodes: int
    bytes: int
    height: int


_DROPPED = ("$schema", "$id", "$defs", "definitions")


class _Inliner:
    """Inlines a schema's local `$ref`s (8 references deep; any other `$ref`, a URL, is
    dropped: a schema is never fetched from anywhere). What a property will grow to is
    measured first, each definition once per reference depth, so a schema past
    MAX_INLINED_NODES nodes, MAX_SCHEMA_BYTES bytes or MAX_SCHEMA_DEPTH levels (deep, wide,
    or both) raises `_Unbounded` in time linear in the schema as sent, before anything is
    built."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions
        self.nodes = 0
        self.bytes = 0
        self._sizes: dict[tuple[str, int], _Size] = {}

    def inline(self, node: Any) -> Any:
        """`node` (a property's schema) with its references inlined, or `_Unbounded`."""
        size = self._measure(node, 0, 1)
        self.nodes += size.nodes
        self.bytes += size.bytes
        if self.nodes > MAX_INLINED_NODES or self.bytes > MAX_SCHEMA_BYTES:
            raise _Unbounded(
                f"its input schema grows past {MAX_INLINED_NODES} nodes or "
                f"{MAX_SCHEMA_BYTES} bytes when its $refs are inlined"
            )
        return self._build(node, 0)

    def _target(self, ref: str, refs: int) -> dict[str, Any] | None:
        if refs >= _MAX_REF_DEPTH:
            return None
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                target = self.definitions.get(ref[len(prefix) :])
                return target if isinstance(target, dict) else None
        return None

    def _measure(self, node: Any, refs: int, depth: int) -> _Size:
        if depth > MAX_SCHEMA_DEPTH:
            raise _Unbounded(f"its input schema nests more than {MAX_SCHEMA_DEPTH} deep")
        nodes, size, height = 1, (len(node) + 3 if isinstance(node, str) else 4), 0
        if isinstance(node, list):
            for item in node:
                part = self._measure(item, refs, depth + 1)
                nodes, size = nodes + part.nodes, size + part.bytes
                height = max(height, part.height + 1)
            return _Size(nodes, size, height)
        if not isinstance(node, dict):
            return _Size(nodes, size, height)
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self._target(ref, refs)
            rest = self._measure({k: v for k, v in node.items() if k != "$ref"}, refs, depth)
            if target is None:
                return _Size(nodes + rest.nodes, size + rest.bytes, rest.height)
            known = self._sizes.get((ref, refs + 1))
            if known is None:
                known = self._sizes[(ref, refs + 1)] = self._measure(target, refs + 1, depth)
            if depth + known.height > MAX_SCHEMA_DEPTH:
                raise _Unbounded(f"its input schema nests more than {MAX_SCHEMA_DEPTH} deep")
            return _Size(
                nodes + rest.nodes + known.nodes,
                size + rest.bytes + known.bytes,
                max(rest.height, known.height),
            )
        for key, value in node.items():
            if key in _DROPPED:
                continue
            part = self._measure(value, refs, depth + 1)
            nodes = nodes + part.nodes
            size = size + part.bytes + (len(key) + 3 if isinstance(key, str) else 8)
            height = max(height, part.height + 1)
        return _Size(nodes, size, height)

    def _build(self, node: Any, refs: int) -> Any:
        if isinstance(node, list):
            return [self._build(item, refs) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self._target(ref, refs)
            resolved = self._build(target, refs + 1) if target is not None else {}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**resolved, **self._build(rest, refs)}
        return {k: self._build(v, refs) for k, v in node.items() if k not in _DROPPED}


def size_of(parameters: list[ToolParameter], description: str | None) -> int:
    """What a tool takes of MAX_CATALOGUE_BYTES: its schema as JSON and its description."""
    schemas = [p.schema for p in parameters]
    notes = sum(len(p.description or "") + len(p.name) for p in parameters)
    return len(orjson.dumps(schemas)) + notes + len(description or "")


def past_catalogue() -> str:
    """Why a tool past the server's MAX_CATALOGUE_BYTES is skipped."""
    return (
        f"the server's tools take more than {MAX_CATALOGUE_BYTES} bytes "
        "(schemas and descriptions); this one is past that"
    )


def cut_text(value: Any, limit: int) -> str | None:
    """A text from the server, cleaned and cut to `limit` characters (None: no text)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()  # cut before cleaning: a cleaned text is as long
    return clean_text(text if len(text) <= limit else text[: limit - 3] + "...")


# -- answers ---------------------------------------------------------------------------------


def result_of(result: types.CallToolResult) -> Any:
    """The JSON-safe value of a successful call; a ToolError for a tool error."""
    if result.is_error:
        raise _tool_error(result)
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    images = [block for block in result.content if isinstance(block, types.ImageContent)]
    structured, instead = _structured(result.structured_content)
    if images:
        picture = _picture(images[0], structured, texts)
        if picture is not None:
            return picture
    if len(texts) == 1 and len(result.content) == 1:
        parsed = _json(texts[0])
        if parsed is not _NOT_JSON:
            return parsed
    if structured is not None:
        return structured
    if instead is not None and (not texts or "truncated_from_chars" in instead):
        return instead
    others = [
        {"type": getattr(block, "type", "unknown"), "note": "not carried over"}
        for block in result.content
        if not isinstance(block, types.TextContent)
    ]
    text = "\n".join(texts)
    if len(text) > MAX_RESULT_CHARS:
        return {"text": text[:MAX_RESULT_CHARS], "truncated_from_chars": len(text)}
    if others:
        return {"text": text, "content": others}
    return text


def _structured(value: Any) -> tuple[Any, dict[str, Any] | None]:
    """The structured content when it can be carried whole, else None and what to say
    instead: its JSON cut to MAX_RESULT_CHARS with its length, as a text is, or a note."""
    if value is None:
        return None, None
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: not JSON, or nested deeper than 255
        note = "structured content not carried over: not JSON, or nested too deep"
        return None, {"note": note}
    if len(data) <= MAX_RESULT_CHARS:
        return value, None
    text = data.decode()
    if len(text) <= MAX_RESULT_CHARS:
        return value, None
    return None, {"text": text[:MAX_RESULT_CHARS], "truncated_from_chars": len(text)}


_NOT_JSON = object()


def _json(text: str) -> Any:
    if len(text) > MAX_RESULT_CHARS:
        return _NOT_JSON
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _picture(image: types.ImageContent, structured: Any, texts: list[str]) -> Any:
    """An image result (`hwbridge.core.images`) from image content, or None."""
    summary = structured if isinstance(structured, dict) else None
    if summary is None and len(texts) == 1:
        parsed = _json(texts[0])
        summary = parsed if isinstance(parsed, dict) else None
    if summary is None:
        summary = {"text": "\n".join(texts)[:2000]} if texts else {}
    candidate = {
        "type": "image",
        "mime_type": image.mime_type,
        "data": image.data,
        "summary": summary,
    }
    if image.mime_type in IMAGE_MIME_TYPES and image_of(candidate) is not None:
        return candidate
    return {**summary, "image": f"{image.mime_type[:60]} (not carried over)"}


def _tool_error(result: types.CallToolResult) -> ToolError:
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent)).strip()
    structured = result.structured_content
    error = structured.get("error") if isinstance(structured, dict) else None
    code: str | None = None
    message = ""
    retryable: bool | None = None
    if isinstance(error, dict):
        given = error.get("code")
        if isinstance(given, str) and _CODE.match(f"{given}: "):
            code = given
        if isinstance(error.get("message"), str):
            message = error["message"]
        if isinstance(error.get("retryable"), bool):
            retryable = error["retryable"]
    if code is None:
        found = _CODE.match(_SDK_PREFIX.sub("", text, count=1))
        if found:
            code, message = found.group(1), message or found.group(2)
    if code is None:
        code = "REMOTE_TOOL_ERROR"
    message = (
        cut_text(message or text, MAX_ERROR_CHARS) or "the remote tool failed without saying why"
    )
    if retryable is None:
        retryable = code in RETRYABLE_CODES
    return ToolError(code, message, retryable=retryable)


def error_of(exc: MCPError, *, where: str, changes_state: bool) -> ToolError:
    """The ToolError for an MCP (JSON-RPC) error of a call to `where`."""
    code = exc.error.code if exc.error is not None else None
    message = exc.error.message if exc.error is not None else str(exc)
    if code == CONNECTION_CLOSED:
        return down_while_calling(where, message, changes_state=changes_state)
    if code == REQUEST_TIMEOUT:
        return timed_out(where, None, changes_state=changes_state)
    if code == INVALID_PARAMS:
        return ToolError("INVALID_ARGUMENTS", f"{where} refused the arguments: {message}")
    if code == METHOD_NOT_FOUND:
        return ToolError("REMOTE_UNSUPPORTED", f"{where} does not support this: {message}")
    if code == INTERNAL_ERROR:
        return ToolError("REMOTE_ERROR", f"{where} failed: {message}", retryable=True)
    return ToolError("REMOTE_ERROR", f"{where} answered with error {code}: {message}")


def too_large(where: str, limit: int, *, changes_state: bool) -> ToolError:
    """REMOTE_ERROR for an answer past the read cap: it was not read (the connection stays)."""
    ran = "; it ran there: check its effect before repeating it" if changes_state else ""
    return ToolError(
        "REMOTE_ERROR",
        f"{where} answered with more than {limit} bytes (answer too large); it was not read{ran}",
    )


def down_while_calling(where: str, reason: str, *, changes_state: bool) -> ToolError:
    """REMOTE_DOWN for a call that had been sent: a read may be repeated; a call that changes
    state may have run before the connection was lost, so it is not retryable."""
    if changes_state:
        return ToolError(
            "REMOTE_DOWN",
            f"the connection to {where} was lost during the call ({reason}); it may or may "
            "not have run there: check before repeating it",
        )
    return ToolError(
        "REMOTE_DOWN",
        f"the connection to {where} was lost during the call ({reason}); it is reconnected "
        "on the next call",
        retryable=True,
    )


def timed_out(where: str, seconds: float | None, *, changes_state: bool) -> ToolError:
    """REMOTE_TIMEOUT: no answer in time (the server was asked to cancel the call)."""
    within = f" within {seconds:g} s" if seconds is not None else " in time"
    if changes_state:
        return ToolError(
            "REMOTE_TIMEOUT",
            f"{where} did not answer{within}; the call may have run there: check before "
            "repeating it",
        )
    return ToolError("REMOTE_TIMEOUT", f"{where} did not answer{within}", retryable=True)
