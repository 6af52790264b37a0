"""A Lawicel/SLCAN USB-CAN adapter on a pty, bridged to a python-can `virtual` channel.

So the `slcan://PORT@BAUD` transport is tested end to end: python-can's own client opens the
pty with `can.Bus(interface="slcan", channel=PORT, sleep_after_open=0)`.

Protocol (what python-can's client and the Lawicel CANUSB/CAN232 documents use; every
command ends in CR, answers end in CR, errors are a BELL):

    Sn / sXXYY / Yn  bitrate (n = 0-9), BTR registers, CAN FD data bitrate; channel closed
    O / L / C        open, open listen-only, close
    V / N / F        version `V1013`, serial number `NHWB0`, status flags `F00`
    Zn               timestamps off/on (4 hex digits of milliseconds, wrapping at 60000)
    Mxxxxxxxx / m..  acceptance code and mask: accepted, not applied
    tIIIL.. TIIIIIIIIL..  rIIIL RIIIIIIIIL   classic data and remote frames, answered z / Z
    dIIIL.. DIIIIIIIIL..  bIIIL.. BIIIIIIIIL..  CAN FD (b/B: bit rate switch), L is a DLC code

An empty command (python-can writes one for "no FD data bitrate") is answered OK. While the
channel is open, frames on the virtual channel go to the client in the same notation.
Frames from the client go to the virtual channel, never back to the client.

Run on its own with `python -m firmware_sim.slcan_device --channel vcan0`.
"""

from __future__ import annotations

import argparse
import logging
import time

from can.util import CAN_FD_DLC, len2dlc

import can
from firmware_sim.pty_device import PtyDevice, serve_forever

__all__ = ["SlcanDevice", "format_frame", "main", "parse_frame"]

log = logging.getLogger(__name__)

OK = b"\r"
BELL = b"\a"
VERSION = "1013"  # hardware 10, software 13: python-can's get_version() reads two pairs
SERIAL_NUMBER = "HWB0"

_MAX_LINE = 160  # longest command; a 64-byte FD frame is 138 characters
_MAX_STANDARD_ID = 0x7FF
_MAX_EXTENDED_ID = 0x1FFFFFFF
_FRAME_KINDS = {
    # letter: (extended, remote, fd, bitrate_switch)
    "t": (False, False, False, False),
    "T": (True, False, False, False),
    "r": (False, True, False, False),
    "R": (True, True, False, False),
    "d": (False, False, True, False),
    "D": (True, False, True, False),
    "b": (False, False, True, True),
    "B": (True, False, True, True),
}
_HEX = frozenset("0123456789abcdefABCDEF")


def _hex(text: str) -> int:
    if not text or not set(text) <= _HEX:
        raise ValueError(f"not hex: {text!r}")
    return int(text, 16)


def parse_frame(line: str) -> can.Message:
    """A transmit command (`t12320102`, `R000001238`, `b1230F...`) as a frame; ValueError."""
    if not line or line[0] not in _FRAME_KINDS:
        raise ValueError("not a frame command")
    extended, remote, fd, brs = _FRAME_KINDS[line[0]]
    id_end = 9 if extended else 4
    if len(line) < id_end + 1:
        raise ValueError("frame command too short")
    ident = _hex(line[1:id_end])
    if ident > (_MAX_EXTENDED_ID if extended else _MAX_STANDARD_ID):
        raise ValueError(f"CAN ID {ident:X} out of range")
    code = _hex(line[id_end])
    if fd:
        length = CAN_FD_DLC[code]
    elif code > 8:
        raise ValueError(f"DLC {code} above 8")
    else:
        length = code
    payload = line[id_end + 1 :]
    if remote:
        if payload:
            raise ValueError("remote frame with data")
        data = b""
    elif len(payload) != 2 * length or not set(payload) <= _HEX:
        raise ValueError(f"DLC {code} needs {2 * length} hex digits, got {payload!r}")
    else:
        data = bytes.fromhex(payload)
    return can.Message(
        timestamp=time.time(),
        arbitration_id=ident,
        is_extended_id=extended,
        is_remote_frame=remote,
        is_fd=fd,
        bitrate_switch=brs,
        dlc=length,
        data=data,
    )


def format_frame(msg: can.Message, timestamps: bool = False) -> str | None:
    """One frame as the adapter reports it (CR included); None for frames SLCAN cannot show."""
    if msg.is_error_frame:
        return None
    ident = (
        f"{msg.arbitration_id & _MAX_EXTENDED_ID:08X}"
        if msg.is_extended_id
        else f"{msg.arbitration_id & _MAX_STANDARD_ID:03X}"
    )
    data = bytes(msg.data or b"")
    if msg.is_remote_frame:
        text = f"{'R' if msg.is_extended_id else 'r'}{ident}{min(msg.dlc, 8)}"
    elif msg.is_fd or len(data) > 8:
        letter = "b" if msg.bitrate_switch else "d"
        code = len2dlc(len(data))
        data = data.ljust(CAN_FD_DLC[code], b"\x00")  # 9..63 bytes pad to the DLC size
        text = f"{letter.upper() if msg.is_extended_id else letter}{ident}{code:X}{data.hex()}"
    else:
        text = f"{'T' if msg.is_extended_id else 't'}{ident}{len(data)}{data.hex()}"
    if timestamps:
        text += f"{int(msg.timestamp * 1000) % 60000:04X}"
    return text[0] + text[1:].upper() + "\r"  # the letter's case carries meaning


class SlcanDevice(PtyDevice):
    """A Lawicel-compatible SLCAN adapter; `start()` returns the pty a client opens."""

    kind = "slcan"

    def __init__(self, channel: str) -> None:
        super().__init__(channel)
        self.frames_from_client = 0
        self.frames_to_client = 0
        self._buffer = bytearray()
        self._overflow = False
        self._open = False
        self._listen_only = False
        self._timestamps = False
        self.bitrate_command = "S6"  # what the last S/s command set (informational)

    def _reset(self) -> None:
        self._buffer.clear()
        self._overflow = False
        self._open = self._listen_only = self._timestamps = False

    @property
    def is_open(self) -> bool:
        """Whether the CAN channel is open (after `O` or `L`, until `C`)."""
        return self._open

    # -- client -> device ---------------------------------------------------------------

    def _on_input(self, data: bytes) -> None:
        replies = bytearray()
        for byte in data:
            if byte == 0x0D:
                line = self._buffer.decode("ascii", errors="replace")
                overflow = self._overflow
                self._buffer.clear()
                self._overflow = False
                replies += BELL if overflow else self._command(line)
            elif byte in (0x0A, 0x00):
                continue  # stray LF/NUL from terminal programs
            elif len(self._buffer) < _MAX_LINE:
                self._buffer.append(byte)
            else:
                self._overflow = True
        if replies:
            self._write(bytes(replies))

    def _command(self, line: str) -> bytes:
        if not line:
            return OK
        head, arg = line[0], line[1:]
        closed = not self._open
        if head in _FRAME_KINDS:
            return self._transmit(line)
        if head == "S" and closed and len(arg) == 1 and arg.isdigit():
            self.bitrate_command = line
            return OK
        if head == "s" and closed and len(arg) == 4 and set(arg) <= _HEX:
            self.bitrate_command = line
            return OK
        if head == "Y" and closed and len(arg) == 1 and arg.isdigit():
            return OK
        if head in "OL" and closed and not arg:
            self._open, self._listen_only = True, head == "L"
            return OK
        if head == "C" and not arg:
            self._open = self._listen_only = False
            return OK
        if head == "V" and not arg:
            return f"V{VERSION}\r".encode()
        if head == "N" and not arg:
            return f"N{SERIAL_NUMBER}\r".encode()
        if head == "F" and not arg:
            return b"F00\r"
        if head == "Z" and closed and arg in ("0", "1"):
            self._timestamps = arg == "1"
            return OK
        if head in "Mm" and len(arg) == 8 and set(arg) <= _HEX:
            return OK
        log.debug("slcan: refused %r (channel %s)", line, "closed" if closed else "open")
        return BELL

    def _transmit(self, line: str) -> bytes:
        if not self._open or self._listen_only:
            return BELL
        try:
            msg = parse_frame(line)
        except ValueError as exc:
            log.debug("slcan: bad frame %r: %s", line, exc)
            return BELL
        if not self._send(msg):
            return BELL
        self.frames_from_client += 1
        return b"Z\r" if msg.is_extended_id else b"z\r"

    # -- bus -> client ------------------------------------------------------------------

    def _on_frame(self, msg: can.Message) -> None:
        if not self._open:
            return
        line = format_frame(msg, self._timestamps)
        if line is not None:
            self._write(line.encode("ascii"))
            self.frames_to_client += 1


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; prints `slcan on /dev/pts/N` once the pty exists."""
    parser = argparse.ArgumentParser(prog="python -m firmware_sim.slcan_device")
    parser.add_argument("--channel", default="vcan0", help="python-can virtual channel")
    serve_forever(SlcanDevice(parser.parse_args(argv).channel))


if __name__ == "__main__":
    main()
