"""Where one field ends and the next begins, from how the bits flip between frames.

The published method (READ, TANG and the bit-flip heat maps of cabana and the CSS
Electronics skills): a bit that never flips is constant; within a numeric field the flip
rate falls from its least to its most significant bit, so a rate that rises again marks a
new field. Rates alone cannot tell a field's quiet top bit from a neighbour's quiet bottom
bit, so each step up is also checked for carry: when a bit of a field flips, the bits below
it in the same field have just wrapped (the value moved by a little, not by the bit's
weight), while a neighbour's bit flips whatever the bits below are doing.

Bits are segmented inside each byte first (both byte orders agree there); the segments at
the edges of bytes are then joined across byte edges where the carry runs: up into the next
byte (little endian) or into the byte before (big endian). Each field keeps one order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, partial

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.bits import ByteOrder, next_up, to_signed, values

__all__ = ["BitStats", "Segment", "bit_stats", "carries_on", "segment"]

U8 = npt.NDArray[np.uint8]
B = npt.NDArray[np.bool_]

CARRY = 0.62
"""Share of a bit's flips that must look like a carry from the bits below to join them."""
SURE_CARRY = 0.9
SURE_FLIPS = 8
NOISE_RATE = 0.35
"""Bits flipping at least this often on every transition are treated as noise of one field
when their rates are alike (carry cannot be seen through noise)."""
NOISE_SPREAD = 0.12
RATE_SLACK = 1.15
"""A bit may flip up to this factor more often than the one below it and still continue."""
FAST = 0.08
"""Bits flipping this often move by about their weight between frames: carries are hidden,
and a field's rate falls by about half a bit, never by much more than STEEPEST."""
STEEPEST = 0.2
HIDDEN_CARRY = 0.2
"""Even hidden, carries show in some flips; none at all says the bit is a neighbour's."""
TOGETHER_P = 0.01
EXCLUSIVE_SHARE = 0.15
"""Share of frames a missing combination of two quiet bits would have had, were they
independent, above which they are read as one state ..."""
TOGGLE = 0.9
"""A bit flipping on at least this share of transitions toggles: see _toggle_carry."""
CARRY_FLOOR = 0.4
CHANCE_FLIPS = 4
CHANCE_P = 0.001
"""A bit flipping no more often than the one below it, at least CHANCE_FLIPS times, whose
flips look like carries in CARRY_FLOOR of them or more (short of CARRY), continues the field
below when chance would hardly give it that share (a binomial tail below CHANCE_P; see
_carries_beyond_chance)."""
EXCLUSIVE_P = 0.01
"""... or, above a state of one or two bits, the chance below which independent bits would
hardly have missed that combination over the changes seen."""
EXCLUSIVE_FLIPS = 3
ECHO_FRAMES = 2
"""Frames within which a quiet flag that follows another's flip is read as an echo of it."""
CARRIES_ON = 0.75
QUANTUM = 3
"""A value whose every change is a multiple of one step of at least this many raw units ...
"""
QUANTUM_CHANGES = 8
QUANTUM_VALUES = 4
"""... over at least QUANTUM_CHANGES changes, through QUANTUM_VALUES distinct values or more
(two flags changing together go 0 <-> 3), is a sensor quantised more coarsely than its
field's step: its lowest bits carry as the step makes them (5 = 0b101 sets bit 0 and carries
into bit 2 at once), not one by one, so the carry test splits it; pieces whose joined value
moves only by multiples of such a step are one field."""
QUANTUM_BUDGET = 1024
"""Runs of pieces one payload's quanta are looked for in, at most (a frame of 64 bytes of
slowly moving values offers tens of thousands; a real one, a few hundred)."""
STATE_BITS = 4
"""Bits two neighbouring quiet pieces may have together to be joined as one state."""
CODE_GAIN_BITS = 0.0
"""Bits by which writing two neighbouring pieces down as one value must be shorter than
writing them apart for them to be joined (see _join_cheaper) ..."""
CODE_SHIFTS = 19
CODE_MARGIN_BITS = 2.0
"""... and by this many bits more than it is with the upper piece moved in time by any of
CODE_SHIFTS circular shifts (what it saves by chance, were the two of their own)."""
PAIR_CODES = 3 + 2 * CODE_SHIFTS
"""Code lengths one pair of pieces takes to judge, at most."""
CODE_BUDGET = 4096
"""Code lengths one payload's joins by code length reckon, at most, each over all its rows
(a frame of 64 bytes of quantised values offers ten thousand; a real one, a few hundred);
a pair the rest cannot judge whole is not joined."""
SPARSE_BITS = 3
SPARSE_VALUE_BITS = 3
SPARSE_RATIO = 4.0
SPARSE_FLIPS = 4
SPARSE_DISTINCT = 8
"""A piece of at most SPARSE_BITS bits, flipping at least SPARSE_FLIPS times but at most
1/SPARSE_RATIO as often as the lowest bit of the value right above it (SPARSE_VALUE_BITS or
more, SPARSE_DISTINCT values or more), and set only while that value sits at one end of
its range, is the value's lowest bits (see _join_sparse_bottoms)."""
_ORDERS: tuple[ByteOrder, ...] = ("little_endian", "big_endian")
_WINDOW = 16  # bits below a candidate looked at for carry


@dataclass(frozen=True, slots=True)
class BitStats:
    """Per bit position: how often it flipped over the transitions, and on which."""

    bits: U8  # (frames, positions) 0/1
    flips: B  # (transitions, positions): the bit changed between frame i and i+1
    before: npt.NDArray[np.intp]  # frame index of each transition's first frame
    count: npt.NDArray[np.int64]  # flips per position
    rate: npt.NDArray[np.float64]  # flips per transition
    transitions: int
    active: int  # transitions on which some bit other than a counter's lowest changed


def bit_stats(bits: U8, cont: B) -> BitStats:
    """Transitions are the pairs of consecutive frames that `cont` marks as such."""
    before = np.flatnonzero(cont[1:])
    flips = (bits[before + 1] ^ bits[before]).astype(np.bool_)
    count = flips.sum(axis=0).astype(np.int64)
    n = max(len(before), 1)
    rate = count / n
    quiet = rate < 0.95  # leave out bits that flip on (nearly) every frame
    active = int(np.count_nonzero(flips[:, quiet].any(axis=1))) if quiet.any() else 0
    return BitStats(bits, flips, before, count, rate, len(before), active)


@dataclass(frozen=True, slots=True)
class Segment:
    """Bits of one field, least significant first, with the order they run in."""

    bits: tuple[int, ...]
    order: ByteOrder | None  # None: within one byte, either order reads it


def _carry(stats: BitStats, below: list[int], hi: int) -> float:
    """Share of `hi`'s flips that are carries from `below`: the value of `below` + `hi`
    (modulo its range, so a signed value crossing zero counts too) moved by at most half
    `below`'s range. A value moving by more than that between frames (a wheel speed while
    accelerating, a timestamp) still moves by about the same amount each time, so the
    change of its change is looked at too, and the better of the two counts."""
    rows = np.flatnonzero(stats.flips[:, hi])
    if not len(rows):
        return 0.0
    if len(below) == 1 and stats.rate[below[0]] >= TOGGLE:
        return _toggle_carry(stats, below[0], hi, rows)
    window = below[-_WINDOW:]
    positions = [*window, hi]
    w = len(window)
    weights = np.left_shift(np.int64(1), np.arange(w + 1, dtype=np.int64))
    span = np.int64(1) << np.int64(w + 1)
    limit = np.int64(1) << np.int64(max(w - 1, 0))

    def value(frames: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = stats.bits[frames][:, positions].astype(np.int64) @ weights
        return out

    def small(d: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        d = d % span
        return np.abs(np.where(d >= span // 2, d - span, d)) <= limit

    first = stats.before[rows]
    v1, v2 = value(first), value(first + 1)
    share = float(np.mean(small(v2 - v1)))
    prev = rows - 1
    ok = prev >= 0
    ok[ok] &= (stats.before[prev[ok]] + 1 == first[ok]) & ~stats.flips[prev[ok], hi]
    if int(ok.sum()) >= 3:
        v0 = value(stats.before[prev[ok]])
        share = max(share, float(np.mean(small(v2[ok] - 2 * v1[ok] + v0))))
    return share


def _toggle_carry(stats: BitStats, lo: int, hi: int, rows: npt.NDArray[np.intp]) -> float:
    """Share of `hi`'s flips that are carries of a count from `lo`, a bit flipping on
    (nearly) every frame: any flip of `hi` then comes with one of `lo`, which two bits
    always read as a small move, so only flips in one direction count (`lo` going 1 -> 0
    as a count goes up, or 0 -> 1 as it goes down), as the bits of a counter show and a
    neighbour of a toggling bit does not (one way about half the time: the share counts
    only when a binomial tail at one half is below TOGETHER_P)."""
    first = stats.before[rows]
    went = stats.bits[first, lo].astype(np.int64) - stats.bits[first + 1, lo].astype(np.int64)
    n = len(rows)
    k = max(int(np.count_nonzero(went > 0)), int(np.count_nonzero(went < 0)))
    return k / n if _binomial_tail(k, n, 0.5) < TOGETHER_P else 0.0


def _carries_beyond_chance(stats: BitStats, below: list[int], hi: int) -> bool:
    """`hi`'s flips look like carries from `below` far more often than they would were it a
    bit of its own: a value whose bits below move by a few steps each frame (a noisy
    sensor) carries into its quiet top bit on only part of its flips, but a neighbour's
    bit, flipping whatever those bits do, would look like a carry only when they happen
    to move by about its weight the other way. Chance is that share over the frames
    where `hi` did not flip; the flips seen must beat it with a binomial tail below
    CHANCE_P."""
    rows = np.flatnonzero(stats.flips[:, hi])
    n = len(rows)
    if n < CHANCE_FLIPS or (len(below) < 2 and stats.rate[below[-1]] >= FAST):
        return False  # a busy bit below: any flip together looks like a carry
    window = below[-_WINDOW:]
    w = len(window)
    weights = np.left_shift(np.int64(1), np.arange(w, dtype=np.int64))
    span = np.int64(1) << np.int64(w + 1)
    limit = np.int64(1) << np.int64(max(w - 1, 0))
    low = stats.bits[:, window].astype(np.int64) @ weights
    step = np.int64(1) << np.int64(w)

    def small(d: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        d = d % span
        return np.abs(np.where(d >= span // 2, d - span, d)) <= limit

    first = stats.before[rows]
    up = stats.bits[first + 1, hi].astype(np.int64) * 2 - 1  # +1: hi went 0 -> 1
    k = int(np.count_nonzero(small(low[first + 1] - low[first] + up * step)))
    still = stats.before[~stats.flips[:, hi]]
    if not len(still):
        return False
    moves = low[still + 1] - low[still]
    rising = float(np.mean(up > 0))
    chance = rising * float(np.mean(small(moves + step))) + (1 - rising) * float(
        np.mean(small(moves - step))
    )
    return _binomial_tail(k, n, chance) < CHANCE_P


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * log_p
            + (n - i) * log_q
        )
        total += term
        if i > n * p and term < total * 1e-12:
            break
    return min(1.0, total)


def _noise_pair(stats: BitStats, lo: int, hi: int) -> bool:
    r_lo, r_hi = stats.rate[lo], stats.rate[hi]
    return bool(r_lo >= NOISE_RATE and r_hi >= NOISE_RATE and abs(r_hi - r_lo) <= NOISE_SPREAD)


def _rate_ok(stats: BitStats, lo: int, hi: int) -> bool:
    return bool(stats.rate[hi] <= stats.rate[lo] * RATE_SLACK + 0.005)


def _poisson_tail(k: int, lam: float) -> float:
    """P(X >= k) for X ~ Poisson(lam)."""
    if lam <= 0:
        return 0.0 if k > 0 else 1.0
    term = math.exp(-lam)
    below = 0.0
    for i in range(k):
        below += term
        term *= lam / (i + 1)
    return max(0.0, 1.0 - below)


def _joins(stats: BitStats, below: list[int], hi: int) -> float:
    """How well `hi` continues the field whose top bits are `below` (0: it does not).

    Either the two bits are noise alike; or `hi` flips no more often than the bit below
    and its flips are carries (the value moved by little); or the bits below move by more
    than their weight between frames (carries cannot be seen) and the rate falls smoothly;
    or the two bits are quiet and change together (a state taking a new value).
    """
    lo = below[-1]
    r_lo, r_hi = float(stats.rate[lo]), float(stats.rate[hi])
    quiet = r_lo < FAST and r_hi < FAST
    if quiet and _echo(stats, lo, hi):
        return 0.0
    if _noise_pair(stats, lo, hi):
        return max(CARRY, _carry(stats, below, hi))
    falling = r_hi <= r_lo * RATE_SLACK + 0.005
    score = _carry(stats, below, hi)
    if score >= SURE_CARRY and stats.count[hi] >= SURE_FLIPS:
        return score  # carries so regular that rates do not matter (a timestamp's bits)
    if falling:
        if score >= CARRY:
            return score
        if r_lo >= FAST and r_hi >= r_lo * STEEPEST and score >= HIDDEN_CARRY:
            return score  # the better of two such links is the one with more carries
        if score >= CARRY_FLOOR and _carries_beyond_chance(stats, below, hi):
            return score
    if r_lo < FAST and _together(stats, lo, hi):
        return CARRY
    if quiet and (_state_pair(stats, below, hi) or _exclusive(stats, below, hi)):
        return CARRY
    return 0.0


def _runs(stats: BitStats, lo: int, hi: int) -> tuple[npt.NDArray[np.int64], ...]:
    """The joint value (lo + 2 * hi) of two bits as runs of frames: (value, first frame,
    frames) of each run."""
    v = stats.bits[:, lo].astype(np.int64) + 2 * stats.bits[:, hi].astype(np.int64)
    starts = np.flatnonzero(np.r_[True, v[1:] != v[:-1]])
    lengths = np.diff(np.r_[starts, len(v)])
    return v[starts], starts, lengths


def _echo(stats: BitStats, lo: int, hi: int) -> bool:
    """Two quiet flags copying one event, each with its own lag: every time one flips
    alone, the other follows within ECHO_FRAMES frames (the combination in between is a
    passing one), and they otherwise flip together. The bits of one field are written
    at once, so they never pass through such a combination."""
    value, _, frames = _runs(stats, lo, hi)
    if len(value) < 3:
        return False
    staggered = 0
    k = 1
    while k < len(value):
        single = (value[k] ^ value[k - 1]) in (1, 2)
        if not single:
            k += 1
            continue
        passing = (
            k + 1 < len(value)
            and frames[k] <= ECHO_FRAMES
            and (value[k + 1] ^ value[k]) in (1, 2)
            and (value[k + 1] ^ value[k - 1]) == 3
        )
        if not passing:
            return False  # a flip of its own: a state or two flags
        staggered += 1
        k += 2
    return staggered > 0


def _state_pair(stats: BitStats, below: list[int], hi: int) -> bool:
    """A quiet bit that belongs to the piece of quiet bits right below it (at most three),
    as in a state: it flipped together with one of them at least once (a change between two
    values that differ in both) and some value of the bits below never shows with one of
    its own two (a state taking three values of four). A flag of its own would rarely flip
    on the same frame as its neighbours, and in time show with all their values."""
    if len(below) > 3 or any(stats.rate[position] >= FAST for position in below):
        return False  # the top of a wider value, or a value's bits
    window = list(below)
    if not np.count_nonzero(stats.flips[:, window].any(axis=1) & stats.flips[:, hi]):
        return False
    weights = np.left_shift(np.int64(1), np.arange(len(window), dtype=np.int64))
    low = stats.bits[:, window].astype(np.int64) @ weights
    joint = low * 2 + stats.bits[:, hi].astype(np.int64)
    return len(np.unique(joint)) < 2 * len(np.unique(low))


def _exclusive(stats: BitStats, below: list[int], hi: int) -> bool:
    """Quiet bits that are not independent of the bits below them: some combination of the
    two never occurs although, were they independent, chance would hardly have kept it
    away (below EXCLUSIVE_P). A state taking the values 0, 1 and 2 changes one bit at a
    time and never shows 3; two flags of their own show every combination in time.

    Chance is reckoned per change, not per frame (frames in between are not new tries):
    each time the top bit took the value v, the bits below were in combination c with the
    share of frames c holds, and the other way round, so a combination (c, v) is missed by
    chance with about (1 - share(c)) ** entries(v) * (1 - share(v)) ** entries(c). Each
    side must have changed a few times (EXCLUSIVE_FLIPS), or one change could hide it."""
    window = below[-3:]
    if int(stats.count[hi]) < EXCLUSIVE_FLIPS or int(stats.count[window[-1]]) < EXCLUSIVE_FLIPS:
        return False
    weights = np.left_shift(np.int64(1), np.arange(len(window), dtype=np.int64))
    low = stats.bits[:, window].astype(np.int64) @ weights
    top = stats.bits[:, hi].astype(np.int64)
    rows = len(top)
    if rows == 0:
        return False
    cells = 2 << len(window)
    joint = np.bincount(low * 2 + top, minlength=cells).reshape(-1, 2)
    missing = np.argwhere(joint == 0)
    if not len(missing):
        return False
    p_low, p_top = joint.sum(axis=1) / rows, joint.sum(axis=0) / rows
    # how often each side entered each of its values (the first frame counts as an entry)
    entered_low = np.bincount(
        np.concatenate([low[:1], low[1:][low[1:] != low[:-1]]]), minlength=cells // 2
    )
    entered_top = np.bincount(np.concatenate([top[:1], top[1:][top[1:] != top[:-1]]]), minlength=2)
    expected = p_low[missing[:, 0]] * p_top[missing[:, 1]]
    if float(expected.max()) >= EXCLUSIVE_SHARE:
        c, v = missing[int(np.argmax(expected))]
        if _missed_when_shifted(low == c, top == v) < EXCLUSIVE_P:
            return True  # chance would have had it for a large share of the frames
    if len(below) > 2:
        return False  # the top bit of a wider value: its many combinations say little
    for c, v in missing:
        if not p_low[c] or not p_top[v]:
            continue
        chance = (1.0 - p_low[c]) ** entered_top[v] * (1.0 - p_top[v]) ** entered_low[c]
        if chance < EXCLUSIVE_P and _missed_when_shifted(low == c, top == v) < EXCLUSIVE_P:
            return True
    return False


def _missed_when_shifted(a: B, b: B) -> float:
    """The share of circular shifts of `b` against `a` (all but none) at which the two are
    never true on the same frame: how often chance keeps them apart, each keeping the runs
    it has. Entries of a bit that come in a cluster (a value's top bit set a dozen times
    within a few seconds) are one try, not a dozen, against a flag's long run."""
    n = len(a)
    if n < 2:
        return 1.0
    spectrum = np.conj(np.fft.rfft(a.astype(np.float64))) * np.fft.rfft(b.astype(np.float64))
    overlap = np.fft.irfft(spectrum, n)[1:]  # frames both are true at each shift of b
    return float(np.mean(overlap < 0.5))


def _together(stats: BitStats, lo: int, hi: int) -> bool:
    """Quiet bits that change at the same transitions far more often than chance would
    have them (a state taking a new value): a Poisson tail below 1%. Chance is reckoned
    over the transitions on which anything changed, so a message whose values are all
    refreshed together now and then does not make its fields look joined."""
    n_hi = int(stats.count[hi])
    both = int(np.count_nonzero(stats.flips[:, lo] & stats.flips[:, hi]))
    if not n_hi or not both:
        return False
    expected = n_hi * float(stats.count[lo]) / max(stats.active, 1)
    return _poisson_tail(both, expected) < TOGETHER_P


def carries_on(stats: BitStats, length: int) -> Callable[[int], bool]:
    """`carries(byte)`: the byte's value carries into the bottom bit of a neighbouring byte
    (the next one, little endian, or the one before, big endian) in most of that bit's
    flips, as the low byte of a multi-byte value does and a checksum never does."""

    def carries(byte: int) -> bool:
        below = list(range(byte * 8, byte * 8 + 8))
        for other in (byte + 1, byte - 1):
            if not 0 <= other < length:
                continue
            hi = other * 8
            if (
                stats.count[hi]
                and _rate_ok(stats, below[-1], hi)
                and _carry(stats, below, hi) >= CARRIES_ON
            ):
                return True
        return False

    return carries


def segment(stats: BitStats, length: int, usable: B) -> list[Segment]:
    """Fields of the `usable` bits (varying, not explained elsewhere) of a `length`-byte
    payload, each bit in exactly one field."""
    varying = usable & (stats.count > 0)
    pieces: list[list[int]] = []
    bottom: dict[int, int] = {}  # byte -> piece holding its bit 0
    top: dict[int, int] = {}  # byte -> piece holding its bit 7
    for byte in range(length):
        current: list[int] = []
        for j in range(8):
            pos = byte * 8 + j
            if not varying[pos]:
                if current:
                    pieces.append(current)
                current = []
                continue
            if current and _joins(stats, current, pos) > 0:
                current.append(pos)
                continue
            if current:
                pieces.append(current)
            current = [pos]
        if current:
            pieces.append(current)
    for index, piece in enumerate(pieces):
        if piece[0] % 8 == 0:
            bottom[piece[0] // 8] = index
        if piece[-1] % 8 == 7:
            top[piece[-1] // 8] = index
    links = _cross_links(stats, pieces, bottom, top, length)
    joined = _join_sparse_bottoms(stats, _chains(pieces, links), length * 8)
    joined = _join_quiet_states(stats, joined, length * 8)
    joined = _join_quanta(stats, joined, length * 8)
    return _cheaper_orders(stats, _join_cheaper(stats, joined, length * 8))


def _lower_bound(share: float, n: int, z: float = 1.64) -> float:
    """Wilson's lower bound of a share seen over `n` trials (about 95% one-sided)."""
    if n <= 0:
        return 0.0
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def _cross_links(
    stats: BitStats,
    pieces: list[list[int]],
    bottom: dict[int, int],
    top: dict[int, int],
    length: int,
) -> dict[int, tuple[int, ByteOrder]]:
    """piece -> (the piece it continues into, order), decided best evidence first."""
    candidates: list[tuple[float, int, int, ByteOrder]] = []
    for byte, lower in top.items():
        for other, order in ((byte + 1, "little_endian"), (byte - 1, "big_endian")):
            upper = bottom.get(other)
            if upper is None or upper == lower or not 0 <= other < length:
                continue
            score = _joins(stats, pieces[lower], pieces[upper][0])
            if score > 0:
                # one flip that looks like a carry proves little: rank by how sure the
                # share is (its lower bound), so the link seen more often wins
                sure = _lower_bound(score, int(stats.count[pieces[upper][0]]))
                candidates.append((sure, lower, upper, order))  # type: ignore[arg-type]
    candidates.sort(key=lambda c: -c[0])
    links: dict[int, tuple[int, ByteOrder]] = {}
    linked_into: set[int] = set()
    group = list(range(len(pieces)))
    orders: dict[int, ByteOrder] = {}

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for _, lower, upper, order in candidates:
        if lower in links or upper in linked_into:
            continue
        a, b = root(lower), root(upper)
        if a == b:
            continue  # a loop
        if orders.get(a, order) != order or orders.get(b, order) != order:
            continue  # one field keeps one byte order
        links[lower] = (upper, order)
        linked_into.add(upper)
        group[b] = a
        orders[a] = order
    return links


def _chains(pieces: list[list[int]], links: dict[int, tuple[int, ByteOrder]]) -> list[Segment]:
    targets = {upper for upper, _ in links.values()}
    out: list[Segment] = []
    for index, piece in enumerate(pieces):
        if index in targets:
            continue
        bits = list(piece)
        order: ByteOrder | None = None
        at = index
        while at in links:
            at, order = links[at]
            bits.extend(pieces[at])
        while len(bits) > 63:  # wider than a number we read: cut from the bottom
            out.append(Segment(tuple(bits[:63]), order))
            bits = bits[63:]
        out.append(Segment(tuple(bits), order))
    return out


def _quantum(stats: BitStats, raw: npt.NDArray[np.int64], width: int) -> int:
    """The largest step every change of a `width`-bit value (`raw`, its value in every
    frame) is a multiple of, read unsigned or as two's complement (a signed value crossing
    zero); 1 over fewer than QUANTUM_CHANGES changes. Read only on the frames around its
    changes (and those after a gap), which hold every value it took."""
    if width > 62:
        return 1
    moved = np.flatnonzero(raw[stats.before + 1] != raw[stats.before])
    if len(moved) < QUANTUM_CHANGES:
        return 1
    first = stats.before[moved]
    starts = np.ones(len(stats.bits), np.bool_)
    starts[stats.before + 1] = False  # frames no transition leads to: a start, after a gap
    rows = np.concatenate([first, first + 1, np.flatnonzero(starts)])
    raw = raw[rows]
    if len(np.unique(raw)) < QUANTUM_VALUES:
        return 1  # flags changing together (0 <-> 3), a state: not a value's steps
    k = len(moved)
    best = 1
    for v in (raw, to_signed(raw, width)):
        d = np.abs(v[k : 2 * k] - v[:k])
        d = d[d != 0]
        if len(d) >= QUANTUM_CHANGES:
            best = max(best, int(np.gcd.reduce(d)))
    return best


def _neighbours(segments: list[Segment], nbits: int) -> Iterator[tuple[int, int, ByteOrder]]:
    """(low, high, order) for each piece `high` whose bottom bit is the next bit up from the top
    of piece `low` in `order`, both of them readable in that order and 62 bits at most
    together (a longer field is not read as a number): the pairs a joining pass may make one
    field."""
    at = {seg.bits[0]: i for i, seg in enumerate(segments)}
    for i, low in enumerate(segments):
        for order in _ORDERS:
            up = next_up(low.bits[-1], order)
            j = at.get(up)
            if j is None or j == i or not 0 <= up < nbits:
                continue
            high = segments[j]
            if len(low.bits) + len(high.bits) > 62:
                continue
            if low.order in (None, order) and high.order in (None, order):
                yield i, j, order


def _merged(segments: list[Segment], i: int, j: int, order: ByteOrder) -> list[Segment]:
    """`segments` with the neighbours `i` (low) and `j` (high, in `order`) made one field:
    of that order when it crosses a byte, of either within one."""
    low, high = segments[i], segments[j]
    crossing = len({b // 8 for b in low.bits + high.bits}) > 1
    merged = Segment(low.bits + high.bits, order if crossing else high.order)
    return [seg for k, seg in enumerate(segments) if k not in (i, j)] + [merged]


def _join_sparse_bottoms(stats: BitStats, segments: list[Segment], nbits: int) -> list[Segment]:
    """A short piece of rarely flipping bits right below a value joins it when they are
    set only while the value sits at one end of its range: a sensor quantised more
    coarsely than its field's step (every value a multiple of 2, 4 or 10) leaves its
    lowest bits still but at a saturated end that is not such a multiple (all ones, "not
    available", the end of its DBC range). A flag of its own below a value is set
    whatever the value does.

    The bits' flip rate jumps up at the value's lowest bit, so the flips alone cut them
    off (see RATE_SLACK), and the jump to the end is too large to look like a carry."""
    segments = list(segments)
    while True:
        for i, j, order in _neighbours(segments, nbits):
            low = segments[i]
            if len(low.bits) <= SPARSE_BITS and _sparse_below(stats, low.bits, segments[j].bits):
                segments = _merged(segments, i, j, order)
                break
        else:
            return sorted(segments, key=lambda seg: seg.bits[0])


def _join_quiet_states(stats: BitStats, segments: list[Segment], nbits: int) -> list[Segment]:
    """Two neighbouring pieces of quiet bits (STATE_BITS at most together) are one state
    when they flipped together at least once and some value of one never shows with
    some value of the other (see _state_pair). Pieces grow upwards bit by bit, so a state
    whose lowest bit moves only with its top one (0b001 <-> 0b100) is cut below the pair
    that did join; this looks at the whole pieces."""
    segments = list(segments)
    while True:
        for i, j, order in _neighbours(segments, nbits):
            if _quiet_state(stats, segments[i].bits, segments[j].bits):
                segments = _merged(segments, i, j, order)
                break
        else:
            return sorted(segments, key=lambda seg: seg.bits[0])


def _quiet_state(stats: BitStats, low: tuple[int, ...], high: tuple[int, ...]) -> bool:
    """The pieces flipped together at least once, and together take few values: fewer
    than all their combinations, and at most one more than the busier piece alone (a
    state's few levels; a flag beside a state shows with several of the state's)."""
    both = list(low + high)
    if len(both) > STATE_BITS or float(stats.rate[both].max()) >= FAST:
        return False
    if _echo(stats, low[-1], high[0]):
        return False
    together = stats.flips[:, list(low)].any(axis=1) & stats.flips[:, list(high)].any(axis=1)
    if not together.any():
        return False
    a, b = values(stats.bits, low), values(stats.bits, high)
    da, db = len(np.unique(a)), len(np.unique(b))
    joint = len(np.unique(a * (1 << len(high)) + b))
    return joint < da * db and joint <= max(da, db) + 1


def _sparse_below(stats: BitStats, low: tuple[int, ...], value: tuple[int, ...]) -> bool:
    """`low` flips rarely next to `value`'s lowest bit, and is ever set only while `value`
    sits at one end of its range (see _join_sparse_bottoms)."""
    if len(value) < SPARSE_VALUE_BITS or len(value) + len(low) > 62:
        return False
    if float(stats.rate[list(low)].max()) * SPARSE_RATIO > float(stats.rate[value[0]]):
        return False
    if int(np.count_nonzero(stats.flips[:, list(low)].any(axis=1))) < SPARSE_FLIPS:
        return False
    above = values(stats.bits, value)
    if len(np.unique(above)) < SPARSE_DISTINCT:
        return False
    at = above[values(stats.bits, low) != 0]
    if not len(at):
        return False
    return bool((at == above.max()).all() or (at == above.min()).all())


def _run_up(
    segments: list[Segment], at: dict[int, int], start: int, order: ByteOrder, nbits: int
) -> list[int]:
    """`start` and the pieces above it, each one's bottom the next bit up of the one below
    in `order`, while they can all be read in that order and hold 62 bits at most (`at`:
    each piece's place by its bottom bit)."""
    run = [start]
    size = len(segments[start].bits)
    while True:
        here = segments[run[-1]]
        if here.order not in (None, order):
            break
        up = next_up(here.bits[-1], order)
        j = at.get(up)
        if j is None or j in run or not 0 <= up < nbits or segments[j].order not in (None, order):
            break
        size += len(segments[j].bits)
        if size > 62:
            break  # no longer value has a quantum (see _quantum)
        run.append(j)
    return run


def _join_quanta(stats: BitStats, segments: list[Segment], nbits: int) -> list[Segment]:
    """Neighbouring pieces joined into one field when the joined value moves only by
    multiples of a step of QUANTUM or more: a sensor coarser than its field's step (see
    QUANTUM_CHANGES). The longest such run of pieces is joined first (a window of a larger
    value moves modulo its range, so only the whole shows the step), unless it is two
    quantised values side by side (see one_value)."""
    segments = list(segments)
    orders: tuple[ByteOrder, ...] = ("little_endian", "big_endian")
    quanta: dict[tuple[int, ...], int] = {}  # each run of bits judged once

    def quantum(bits: list[int], run: Callable[[], npt.NDArray[np.int64]], below: int = 0) -> int:
        """`bits`, `below` bits up a run of bits whose value `run` reads (once per run)."""
        key = tuple(bits)
        if key not in quanta:
            if len(quanta) < QUANTUM_BUDGET:
                raw = (run() >> np.int64(below)) & np.int64((1 << len(bits)) - 1)
                quanta[key] = _quantum(stats, raw, len(bits))
            else:
                quanta[key] = 1
        return quanta[key]

    def one_value(
        flat: list[int], ends: list[int], run: Callable[[], npt.NDArray[np.int64]]
    ) -> bool:
        """No cut between the pieces leaves two parts that are each quantised alone: two
        coarse sensors side by side (each moving by 5s, joined they move by 5s too). The
        parts of one split value are not: its low part jumps at each wrap by the range,
        which is no multiple of the step, or its high part moves by ones."""
        return not any(
            quantum(flat[:cut], run) >= QUANTUM
            and quantum(flat[cut : ends[-1]], run, cut) >= QUANTUM
            for cut in ends[:-1]
        )

    while True:
        best: tuple[list[int], ByteOrder | None] | None = None
        size = 0
        at = {seg.bits[0]: i for i, seg in enumerate(segments)}
        for start in range(len(segments)):
            for order in orders:
                run = _run_up(segments, at, start, order, nbits)
                flat = [b for k in run for b in segments[k].bits]
                ends = [int(e) for e in np.cumsum([len(segments[k].bits) for k in run])]
                read = cache(partial(values, stats.bits, flat))  # read once, if at all
                for m in range(len(run), 1, -1):
                    bits = flat[: ends[m - 1]]
                    if len(bits) <= size:
                        break
                    if quantum(bits, read) >= QUANTUM and one_value(flat, ends[:m], read):
                        crossing = len({b // 8 for b in bits}) > 1
                        best, size = (run[:m], order if crossing else None), len(bits)
                        break
        if best is None:
            return sorted(segments, key=lambda seg: seg.bits[0])
        run, joined = best
        merged = Segment(tuple(b for k in run for b in segments[k].bits), joined)
        segments = [seg for k, seg in enumerate(segments) if k not in run] + [merged]


def _code_length(raw: npt.NDArray[np.int64], width: int, before: npt.NDArray[np.intp]) -> float:
    """Bits to write down how a `width`-bit value moved over the transitions `before` ->
    `before + 1`: each change as a number (log2(1 + |change|) and a sign), taken modulo
    the value's range (a wrap of a counter or a signed value crossing zero is a small
    move), or, when shorter and the frames run without gaps, the change of the change (a
    value moving fast but smoothly)."""
    span = np.int64(1) << np.int64(width)
    half = span // 2

    def wrap(d: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = (d + half) % span - half
        return out

    def bits_of(d: npt.NDArray[np.int64]) -> float:
        return float(np.sum(np.log2(1.0 + np.abs(d)) + (d != 0)))

    d1 = wrap(raw[before + 1] - raw[before])
    first = bits_of(d1)
    if len(before) < 3 or not bool(np.all(before[1:] == before[:-1] + 1)):
        return first
    return min(first, bits_of(wrap(d1[1:] - d1[:-1])))


def _cheaper_joined(
    stats: BitStats, low: tuple[int, ...], high: tuple[int, ...]
) -> tuple[float, int]:
    """How many bits writing `low` and `high` down as one value saves over writing them
    apart (0 unless it saves more than CODE_GAIN_BITS, and CODE_MARGIN_BITS more than it
    would were `high` moving at moments of its own: the same two joined with `high`
    shifted in time by CODE_SHIFTS circular shifts are the chance level), and the code
    lengths that took (at most PAIR_CODES)."""
    a, b = values(stats.bits, low), values(stats.bits, high)
    wa, wb = len(low), len(high)
    low_alone = _code_length(a, wa, stats.before)
    apart = low_alone + _code_length(b, wb, stats.before)
    gain = apart - _code_length(a + (b << np.int64(wa)), wa + wb, stats.before)
    if gain <= CODE_GAIN_BITS:
        return 0.0, 3
    n = len(b)
    for k in range(1, CODE_SHIFTS + 1):
        moved = np.roll(b, (n * k) // (CODE_SHIFTS + 1))
        alone = low_alone + _code_length(moved, wb, stats.before)
        chance = alone - _code_length(a + (moved << np.int64(wa)), wa + wb, stats.before)
        if chance + CODE_MARGIN_BITS > gain:
            return 0.0, 3 + 2 * k
    return gain, PAIR_CODES


def _join_cheaper(stats: BitStats, segments: list[Segment], nbits: int) -> list[Segment]:
    """Two neighbouring pieces (one of them two bits wide at least) joined into one value
    when that value is cheaper to write down than the two pieces apart (see
    _code_length): the top piece then moves only when the bottom one wraps, and by the
    carry's one step, as the upper bits of a number do. A piece of its own moves whatever
    the bottom piece does, and its every move adds a jump of the bottom piece's whole range
    to the joined value, which costs more than writing it apart. This catches what the
    bit-by-bit carry test misses: a value moving by nearly its lower bits' range from frame
    to frame, or a top bit that flips only a couple of times. The best join is made first."""
    segments = list(segments)
    gains: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}  # each pair judged once
    spent = 0  # code lengths reckoned (see CODE_BUDGET)
    while True:
        best: tuple[float, int, int, ByteOrder] | None = None
        for i, j, order in _neighbours(segments, nbits):
            low, high = segments[i], segments[j]
            if len(low.bits) == 1 and len(high.bits) == 1:
                continue
            pair = (low.bits, high.bits)
            if pair not in gains:
                if spent + PAIR_CODES > CODE_BUDGET:
                    gains[pair] = 0.0
                else:
                    gains[pair], used = _cheaper_joined(stats, low.bits, high.bits)
                    spent += used
            gain = gains[pair]
            if gain > 0.0 and (best is None or gain > best[0]):
                best = (gain, i, j, order)
        if best is None:
            return sorted(segments, key=lambda seg: seg.bits[0])
        _, i, j, order = best
        segments = _merged(segments, i, j, order)


def _flip(order: ByteOrder) -> ByteOrder:
    return "big_endian" if order == "little_endian" else "little_endian"


def _other_order(bits: tuple[int, ...], order: ByteOrder) -> tuple[int, ...] | None:
    """The same bits as one field of the other byte order, least significant first (None
    when they do not make one)."""
    other = _flip(order)
    wanted = set(bits)
    for start in bits:
        chain = [start]
        while len(chain) < len(bits):
            up = next_up(chain[-1], other)
            if up not in wanted or up in chain:
                break
            chain.append(up)
        if len(chain) == len(bits):
            return tuple(chain)
    return None


def _cheaper_orders(stats: BitStats, segments: list[Segment]) -> list[Segment]:
    """A field across bytes read in the other byte order when its value is cheaper to write
    down that way (see _code_length) by CODE_MARGIN_BITS: read in the wrong order, a value
    jumps by its high byte's weight each time its low byte wraps. The carries that linked
    its pieces may have misled: a value held over several frames by a slower sensor, or
    moving by tens of steps a sample, carries as readily one way as the other."""
    out: list[Segment] = []
    for seg in segments:
        if seg.order is None or len({b // 8 for b in seg.bits}) < 2:
            out.append(seg)
            continue
        other = _other_order(seg.bits, seg.order)
        if other is None:
            out.append(seg)
            continue
        here = _code_length(values(stats.bits, seg.bits), len(seg.bits), stats.before)
        there = _code_length(values(stats.bits, other), len(other), stats.before)
        out.append(Segment(other, _flip(seg.order)) if there + CODE_MARGIN_BITS < here else seg)
    return out
