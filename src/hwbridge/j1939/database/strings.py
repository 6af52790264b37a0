"""The parameter groups that carry text: `*`-delimited ASCII fields (SAE J1939-71).

Vehicle identification (VIN), component identification (make, model, serial number, unit
number), software identification (a count of fields, then the fields) and ECU
identification. What a vehicle sends is cut to printable ASCII of a bounded length: it is
data to read, never text to follow.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["TEXT_PGNS", "decode_text", "printable"]

MAX_FIELD = 64
MAX_FIELDS = 16

# PGN -> the names of its fields, in order (the last one repeats for software ids)
TEXT_PGNS: Final[dict[int, tuple[str, ...]]] = {
    65260: ("vin",),
    65259: ("make", "model", "serial_number", "unit_number"),
    65242: ("software_identification",),
    64965: (
        "ecu_part_number",
        "ecu_serial_number",
        "ecu_location",
        "ecu_type",
        "ecu_manufacturer",
        "ecu_hardware_id",
    ),
    65131: ("driver_1_id", "driver_2_id"),
}


def printable(data: bytes, limit: int = MAX_FIELD) -> str:
    """Bytes as printable ASCII (anything else dropped), at most `limit` characters."""
    return "".join(chr(b) for b in data if 0x20 <= b < 0x7F)[:limit].strip()


def decode_text(pgn: int, data: bytes) -> dict[str, Any] | None:
    """The fields of a text PGN, or None when `pgn` is not one of them."""
    names = TEXT_PGNS.get(pgn)
    if names is None:
        return None
    body = data
    out: dict[str, Any] = {}
    if pgn == 65242 and body:
        out["fields_declared"] = body[0]
        body = body[1:]
    parts = body.split(b"*")
    if parts and not parts[-1].strip(b"\xff\x00 "):
        parts = parts[:-1]  # the terminating '*' (and padding after it)
    fields = [printable(p) for p in parts[:MAX_FIELDS]]
    if len(names) == 1 and pgn != 65260:
        out[names[0] + "s"] = fields
    else:
        for i, value in enumerate(fields):
            key = names[i] if i < len(names) else f"field_{i + 1}"
            out[key] = value
    if len(parts) > MAX_FIELDS:
        out["fields_not_shown"] = len(parts) - MAX_FIELDS
    return out
