"""What a database contains, as plain JSON: message summaries, descriptions, signal search.

Descriptions leave out empty fields so a large database stays small in a tool result. The
signal search (`SignalIndex`) lives in `signal_search`, its vocabulary in
prompts/vocabulary.toml.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hwbridge.can.database.search import SignalIndex
from hwbridge.can.database.values import SignalSpec

__all__ = [
    "SignalIndex",
    "describe_message",
    "describe_signal",
    "id_text",
    "j1939_pgn",
    "summarize_message",
]


def id_text(frame_id: int, extended: bool) -> str:
    """`0x1A0` for a standard id, `0x18FEF100` for an extended one."""
    return f"0x{frame_id:08X}" if extended else f"0x{frame_id:03X}"


def j1939_pgn(frame_id: int) -> int:
    """The PGN of a 29-bit J1939 id: PDU1 formats (PF < 240) drop the destination byte."""
    pgn = (frame_id >> 8) & 0x3FFFF
    if (pgn >> 8) & 0xFF < 240:
        pgn &= 0x3FF00
    return pgn


def _comment(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def summarize_message(message: Any) -> dict[str, Any]:
    """One line of `list_messages`."""
    extended = bool(message.is_extended_frame)
    return {
        "name": message.name,
        "id": id_text(message.frame_id, extended),
        "extended": extended,
        "fd": bool(message.is_fd),
        "length": int(message.length),
        "signals": len(message.signals),
        "cycle_time_ms": message.cycle_time,
        "senders": list(message.senders),
    }


def describe_signal(spec: SignalSpec) -> dict[str, Any]:
    """A signal's unit, range, labels and multiplexing; absent fields are omitted."""
    out: dict[str, Any] = {"name": spec.name}
    if spec.unit:
        out["unit"] = spec.unit
    out["type"] = "integer" if spec.int_like else "number"
    out["minimum"] = _number(spec.low)
    out["maximum"] = _number(spec.high)
    if not spec.int_like:
        out["resolution"] = spec.scale
    out["bits"] = int(spec.signal.length)
    if spec.choices:
        out["choices"] = {str(raw): label for raw, label in spec.choices.items()}
    if spec.signal.raw_initial is not None:
        out["initial"] = spec.to_json(spec.signal.raw_initial)[0]
    if spec.is_multiplexer:
        out["multiplexer"] = True
    if spec.multiplexer_signal is not None:
        out["multiplexer_signal"] = spec.multiplexer_signal
        out["multiplexer_ids"] = list(spec.multiplexer_ids)
    if spec.signal.receivers:
        out["receivers"] = list(spec.signal.receivers)
    if spec.comment:
        out["comment"] = spec.comment
    return out


def describe_message(message: Any, specs: Iterable[SignalSpec]) -> dict[str, Any]:
    """Everything an LLM needs to read or send `message`."""
    out = summarize_message(message)
    if message.protocol == "j1939" and message.is_extended_frame:
        out["pgn"] = j1939_pgn(message.frame_id)
    comment = _comment(message.comment)
    if comment:
        out["comment"] = comment
    out["multiplexed"] = bool(message.is_multiplexed())
    out["signals"] = [describe_signal(s) for s in specs]
    return out
