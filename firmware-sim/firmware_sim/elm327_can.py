"""How the simulated ELM327 speaks ISO 15765-4: addressing, frame tracking, and display.

A small receiver of our own rather than can-isotp: a functional request (0x7DF) can be
answered by several ECUs at once, and the ELM327 prints frame by frame as they arrive
(`014` / `0: ..` / `1: ..` with formatting on, raw frames with headers or formatting off),
so it needs every frame and its sequence number, not reassembled messages from one fixed
address pair. It still tracks each ECU's multi-frame message (length, sequence, completion)
so the device knows when to send flow control, when a response is complete, and when it
may stop waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import can

__all__ = [
    "FLOW_CONTROL",
    "Addressing",
    "Display",
    "FrameKind",
    "ResponseTracker",
    "Tracked",
    "frame_lines",
]

FLOW_CONTROL = bytes([0x30, 0x00, 0x00, 0, 0, 0, 0, 0])
"""Continue to send, no block limit, no separation time, padded to 8 bytes as OBD needs."""

OBD_FUNCTIONAL_11 = 0x7DF
OBD_FUNCTIONAL_29 = 0x18DB33F1


@dataclass(frozen=True)
class Addressing:
    """Which ID a request goes to and which responses count (ATSH / ATCRA / protocol)."""

    extended: bool
    request_id: int
    receive_id: int | None = None  # ATCRA: only this ID; None: the OBD response range

    @classmethod
    def for_protocol(
        cls,
        extended: bool,
        header: str | None = None,
        receive: str | None = None,
        priority: int = 0x18,
    ) -> Addressing:
        """Addressing from the protocol's ID size and the ATSH / ATCRA hex strings."""
        if header is None:
            request = OBD_FUNCTIONAL_29 if extended else OBD_FUNCTIONAL_11
        elif not extended:
            request = int(header, 16) & 0x7FF  # the ELM uses the last 3 digits for 11-bit
        elif len(header) == 8:
            request = int(header, 16) & 0x1FFFFFFF
        else:
            request = (priority & 0x1F) << 24 | int(header, 16)  # ATCP's priority, 18 by default
        accept = None if receive is None else int(receive, 16)
        return cls(extended, request, accept)

    def accepts(self, msg: can.Message) -> bool:
        if msg.is_error_frame or msg.is_remote_frame or msg.is_extended_id != self.extended:
            return False
        ident = msg.arbitration_id
        if self.receive_id is not None:
            return bool(ident == self.receive_id)
        if self.extended:
            return (ident & 0x1FFFFF00) == 0x18DAF100  # 18 DA F1 xx: to the tester F1
        return 0x7E8 <= ident <= 0x7EF

    def flow_control_id(self, response_id: int) -> int:
        """ISO 15765-4: 0x7E8+n is answered on 0x7E0+n; 18DAF1xx on 18DAxxF1."""
        if self.extended:
            swapped = ((response_id & 0xFF) << 8) | ((response_id >> 8) & 0xFF)
            return (response_id & 0x1FFF0000) | swapped
        return max(0, response_id - 8)


class FrameKind(Enum):
    SINGLE = 0
    FIRST = 1
    CONSECUTIVE = 2


@dataclass(frozen=True)
class Tracked:
    """One accepted ISO-TP frame: its kind, its sender, and what it means for the message."""

    kind: FrameKind
    ecu: int
    length: int  # payload length (single frame) or message length (first frame); else 0
    sequence: int  # 0 for single and first frames
    complete: bool  # this frame ends a message


class ResponseTracker:
    """Per-ECU ISO-TP state: which frames are valid and when messages are complete."""

    def __init__(self) -> None:
        self._open: dict[int, tuple[int, int]] = {}  # ECU -> (bytes still due, next sequence)

    @property
    def busy(self) -> bool:
        """Whether some ECU is in the middle of a multi-frame message."""
        return bool(self._open)

    def feed(self, msg: can.Message) -> Tracked | None:
        """Track a frame; None when it is not a valid SF/FF/CF (out of sequence, FC, junk)."""
        data = bytes(msg.data)
        ecu = int(msg.arbitration_id)
        if not data:
            return None
        pci, low = data[0] >> 4, data[0] & 0x0F
        if pci == 0:
            if not 1 <= low <= 7 or len(data) < 1 + low:
                return None
            self._open.pop(ecu, None)
            return Tracked(FrameKind.SINGLE, ecu, low, 0, True)
        if pci == 1:
            length = (low << 8) | data[1] if len(data) >= 2 else 0
            if len(data) != 8 or length < 8:
                return None  # a first frame is always full, and only for > 7 bytes
            self._open[ecu] = (length - 6, 1)
            return Tracked(FrameKind.FIRST, ecu, length, 0, False)
        if pci == 2:
            due, expected = self._open.get(ecu, (0, -1))
            if low != expected:
                self._open.pop(ecu, None)  # lost frame: the message cannot be completed
                return None
            due -= min(7, len(data) - 1)
            if due > 0:
                self._open[ecu] = (due, (expected + 1) & 0x0F)
            else:
                del self._open[ecu]
            return Tracked(FrameKind.CONSECUTIVE, ecu, 0, low, due <= 0)
        return None  # flow control from the ECU, or not ISO-TP at all


@dataclass(frozen=True)
class Display:
    """The ELM327 settings that shape a printed frame (ATH, ATS, ATCAF, ATD1)."""

    headers: bool = False
    spaces: bool = True
    formatting: bool = True
    dlc: bool = False


def _hex(data: bytes, spaces: bool) -> str:
    return (data.hex(" ") if spaces else data.hex()).upper()


def _join(parts: list[str], spaces: bool) -> str:
    return (" " if spaces else "").join(p for p in parts if p)


def frame_lines(msg: can.Message, tracked: Tracked | None, display: Display) -> list[str]:
    """The lines an ELM327 prints for one received frame."""
    data = bytes(msg.data)
    sp = display.spaces
    if display.headers or not display.formatting or tracked is None:
        # With headers on the chip prints every data byte, PCI and padding included
        # (the datasheet's `7E8 03 41 05 46 00 00 00 00`).
        if not display.headers:
            return [_hex(data, sp)]
        ident = msg.arbitration_id
        header = _hex(ident.to_bytes(4, "big"), sp) if msg.is_extended_id else f"{ident:03X}"
        return [_join([header, f"{msg.dlc:X}" if display.dlc else "", _hex(data, sp)], sp)]
    if tracked.kind is FrameKind.SINGLE:
        return [_hex(data[1 : 1 + tracked.length], sp)]
    if tracked.kind is FrameKind.FIRST:
        return [f"{tracked.length:03X}", _join(["0:", _hex(data[2:], sp)], sp)]
    return [_join([f"{tracked.sequence:X}:", _hex(data[1:], sp)], sp)]
