"""Checksums: a byte or nibble that is a function of the other bytes of its frame.

Each candidate (a byte or nibble with several changing bits) is tested against the families
real cars use, over the distinct payloads of the id at once:

- `xor`: XOR of the other bytes, with a constant (VW PQ; MLB's start values);
- `sum8`: their sum modulo 256 plus a constant (Toyota adds the id's bytes and the length,
  Tesla and Subaru the id's bytes), and `sum8_neg`, a constant minus it;
- `nibble_sum` / `nibble_sum_neg` / `nibble_xor`: a nibble that is a constant plus or minus
  the sum (or the XOR) of every other nibble (Honda, PSA);
- `crc8_<poly>`: any CRC-8 with that polynomial over the other bytes, in either order and
  bit order, with any start value and final XOR (SAE J1850 0x1D: Chrysler, FCA; 0xD5:
  comma body; 0x07, 0x31, 0x9B), and `..._per_counter`, the AUTOSAR E2E profile 2 form
  (0x2F: VW MQB/MEB) whose final constant depends on the frame's counter. A CRC's result is
  an affine function of its input bits, so the remainder (checksum XOR the CRC from zero) is
  constant, or constant per counter value, exactly when the family fits.

A candidate is accepted when at least 98% of at least 16 distinct payloads agree: a few
corrupt frames do not hide a checksum, and chance cannot fake one. XOR and sum relations are
symmetric (any byte of them is "the checksum" of the rest): the candidate that changes most
often is taken, and its bits are left out of every later test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Checksum", "crc8_table", "find_checksums"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

AGREE = 0.98
MIN_DISTINCT = 8
MAX_ROWS = 4096  # distinct payloads a hypothesis is tried on
MAX_KEYS = 4  # counter nibbles tried as a CRC's key
COUNTING = 0.98
"""A byte or nibble stepping by one amount this often holds a counter."""
PERFECT_COUNT = 0.999
"""A byte or nibble stepping by one amount this regularly is a counter, never a checksum
(a checksum that follows a counter also moves with the rest of its frame)."""
CRC_POLYS = (0x1D, 0x2F, 0x07, 0x31, 0x9B, 0xD5)
_REFLECT = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


@cache
def crc8_table(poly: int) -> U8:
    """The byte table of a CRC-8 (MSB first) with generator `poly`."""
    table = np.zeros(256, np.uint8)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table[i] = crc
    return table


@dataclass(frozen=True, slots=True)
class Checksum:
    """A recognised checksum: where it is and how it is computed."""

    bits: tuple[int, ...]  # positions, least significant first
    algorithm: str  # xor, sum8, sum8_neg, nibble_sum, nibble_sum_neg, crc8_1d, ...
    description: str  # one sentence for the DBC comment
    car: str | None = None  # the make whose form this is, when the constant says so


def _agreement(values: I64, key: I64 | None = None) -> tuple[float, int]:
    """Share of rows equal to their most common value (per `key` value when given), and
    that value (the overall one; -1 per key)."""
    if key is None:
        counts = np.bincount(values)
        best = int(np.argmax(counts))
        return float(counts[best]) / len(values), best
    counts = np.bincount(key * 256 + values, minlength=256)
    groups = np.zeros(((len(counts) + 255) // 256) * 256, np.int64)
    groups[: len(counts)] = counts
    return float(groups.reshape(-1, 256).max(axis=1).sum()) / len(values), -1


def _crc_linear(table: U8, columns: U8) -> U8:
    """The CRC register after the bytes of each row, from zero (the linear part)."""
    state = np.zeros(columns.shape[0], np.uint8)
    for j in range(columns.shape[1]):
        state = table[state ^ columns[:, j]]
    return state


def _id_bytes(frame_id: int) -> int:
    total = 0
    while frame_id:
        total += frame_id & 0xFF
        frame_id >>= 8
    return total


def _id_nibbles(frame_id: int) -> int:
    total = 0
    while frame_id:
        total += frame_id & 0xF
        frame_id >>= 4
    return total


def _bits(byte: int) -> tuple[int, ...]:
    return tuple(range(byte * 8, byte * 8 + 8))


@dataclass(frozen=True, slots=True)
class _Key:
    """A nibble that changes on most frames: a counter a checksum's constant may follow."""

    byte: int
    high: bool

    @property
    def name(self) -> str:
        return f"the {'high' if self.high else 'low'} nibble of byte {self.byte}"

    def of(self, data: U8) -> I64:
        column = data[:, self.byte]
        return ((column >> 4) if self.high else (column & 0x0F)).astype(np.int64)


def _simple(data: U8, frame_id: int, byte: int) -> Checksum | None:
    """XOR and sums of the other bytes."""
    length = data.shape[1]
    target = data[:, byte].astype(np.int64)
    others = np.delete(data, byte, axis=1)
    where, span = f"byte {byte}", f"the other {length - 1} byte(s)"
    x = np.bitwise_xor.reduce(others, axis=1).astype(np.int64)
    share, k = _agreement(target ^ x)
    if share >= AGREE:
        return Checksum(_bits(byte), "xor", f"{where}: XOR of {span}, XOR 0x{k:02X}")
    s = others.astype(np.int64).sum(axis=1) & 0xFF
    share, k = _agreement((target - s) & 0xFF)
    if share >= AGREE:
        car = None
        if k == (_id_bytes(frame_id) + length) & 0xFF:
            car = "toyota"
        elif k == _id_bytes(frame_id) & 0xFF:
            car = "tesla/subaru"
        text = f"{where}: sum of {span} plus 0x{k:02X}, modulo 256"
        return Checksum(_bits(byte), "sum8", text, car)
    share, k = _agreement((target + s) & 0xFF)
    if share >= AGREE:
        text = f"{where}: 0x{k:02X} minus the sum of {span}, modulo 256"
        return Checksum(_bits(byte), "sum8_neg", text)
    return None


def _crc(data: U8, byte: int, keys: Sequence[_Key]) -> Checksum | None:
    """CRC-8 of the other bytes, with a constant or a constant per counter value."""
    n, length = data.shape
    target = data[:, byte]
    others = np.delete(data, byte, axis=1)
    where, span = f"byte {byte}", f"the other {length - 1} byte(s)"
    keyed = [(key, key.of(data)) for key in keys if key.byte != byte]
    keyed = [(key, v) for key, v in keyed if len(np.unique(v)) * 3 <= n]
    for poly in CRC_POLYS:
        table = crc8_table(poly)
        for reflected in (False, True):
            got = (_REFLECT[target] if reflected else target).astype(np.int64)
            for reverse in (False, True):
                cols = others[:, ::-1] if reverse else others
                linear = _crc_linear(table, _REFLECT[cols] if reflected else cols)
                form = f"crc8_{poly:02x}" + ("_reflected" if reflected else "")
                order = "last byte first" if reverse else "in order"
                for extra in (False, True):  # E2E profile 2 runs one more (constant) byte
                    rest = got ^ (table[linear] if extra else linear).astype(np.int64)
                    share, k = _agreement(rest)
                    if share >= AGREE:
                        text = (
                            f"{where}: CRC-8 with polynomial 0x{poly:02X} over {span} {order}"
                            f" (remainder 0x{k:02X})"
                        )
                        return Checksum(_bits(byte), form, text)
                    for key, values in keyed:
                        share, _ = _agreement(rest, values)
                        if share >= AGREE:
                            text = (
                                f"{where}: CRC-8 with polynomial 0x{poly:02X} over {span}"
                                f" {order}, finished with a constant chosen by {key.name}"
                                " (AUTOSAR E2E profile 2)"
                            )
                            car = "vw" if poly == 0x2F else None
                            return Checksum(_bits(byte), form + "_per_counter", text, car)
    return None


def _nibble(data: U8, frame_id: int, extended: bool, byte: int, high: bool) -> Checksum | None:
    nibbles = np.concatenate([data & 0x0F, data >> 4], axis=1).astype(np.int64)
    column = data.shape[1] + byte if high else byte
    target = nibbles[:, column]
    s = nibbles.sum(axis=1) - target
    x = np.bitwise_xor.reduce(np.delete(nibbles, column, axis=1), axis=1)
    bits = tuple(byte * 8 + (4 if high else 0) + i for i in range(4))
    where = f"the {'high' if high else 'low'} nibble of byte {byte}"
    share, k = _agreement((target - s) & 0xF)
    if share >= AGREE:
        text = f"{where}: sum of every other nibble plus {k}, modulo 16"
        return Checksum(bits, "nibble_sum", text)
    share, k = _agreement((target + s) & 0xF)
    if share >= AGREE:
        honda = (8 - _id_nibbles(frame_id) + (3 if extended else 0)) & 0xF
        text = f"{where}: {k} minus the sum of every other nibble, modulo 16"
        return Checksum(bits, "nibble_sum_neg", text, "honda" if k == honda else None)
    share, k = _agreement(target ^ x)
    if share >= AGREE:
        return Checksum(bits, "nibble_xor", f"{where}: XOR of every other nibble, XOR {k}")
    return None


def _count_share(values: I64, modulo: int) -> float:
    """Share of the steps that are the most common non-zero step modulo `modulo`: 1.0 for
    a counter; a checksum following a counter scores a little less (it also moves with
    everything else in the frame)."""
    if len(values) < 3:
        return 0.0
    steps = np.bincount((values[1:] - values[:-1]) % modulo, minlength=modulo)
    return float(steps[1:].max()) / (len(values) - 1)


def _counts(values: I64, modulo: int) -> bool:
    """The values step by one constant amount (a counter, not a checksum)."""
    return _count_share(values, modulo) >= COUNTING


def _coverage(changes: U8, byte: int) -> float:
    """Share of the transitions on which another byte changed that this byte changed too
    (a checksum changes whenever anything it covers does)."""
    others = np.delete(changes, byte, axis=1).any(axis=1)
    if not others.any():
        return 0.0
    return float((changes[others, byte] != 0).mean())


class _Search:
    """The state of one id's checksum search: its payloads, and what was found so far."""

    def __init__(self, data: U8, distinct: U8, usable: B) -> None:
        self.data = data
        self.length = data.shape[1]
        self.usable = usable
        self.changes = data[1:] ^ data[:-1]
        flipped = np.unpackbits(self.changes[:, :, None], axis=2)  # MSB first
        self.varying = np.zeros(self.length * 8, np.bool_)
        self.varying.reshape(self.length, 8)[:, ::-1] = flipped.any(axis=0)
        popcount = flipped.sum(axis=2)
        # bits flipped per change of each byte: a checksum jumps, a value carries
        self.jumps = [float(p[p > 0].mean()) if (p > 0).any() else 0.0 for p in popcount.T]
        # how well each byte (itself, or a nibble of it) counts: of two bytes in one XOR or
        # sum relation, the one counting less well is the checksum
        self.count_share = [
            max(
                _count_share(data[:, b].astype(np.int64), 256),
                _count_share((data[:, b] & 0x0F).astype(np.int64), 16),
                _count_share((data[:, b] >> 4).astype(np.int64), 16),
            )
            for b in range(self.length)
        ]
        # the nibbles a CRC may be keyed by (AUTOSAR E2E: a data id per counter value):
        # the best counting few, never every moving nibble (random bytes would make the
        # search cost seconds per id)
        counting = [
            (_count_share(_Key(b, high).of(data), 16), _Key(b, high))
            for b in range(self.length)
            for high in (False, True)
            if self.nibble_rate(b, high) >= 0.5
        ]
        self.keys = [
            key
            for share, key in sorted(counting, key=lambda c: -c[0])[:MAX_KEYS]
            if share >= COUNTING
        ]
        self.distinct = distinct
        self.masked = distinct.copy()
        self.mask = np.full(self.length, 0xFF, np.uint8)
        self.found: list[Checksum] = []

    def nibble_rate(self, byte: int, high: bool) -> float:
        column = self.changes[:, byte]
        return float(((column >> 4 if high else column & 0x0F) != 0).mean())

    def taken(self, pos: int) -> bool:
        return any(pos in hit.bits for hit in self.found)

    def candidate(self, positions: range) -> bool:
        """Usable, two bits or more moving, and two more moving bits elsewhere (a function
        of one other bit proves nothing)."""
        idx = list(positions)
        if not self.usable[idx].all() or self.varying[idx].sum() < 2:
            return False
        rest = self.varying.copy()
        rest[idx] = False
        for hit in self.found:
            rest[list(hit.bits)] = False
        return int(rest.sum()) >= 2

    def accept(self, hit: Checksum) -> None:
        """Keep `hit`, and leave its bits out of every later test."""
        self.found.append(hit)
        for pos in hit.bits:
            self.mask[pos // 8] &= 0xFF ^ (1 << (pos % 8))
        np.bitwise_and(self.distinct, self.mask, out=self.masked)


def _byte_hits(
    search: _Search, frame_id: int, carries: Callable[[int], bool] | None, crc: dict[int, Any]
) -> list[tuple[tuple[float, ...], Checksum]]:
    """Every byte that is a checksum of the rest now, with how much it looks like one."""
    hits: list[tuple[tuple[float, ...], Checksum]] = []
    length = search.length
    for byte in range(length):
        if search.taken(byte * 8) or not search.candidate(range(byte * 8, byte * 8 + 8)):
            continue
        if _count_share(search.data[:, byte].astype(np.int64), 256) >= PERFECT_COUNT:
            continue  # an 8-bit counter
        hit = _simple(search.masked, frame_id, byte)
        if (
            hit is None
            and search.jumps[byte] >= 2.5
            and not _counts(search.data[:, byte].astype(np.int64), 256)
        ):  # a CRC's output jumps
            if byte not in crc:
                crc[byte] = _crc(search.masked, byte, search.keys)
            hit = crc[byte]
        if hit is not None:
            # XOR and sum relations are symmetric: the checksum is the byte with no counter
            # in it (or, of two that count, the one counting less well), that carries into
            # no neighbour (a value's low byte does), at the frame's first or last byte,
            # changing whenever anything else does
            share = search.count_share[byte]
            rank = (
                share < COUNTING,
                -round(share, 3) if share >= COUNTING else 0.0,
                not (carries is not None and carries(byte)),
                byte in (0, length - 1),
                _coverage(search.changes, byte),
                search.jumps[byte],
            )
            hits.append((rank, hit))
    return hits


def find_checksums(
    data: U8,
    frame_id: int,
    extended: bool,
    usable: B,
    carries: Callable[[int], bool] | None = None,
) -> list[Checksum]:
    """The checksums among the bytes and nibbles of `data` (frames x bytes, time order)
    whose bits are all `usable`; `carries(byte)` says a byte carries into a neighbour,
    as the low byte of a value does (so it is not taken for a checksum)."""
    n, length = data.shape
    if n < 2 or length < 2:
        return []
    distinct = np.unique(data, axis=0)
    if len(distinct) < MIN_DISTINCT:
        return []
    if len(distinct) > MAX_ROWS:
        distinct = distinct[np.linspace(0, len(distinct) - 1, MAX_ROWS).astype(np.intp)]
    search = _Search(data, distinct, usable)
    crc: dict[int, Any] = {}
    while hits := _byte_hits(search, frame_id, carries, crc):
        search.accept(max(hits, key=lambda h: h[0])[1])
    while hits := _nibble_hits(search, frame_id, extended):
        search.accept(max(hits, key=lambda h: h[0])[1])
    return search.found


def _nibble_hits(
    search: _Search, frame_id: int, extended: bool
) -> list[tuple[tuple[float, ...], Checksum]]:
    """Every nibble that is a checksum of the others now: of a counter and a checksum that
    follows it (the relation is symmetric), the one counting less well is the checksum."""
    hits: list[tuple[tuple[float, ...], Checksum]] = []
    for byte in range(search.length):
        for high in (False, True):
            lo = byte * 8 + (4 if high else 0)
            if search.taken(lo) or not search.candidate(range(lo, lo + 4)):
                continue
            share = _count_share(_Key(byte, high).of(search.data), 16)
            if share >= PERFECT_COUNT:
                continue  # a counter
            hit = _nibble(search.masked, frame_id, extended, byte, high)
            if hit is not None:
                counting = share >= COUNTING
                rank = (not counting, -round(share, 3) if counting else 0.0)
                hits.append(((*rank, search.nibble_rate(byte, high)), hit))
    return hits
