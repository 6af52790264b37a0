"""What a device says, as typed JSON values: reply groups and NMEA fields become
`{"value": ..., "unit": ..., "label": ...}`; text from the device stays a bounded string."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from hwbridge.serial.spec.models import FieldSpec

__all__ = ["MAX_TEXT", "bounded", "nmea_kind", "typed_value"]

MAX_TEXT = 200
"""Longest piece of device text in a result (a reply line, a string field)."""


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def typed_value(spec: FieldSpec, raw: Any) -> dict[str, Any]:
    """One field as JSON: its value in the spec's type (None when the device left it
    empty or wrote something else), its unit and its label."""
    value: Any
    if raw is None or raw == "":
        value = None
    elif spec.type in ("number", "integer"):
        try:
            number = float(raw) * spec.scale
        except (TypeError, ValueError):
            number = None
        if number is None or not math.isfinite(number):
            value = None
        elif spec.type == "integer":
            value = round(number)
        else:
            value = round(number, spec.digits) if spec.digits is not None else number
    elif spec.type == "boolean":
        value = str(raw).strip().upper() in {t.upper() for t in spec.true}
    elif isinstance(raw, dt.datetime | dt.date | dt.time):
        value = raw.isoformat()
    else:
        value = bounded(str(raw))
    out: dict[str, Any] = {"value": value}
    if spec.unit:
        out["unit"] = spec.unit
    if spec.labels and value is not None:
        key = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
        label = spec.labels.get(key)
        if label is not None:
            out["label"] = label
    return out


def nmea_kind(line: str) -> str | None:
    """The kind of an NMEA 0183 sentence whose checksum holds: `GGA` for `$GPGGA` and
    `$GNGGA` alike, the whole address for proprietary ones (`PMTK001`); None otherwise."""
    if len(line) < 7 or line[0] not in "$!":
        return None
    star = line.rfind("*")
    if star < 0 or len(line) < star + 3:
        return None
    body = line[1:star]
    checksum = 0
    for byte in body.encode("latin-1", "replace"):
        checksum ^= byte
    if f"{checksum:02X}" != line[star + 1 : star + 3].upper():
        return None
    address = body.split(",", 1)[0]
    if address.startswith("P"):
        return address
    return address[2:] if len(address) == 5 else None
