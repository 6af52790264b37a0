"""The device spec: what a serial device understands, as data (pydantic v2, strict).

A spec is a TOML file (see devices/*.toml and docs/serial.md, "Device specs"). It names the
device, how to reach it (baud rate, terminators, encoding, timeouts), how to recognise it
(an identity query and the pattern its reply must match), how it reports errors, and its
commands: for a request/response device the line to send (a template over typed parameters)
and the reply (a regular expression whose named groups become typed fields with units); for
a streaming device the kind of line each command reads and the fields it takes from it.
"""

from __future__ import annotations

import re
import string
from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hwbridge.core.models import TOOL_NAME_PATTERN

__all__ = [
    "CommandSpec",
    "DeviceInfo",
    "DeviceSpec",
    "ErrorSpec",
    "FieldSpec",
    "IdentitySpec",
    "ParamSpec",
    "PortSpec",
    "StreamSpec",
]

_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
GENERIC_TOOLS = frozenset({"port_status", "serial_query", "serial_read"})
"""Names the generic tools use: a command may not take them."""
MAX_STRING = 200  # longest string parameter when the spec gives no max_length


def _regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
            regex.compile(value)  # what DevicePattern runs it with
        except (re.error, regex.error) as exc:
            raise ValueError(f"the regular expression {value!r} does not compile: {exc}") from exc
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DeviceInfo(_Strict):
    name: str = Field(pattern=_NAME)
    description: str = Field(default="", max_length=1000)
    mode: Literal["query", "stream"] = "query"


class PortSpec(_Strict):
    """How to talk to the device; what pyserial and the adapter need."""

    baudrate: int = Field(default=115200, gt=0)
    bytesize: Literal[5, 6, 7, 8] = 8
    parity: Literal["N", "E", "O", "M", "S"] = "N"
    stopbits: float = Field(default=1, description="1, 1.5 or 2")
    rtscts: bool = False
    xonxoff: bool = False
    terminator: str = Field(default="\n", min_length=1, max_length=8)
    write_terminator: str | None = Field(default=None, min_length=1, max_length=8)
    encoding: str = "ascii"
    max_line: int = Field(default=1024, ge=16, le=1_000_000)
    timeout_ms: int = Field(default=1000, gt=0, le=60_000)
    separators: list[str] = Field(
        default_factory=list,
        description="characters that start another command inside one line (SCPI: ';'); a "
        "parameter value may not hold them",
    )

    @field_validator("stopbits")
    @classmethod
    def _stopbits(cls, value: float) -> float:
        if value not in (1, 1.5, 2):
            raise ValueError("stopbits is 1, 1.5 or 2")
        return value

    @field_validator("encoding")
    @classmethod
    def _known(cls, value: str) -> str:
        try:
            "".encode(value)
        except LookupError as exc:
            raise ValueError(f"unknown encoding {value!r}") from exc
        return value

    def serial_options(self) -> dict[str, Any]:
        return {
            "bytesize": self.bytesize,
            "parity": self.parity,
            "stopbits": self.stopbits,
            "rtscts": self.rtscts,
            "xonxoff": self.xonxoff,
        }


class IdentitySpec(_Strict):
    """The query that says which device answers, and what its reply must match."""

    send: str = Field(min_length=1, max_length=200)
    expect: str = Field(min_length=1)
    timeout_ms: int | None = Field(default=None, gt=0, le=60_000)

    _check = field_validator("expect")(_regex)


class ErrorSpec(_Strict):
    """How the device reports errors: replies of the form `reply` (a named group `code`,
    optionally `message`), where `ok` matches the reply that means "no error"; `query` asks
    the device's error queue (SCPI SYST:ERR?) after a state-changing command and after a
    query that got no reply."""

    reply: str
    ok: str | None = None
    query: str | None = Field(default=None, min_length=1, max_length=200)

    _check = field_validator("reply", "ok")(_regex)

    @field_validator("reply")
    @classmethod
    def _has_code(cls, value: str) -> str:
        if "code" not in re.compile(value).groupindex:
            raise ValueError("the error reply pattern needs a named group 'code'")
        return value


class StreamSpec(_Strict):
    """A streaming device: how to tell a line's kind, how much to keep, when a value is old."""

    format: Literal["nmea", "lines"] = "lines"
    kind: str | None = Field(
        default=None, description="for 'lines': a regex whose group 'kind' names the line's kind"
    )
    history: int = Field(default=1000, ge=1, le=1_000_000)
    stale_ms: int = Field(default=5000, gt=0)

    _check = field_validator("kind")(_regex)

    @model_validator(mode="after")
    def _kind_for_lines(self) -> StreamSpec:
        if self.format == "lines":
            if self.kind is None:
                raise ValueError("a 'lines' stream needs 'kind', a regex with a group 'kind'")
            if "kind" not in re.compile(self.kind).groupindex:
                raise ValueError("the kind pattern needs a named group 'kind'")
        return self


ValueType = Literal["number", "integer", "string", "boolean"]


class ParamSpec(_Strict):
    """One typed parameter; becomes the tool parameter's JSON Schema."""

    type: ValueType
    description: str = Field(default="", max_length=500)
    unit: str | None = Field(default=None, max_length=32)
    minimum: float | None = None
    maximum: float | None = None
    enum: list[str | int | float] | None = Field(default=None, min_length=1, max_length=100)
    pattern: str | None = None
    max_length: int | None = Field(default=None, ge=1, le=1000)
    required: bool = True
    true: str = Field(default="1", description="what a boolean true is written as")
    false: str = Field(default="0", description="what a boolean false is written as")

    _check = field_validator("pattern")(_regex)

    @model_validator(mode="after")
    def _consistent(self) -> ParamSpec:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError("minimum is above maximum")
        numeric = self.type in ("number", "integer")
        if not numeric and (self.minimum is not None or self.maximum is not None):
            raise ValueError(f"a {self.type} parameter has no minimum or maximum")
        if self.type != "string" and (self.pattern is not None or self.max_length is not None):
            raise ValueError(f"a {self.type} parameter has no pattern or max_length")
        return self

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the parameter."""
        out: dict[str, Any] = {"type": self.type}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.minimum is not None:
            out["minimum"] = _number(self.minimum)
        if self.maximum is not None:
            out["maximum"] = _number(self.maximum)
        if self.type == "string" and self.enum is None:
            out["maxLength"] = self.max_length or MAX_STRING
            if self.pattern is not None:
                out["pattern"] = self.pattern
        return out


class FieldSpec(_Strict):
    """One typed value of a reply: a named group of the reply pattern, or (for NMEA) an
    attribute of the parsed sentence."""

    type: ValueType = "string"
    unit: str | None = Field(default=None, max_length=32)
    description: str = Field(default="", max_length=500)
    source: str | None = Field(default=None, pattern=_NAME)
    scale: float = 1.0
    digits: int | None = Field(default=None, ge=0, le=12, description="round to this many")
    labels: dict[str, str] = Field(default_factory=dict)
    true: list[str] = Field(default_factory=lambda: ["1", "ON", "TRUE", "YES"])


class CommandSpec(_Strict):
    description: str = Field(min_length=1, max_length=1000)
    send: str | None = Field(default=None, min_length=1, max_length=500)
    reply: str | None = None
    read: str | None = Field(default=None, min_length=1, max_length=64)
    changes_state: bool = False
    timeout_ms: int | None = Field(default=None, gt=0, le=60_000)
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    fields: dict[str, FieldSpec] = Field(default_factory=dict)

    _check = field_validator("reply")(_regex)

    @field_validator("params", "fields")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not re.match(_NAME, name):
                raise ValueError(f"{name!r} is not a name (letters, digits, _)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CommandSpec:
        if (self.send is None) == (self.read is None):
            raise ValueError("a command has either 'send' (a query device) or 'read' (a stream)")
        if self.read is not None:
            if self.params or self.changes_state:
                raise ValueError("a stream command only reads: no params or changes_state")
            if not self.fields:
                raise ValueError("a stream command needs the fields it reads")
            if self.reply is not None:
                self._groups_declared()
            return self
        assert self.send is not None
        names = template_fields(self.send)
        missing = sorted(set(names) - set(self.params))
        if missing:
            raise ValueError(f"the template names parameters it does not declare: {missing}")
        unused = sorted(set(self.params) - set(names))
        if unused:
            raise ValueError(f"parameters not used by the template: {unused}")
        self._groups_declared()
        return self

    def _groups_declared(self) -> None:
        groups = set(re.compile(self.reply).groupindex) if self.reply is not None else set()
        unknown = sorted(set(self.fields) - groups)
        if unknown:
            raise ValueError(f"fields without a named group in the reply pattern: {unknown}")

    def reply_fields(self) -> dict[str, FieldSpec]:
        """Every named group of the reply, typed (undeclared ones are strings)."""
        if self.reply is None:
            return dict(self.fields)
        groups = re.compile(self.reply).groupindex
        return {name: self.fields.get(name, FieldSpec()) for name in groups}


def template_fields(template: str) -> list[str]:
    """The parameter names a template uses; ValueError for anything but plain `{name}` or
    `{name:format}` fields (no attribute access, indexing or conversion)."""
    names = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"the template {template!r} is malformed: {exc}") from exc
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not re.match(_NAME, field) or conversion is not None or "{" in (spec or ""):
            raise ValueError(
                f"the template field {{{field}}} must be a parameter name, optionally with "
                "a format such as {volts:.3f}"
            )
        names.append(field)
    return names


class DeviceSpec(_Strict):
    device: DeviceInfo
    port: PortSpec = Field(default_factory=PortSpec)
    identity: IdentitySpec | None = None
    errors: ErrorSpec | None = None
    stream: StreamSpec | None = None
    commands: dict[str, CommandSpec] = Field(min_length=1)

    @field_validator("commands")
    @classmethod
    def _tool_names(cls, value: dict[str, CommandSpec]) -> dict[str, CommandSpec]:
        for name in value:
            if not re.match(TOOL_NAME_PATTERN, name) or not re.match(_NAME, name):
                raise ValueError(f"{name!r} cannot be a tool name (letters, digits, _)")
            if name in GENERIC_TOOLS:
                raise ValueError(f"{name!r} is the name of a generic tool")
        return value

    @model_validator(mode="after")
    def _mode(self) -> DeviceSpec:
        stream = self.device.mode == "stream"
        if stream and self.stream is None:
            object.__setattr__(self, "stream", StreamSpec(format="nmea"))
        if not stream and self.stream is not None:
            raise ValueError("[stream] is for devices with mode = 'stream'")
        lines = stream and self.stream is not None and self.stream.format == "lines"
        for name, command in self.commands.items():
            if lines and command.reply is None:
                raise ValueError(f"commands.{name}: a 'lines' stream reads fields with 'reply'")
            if stream and command.read is None:
                raise ValueError(f"commands.{name}: a streaming device's commands 'read'")
            if not stream and command.send is None:
                raise ValueError(f"commands.{name}: a query device's commands 'send'")
        return self

    @property
    def streaming(self) -> bool:
        return self.device.mode == "stream"


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x
