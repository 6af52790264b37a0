"""Signal bits in a payload, for messages cantools cannot compile.

cantools builds one packing format per message; when real DBCs overlap two signals or put
one past the message length, that format breaks and every frame of the message fails to
decode. These functions read and write one signal at a time instead, so such a message
still decodes (and encodes) signal by signal.
"""

from __future__ import annotations

import struct
from typing import Any, Literal

__all__ = ["bytes_needed", "extract", "insert", "overlap", "raw_bits", "signal_bits"]

_FLOATS = {16: struct.Struct(">e"), 32: struct.Struct(">f"), 64: struct.Struct(">d")}


def _lsb_big_endian(signal: Any) -> int:
    """Index of a big-endian signal's last bit, counting bits forwards from byte 0's MSB."""
    msb = 8 * (signal.start // 8) + 7 - signal.start % 8
    return int(msb + signal.length - 1)


def bytes_needed(signal: Any) -> int:
    """How many bytes a payload must have to carry `signal`."""
    if signal.byte_order == "little_endian":
        return int((signal.start + signal.length - 1) // 8 + 1)
    return _lsb_big_endian(signal) // 8 + 1


def extract(signal: Any, data: bytes) -> int | float | None:
    """The raw value of `signal` in `data`, or None when `data` is too short for it."""
    length = int(signal.length)
    mask = (1 << length) - 1
    size = len(data)
    if bytes_needed(signal) > size:
        return None
    if signal.byte_order == "little_endian":
        raw = (int.from_bytes(data, "little") >> int(signal.start)) & mask
    else:
        raw = (int.from_bytes(data, "big") >> (8 * size - 1 - _lsb_big_endian(signal))) & mask
    if signal.is_float and length in _FLOATS:
        return float(_FLOATS[length].unpack(raw.to_bytes(length // 8, "big"))[0])
    if signal.is_signed and raw >> (length - 1):
        raw -= 1 << length
    return raw


def raw_bits(signal: Any, raw: float) -> int:
    """The bits that carry raw value `raw` of `signal` (floats packed, integers masked)."""
    length = int(signal.length)
    if signal.is_float and length in _FLOATS:
        return int.from_bytes(_FLOATS[length].pack(raw), "big")
    return int(raw) & ((1 << length) - 1)


def insert(signal: Any, raw: float, payload: bytearray) -> None:
    """Write raw value `raw` of `signal` into `payload` (which must be long enough)."""
    length = int(signal.length)
    mask = (1 << length) - 1
    bits = raw_bits(signal, raw)
    size = len(payload)
    order: Literal["little", "big"]
    if signal.byte_order == "little_endian":
        shift, order = int(signal.start), "little"
    else:
        shift, order = 8 * size - 1 - _lsb_big_endian(signal), "big"
    value = int.from_bytes(payload, order)
    value = (value & ~(mask << shift)) | (bits << shift)
    payload[:] = value.to_bytes(size, order)


def signal_bits(signal: Any, size: int) -> bytes:
    """The bits `signal` occupies in a `size`-byte payload, as a byte mask."""
    length = int(signal.length)
    mask = (1 << length) - 1
    if signal.byte_order == "little_endian":
        return (mask << int(signal.start)).to_bytes(size, "little")
    return (mask << (8 * size - 1 - _lsb_big_endian(signal))).to_bytes(size, "big")


def overlap(a: bytes, b: bytes) -> bool:
    """Whether two byte masks share a bit."""
    return any(x & y for x, y in zip(a, b, strict=False))
