"""One frame id's payload split into fields, each with a kind, an order and a sign.

The steps, in the order they run: checksums (they would otherwise look like noise joined to
their neighbours), fields from how bits flip (`segment`), then per field its kind: a single
bit is a `flag`; a field that steps by the same amount modulo 2**n frame after frame, through
all its values, is a `counter`; everything else that moves is a `value`, signed when reading
it in two's complement makes its wrap-arounds (jumps across the whole range) disappear. Bits
that never moved are `constant` fields, one per run inside a byte: nothing says which field
they belong to, so none is guessed; a value field right below such bits says so in `note`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.analysis.checksums import Checksum, find_checksums
from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.analysis.segment import BitStats, Segment, bit_stats, carries_on, segment
from hwbridge.discovery.bits import ByteOrder, bit_matrix, next_up, to_signed, values
from hwbridge.discovery.frames import FrameSet

__all__ = ["analyse"]

B = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]

ORDERS: tuple[ByteOrder, ...] = ("little_endian", "big_endian")
COUNTER_SHARE = 0.9
COUNTER_LSB_RATE = 0.9
"""A counter's lowest bit flips on (nearly) every frame ..."""
HALF_LOW, HALF_HIGH = 0.4, 0.6
"""... and each bit above it about half as often as the one below."""
SIGNED_DISTINCT = 4
"""Distinct values a field needs before it is called signed: fewer are a state's."""
SIGNED_SMALL = 0.5
"""Share of a signed field's changes that move it by a little (an eighth of its range)."""
COUNTER_SHORT_FRAMES = 64
"""Transitions a counter that never went round twice must show to be called one."""
CLOCK_R = 0.9999
"""r with the frames' times above which two neighbouring pieces read as one clock."""
CLOCK_RESIDUAL = 0.25
"""... and the scatter around the line, in steps between frames, below which."""
CLOCK_BUDGET = 1024
"""Runs of pieces one payload's clocks are looked for in, at most (a frame of 64 bytes of
flags, each rising once, offers tens of thousands; a real one, a handful)."""


def analyse(frames: FrameSet, explained: B | None = None) -> list[Field]:
    """The fields of one id's frames; `explained` marks bit positions a database already
    describes (they are left out)."""
    length = frames.length
    nbits = length * 8
    usable = np.ones(nbits, np.bool_) if explained is None else ~explained[:nbits]
    if len(frames) == 0 or nbits == 0:
        return []
    bits = bit_matrix(frames.data)
    stats = bit_stats(bits, frames.cont)
    fields: list[Field] = []
    taken = ~usable
    aid, extended = frames.key
    for found in find_checksums(frames.data, aid, extended, usable, carries_on(stats, length)):
        fields.append(_checksum(found, bits))
        taken[list(found.bits)] = True
    counters = {c.bits: c for c in _counters(stats, bits, ~taken)}
    for bits_of in counters:
        taken[list(bits_of)] = True
    pieces = [Segment(c.bits, c.byte_order) for c in counters.values()]
    pieces += segment(stats, length, ~taken)
    for seg in _join_clocks(pieces, bits, frames):
        counter = counters.get(seg.bits)
        fields.append(counter or _classify(seg.bits, seg.order, bits, stats))
        taken[list(seg.bits)] = True
    order = _majority_order(fields)
    fields = [
        replace(f, byte_order=order) if _one_byte(f.bits) and f.kind != "checksum" else f
        for f in fields
    ]
    constant = usable & (stats.count == 0) & ~taken
    fields += _constants(constant, bits)
    fields = [_widen_note(f, constant, nbits) for f in fields]
    return sorted(fields, key=lambda f: (min(f.bits), f.bits))


def _counters(stats: BitStats, bits: npt.NDArray[np.uint8], free: B) -> list[Field]:
    """Rolling counters, found before the other fields (a counter's top bit flips about as
    rarely as a neighbour's, so flips alone may join them): from a bit flipping on nearly
    every frame, upwards while each bit flips about half as often as the one below, in
    either byte order; the longest run that counts through all its values is a counter."""
    out: list[Field] = []
    free = free.copy()
    nbits = len(free)
    for p in (int(i) for i in np.argsort(-stats.rate, kind="stable")):
        if stats.rate[p] < COUNTER_LSB_RATE:
            break
        if not free[p]:
            continue
        best: tuple[tuple[int, ...], ByteOrder, str] | None = None
        for order in ORDERS:
            chain = [p]
            while len(chain) < 8:
                q = next_up(chain[-1], order)
                if not 0 <= q < nbits or not free[q]:
                    break
                if not stats.count[q]:
                    break
                ratio = stats.rate[q] / stats.rate[chain[-1]]
                half = float(stats.count[chain[-1]]) / 2
                if not (HALF_LOW <= ratio <= HALF_HIGH or abs(stats.count[q] - half) <= 1.0):
                    break  # few flips are halved to within one (a wide counter, few frames)
                chain.append(q)
            for n in range(len(chain), 1, -1):
                raw = values(bits, chain[:n])
                first, second = raw[stats.before], raw[stats.before + 1]
                step = _counter_step(first, second, n, len(np.unique(raw)))
                if step is not None:
                    if best is None or n > len(best[0]):
                        best = (tuple(chain[:n]), order, step)
                    break
        if best is not None:
            chain_bits, found_order, step = best
            if _one_byte(chain_bits):
                found_order = "little_endian"  # either reads it; the message's order is set later
            distinct = len(np.unique(values(bits, chain_bits)))
            out.append(Field(chain_bits, found_order, "counter", detail=step, distinct=distinct))
            free[list(chain_bits)] = False
    return out


def _join_clocks(
    segments: list[Segment], bits: npt.NDArray[np.uint8], frames: FrameSet
) -> list[Segment]:
    """Join neighbouring pieces that together read as a clock: a value rising with the
    frames' own times, in a straight line (a GNSS epoch in milliseconds sent every second,
    an uptime). Flips cannot join those: the value moves by about the weight of a middle
    bit every frame, so the bits above it flip on nearly every frame, like a new field's
    (or a counter's), and the bits below only with the jitter of the clock.

    From each piece, the run of pieces continuing it upwards is tried longest first: the
    run is a clock when all of it rises in a straight line with time and its part above
    the first piece never falls back. Bounded: a run is read up to 63 bits (no longer
    number is read), only where its top piece never falls (a value whose top falls falls
    too), each run judged once and at most CLOCK_BUDGET of them."""
    if len(frames) < 8:
        return segments
    pieces = list(segments)
    cont = frames.cont[1:]
    never_falls: dict[tuple[int, ...], bool] = {}
    verdicts: dict[tuple[tuple[int, ...], int], bool] = {}  # (chain, bits of its first piece)

    def rising(piece: Segment) -> bool:
        if piece.bits not in never_falls:
            steps = np.diff(values(bits, piece.bits))[cont]
            never_falls[piece.bits] = bool((steps >= 0).all())
        return never_falls[piece.bits]

    joined = True
    while joined:
        joined = False
        at = {p.bits[0]: (i, p) for i, p in enumerate(pieces)}
        for a in sorted(pieces, key=lambda p: p.bits[0]):
            run, order = _run_above(a, at)
            tried = [
                k
                for k in range(len(run), 1, -1)
                if (_chain(run[:k]), len(a.bits)) in verdicts or rising(run[k - 1])
            ]
            if not tried:
                continue
            whole = _chain(run)
            raw = values(bits, whole)  # each shorter chain is its low bits
            for k in tried:
                chain = _chain(run[:k])
                key = (chain, len(a.bits))
                if key not in verdicts:
                    if len(verdicts) >= CLOCK_BUDGET:
                        continue
                    low = raw & np.int64((1 << len(chain)) - 1) if len(chain) < 63 else raw
                    verdicts[key] = _clock(low, frames) and _clock(
                        low >> np.int64(len(a.bits)), frames, loose=True
                    )
                if verdicts[key]:
                    used = {id(p) for p in run[:k]}
                    pieces = [p for p in pieces if id(p) not in used]
                    pieces.append(Segment(chain, order))
                    joined = True
                    break
            if joined:
                break
    return pieces


def _chain(run: list[Segment]) -> tuple[int, ...]:
    return tuple(b for piece in run for b in piece.bits)


def _run_above(
    a: Segment, at: dict[int, tuple[int, Segment]]
) -> tuple[list[Segment], ByteOrder | None]:
    """`a` and the pieces continuing it upwards one after the other, in one byte order, as
    far as they hold 63 bits (`at`: the pieces by their bottom bit, with their place in the
    list; of two that continue a piece, the one listed first). The order is the whole
    run's: set where it first leaves a byte, which may lie past those 63 bits."""
    run, order = [a], a.order
    taken = {id(a)}
    size = len(a.bits)
    top = a
    while True:
        step = None
        ups = {next_up(top.bits[-1], o) for o in ORDERS}
        for _, b in sorted((at[u] for u in ups if u in at), key=lambda ib: ib[0]):
            got = _continues(top, b)
            if got is not None and order in (None, got) and id(b) not in taken:
                step = (b, got)
                break
        if step is None:
            break
        if not _one_byte(top.bits + step[0].bits):
            order = step[1]
        top = step[0]
        taken.add(id(top))
        size += len(top.bits)
        if size <= 63:
            run.append(top)
        elif order is not None:
            break  # longer chains are not read; the order is set for good
    return run, order


def _continues(a: Segment, b: Segment) -> ByteOrder | None:
    """The order in which `b` continues `a` upwards (its bottom bit right above a's top)."""
    for order in ORDERS:
        if a.order not in (None, order) or b.order not in (None, order):
            continue
        if next_up(a.bits[-1], order) == b.bits[0]:
            return order
    return None


def _clock(raw: I64, frames: FrameSet, *, loose: bool = False) -> bool:
    """The value rises in a straight line with the frames' times (`loose`: it merely rises
    and never falls back, as the top part of a clock does)."""
    v = raw.astype(np.float64)
    t = frames.t
    steps = np.diff(v)[frames.cont[1:]]
    if len(steps) < 8 or not (steps >= 0).all() or not (steps > 0).any():
        return False
    if loose:
        return True
    if float(np.std(t)) == 0.0:
        return False
    r = float(np.corrcoef(t, v)[0, 1])
    if not r >= CLOCK_R:
        return False
    slope, intercept = np.polyfit(t, v, 1)
    scatter = float(np.std(v - (slope * t + intercept)))
    return scatter <= CLOCK_RESIDUAL * float(np.median(steps[steps > 0]))


def _one_byte(bits: tuple[int, ...]) -> bool:
    return len({b // 8 for b in bits}) == 1


def _checksum(found: Checksum, bits: npt.NDArray[np.uint8]) -> Field:
    distinct = len(np.unique(values(bits, found.bits)))
    detail = found.description + (f" ({found.car})" if found.car else "")
    return Field(
        found.bits,
        "little_endian",
        "checksum",
        detail=detail,
        algorithm=found.algorithm,
        distinct=distinct,
    )


def _classify(
    positions: tuple[int, ...],
    order: ByteOrder | None,
    bits: npt.NDArray[np.uint8],
    stats: BitStats,
) -> Field:
    byte_order: ByteOrder = order or "little_endian"
    raw = values(bits, positions)
    distinct = len(np.unique(raw))
    n = len(positions)
    if n == 1:
        return Field(positions, byte_order, "flag", distinct=distinct)
    first, second = raw[stats.before], raw[stats.before + 1]
    step = _counter_step(first, second, n, distinct)
    if step is not None:
        return Field(positions, byte_order, "counter", detail=step, distinct=distinct)
    signed = _is_signed(first, second, raw, n)
    return Field(positions, byte_order, "value", signed=signed, distinct=distinct)


def _counter_step(first: I64, second: I64, n: int, distinct: int) -> str | None:
    """'+1' (or the step) when the field counts modulo 2**n through all its values; or, in a
    capture too short for it to go round twice (a message sent once a second, a wide
    counter), when it steps the same way on nearly every frame and shows nearly every value
    it could have shown in that time (one per frame, or all of them when it went round
    once; COUNTER_SHORT): a rarely changing field above a counter repeats the counter's
    values, so it cannot pass as its top bits."""
    if n > 8:
        return None
    short = len(first) < (2 << n)
    if short:
        could = min(len(first) + 1, 1 << n)  # the values it could have shown
        if len(first) < COUNTER_SHORT_FRAMES or distinct < COUNTER_SHARE * could:
            return None
    elif distinct < (1 << n):
        return None
    modulo = 1 << n
    delta = (second - first) % modulo
    moving = delta[delta != 0]
    if len(moving) < COUNTER_SHARE * len(delta):
        return None
    steps = np.bincount(moving, minlength=modulo)
    step = int(np.argmax(steps))
    if steps[step] < COUNTER_SHARE * len(delta) or step % 2 == 0:
        return None
    wraps = int(((second < first) if step < modulo // 2 else (second > first)).sum())
    if wraps < 2 and not short:
        return None
    shown = step if step < modulo // 2 else step - modulo
    return f"{shown:+d} modulo {modulo} every frame"


def _is_signed(first: I64, second: I64, raw: I64, n: int) -> bool:
    """Two's complement when the value wraps around: it jumps across more than half the
    unsigned range while, read signed, it moves by a little (crossing zero), at least twice
    and far more often than the other way round (an unsigned value crossing mid-range).

    A state that jumps between a few values (0 and 7, "not available") wraps too, so the
    field must also move like a number, read signed: take enough distinct values
    (SIGNED_DISTINCT), and change by a little in most of its changes (SIGNED_SMALL), where a
    state jumps between its values."""
    if n < 3 or len(first) < 2:
        return False
    half, small = 1 << (n - 1), max(1, 1 << (n - 3))
    du = np.abs(second - first)
    ds = np.abs(to_signed(second, n) - to_signed(first, n))
    wraps = int(np.count_nonzero((du >= half) & (ds <= small)))
    unwraps = int(np.count_nonzero((ds >= half) & (du <= small)))
    if not (wraps >= 2 and wraps > 4 * unwraps):
        return False
    if len(np.unique(raw)) < SIGNED_DISTINCT:
        return False
    moves = ds[du != 0]
    return float(np.mean(moves <= small)) >= SIGNED_SMALL


def _majority_order(fields: list[Field]) -> ByteOrder:
    """The order the message's multi-byte fields use (little endian when none tell)."""
    votes = Counter(f.byte_order for f in fields if not _one_byte(f.bits) and f.kind != "checksum")
    if votes.get("big_endian", 0) > votes.get("little_endian", 0):
        return "big_endian"
    return "little_endian"


def _constants(constant: B, bits: npt.NDArray[np.uint8]) -> list[Field]:
    """Runs of never-changing bits, one field per run within a byte."""
    out: list[Field] = []
    run: list[int] = []
    for pos in range(len(constant)):
        if constant[pos] and (not run or (pos % 8 != 0 and run[-1] == pos - 1)):
            run.append(pos)
            continue
        if run:
            out.append(Field(tuple(run), "little_endian", "constant", distinct=1))
        run = [pos] if constant[pos] else []
    if run:
        out.append(Field(tuple(run), "little_endian", "constant", distinct=1))
    return out


def _widen_note(f: Field, constant: B, nbits: int) -> Field:
    """Count the never-moving bits right above a value field: they may be its own."""
    if f.kind not in ("value",):
        return f
    wider = 0
    pos = f.bits[-1]
    while True:
        pos = next_up(pos, f.byte_order)
        if not 0 <= pos < nbits or not constant[pos]:
            break
        wider += 1
    return replace(f, wider=wider) if wider else f
