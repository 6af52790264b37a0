"""Reading what an ELM327 prints for one OBD request (headers on): pure, bounded, tested
with any input.

Each line is a message the adapter prints (`NO DATA`, `CAN ERROR`, `SEARCHING...`...) or a
received frame: its CAN id (3 hex digits, or 8 with 29-bit ids), then the ISO-TP bytes, with
or without spaces. Frames are reassembled per ECU (single, first and consecutive frames);
lines that are neither are counted as garbage, never guessed at. A "response pending"
(`7F xx 78`) is no answer: it is counted per ECU, and the final answer follows, or not. An
answer to another request (another service's, or, when the request is known, the same
service's for other PIDs or DIDs, as an ECU's late answer to an earlier request is) is kept
apart (`Reply.foreign`), never taken for this request's answer, and the ECU's own answer
that follows still counts.

`ReplyReader` reads a reply as it comes in, line by line, at a constant cost per line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from hwbridge.obd.transport.pending import for_another_request, for_another_service, is_pending

__all__ = ["ADAPTER_MESSAGES", "Reply", "ReplyReader", "parse_reply"]

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
    foreign: dict[int, bytes] = field(default_factory=dict)  # negative answers to another service
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


class ReplyReader:
    """`parse_reply` line by line, for a reply still coming in: each line costs the same
    however many came before it (the ELM327 adapter reads a chip that may flood it).

    `service` is the request's service id: a "response pending" or a negative response
    that names another service answers some other request, and is kept apart (`foreign`).
    """

    def __init__(
        self, extended: bool, service: int | None = None, request: bytes | None = None
    ) -> None:
        self.extended = extended
        self.service = request[0] if request else service
        self.request = request or None
        self.lines = 0
        self._reply = Reply()
        self._open: dict[int, _Open] = {}
        self._width = 8 if extended else 3

    def feed(self, text: str) -> int | None:
        """Read one printed line (or several, separated by CR/LF); the CAN id of the ECU
        that said "response pending" in it, if one did. Lines past the first `_MAX_LINES`
        are ignored."""
        pended = None
        for raw in text.replace("\n", "\r").split("\r"):
            if self.lines >= _MAX_LINES:
                break
            self.lines += 1
            ident = self._line(raw.strip().upper())
            pended = ident if ident is not None else pended
        return pended

    def began(self, ident: int) -> bool:
        """Whether `ident`'s final answer (not a pending) came, complete or begun."""
        reply = self._reply
        return ident in reply.messages or ident in reply.incomplete or ident in self._open

    def result(self) -> Reply:
        """What was read so far; answers begun but not finished are incomplete."""
        reply = self._reply
        out = Reply(
            messages=dict(reply.messages),
            incomplete=dict(reply.incomplete),
            order=list(reply.order),
            errors=list(reply.errors),
            pending=dict(reply.pending),
            foreign=dict(reply.foreign),
            no_data=reply.no_data,
            garbage=reply.garbage,
        )
        for ident, pending in self._open.items():
            got = len(pending.data)
            out.incomplete[ident] = f"the answer stopped after {got} of {pending.length} bytes"
        return out

    def _line(self, line: str) -> int | None:
        reply = self._reply
        if not line or line in _SKIPPED:
            return None
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
            return None
        width = self._width
        digits = line.replace(" ", "")
        if len(digits) < width + 2 or len(digits) > width + 16 or not set(digits) <= _HEX:
            reply.garbage += 1
            return None
        if (len(digits) - width) % 2:
            reply.garbage += 1
            return None
        ident = int(digits[:width], 16)
        data = bytes.fromhex(digits[width:])
        return _feed(reply, self._open, ident, data, self.service, request=self.request)


def parse_reply(text: str, extended: bool, service: int | None = None) -> Reply:
    """`text` (what came before the prompt) as frames and messages; `extended`: 29-bit ids;
    `service`: the request's service id (None: a pending for any service counts)."""
    reader = ReplyReader(extended, service)
    reader.feed(text)
    return reader.result()


def _feed(
    reply: Reply,
    open_: dict[int, _Open],
    ident: int,
    data: bytes,
    service: int | None,
    *,
    request: bytes | None = None,
) -> int | None:
    """One frame; the id of its ECU if it completed a "response pending"."""
    pci = data[0] >> 4
    if pci == 0:
        length = data[0] & 0x0F
        if not 1 <= length <= len(data) - 1:
            reply.garbage += 1
            return None
        open_.pop(ident, None)
        return _done(reply, ident, data[1 : 1 + length], service, request)
    if pci == 1:
        if len(data) < 8:
            reply.garbage += 1
            return None
        length = (data[0] & 0x0F) << 8 | data[1]
        if length < 8:
            reply.garbage += 1
            return None
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
            return None
        pending.data += data[1:]
        pending.sequence = (pending.sequence + 1) & 0x0F
        if len(pending.data) >= pending.length:
            del open_[ident]
            return _done(reply, ident, bytes(pending.data[: pending.length]), service, request)
    else:
        reply.garbage += 1  # flow control or not ISO-TP
    return None


def _done(
    reply: Reply, ident: int, payload: bytes, service: int | None, request: bytes | None = None
) -> int | None:
    if ident not in reply.order:
        reply.order.append(ident)
    asked = payload[1] if service is None and len(payload) >= 2 else service
    if asked is not None and is_pending(payload, asked):
        reply.pending[ident] = reply.pending.get(ident, 0) + 1
        return ident  # the final answer follows, or not
    if request is not None:
        another = for_another_request(payload, request)
    else:
        another = service is not None and for_another_service(payload, service)
    if another:
        reply.foreign[ident] = payload[:8]  # the last one: a refusal after its pendings
        return None  # another request's answer: not this one's
    reply.messages.setdefault(ident, payload)
    reply.incomplete.pop(ident, None)
    return None
