"""Reading what an ELM327 prints for one OBD request (headers on): pure, bounded, tested
with any input.

Each line is a message the adapter prints (`NO DATA`, `CAN ERROR`, `SEARCHING...`...) or a
received frame: its CAN id (3 hex digits, or 8 with 29-bit ids), then the ISO-TP bytes, with
or without spaces. Frames are reassembled per ECU (single, first and consecutive frames);
lines that are neither are counted as garbage, never guessed at. A "response pending"
(`7F xx 78`) is no answer: it is counted per ECU, and the final answer follows, or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from hwbridge.obd.transport.pending import is_pending

__all__ = ["ADAPTER_MESSAGES", "Reply", "parse_reply", "pending_line"]

# What a real adapter prints instead of data, and the error code each one becomes.
ADAPTER_MESSAGES: Final = {
    "NO DATA": None,  # nothing answered: an empty reply, not an error
    "?": "ADAPTER_ERROR",
    "CAN ERROR": "BUS_ERROR",
    "BUS ERROR": "BUS_ERROR",
    "BUS BUSY": "BUS_ERROR",
    "FB ERROR": "BUS_ERROR",
    "LV RESET": "ADAPTER_ERROR",
    "ERR94": "BUS_ERROR",
    "BUFFER FULL": "ADAPTER_OVERFLOW",
    "STOPPED": "ADAPTER_STOPPED",
    "UNABLE TO CONNECT": "NO_VEHICLE",
    "ACT ALERT": "ADAPTER_ERROR",
}
_SKIPPED = ("SEARCHING...", "SEARCHING", "OK", ">")
_HEX = frozenset("0123456789ABCDEF")
_MAX_LINES = 2048


@dataclass
class Reply:
    """Complete messages per CAN id, incomplete ones with the reason, adapter messages."""

    messages: dict[int, bytes] = field(default_factory=dict)
    incomplete: dict[int, str] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # ids in the order their answers began
    errors: list[tuple[str, str]] = field(default_factory=list)  # (code, line)
    pending: dict[int, int] = field(default_factory=dict)  # "response pending" answers per id
    no_data: bool = False
    garbage: int = 0


@dataclass
class _Open:
    length: int
    data: bytearray
    sequence: int


def _message(line: str) -> str | None:
    """The adapter message `line` is, if it is one."""
    if line in ADAPTER_MESSAGES:
        return line
    if line.startswith("BUS INIT") and "ERROR" in line:
        return "BUS INIT: ...ERROR"
    if line.startswith("ERR") and line[3:].isdigit():
        return "ERR94" if line == "ERR94" else line
    if "DATA ERROR" in line or "RX ERROR" in line:
        return "DATA ERROR"
    return None


def parse_reply(text: str, extended: bool) -> Reply:
    """`text` (what came before the prompt) as frames and messages; `extended`: 29-bit ids."""
    reply = Reply()
    width = 8 if extended else 3
    open_: dict[int, _Open] = {}
    for raw in text.replace("\n", "\r").split("\r")[:_MAX_LINES]:
        line = raw.strip().upper()
        if not line or line in _SKIPPED:
            continue
        message = _message(line)
        if message is not None:
            if message == "NO DATA":
                reply.no_data = True
            elif message == "DATA ERROR":
                reply.errors.append(("BUS_ERROR", line[:40]))
            elif message == "BUS INIT: ...ERROR":
                reply.errors.append(("NO_VEHICLE", line[:40]))
            else:
                reply.errors.append((ADAPTER_MESSAGES.get(message) or "ADAPTER_ERROR", line[:40]))
            continue
        digits = line.replace(" ", "")
        if len(digits) < width + 2 or len(digits) > width + 16 or not set(digits) <= _HEX:
            reply.garbage += 1
            continue
        if (len(digits) - width) % 2:
            reply.garbage += 1
            continue
        ident = int(digits[:width], 16)
        data = bytes.fromhex(digits[width:])
        _feed(reply, open_, ident, data)
    for ident, pending in open_.items():
        got = len(pending.data)
        reply.incomplete[ident] = f"the answer stopped after {got} of {pending.length} bytes"
    return reply


def pending_line(line: str, extended: bool) -> int | None:
    """The CAN id of the ECU that `line` (one printed line) says "response pending" for."""
    return next(iter(parse_reply(line, extended).pending), None)


def _feed(reply: Reply, open_: dict[int, _Open], ident: int, data: bytes) -> None:
    pci = data[0] >> 4
    if pci == 0:
        length = data[0] & 0x0F
        if not 1 <= length <= len(data) - 1:
            reply.garbage += 1
            return
        open_.pop(ident, None)
        _done(reply, ident, data[1 : 1 + length])
    elif pci == 1:
        if len(data) < 8:
            reply.garbage += 1
            return
        length = (data[0] & 0x0F) << 8 | data[1]
        if length < 8:
            reply.garbage += 1
            return
        open_[ident] = _Open(length, bytearray(data[2:8]), 1)
        if ident not in reply.order:
            reply.order.append(ident)
    elif pci == 2:
        pending = open_.get(ident)
        if pending is None or data[0] & 0x0F != pending.sequence:
            reply.garbage += 1
            if pending is not None:  # a lost frame: this message cannot be completed
                del open_[ident]
                reply.incomplete[ident] = "a consecutive frame was lost"
            return
        pending.data += data[1:]
        pending.sequence = (pending.sequence + 1) & 0x0F
        if len(pending.data) >= pending.length:
            del open_[ident]
            _done(reply, ident, bytes(pending.data[: pending.length]))
    else:
        reply.garbage += 1  # flow control or not ISO-TP


def _done(reply: Reply, ident: int, payload: bytes) -> None:
    if ident not in reply.order:
        reply.order.append(ident)
    if is_pending(payload):
        reply.pending[ident] = reply.pending.get(ident, 0) + 1
        return  # the final answer follows, or not
    reply.messages.setdefault(ident, payload)
    reply.incomplete.pop(ident, None)
