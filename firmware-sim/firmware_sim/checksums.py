"""Checksums real cars put in their frames, for databases whose make is known.

Where the opendbc package is installed (the `opendbc` extra) and names the database's
checksums (`opendbc.can.dbc.get_checksum_state`: VW MQB and MLB with their per-message data
ids, Subaru, Hyundai CAN FD, FCA, PSA, comma body and the makes below), its own function
computes them, for the signals it takes for checksums: the frames then pass opendbc's own
`CANParser`, as frames from the car do. Otherwise they are written here from the algorithms
as opendbc documents them (the same ones as the project's `benchmarks/car_checksums.py`,
copied: the simulator imports nothing of hwbridge). Each takes the frame id, the payload
(with the checksum field zeroed) and the checksum's start bit, and returns the checksum's raw
value. A database whose make is not known, or whose checksum field does not have the shape
the scheme expects, gets an XOR of every byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from firmware_sim.e2e import positions

__all__ = ["Checksum", "checksum_for", "folds", "scheme_of", "xor_bytes"]

Checksum = Callable[[int, bytes | bytearray, int], int]


def _crc8(data: Sequence[int], poly: int, init: int) -> int:
    crc = init
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _id_byte_sum(frame_id: int) -> int:
    total = 0
    while frame_id:
        total += frame_id & 0xFF
        frame_id >>= 8
    return total


def toyota(frame_id: int, d: bytes | bytearray, start: int) -> int:
    """Sum of the id's bytes, the length and every byte but the last, modulo 256."""
    return (_id_byte_sum(frame_id) + len(d) + sum(d[:-1])) & 0xFF


def tesla(frame_id: int, d: bytes | bytearray, start: int) -> int:
    """The id's two low bytes plus every byte but the checksum's, modulo 256."""
    own = start // 8
    total = (frame_id & 0xFF) + ((frame_id >> 8) & 0xFF)
    return (total + sum(b for i, b in enumerate(d) if i != own)) & 0xFF


def chrysler(frame_id: int, d: bytes | bytearray, start: int) -> int:
    """SAE J1850 CRC-8 (0x1D) from 0xFF over every byte but the last, inverted."""
    return _crc8(d[:-1], 0x1D, 0xFF) ^ 0xFF


def honda(frame_id: int, d: bytes | bytearray, start: int) -> int:
    """8 minus the nibbles of the id and of the payload (but the checksum's), modulo 16."""
    total = 0
    frame = frame_id
    while frame:
        total += frame & 0xF
        frame >>= 4
    for i, b in enumerate(d):
        x = b >> 4 if i == len(d) - 1 else b
        total += (x & 0xF) + (x >> 4)
    return (8 - total + (3 if frame_id > 0x7FF else 0)) & 0xF


def xor_bytes(frame_id: int, d: bytes | bytearray, start: int) -> int:
    """XOR of every byte (the checksum's own bits are zero): the payload as one number,
    folded onto itself by halves down to a byte (8 bytes: three folds, not eight steps)."""
    out = int.from_bytes(d, "little")
    for shift in _FOLDED[len(d)] if len(d) < len(_FOLDED) else folds(len(d)):
        out ^= out >> shift
    return out & 0xFF


def folds(size: int) -> tuple[int, ...]:
    """The shifts that fold `size` bytes (zeros above them, up to a power of two) onto the
    lowest: 32, 16, 8 for 8 bytes."""
    bits = 8
    while bits < size * 8:
        bits *= 2
    shifts = []
    while bits > 8:
        bits //= 2
        shifts.append(bits)
    return tuple(shifts)


_FOLDED: Final = tuple(folds(size) for size in range(65))


# scheme -> (function, checksum width in bits, whether it must sit in the last byte)
_SCHEMES: Final[dict[str, tuple[Checksum, int, bool]]] = {
    "toyota": (toyota, 8, True),
    "tesla": (tesla, 8, False),
    "chrysler": (chrysler, 8, True),
    "honda": (honda, 4, True),
}
_MAKES: Final = (
    (re.compile(r"toyota|lexus", re.I), "toyota"),
    (re.compile(r"tesla", re.I), "tesla"),
    (re.compile(r"chrysler|jeep|ram_|dodge", re.I), "chrysler"),
    (re.compile(r"honda|acura", re.I), "honda"),
)


_OPENDBC: Final = "opendbc:"


def scheme_of(database_name: str | None) -> str | None:
    """The checksum scheme of a database from its name (opendbc names files by make):
    `opendbc:NAME` when the opendbc package computes its checksums, else the make's."""
    if database_name and _opendbc_state(database_name) is not None:
        return _OPENDBC + database_name
    return _make_of(database_name)


def _make_of(database_name: str | None) -> str | None:
    for pattern, scheme in _MAKES:
        if database_name and pattern.search(database_name):
            return scheme
    return None


_OPENDBC_MAKES: Final = re.compile(
    r"^(honda|acura|toyota|lexus|hyundai|vw|subaru|chrysler|fca|comma|tesla|psa)_", re.I
)
"""Names opendbc may know checksums of: only for these is opendbc imported (it loads pycapnp,
which has a word to say on stderr in a process started with another folder's PWD)."""


def _opendbc_state(database_name: str) -> Any | None:
    """opendbc's checksum state for a database it names, when the package is installed."""
    if not _OPENDBC_MAKES.match(database_name):
        return None
    try:
        from opendbc.can.dbc import get_checksum_state  # the opendbc extra (Python < 3.13)
    except ImportError:
        return None
    state = get_checksum_state(database_name)
    return state if state is not None and state.calc_checksum is not None else None


def _opendbc_checksum(database_name: str, signal: Any) -> Checksum | None:
    """opendbc's own checksum of `signal`, if opendbc takes it for the checksum (its name,
    as opendbc's parser and packer decide); None otherwise."""
    from opendbc.can.dbc import Signal, set_signal_type

    state = _opendbc_state(database_name)
    if state is None:
        return None
    bits = positions(signal)  # least significant first; a big-endian start is the last
    start, size = int(signal.start), int(signal.length)
    little = signal.byte_order == "little_endian"
    lsb, msb = bits[0], bits[-1]
    theirs = Signal(str(signal.name), start, msb, lsb, size, bool(signal.is_signed),
                    float(signal.scale), float(signal.offset), little)  # fmt: skip
    set_signal_type(theirs, state, database_name, 0)
    calc = theirs.calc_checksum
    if calc is None:
        return None

    def checksum(frame_id: int, d: bytes | bytearray, start: int) -> int:
        return int(calc(frame_id, theirs, bytearray(d)))

    return checksum


def checksum_for(scheme: str | None, signal: Any, size: int) -> Checksum:
    """The checksum function for `signal` in a `size`-byte frame: opendbc's when it computes
    this database's, else the make's scheme when the field has its shape, else XOR of every
    byte."""
    if scheme is not None and scheme.startswith(_OPENDBC):
        name = scheme.removeprefix(_OPENDBC)
        theirs = _opendbc_checksum(name, signal)
        if theirs is not None:
            return theirs
        scheme = _make_of(name)
    known = _SCHEMES.get(scheme or "")
    if known is not None:
        function, width, last_byte = known
        in_last = int(signal.start) // 8 == size - 1
        if int(signal.length) == width and (in_last or not last_byte):
            return function
    return xor_bytes
