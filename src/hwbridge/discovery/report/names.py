"""The names discovery gives what it finds: MSG_1A0, SIG_1A0_7, COUNTER_1A0_56 (the report's
and the draft DBC's)."""

from __future__ import annotations

__all__ = ["field_name", "id_text", "message_name"]

_PREFIX = {
    "value": "SIG",
    "flag": "FLAG",
    "counter": "COUNTER",
    "checksum": "CHECKSUM",
    "constant": "CONST",
}


def id_text(frame_id: int, extended: bool) -> str:
    return f"{frame_id:08X}" if extended else f"{frame_id:03X}"


def message_name(frame_id: int, extended: bool) -> str:
    """MSG_1A0 for 11-bit 0x1A0, MSG_18FEF100 for a 29-bit id."""
    return f"MSG_{id_text(frame_id, extended)}"


def field_name(kind: str, frame_id: int, extended: bool, start_bit: int) -> str:
    """A name unique on the bus: SIG_1A0_7 (kind, id, start bit)."""
    return f"{_PREFIX.get(kind, 'SIG')}_{id_text(frame_id, extended)}_{start_bit}"
