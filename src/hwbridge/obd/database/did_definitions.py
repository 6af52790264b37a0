"""DID definitions: what the data identifiers of a vehicle's ECUs hold, as a TOML file the user
writes, so that `uds_read_did` and `uds_write_did` take a DID by name and its value as a
number in its unit (or a label), checked against its range before anything is sent.

    # engine_dids.toml
    [did.IdleSpeedTarget]
    did = 0x0101          # or "0101"
    type = "uint16"       # uint8/16/24/32, int8/16/32, float32/64, ascii, bytes
    scale = 1             # physical = raw * scale + offset
    offset = 0
    unit = "rpm"
    range = [600, 1000]   # physical; a write outside it is refused before it is sent
    writable = true
    description = "the speed the engine idles at"

    [did.FanMode]
    did = 0x0120
    type = "uint8"
    choices = { 0 = "off", 1 = "low", 2 = "high" }

The file is checked by pydantic models (`DidDefinitionsFile`, its JSON Schema from
`did_definitions_schema()`); a bad one is a `DidDefinitionError` naming the file, the entry
and the line of its table. Multi-byte values are big-endian, as UDS sends them.
"""

from __future__ import annotations

import math
import re
import struct
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from hwbridge.can.database.values import format_number
from hwbridge.core.models import ToolError

__all__ = [
    "DESCRIBED_CHARS",
    "MAX_CHOICES",
    "MAX_DEFINITIONS",
    "DidDefinition",
    "DidDefinitionError",
    "DidDefinitions",
    "DidDefinitionsFile",
    "did_definitions_schema",
    "load_did_definitions",
    "parse_did_definitions",
]

DidType = Literal[
    "uint8", "uint16", "uint24", "uint32", "int8", "int16", "int32", "float32", "float64",
    "ascii", "bytes",
]  # fmt: skip
MAX_DEFINITIONS: Final = 4096
MAX_FILE_BYTES: Final = 1_000_000
MAX_CHOICES: Final = 256
"""Labels one DID may have (a value table of a byte at most)."""
DESCRIBED_LABELS: Final = 8
"""Labels of a DID the tools' descriptions show; the others are still taken by name."""
DESCRIBED_CHARS: Final = 4000
"""How much of the tools' descriptions the definitions take; the DIDs past it are counted,
and still read and written by name (what the file says costs prompt space at every turn)."""
_MAX_RECORD: Final = 4093  # what one WriteDataByIdentifier can carry
_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_UNIT = r"^[ -~]{0,16}$"  # printable ASCII: a unit goes into tool descriptions
_INTEGERS: Final = {
    "uint8": (1, False), "uint16": (2, False), "uint24": (3, False), "uint32": (4, False),
    "int8": (1, True), "int16": (2, True), "int32": (4, True),
}  # fmt: skip
_FLOATS: Final = {"float32": ">f", "float64": ">d"}
_MAX_LISTED = 5
_DID_SCHEMA: Final = {
    "description": 'the identifier: 0x0101, or hex text "0101"',
    "anyOf": [
        {"type": "integer", "minimum": 0, "maximum": 0xFFFF},
        {"type": "string", "pattern": "^(0[xX])?[0-9a-fA-F]{1,4}$"},
    ],
}


class DidDefinitionError(ValueError):
    """A DID definitions file that cannot be used: the file, the entry, the line, what."""


class DidDefinition(BaseModel):
    """One data identifier: its number, how its bytes read, and whether it may be written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    did: Annotated[int, WithJsonSchema(_DID_SCHEMA)] = Field(ge=0, le=0xFFFF)
    type: DidType
    scale: float = Field(1.0, description="physical = raw * scale + offset")
    offset: float = 0.0
    unit: str = Field("", pattern=_UNIT)
    range: tuple[float, float] | None = Field(
        None, description="[low, high] in physical units; writes outside are refused"
    )
    writable: StrictBool = False
    choices: dict[str, Annotated[str, Field(pattern=r"^[ -~]{1,64}$")]] = Field(
        default_factory=dict,
        max_length=MAX_CHOICES,
        description='raw value -> label, { 0 = "off", 1 = "on" }',
    )
    length: int | None = Field(
        None, ge=1, le=_MAX_RECORD, description="bytes of an ascii or bytes value"
    )
    description: str = Field("", max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")

    @field_validator("did", mode="before")
    @classmethod
    def _hex(cls, value: Any) -> Any:
        if isinstance(value, str) and re.fullmatch(r"(?:0[xX])?[0-9a-fA-F]{1,4}", value.strip()):
            return int(value.strip().removeprefix("0x").removeprefix("0X"), 16)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> DidDefinition:
        if self.type in ("ascii", "bytes"):
            numeric = self.scale != 1 or self.offset != 0 or self.range or self.choices
            if numeric:
                raise ValueError(
                    f"a {self.type} value has no scale, offset, range or choices; "
                    "give length instead"
                )
            return self
        if self.length is not None:
            raise ValueError(f"a {self.type} value's length is its type's; drop length")
        if not (math.isfinite(self.scale) and math.isfinite(self.offset)) or self.scale == 0:
            raise ValueError("scale must be a finite number other than 0; offset finite")
        low, high = self.raw_limits()
        if self.range is not None:
            first, last = self.range
            if not (math.isfinite(first) and math.isfinite(last)) or first > last:
                raise ValueError("range is [low, high] with low <= high")
            ends = sorted((low * self.scale + self.offset, high * self.scale + self.offset))
            if first < ends[0] or last > ends[1]:
                raise ValueError(
                    f"range [{format_number(first)}, {format_number(last)}] is beyond what a "
                    f"{self.type} scaled by {format_number(self.scale)} can hold "
                    f"([{format_number(ends[0])}, {format_number(ends[1])}])"
                )
        if self.choices:
            if self.type in _FLOATS:
                raise ValueError("choices label integer values: give an integer type")
            for key in self.choices:
                try:
                    raw = int(key, 0)
                except ValueError:
                    raise ValueError(f"choices key {key[:40]!r} is not an integer") from None
                if not low <= raw <= high:
                    raise ValueError(f"choices key {key} does not fit a {self.type}")
            if len({v.lower() for v in self.choices.values()}) != len(self.choices):
                raise ValueError("two choices have the same label")
        return self

    def raw_limits(self) -> tuple[float, float]:
        """The raw values the type can hold."""
        if self.type in _INTEGERS:
            size, signed = _INTEGERS[self.type]
            if signed:
                return -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
            return 0, (1 << (8 * size)) - 1
        if self.type == "float32":
            return -3.4028234663852886e38, 3.4028234663852886e38
        return -math.inf, math.inf

    def physical_range(self) -> tuple[float, float]:
        """The physical values a write may give: `range`, else all the type holds."""
        if self.range is not None:
            return self.range
        low, high = self.raw_limits()
        ends = sorted((low * self.scale + self.offset, high * self.scale + self.offset))
        return ends[0], ends[1]

    def labels(self) -> dict[int, str]:
        return {int(key, 0): label for key, label in self.choices.items()}


class DidDefinitionsFile(BaseModel):
    """A DID definitions file: `[did.<Name>]` tables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    did: dict[Annotated[str, Field(pattern=_NAME)], DidDefinition] = Field(
        min_length=1, max_length=MAX_DEFINITIONS
    )


def did_definitions_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a DID definitions file."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://hwbridge.dev/schema/obd/DidDefinitions.schema.json",
        **DidDefinitionsFile.model_json_schema(),
    }


def _number(value: float) -> int | float:
    """A physical value as JSON: an int when it is whole, else 10 significant digits."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return int(value)
    return float(f"{value:.10g}")


@dataclass(frozen=True)
class DefinedDid:
    """One definition with its name, and the codec of its bytes."""

    name: str
    spec: DidDefinition

    @property
    def did(self) -> int:
        return self.spec.did

    def size(self) -> int | None:
        spec = self.spec
        if spec.type in _INTEGERS:
            return _INTEGERS[spec.type][0]
        if spec.type in _FLOATS:
            return struct.calcsize(_FLOATS[spec.type])
        return spec.length

    def describe(self) -> str:
        """One line for a tool description: name, DID, unit, range, labels, writable."""
        spec = self.spec
        parts = [f"{self.name} ({spec.did:04X}"]
        if spec.type in ("ascii", "bytes"):
            parts.append(", text" if spec.type == "ascii" else ", hex bytes")
        elif spec.choices:
            labels = list(spec.labels().values())
            shown = "/".join(labels[:DESCRIBED_LABELS])
            more = len(labels) - DESCRIBED_LABELS
            parts.append(f", one of {shown}" + (f"/... ({len(labels)} labels)" if more > 0 else ""))
        else:
            low, high = spec.physical_range()
            unit = f" {spec.unit}" if spec.unit else ""
            if math.isfinite(low) and math.isfinite(high):
                parts.append(f", {format_number(low)} to {format_number(high)}{unit}")
            elif unit:
                parts.append(f",{unit}")
        parts.append(", writable)" if spec.writable else ")")
        return "".join(parts)

    def decode(self, data: bytes) -> dict[str, Any]:
        """The value as JSON: name, value (and label), unit, always the raw hex."""
        spec = self.spec
        out: dict[str, Any] = {"did": f"{spec.did:04X}", "name": self.name}
        size = self.size()
        if spec.type == "ascii":
            text = data[:size] if size else data
            out["value"] = text.decode("ascii", "replace").rstrip("\x00 ").replace("\ufffd", "?")
        elif spec.type == "bytes":
            out["value"] = (data[:size] if size else data)[:512].hex(" ").upper()
        elif size is not None and len(data) >= size:
            raw: int | float
            if spec.type in _FLOATS:
                raw = struct.unpack(_FLOATS[spec.type], data[:size])[0]
            else:
                raw = int.from_bytes(data[:size], "big", signed=_INTEGERS[spec.type][1])
            physical = raw * spec.scale + spec.offset
            if not math.isfinite(physical):
                out["value"] = None
                out["note"] = f"{self.name} holds {raw!r}, not a finite number"
            else:
                out["value"] = _number(physical)
            if spec.unit:
                out["unit"] = spec.unit
            if isinstance(raw, int) and raw in spec.labels():
                out["label"] = spec.labels()[raw]
            out["raw_value"] = _number(raw) if math.isfinite(raw) else str(raw)
        else:
            out["note"] = f"the ECU sent {len(data)} bytes; {self.name} has {size}"
        if size is not None and len(data) > size:
            out["extra_bytes"] = len(data) - size
        out["raw"] = data[:512].hex(" ").upper()
        return out

    def encode(self, value: Any) -> bytes:
        """The data record for `value` (a number in the unit, a label, text or hex bytes);
        INVALID_VALUE or OUT_OF_RANGE before anything is sent."""
        spec = self.spec
        if spec.type == "ascii":
            return self._text(value)
        if spec.type == "bytes":
            return self._bytes(value)
        number = self._physical(value)
        low, high = spec.physical_range()
        unit = f" {spec.unit}" if spec.unit else ""
        if not low <= number <= high:
            raise ToolError(
                "OUT_OF_RANGE",
                f"{self.name} is {format_number(low)} to {format_number(high)}{unit}; "
                f"{format_number(number)} is out of range. Nothing was sent.",
            )
        raw_value = (number - spec.offset) / spec.scale
        size = self.size() or 0
        if spec.type in _FLOATS:
            return struct.pack(_FLOATS[spec.type], raw_value)
        raw = round(raw_value)
        raw_low, raw_high = spec.raw_limits()
        if not raw_low <= raw <= raw_high:  # rounding at the edge of the type
            raise ToolError(
                "OUT_OF_RANGE", f"{self.name} cannot hold {format_number(number)}{unit}."
            )
        return raw.to_bytes(size, "big", signed=_INTEGERS[spec.type][1])

    def _physical(self, value: Any) -> float:
        labels = self.spec.labels()
        if isinstance(value, str):
            key = value.strip().lower()
            for raw, label in labels.items():
                if label.lower() == key:
                    return raw * self.spec.scale + self.spec.offset
            try:
                value = float(key)
            except ValueError:
                listed = ", ".join(list(labels.values())[:8])
                also = f" or one of {listed}" if labels else ""
                raise ToolError(
                    "INVALID_VALUE",
                    f"{self.name} takes a number{also}; got {value[:40]!r}. Nothing was sent.",
                ) from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolError(
                "INVALID_VALUE", f"{self.name} takes a number; got {type(value).__name__}."
            )
        if not math.isfinite(value):
            raise ToolError("INVALID_VALUE", f"{self.name} takes a finite number.")
        return float(value)

    def _text(self, value: Any) -> bytes:
        size = self.spec.length
        if not isinstance(value, str) or not re.fullmatch(r"[ -~]*", value):
            raise ToolError("INVALID_VALUE", f"{self.name} takes printable ASCII text.")
        data = value.encode("ascii")
        limit = size or _MAX_RECORD
        if not data or len(data) > limit:
            raise ToolError(
                "INVALID_VALUE", f"{self.name} takes 1 to {limit} characters; got {len(data)}."
            )
        return data.ljust(size or 0, b" ")  # a fixed-length text is padded with spaces

    def _bytes(self, value: Any) -> bytes:
        digits = "".join(value.split()) if isinstance(value, str) else ""
        try:
            data = bytes.fromhex(digits.removeprefix("0x").removeprefix("0X"))
        except ValueError:
            data = b""
        if not data:
            raise ToolError(
                "INVALID_VALUE", f'{self.name} takes hex bytes, two digits a byte, e.g. "02BC".'
            )
        if len(data) > (self.spec.length or _MAX_RECORD):
            raise ToolError(
                "INVALID_VALUE", f"{self.name} has at most {_MAX_RECORD} bytes; got {len(data)}."
            )
        if self.spec.length is not None and len(data) != self.spec.length:
            raise ToolError(
                "INVALID_VALUE", f"{self.name} is {self.spec.length} bytes; got {len(data)}."
            )
        return data


class DidDefinitions:
    """The definitions of one file, by name (case-insensitive) and by DID."""

    def __init__(self, entries: Mapping[str, DidDefinition], source: str = "<dids>") -> None:
        self.source = source
        self._by_name = {name.lower(): DefinedDid(name, spec) for name, spec in entries.items()}
        self.by_did: Mapping[int, DefinedDid] = MappingProxyType(
            {d.did: d for d in self._by_name.values()}
        )

    def __len__(self) -> int:
        return len(self.by_did)

    def find(self, text: Any) -> DefinedDid | None:
        """The definition named `text`, or of the DID `text` is (hex, or an int)."""
        if isinstance(text, str):
            named = self._by_name.get(text.strip().lower())
            if named is not None:
                return named
            digits = text.strip().removeprefix("0x").removeprefix("0X")
            if re.fullmatch(r"[0-9a-fA-F]{1,4}", digits):
                return self.by_did.get(int(digits, 16))
            return None
        if isinstance(text, int) and not isinstance(text, bool):
            return self.by_did.get(text)
        return None

    def describe(self) -> str:
        """The definitions for the tools' descriptions, up to DESCRIBED_CHARS: the DIDs
        past it are counted (they are still read and written by name)."""
        shown: list[str] = []
        size = 0
        for defined in self.by_did.values():
            line = defined.describe()
            if size + len(line) + 2 > DESCRIBED_CHARS:
                break
            shown.append(line)
            size += len(line) + 2
        more = len(self.by_did) - len(shown)
        return "; ".join(shown) + (f"; and {more} more defined DIDs" if more else "")


def _line_of(text: str, name: str) -> int | None:
    quoted = re.escape(name)
    key = rf"(?:\"{quoted}\"|'{quoted}'|{quoted})"
    pattern = rf"^[ \t]*\[[ \t]*did[ \t]*\.[ \t]*{key}[ \t]*\]"
    found = re.search(pattern, text, re.MULTILINE)
    return text.count("\n", 0, found.start()) + 1 if found else None


def _where(source: str, text: str, location: tuple[Any, ...]) -> str:
    """`file:line: did.Name.key` for a pydantic error location."""
    parts = [str(p) for p in location]
    line = _line_of(text, parts[1]) if len(parts) > 1 and parts[0] == "did" else None
    at = f"{source}:{line}" if line is not None else source
    return f"{at}: {'.'.join(parts) or '(top level)'}"


def parse_did_definitions(text: str, source: str = "<dids>") -> DidDefinitions:
    """DidDefinitions from TOML text; DidDefinitionError naming `source`, the line of the
    entry, the key and the problem."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DidDefinitionError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise DidDefinitionError(f"{source}: nests arrays or tables too deeply") from None
    try:
        model = DidDefinitionsFile.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # the line of each listed one only: each is looked for in the whole text
        problems = [f"{_where(source, text, e['loc'])}: {e['msg']}" for e in errors[:_MAX_LISTED]]
        more = len(errors) - _MAX_LISTED
        listed = "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
        raise DidDefinitionError(listed) from None
    seen: dict[int, str] = {}
    names: dict[str, str] = {}
    for name, spec in model.did.items():
        if re.fullmatch(r"[0-9a-fA-F]{4}", name):  # "F190" would mean another DID by name
            raise DidDefinitionError(
                f"{_where(source, text, ('did', name))}: the name reads as the DID "
                f"{int(name, 16):04X}; name it so that it does not (F190 is DID F190)"
            )
        if spec.did in seen:
            raise DidDefinitionError(
                f"{_where(source, text, ('did', name))}: DID {spec.did:04X} is defined twice "
                f"(also as {seen[spec.did]})"
            )
        if name.lower() in names:
            raise DidDefinitionError(
                f"{_where(source, text, ('did', name))}: the name differs from "
                f"{names[name.lower()]} by case alone"
            )
        seen[spec.did] = name
        names[name.lower()] = name
    return DidDefinitions(model.did, source)


def load_did_definitions(path: str | Path) -> DidDefinitions:
    """Read and check a DID definitions file (at most 1 MB of UTF-8 TOML)."""
    file = Path(path)
    try:
        with file.open("rb") as stream:  # read no more than the bound: a device may not end
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DidDefinitionError(f"{file}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise DidDefinitionError(
            f"{file}: more than {MAX_FILE_BYTES:,} bytes; a DID definitions file is at most "
            f"{MAX_FILE_BYTES:,}"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DidDefinitionError(f"{file}: not UTF-8 (byte {exc.start})") from None
    return parse_did_definitions(text, str(file))
