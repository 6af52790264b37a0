"""IEEE 754 floats among the fields: four aligned bytes (eight in CAN FD frames) that read
as one floating-point number.

Bit flips alone see a float as an integer: its mantissa carries into its exponent, so the
segmentation finds a value from the noisy low mantissa up into the exponent, or pieces of
it. A window of bytes is read as a float (either byte order) when

- every frame decodes to a finite, normal number (or exactly zero) of a plausible size,
  and its exponent takes a few values only (it barely moves while the mantissa is noisy);
- the float reading is smooth (it moves by a small share of its range between frames);
- and it is what explains the bits: smoother than every integer reading of them
  (the window as a 32/64-bit integer, and each field found in it) where a float crosses
  zero or changes sign (an integer reading jumps across its range there), or, for a float
  that stays on one side of zero but crosses powers of two, the fields found in the
  window are one number from below its middle byte into its exponent (carries run through,
  where two integers side by side would be split).

A float that never leaves one power-of-two interval is a linear function of its mantissa:
an integer reading with a scale decodes it as well, and nothing in the bits tells which
was sent, so it is left as the integer field found.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.bits import ByteOrder, bit_matrix, to_signed, values
from hwbridge.discovery.frames import FrameSet

__all__ = ["FloatWindow", "decode_float", "find_floats", "with_floats"]

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]

MAX_MAGNITUDE = 1e9
"""No plausible physical float is larger (a pressure in Pa, an altitude in mm are far less)."""
MIN_MEDIAN, MAX_MEDIAN = 1e-4, 1e8
"""The typical size (median of the nonzero magnitudes) of a plausible float."""
MAX_EXPONENTS = 24
"""Distinct exponents a float shows at most: 2**24 between its smallest and largest size."""
MAX_EXPONENT_MOVES = 0.75
"""Share of transitions on which the exponent may change (it moves far less than the noisy
low bits of the mantissa; a noisy value near zero changes its exponent often)."""
BINADE_STEP = 0.25
"""Where the exponent changes by one (a power of two crossed) a float moves by a small
share of its size; bits that only look like an exponent jump by half or double there."""
MAX_DENORMAL = 0.005
SMOOTH = 0.1
"""A float reading moves by at most this share of its range per frame on average."""
JUMP = 0.2
MIN_JUMPS = 2
"""Across zero, every integer reading of the bits jumps across more than JUMP of its range
at least MIN_JUMPS times where the float reading does not."""
SIGN_JUMPS = 0.2
"""Share of its sign changes on which a float may jump (a noisy value crossing zero is
small on both sides; bits that only look like a sign bit flip at any size)."""
MIN_DISTINCT = 16
MIN_TRANSITIONS = 16

_FORMATS = {4: (8, 23, "f4", "u4"), 8: (11, 52, "f8", "u8")}  # width: exponent, mantissa


@dataclass(frozen=True, slots=True)
class FloatWindow:
    """A float found at bytes `first_byte`.. of a payload, `width` bytes, in `byte_order`."""

    first_byte: int
    width: int
    byte_order: ByteOrder

    @property
    def bits(self) -> tuple[int, ...]:
        """Bit positions, least significant first (as `Field.bits`)."""
        order = (
            range(self.width)
            if self.byte_order == "little_endian"
            else range(self.width - 1, -1, -1)
        )
        return tuple((self.first_byte + k) * 8 + j for k in order for j in range(8))


def decode_float(data: U8, first_byte: int, width: int, byte_order: ByteOrder) -> F64:
    """The float in bytes `first_byte`.. of every row (4 bytes: float32, 8: float64)."""
    _, _, kind, _ = _FORMATS[width]
    chunk = np.ascontiguousarray(data[:, first_byte : first_byte + width])
    dtype = np.dtype(kind).newbyteorder("<" if byte_order == "little_endian" else ">")
    with np.errstate(invalid="ignore"):  # NaN payloads are a float's too
        out: F64 = chunk.view(dtype).reshape(-1).astype(np.float64)
    return out


def _as_uint(
    data: U8, first_byte: int, width: int, byte_order: ByteOrder
) -> npt.NDArray[np.uint64]:
    _, _, _, kind = _FORMATS[width]
    chunk = np.ascontiguousarray(data[:, first_byte : first_byte + width])
    dtype = np.dtype(kind).newbyteorder("<" if byte_order == "little_endian" else ">")
    out: npt.NDArray[np.uint64] = chunk.view(dtype).reshape(-1).astype(np.uint64)
    return out


def _span(x: F64) -> float:
    lo, hi = np.percentile(x, [1, 99])
    return float(hi - lo)


def _jumpiness(x: F64, before: npt.NDArray[np.intp]) -> float:
    """Mean move between consecutive frames as a share of the range (1st to 99th
    percentile); inf for a reading that does not move."""
    span = _span(x)
    if len(before) == 0 or not np.isfinite(span) or span <= 0:
        return float("inf")
    return float(np.mean(np.abs(x[before + 1] - x[before]))) / span


def _plausible(
    v: F64, raw: npt.NDArray[np.uint64], width: int, before: npt.NDArray[np.intp]
) -> bool:
    exp_bits, man_bits, _, _ = _FORMATS[width]
    if not np.isfinite(v).all():
        return False
    mag = np.abs(v)
    if float(mag.max()) > MAX_MAGNITUDE:
        return False
    nonzero = mag[mag > 0]
    if len(nonzero) < len(v) // 2:
        return False
    median = float(np.median(nonzero))
    if not MIN_MEDIAN <= median <= MAX_MEDIAN:
        return False
    exponent = (raw >> np.uint64(man_bits)) & np.uint64((1 << exp_bits) - 1)
    mantissa = raw & np.uint64((1 << man_bits) - 1)
    denormal = (exponent == 0) & (mantissa != 0)
    if float(np.mean(denormal)) > MAX_DENORMAL:
        return False
    used = exponent[mag > 0]
    if len(np.unique(used)) > MAX_EXPONENTS:
        return False
    moves = float(np.mean(exponent[before + 1] != exponent[before]))
    return moves <= MAX_EXPONENT_MOVES


def _one_number(fields: list[Field], window: FloatWindow) -> bool:
    """One moving field of the window runs from below its middle byte into its exponent."""
    bits = window.bits
    rank = {b: k for k, b in enumerate(bits)}
    _, man_bits, _, _ = _FORMATS[window.width]
    middle = window.width * 8 // 2
    for f in fields:
        if f.kind not in ("value", "counter") or not set(f.bits) <= set(bits):
            continue
        ranks = [rank[b] for b in f.bits]
        if ranks != list(range(ranks[0], ranks[0] + len(ranks))):
            continue  # not a number read in the window's byte order
        if min(ranks) < middle and max(ranks) >= man_bits:
            return True
    return False


def find_floats(frames: FrameSet, fields: list[Field]) -> list[FloatWindow]:
    """The windows of `frames` that read as floats, given the fields found in them
    (non-overlapping; those no field crosses first, then the smoothest)."""
    length = frames.length
    n = len(frames)
    before = np.flatnonzero(frames.cont[1:])
    if n < MIN_DISTINCT or len(before) < MIN_TRANSITIONS or length < 4:
        return []
    data = frames.data
    bits = None
    found: list[tuple[float, FloatWindow]] = []
    for width in (4, 8):
        if length < width:
            continue
        for first in range(length - width + 1):
            for order in ("little_endian", "big_endian"):
                window = FloatWindow(first, width, order)
                raw = _as_uint(data, first, width, window.byte_order)
                if np.count_nonzero(raw[before + 1] != raw[before]) < MIN_TRANSITIONS:
                    continue
                v = decode_float(data, first, width, window.byte_order)
                if not _plausible(v, raw, width, before):
                    continue
                if len(np.unique(raw)) < MIN_DISTINCT:
                    continue
                smooth = _jumpiness(v, before)
                if smooth > SMOOTH:
                    continue
                if bits is None:
                    bits = bit_matrix(data)
                if not _explains(v, raw, fields, window, (bits, before)):
                    continue
                found.append((smooth, window))
    # windows no field crosses first (a float is a field of its own), the smoothest first
    found.sort(key=lambda item: (not _fits(fields, [item[1]]), item[0]))
    chosen: list[FloatWindow] = []
    taken: set[int] = set()
    for _, window in found:
        if taken & set(window.bits):
            continue
        chosen.append(window)
        taken |= set(window.bits)
    # a field found across a float's edge must lie in floats only (two floats side by
    # side may be joined by the flips of one's exponent and the other's mantissa)
    while chosen and not _fits(fields, chosen):
        chosen = [w for w in chosen if _fits(fields, chosen, w)]
    return chosen


def _fits(fields: list[Field], windows: list[FloatWindow], only: FloatWindow | None = None) -> bool:
    """No field overlapping the windows (or window `only`) reaches outside all of them."""
    union = {b for w in windows for b in w.bits}
    mine = union if only is None else set(only.bits)
    return all(not (set(f.bits) & mine) or set(f.bits) <= union for f in fields)


def _explains(
    v: F64,
    raw: npt.NDArray[np.uint64],
    fields: list[Field],
    window: FloatWindow,
    frames: tuple[U8, npt.NDArray[np.intp]],
) -> bool:
    """The float reading explains the bits better than the integer readings do (`frames`:
    the bit matrix and the first frame of each transition): across zero, every integer
    reading jumps where the float does not; on one side of zero, the float crosses powers
    of two continuously and the fields found are one number."""
    bits, before = frames
    exp_bits, man_bits, _, _ = _FORMATS[window.width]
    exponent = (raw >> np.uint64(man_bits)) & np.uint64((1 << exp_bits) - 1)
    crosses = bool((v > 0).any() and (v <= 0).any()) or bool((v < 0).any() and (v >= 0).any())
    if crosses:
        ints = [raw.astype(np.float64)]
        if window.width == 4:
            ints.append(to_signed(raw.astype(np.int64), 32).astype(np.float64))
        inside = set(window.bits)
        for f in fields:
            if f.kind == "constant" or not set(f.bits) <= inside or len(f.bits) < 2:
                continue
            reading = values(bits, f.bits)
            if f.signed:
                reading = to_signed(reading, len(f.bits))
            ints.append(reading.astype(np.float64))
        jumped = _jumped(v, before)
        calm = before[~jumped]  # the float does not jump there
        flips = (v[before] * v[before + 1]) < 0  # a float changes sign near zero
        if (not flips.any() or float(np.mean(jumped[flips])) <= SIGN_JUMPS) and min(
            int(_jumped(x, calm).sum()) for x in ints
        ) >= MIN_JUMPS:
            return True
    if len(np.unique(exponent)) < 2:
        return False  # one power-of-two interval: an integer with a scale reads it as well
    return _continuous(v, exponent, before) and _one_number(fields, window)


def _jumped(x: F64, before: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Which transitions move across more than JUMP of the range."""
    span = _span(x)
    if not np.isfinite(span) or span <= 0:
        return np.zeros(len(before), np.bool_)
    out: npt.NDArray[np.bool_] = np.abs(x[before + 1] - x[before]) > JUMP * span
    return out


def _continuous(v: F64, exponent: npt.NDArray[np.uint64], before: npt.NDArray[np.intp]) -> bool:
    """Across a power of two (the exponent changing by one, the sign not), the value moves
    by less than BINADE_STEP of its size in most such transitions."""
    a, b = v[before], v[before + 1]
    ea, eb = exponent[before].astype(np.int64), exponent[before + 1].astype(np.int64)
    at = (np.abs(ea - eb) == 1) & (np.sign(a) == np.sign(b)) & (a != 0)
    if not at.any():
        return False
    size = np.maximum(np.abs(a[at]), np.abs(b[at]))
    return float(np.median(np.abs(b[at] - a[at]) / size)) <= BINADE_STEP


def with_floats(frames: FrameSet, fields: list[Field]) -> list[Field]:
    """`fields` with each float found replacing the fields inside its window."""
    windows = find_floats(frames, fields)
    if not windows:
        return fields
    union = {b for w in windows for b in w.bits}
    templates = {
        id(w): next((f for f in fields if set(f.bits) & set(w.bits)), None) for w in windows
    }
    out = [f for f in fields if not set(f.bits) <= union]
    for window in windows:
        template = templates[id(window)]
        distinct = len(
            np.unique(_as_uint(frames.data, window.first_byte, window.width, window.byte_order))
        )
        base = template or Field(window.bits, window.byte_order, "value")
        out.append(
            replace(
                base,
                bits=window.bits,
                byte_order=window.byte_order,
                kind="value",
                signed=False,
                detail=f"IEEE 754 float{window.width * 8}",
                algorithm=None,
                wider=0,
                distinct=distinct,
                is_float=True,
            )
        )
    return sorted(out, key=lambda f: (min(f.bits), f.bits))
