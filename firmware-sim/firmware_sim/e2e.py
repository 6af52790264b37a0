"""Bits in a payload, rolling counters and XOR checksums, written for the simulator alone.

The simulator is a witness of hwbridge's decoding, so it shares none of hwbridge's code:
frames are encoded by cantools, and the few things cantools does not do (writing a raw value
into a payload as it is, keeping a counter rolling and a checksum right) are done here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BitSlot", "RollingE2E", "positions", "read_raw", "write_raw"]


def positions(signal: Any) -> list[int]:
    """Bit positions (byte * 8 + bit, bit 0 the byte's LSB) of a cantools signal, least
    significant first."""
    start, length = int(signal.start), int(signal.length)
    if signal.byte_order == "little_endian":
        return list(range(start, start + length))
    out = [start]  # big endian: the start bit is the MSB; walk down to the LSB
    for _ in range(length - 1):
        pos = out[-1]
        out.append(pos - 1 if pos % 8 else pos + 15)
    return out[::-1]


def write_raw(payload: bytearray, signal: Any, raw: int) -> None:
    """Put `raw` (two's complement for a negative number) into the signal's bits."""
    bits = positions(signal)
    raw &= (1 << len(bits)) - 1
    for k, pos in enumerate(bits):
        if pos // 8 >= len(payload):
            continue
        if raw >> k & 1:
            payload[pos // 8] |= 1 << (pos % 8)
        else:
            payload[pos // 8] &= 0xFF ^ (1 << (pos % 8))


def read_raw(payload: bytes, signal: Any) -> int:
    """The signal's raw bits as an unsigned number."""
    value = 0
    for k, pos in enumerate(positions(signal)):
        if pos // 8 < len(payload) and payload[pos // 8] >> (pos % 8) & 1:
            value |= 1 << k
    return value


class RollingE2E:
    """A rolling counter (+1 modulo its range every frame) and an XOR checksum (of every
    byte, the checksum's own bits zeroed), either of them optional."""

    def __init__(self, counter: Any | None, checksum: Any | None) -> None:
        self.counter = counter
        self.checksum = checksum

    def apply(self, payload: bytes, sequence: int) -> bytes:
        """The payload of the `sequence`-th frame sent (0 for the first)."""
        work = bytearray(payload)
        if self.counter is not None:
            modulo = 1 << int(self.counter.length)
            write_raw(work, self.counter, (read_raw(payload, self.counter) + sequence) % modulo)
        if self.checksum is not None:
            write_raw(work, self.checksum, 0)
            value = 0
            for byte in work:
                value ^= byte
            write_raw(work, self.checksum, value)
        return bytes(work)


class BitSlot:
    """A signal's bits as runs within bytes, so that writing a raw value on every frame (a
    counter, a checksum) costs a few byte operations instead of a loop over its bits."""

    __slots__ = ("byte", "run", "runs", "width")

    def __init__(self, signal: Any) -> None:
        bits = positions(signal)
        runs: list[tuple[int, int, int, int]] = []  # (byte, shift in it, mask, first value bit)
        k = 0
        while k < len(bits):
            pos, n = bits[k], 1
            while k + n < len(bits) and bits[k + n] == pos + n and (pos + n) // 8 == pos // 8:
                n += 1
            runs.append((pos // 8, pos % 8, (1 << n) - 1, k))
            k += n
        self.runs = tuple(runs)
        self.width = len(bits)
        # a field that is one whole byte (most checksums): written with one store
        self.byte = runs[0][0] if len(runs) == 1 and runs[0][1:] == (0, 0xFF, 0) else None
        # a field within one byte (most counters): (byte, shift, mask, the bits kept)
        self.run: tuple[int, int, int, int] | None = None
        if len(runs) == 1:
            byte, shift, mask, _ = runs[0]
            self.run = (byte, shift, mask, ~(mask << shift) & 0xFF)

    def write(self, payload: bytearray, raw: int) -> None:
        """Put `raw` (two's complement if negative) into the bits."""
        byte = self.byte
        if byte is not None:
            if byte < len(payload):
                payload[byte] = raw & 0xFF
            return
        run = self.run
        if run is not None:
            byte, shift, mask, kept = run
            if byte < len(payload):
                payload[byte] = payload[byte] & kept | (raw & mask) << shift
            return
        raw &= (1 << self.width) - 1
        size = len(payload)
        for byte, shift, mask, first in self.runs:
            if byte < size:
                kept = payload[byte] & ~(mask << shift) & 0xFF
                payload[byte] = kept | ((raw >> first) & mask) << shift

    def read(self, payload: bytes | bytearray) -> int:
        """The raw bits as an unsigned number."""
        value = 0
        size = len(payload)
        for byte, shift, mask, first in self.runs:
            if byte < size:
                value |= (payload[byte] >> shift & mask) << first
        return value
