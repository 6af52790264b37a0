"""Tool results as JSON: whatever a tool returns becomes JSON text and a JSON-safe value."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any

import orjson

__all__ = ["clean_text", "dumps", "loads", "to_jsonable", "writable"]


def to_jsonable(value: Any) -> Any:
    """A copy of `value` that json.dumps accepts without help (non-finite floats become None)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex(" ").upper()
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    if isinstance(value, Decimal):
        return to_jsonable(float(value))
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return to_jsonable(dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    return str(value)


# Types orjson would write natively but plain json cannot: let them fall back to to_jsonable
# so that the returned value is JSON-safe for any serializer.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def dumps(value: Any) -> tuple[str, Any]:
    """Compact JSON text of `value` and the JSON-safe value it encodes.

    The value is `value` itself when it already was JSON-safe (the common case, which costs
    one orjson call); otherwise a converted copy.
    """
    try:
        return orjson.dumps(value, option=_PASSTHROUGH).decode(), value
    except TypeError:
        safe = to_jsonable(value)
    try:
        return orjson.dumps(safe).decode(), safe
    except TypeError:  # lone surrogates, nesting beyond orjson's, integers beyond 64 bits
        safe = writable(safe)
    try:
        return orjson.dumps(safe).decode(), safe
    except TypeError:  # integers beyond 64 bits: the standard library copes
        return json.dumps(safe, ensure_ascii=True), safe


def loads(text: str | bytes) -> Any:
    """Strict, fast JSON parsing; raises ValueError on anything that is not JSON."""
    return orjson.loads(text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 64


def clean_text(text: str) -> str:
    """`text` with lone surrogates (which no UTF-8 writer can encode) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def writable(value: Any, depth: int = 0) -> Any:
    """A copy any JSON writer accepts: lone surrogates (which no UTF-8 writer can encode)
    become U+FFFD, and containers nested beyond 64 levels become null."""
    if isinstance(value, str):
        return clean_text(value)
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {writable(str(k)): writable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [writable(v, depth + 1) for v in value]
    return to_jsonable(value)
