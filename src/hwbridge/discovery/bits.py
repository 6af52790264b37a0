"""Where a field's bits are, and its values over many frames at once.

A bit position is `byte * 8 + bit`, bit 0 the least significant bit of its byte: cantools'
numbering for little-endian signals. A field is a chain of positions from its least to its
most significant bit. Little endian (Intel) runs up through the bytes; big endian (Motorola)
runs up within a byte, then on into bit 0 of the byte before. Within one byte the two orders
are the same chain.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "ByteOrder",
    "bit_matrix",
    "cantools_chain",
    "chain",
    "float_values",
    "next_up",
    "start_bit",
    "to_signed",
    "values",
]

ByteOrder = Literal["little_endian", "big_endian"]
U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def next_up(position: int, order: ByteOrder) -> int:
    """The next more significant position after `position` in a field of `order` (may be
    negative for a big-endian chain leaving byte 0: no such bit)."""
    if position % 8 != 7:
        return position + 1
    return position + 1 if order == "little_endian" else position - 15


def chain(lsb: int, length: int, order: ByteOrder) -> tuple[int, ...]:
    """The positions of a field from its least significant bit `lsb`, `length` bits long."""
    out = [lsb]
    for _ in range(length - 1):
        out.append(next_up(out[-1], order))
    return tuple(out)


def cantools_chain(start: int, length: int, order: ByteOrder) -> tuple[int, ...]:
    """The positions of a signal as cantools writes it (`start` is the LSB of a little-endian
    signal and the MSB of a big-endian one), least significant first."""
    if order == "little_endian":
        return tuple(range(start, start + length))
    out = [start]
    for _ in range(length - 1):
        pos = out[-1]
        out.append(pos - 1 if pos % 8 else pos + 15)
    return tuple(reversed(out))


def start_bit(bits: tuple[int, ...], order: ByteOrder) -> int:
    """The start bit cantools writes for a field: its LSB (little endian) or MSB (big)."""
    return bits[0] if order == "little_endian" else bits[-1]


def bit_matrix(data: U8) -> U8:
    """(frames, bytes) -> (frames, bytes * 8) of 0/1, column = bit position."""
    return np.unpackbits(data, axis=1, bitorder="little")


def values(bits: U8, positions: tuple[int, ...] | list[int]) -> I64:
    """The unsigned value of the field at `positions` (LSB first, at most 63 bits) in every
    row of a bit matrix."""
    n = len(positions)
    if n == 0:
        return np.zeros(bits.shape[0], np.int64)
    if n > 63:
        raise ValueError("fields of more than 63 bits are not read as numbers")
    weights = np.left_shift(np.int64(1), np.arange(n, dtype=np.int64))
    picked = np.take(bits, list(positions), axis=1).astype(np.int64)  # take: 3x fancy indexing
    out: I64 = picked @ weights
    return out


def to_signed(raw: I64, length: int) -> I64:
    """Two's complement reading of `length`-bit unsigned values."""
    if length < 1:
        return raw
    half = np.int64(1) << np.int64(length - 1)
    out: I64 = np.where(raw >= half, raw - (half << np.int64(1)), raw)
    return out


def float_values(bits: U8, positions: tuple[int, ...]) -> F64:
    """The float whose bits are at `positions` (least significant first, 32 or 64 of them)
    in every row of a bit matrix."""
    kind = "f4" if len(positions) == 32 else "f8"
    packed = np.packbits(bits[:, list(positions)], axis=1, bitorder="little")
    with np.errstate(invalid="ignore"):
        out: F64 = np.ascontiguousarray(packed).view("<" + kind).reshape(-1).astype(np.float64)
    return out
