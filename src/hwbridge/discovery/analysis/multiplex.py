"""Multiplexed messages: a field whose value selects the layout of the rest of the frame.

A multiplexer (cantools' `M`) changes often, and the frames of each of its values (its
pages, `m0`, `m1`...) carry signals of their own. Frame after frame the other bits then
jump between the pages' contents; page after page (each frame against the next frame of
the same value) they move only as those signals do. So a field is the multiplexer when
grouping the frames by its value explains the flips of the other bits: the bits flip far
less between frames of one page than between consecutive frames (`explained`, bit flips
per frame that the layout accounts for).

What it is not:
- a counter: frames with the same counter value are many frames apart, so the other bits
  have drifted more, not less; a counter's bits are never evidence (what follows a counter,
  a checksum, is its own), and a whole counter is taken only when what it explains spans
  more than one byte;
- the bits of a number: its low bits predict its next ones, and one of four wheel speeds
  predicts the others, yet they are numbers; the bits of the field holding a candidate are
  never evidence for it, a part of a smoothly moving value is no candidate (but for its
  lowest bit or two), and a layout that stays within its own byte needs a byte that does
  not read as one number moving by small steps (even a quantised one, or the low byte of a
  wider one): the pages jump as the multiplexer changes;
- a state that changes now and then: frames of one state are consecutive anyway, so
  grouping by it explains next to nothing;
- a page's own number: it groups the frames by page and by its own value, explaining more;
  the coarser grouping it refines is the multiplexer, when it changes about as often (a
  flag on in one page only groups the frames more coarsely too, but changes only as that
  page comes and goes), and a page's bit joined to the multiplexer is left out of it;
- a symmetric checksum: in an XOR or a sum of every byte, any byte is the function of the
  others, and the multiplexer's, changing with everything, was taken for it; a multiplexer
  found there, with its pages beside it, is kept when the checksum is found again in
  another byte with the multiplexer set aside.

With a multiplexer found, the fields of each page are found as usual over that page's
frames (consecutive frames of the page taken as the transitions); checksums, counters and
bits that never moved stay fields of the whole frame, and a field found alike in every
page that moves as smoothly across pages as within them is one field of the whole frame.
Bounded: candidates within the first eight bytes, at most MAX_PAGES values, at most
MAX_CANDIDATES candidates and MAX_SEARCH_ROWS frames to choose among them, and a deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.analysis.analyse import analyse
from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.analysis.floats import with_floats
from hwbridge.discovery.bits import bit_matrix, values
from hwbridge.discovery.frames import FrameSet

__all__ = [
    "Multiplexer",
    "analyse_layouts",
    "describe_layout",
    "field_rows",
    "find_multiplexer",
    "first_row",
    "layout_name",
    "page_pairs",
]

B = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]
IP = npt.NDArray[np.intp]
U8 = npt.NDArray[np.uint8]

MAX_PAGES = 64
"""Values a multiplexer takes at most (each page is analysed on its own)."""
MIN_PAGE_FRAMES = 8
"""Frames a page needs to count; rarer values together may hold at most RARE_SHARE."""
RARE_SHARE = 0.02
MAX_BYTES = 8
"""Multiplexers are looked for in the first bytes of a frame only."""
MAX_CANDIDATES = 128
MAX_SEARCH_ROWS = 2048
MIN_CHANGES = 0.1
"""Share of transitions on which a multiplexer's value changes at least."""
MIN_EXPLAINED = 1.0
"""Bit flips per frame that grouping by the multiplexer must explain at least ..."""
MIN_EXPLAINED_SHARE = 0.15
"""... and this share of all the flips of the bits it could explain."""
MIN_BITS_EXPLAINED = 3
"""Bits whose flips the layout explains for the most part (at least half): outside its own
byte, or within it when the byte does not read as one number (`_reads_as_number`: a
temperature's low bits predict its next ones, yet it moves by small steps)."""
NUMBER_STEP = 1 / 8
"""A layout within one byte: a byte that, read as one number, moves by at most this share
of its range in most frames is a number split in two."""
TIE = 0.98
"""Candidates explaining this share of the best one's flips are as good: the fewest bits win."""
COARSER = 0.6
REFINE_SLACK = 0.05
"""A grouping explaining at least COARSER of the best one's flips, which the best one
refines (each of its groups within one of the coarser's, but for REFINE_SLACK of the
frames) and with fewer groups, is the layout: the finer one is a page's own number."""
SAME_CHANGES = 0.8
"""... when it changes nearly as often as the finer one (a multiplexer takes its values frame
after frame, as often as anything it selects): a flag on in one page only also groups the
frames more coarsely, that page against the rest, but changes only as that page comes and
goes."""
JOINED = 0.9
"""Fewer of the best candidate's bits grouping the frames coarsely, which it refines,
explaining this share of its flips: the best one is the multiplexer with a page's bit."""
SMOOTH_NUMBER = 1 / 16
BOTTOM_BITS = 2
"""The lowest bits of a smooth number may still be a multiplexer joined to it, up to this
many: its lowest bit or two are noise, predicting nothing in the numbers moving with it."""
SMOOTH_ACROSS = 1.5
"""A field alike in every page whose mean move between consecutive frames is at most this
factor of its move between frames of one page is a field of the whole frame."""


@dataclass(frozen=True, slots=True)
class Multiplexer:
    """The multiplexer of an id: its bits (least significant first), its values, and the
    bit flips per frame grouping by it explains."""

    bits: tuple[int, ...]
    values: tuple[int, ...]
    explained: float
    dependent: tuple[int, ...] = ()  # the bits whose flips it explains for the most part


def page_pairs(value: I64, cont: B) -> tuple[IP, IP]:
    """(first, second): each frame and the next frame with the same `value`, with no break
    in the capture (`cont`) between them."""
    n = len(value)
    if n < 2:
        empty = np.zeros(0, np.intp)
        return empty, empty
    segment = np.cumsum(~cont)
    order = np.argsort(value, kind="stable")
    a, b = order[:-1], order[1:]
    ok = (value[a] == value[b]) & (segment[a] == segment[b])
    return a[ok].astype(np.intp), b[ok].astype(np.intp)


def _sample(frames: FrameSet, rows: int) -> tuple[U8, B]:
    """At most `rows` frames (in whole blocks) for the search."""
    n = len(frames)
    if n <= rows:
        return frames.data, frames.cont
    block = 256
    chosen = np.linspace(0, n // block - 1, max(1, rows // block)).astype(np.int64)
    idx = (chosen[:, None] * block + np.arange(block)[None, :]).ravel()
    idx = idx[idx < n]
    cont = frames.cont[idx].copy()
    cont[np.r_[True, idx[1:] != idx[:-1] + 1]] = False
    return frames.data[idx], cont


def _candidates(rate: npt.NDArray[np.float64], count: I64, nbits: int) -> list[tuple[int, ...]]:
    """Runs of moving bits within one byte whose lowest bit flips often."""
    out: list[tuple[int, ...]] = []
    for byte in range(min(nbits // 8, MAX_BYTES)):
        for lo in range(byte * 8, byte * 8 + 8):
            if rate[lo] < MIN_CHANGES / 2 or count[lo] == 0:
                continue
            for hi in range(lo, min(byte * 8 + 8, lo + 6)):
                if count[hi] == 0:
                    break
                out.append(tuple(range(lo, hi + 1)))
    return out[:MAX_CANDIDATES]


@dataclass(frozen=True, slots=True)
class _Search:
    """What every candidate is judged against: the sampled payloads and transitions, each
    bit's flip rate, the field holding each bit, and the bits never evidence (checksums,
    floats)."""

    data: U8
    cont: B
    before: IP
    count: I64
    rate: npt.NDArray[np.float64]
    owner: I64
    never: B
    fields: list[Field]
    bits: U8


@dataclass(frozen=True, slots=True)
class _Candidate:
    explained: float
    bits: tuple[int, ...]
    pages: tuple[int, ...]
    dependent: tuple[int, ...]
    value: I64  # per sampled frame
    changes: float  # share of transitions on which its value changes


def find_multiplexer(
    frames: FrameSet, fields: list[Field], *, deadline: float | None = None
) -> Multiplexer | None:
    """The multiplexer of `frames` (one id), given the fields found over whole frames;
    None when no field selects a layout."""
    nbits = frames.length * 8
    if len(frames) < 4 * MIN_PAGE_FRAMES or nbits < 16:
        return None
    data, cont = _sample(frames, MAX_SEARCH_ROWS)
    before = np.flatnonzero(cont[1:])
    if len(before) < 2 * MIN_PAGE_FRAMES:
        return None
    moved = np.unpackbits(data[before + 1] ^ data[before], axis=1, bitorder="little")
    count = moved.sum(axis=0).astype(np.int64)
    owner = np.full(nbits, -1, np.int64)  # the field holding each bit
    never = np.zeros(nbits, np.bool_)
    for k, f in enumerate(fields):
        owner[list(f.bits)] = k
        if f.kind == "checksum" or f.is_float:
            never[list(f.bits)] = True
    search = _Search(
        data, cont, before, count, count / len(before), owner, never, fields, bit_matrix(data)
    )
    best: list[_Candidate] = []
    for cand in _candidates(search.rate, count, nbits):
        if deadline is not None and time.monotonic() > deadline:
            return None
        judged = _judge(search, cand)
        if judged is not None:
            best.append(judged)
    if not best:
        return None
    top = max(best, key=lambda c: c.explained)
    # a page's own bits group the frames by page and by their own value: finer groups that
    # explain more of that page's numbers; the layout is the coarser grouping they refine
    while True:
        coarser = [
            c
            for c in best
            if len(c.pages) < len(top.pages)
            and not set(c.bits) & set(top.bits)
            and c.explained >= COARSER * top.explained
            and _refines(top.value, c.value)
            and c.changes >= SAME_CHANGES * top.changes
        ]
        if not coarser:
            break
        top = max(coarser, key=lambda c: c.explained)
    # a page's bit joined to the multiplexer (the top bit of a value in its byte) splits
    # pages by that value: fewer of its bits, explaining nearly as much, are the layout
    joined = [
        c
        for c in best
        if set(c.bits) < set(top.bits)
        and len(c.pages) < len(top.pages)
        and c.explained >= JOINED * top.explained
        and _refines(top.value, c.value)
    ]
    if joined:
        top = max(joined, key=lambda c: c.explained)
    # as good: explaining nearly as much, or grouping the frames exactly as the best one
    # does (a page's constant bit follows the multiplexer, and its own number's bits are
    # no evidence for it); of those the fewest bits, not a counter, not amid the bits of
    # its byte it explains (a selector sits beside what it selects: of a page's constant
    # bit and the multiplexer's top bit, grouping the frames alike, the one at the edge),
    # the lowest (a multiplexer leads its frame)
    good = [
        c for c in best if c.explained >= TIE * top.explained or _same_groups(c.value, top.value)
    ]
    chosen = min(
        good,
        key=lambda c: (
            len(c.bits),
            _counter_like(c.bits, fields, owner),
            _splits_its_byte(c),
            c.bits[0],
        ),
    )
    return Multiplexer(chosen.bits, chosen.pages, chosen.explained, chosen.dependent)


def _splits_its_byte(c: _Candidate) -> bool:
    """Bits of its own byte that the candidate explains lie on both sides of it."""
    own = [p for p in c.dependent if p // 8 == c.bits[0] // 8]
    return any(p < c.bits[0] for p in own) and any(p > c.bits[-1] for p in own)


def _refines(fine: I64, coarse: I64) -> bool:
    """Each group of `fine` lies (but for REFINE_SLACK of the frames) in one of `coarse`."""
    codes = fine * (int(coarse.max()) + 1) + coarse
    pairs, counts = np.unique(codes, return_counts=True)
    of_fine = pairs // (int(coarse.max()) + 1)
    majority = np.zeros(int(of_fine.max()) + 1, np.int64)
    np.maximum.at(majority, of_fine, counts)
    return int(majority.sum()) >= (1 - REFINE_SLACK) * len(fine)


def _same_groups(a: I64, b: I64) -> bool:
    """`a` and `b` split the frames into the same groups."""
    pairs = len(np.unique(a * (int(b.max()) + 1) + b))
    return pairs == len(np.unique(a)) == len(np.unique(b))


def _judge(search: _Search, cand: tuple[int, ...]) -> _Candidate | None:
    """(flips explained, the candidate, its pages, the bits it explains) when grouping the
    frames by `cand` explains enough of the other bits' flips; None otherwise."""
    fields, owner, before = search.fields, search.owner, search.before
    if search.never[list(cand)].any() or _inside_counter(cand, fields, owner):
        return None
    if _inside_number(search, cand):
        return None
    # the value of a run of one byte's bits, from the byte itself
    byte = search.data[:, cand[0] // 8].astype(np.int64)
    value = (byte >> (cand[0] % 8)) & ((1 << len(cand)) - 1)
    changes = float(np.count_nonzero(value[before + 1] != value[before])) / len(before)
    if changes < MIN_CHANGES:
        return None
    kept = _pages(value)
    if kept is None:
        return None
    a, b = page_pairs(value, search.cont)
    if len(a) < 2 * MIN_PAGE_FRAMES:
        return None
    evidence = ~search.never & (search.count > 0)
    evidence[list(cand)] = False
    for f in fields:
        if f.kind == "counter":  # no layout decides a counter: what follows one is its own
            evidence[list(f.bits)] = False
    for k in {int(owner[p]) for p in cand if owner[p] >= 0}:
        evidence[list(fields[k].bits)] = False  # the bits of its own number
    if not evidence.any():
        return None
    moved = np.unpackbits(search.data[a] ^ search.data[b], axis=1, bitorder="little")
    within = moved.sum(axis=0)[evidence] / len(a)
    across = search.rate[evidence]
    gain = across - within
    explained = float(gain[gain > 0].sum())
    dependent = (gain >= across / 2) & (gain >= 0.05)
    if (
        explained < MIN_EXPLAINED
        or explained < MIN_EXPLAINED_SHARE * float(across.sum())
        or int(np.count_nonzero(dependent)) < MIN_BITS_EXPLAINED
    ):
        return None
    positions = tuple(int(p) for p in np.flatnonzero(evidence)[dependent])
    if sum(1 for p in positions if p // 8 != cand[0] // 8) < MIN_BITS_EXPLAINED and (
        sum(1 for p in positions if p // 8 == cand[0] // 8) < MIN_BITS_EXPLAINED
        or _reads_as_number(search, cand)
    ):
        return None  # bits of its own byte alone, a number split in two
    if _counter_like(cand, fields, owner) and len({p // 8 for p in positions}) < 2:
        return None
    return _Candidate(explained, cand, kept, positions, value, changes)


def _reads_as_number(search: _Search, cand: tuple[int, ...]) -> bool:
    """The candidate's byte, read as one number, moves by small steps (at most NUMBER_STEP
    of its range in most frames, around its ends too): the parts of a number, even of one
    taking a few values or the low byte of a wider one, not a layout. A multiplexer's pages
    jump as it changes, and the byte they make with it with them."""
    joint = search.data[:, cand[0] // 8].astype(np.int64)
    step = np.abs(joint[search.before + 1] - joint[search.before])
    step = np.minimum(step, 256 - step)[step > 0]
    return not len(step) or float(np.median(step)) <= NUMBER_STEP * 256


def _pages(value: I64) -> tuple[int, ...] | None:
    """The values frequent enough to be pages (at least two, at most MAX_PAGES, the rest
    rare), or None."""
    counts = np.bincount(value)
    found = np.flatnonzero(counts)
    counts = counts[found]
    frequent = counts >= MIN_PAGE_FRAMES
    if frequent.sum() < 2 or frequent.sum() > MAX_PAGES:
        return None
    if counts[~frequent].sum() > RARE_SHARE * len(value):
        return None
    return tuple(int(v) for v in found[frequent])


def _inside_number(search: _Search, cand: tuple[int, ...]) -> bool:
    """`cand` is part of a value found over whole frames that moves smoothly (by less than
    SMOOTH_NUMBER of its range in most steps): its bits predict the bits of other values
    moving with it (four wheel speeds), yet it is a number, not a multiplexer. A
    multiplexer joined with its pages' bits jumps between them."""
    k = int(search.owner[cand[0]])
    if k < 0:
        return False
    f = search.fields[k]
    if f.kind != "value" or set(f.bits) <= set(cand) or len(f.bits) > 62:
        return False
    if f.bits.index(cand[0]) == 0 and len(cand) <= BOTTOM_BITS:
        return False  # a multiplexer's bit or two the flips joined to a number above it
    raw = values(search.bits, f.bits)
    steps = np.abs(raw[search.before + 1] - raw[search.before])
    steps = steps[steps > 0]
    span = int(raw.max() - raw.min())
    return bool(len(steps)) and float(np.median(steps)) <= SMOOTH_NUMBER * span


def _inside_counter(cand: tuple[int, ...], fields: list[Field], owner: I64) -> bool:
    """Some bits of a counter, not all: a counter's low bits select nothing."""
    for k in {int(owner[p]) for p in cand if owner[p] >= 0}:
        f = fields[k]
        if f.kind == "counter" and set(cand) < set(f.bits):
            return True
    return False


def _counter_like(cand: tuple[int, ...], fields: list[Field], owner: I64) -> bool:
    return any(fields[int(owner[p])].kind == "counter" for p in cand if owner[p] >= 0)


def _page(frames: FrameSet, rows: IP, quiet: U8 | None = None) -> FrameSet:
    """The frames of one page, the bits of `quiet` (a mask per byte) cleared; consecutive
    frames of the page with no break between them are its transitions."""
    segment = np.cumsum(~frames.cont)
    cont = np.zeros(len(rows), np.bool_)
    if len(rows) > 1:
        cont[1:] = segment[rows[1:]] == segment[rows[:-1]]
    t = frames.t[rows]
    gaps = np.diff(t)[cont[1:]] if len(rows) > 1 else np.zeros(0)
    gaps = gaps[gaps > 0]
    period = float(np.median(gaps) * 1000.0) if len(gaps) else None
    data = frames.data[rows]
    if quiet is not None and quiet.any():
        data = data & ~quiet[None, : data.shape[1]]
    return FrameSet(
        frames.key,
        t,
        data,
        cont,
        frames.length,
        len(rows),
        period,
    )


def analyse_layouts(
    frames: FrameSet, explained: B | None = None, *, deadline: float | None = None
) -> list[Field]:
    """The fields of one id's frames (as `analyse`), with floats found, and the pages of a
    multiplexed message analysed each on its own (see the module's docstring). Past
    `deadline` the fields of whole frames are returned."""
    fields = with_floats(frames, analyse(frames, explained))
    mux = find_multiplexer(frames, fields, deadline=deadline)
    if mux is None:
        mux, fields = _behind_checksum(frames, explained, fields, deadline)
    if mux is None:
        return fields
    paged = _paged(frames, explained, fields, mux, deadline)
    return fields if paged is None else paged


SYMMETRIC = ("xor", "sum8", "sum8_neg")
"""Checksum families in which any byte is the function of the others."""


def _behind_checksum(
    frames: FrameSet, explained: B | None, fields: list[Field], deadline: float | None
) -> tuple[Multiplexer | None, list[Field]]:
    """A multiplexer in the byte taken for a symmetric checksum, and the fields of whole
    frames found again with its bits set aside.

    In an XOR (or a sum) of every byte, each byte is the function of the others; the search
    takes the one changing with everything else, and a multiplexer's byte, whose pages jump
    frame after frame, is that one. With the checksum's bits freed, a multiplexer found
    inside them that explains the bits beside it in its byte (its pages) is the layout when,
    with its bits set aside, the same checksum is found in another byte; anything else is
    not trusted."""
    for k, f in enumerate(fields):
        if f.kind != "checksum" or f.algorithm not in SYMMETRIC:
            continue
        mux = find_multiplexer(frames, fields[:k] + fields[k + 1 :], deadline=deadline)
        if mux is None or not set(mux.bits) <= set(f.bits):
            continue
        byte = mux.bits[0] // 8
        if sum(1 for p in mux.dependent if p // 8 == byte) < MIN_BITS_EXPLAINED:
            continue  # a real checksum's bits: its pages would lie beside it, in its byte
        aside = np.zeros(frames.length * 8, np.bool_)
        if explained is not None:
            aside |= explained[: len(aside)]
        aside[list(mux.bits)] = True
        again = with_floats(frames, analyse(frames, aside))
        if any(
            g.kind == "checksum" and g.algorithm == f.algorithm and g.bits[0] // 8 != byte
            for g in again
        ):
            return mux, again
    return None, fields


def _paged(
    frames: FrameSet,
    explained: B | None,
    fields: list[Field],
    mux: Multiplexer,
    deadline: float | None,
) -> list[Field] | None:
    nbits = frames.length * 8
    bits = bit_matrix(frames.data)
    value = values(bits, mux.bits)
    mine = set(mux.bits)
    dependent = set(mux.dependent)
    # what the layout does not explain stays a field of the whole frame: checksums,
    # counters, bits that never moved, and fields none of whose bits follow the pages
    whole = [
        f
        for f in fields
        if not set(f.bits) & mine
        and (f.kind in ("checksum", "counter", "constant") or not set(f.bits) & dependent)
    ]
    known = np.zeros(nbits, np.bool_) if explained is None else explained[:nbits].copy()
    known[list(mux.bits)] = True
    for f in whole:
        known[list(f.bits)] = True
    # a checksum of the whole frame is in every relation of the bits within a page (in an
    # XOR of every byte, any nibble is the XOR of the others): its bits read as still there
    quiet = np.zeros(frames.length, np.uint8)
    for f in whole:
        if f.kind == "checksum":
            for p in f.bits:
                quiet[p // 8] |= 1 << (p % 8)
    kind = "flag" if len(mux.bits) == 1 else "value"
    selector = Field(
        mux.bits,
        "little_endian",
        kind,  # type: ignore[arg-type]
        distinct=len(mux.values),
        is_multiplexer=True,
    )
    per_page: dict[int, list[Field]] = {}
    for v in mux.values:
        if deadline is not None and time.monotonic() > deadline:
            return None
        rows = np.flatnonzero(value == v).astype(np.intp)
        page = _page(frames, rows, quiet)
        found = with_floats(page, analyse(page, known))
        per_page[v] = [replace(f, multiplexer_ids=(v,)) for f in found]
    shared = _shared(frames, bits, value, per_page)
    out = [*whole, selector, *shared]
    for page_fields in per_page.values():
        out += [f for f in page_fields if _signature(f) not in {_signature(s) for s in shared}]
    return sorted(out, key=lambda f: (min(f.bits), f.bits, f.multiplexer_ids or ()))


def _signature(f: Field) -> tuple[object, ...]:
    return (f.bits, f.byte_order, f.kind, f.signed, f.is_float)


def _shared(
    frames: FrameSet, bits: U8, value: I64, per_page: dict[int, list[Field]]
) -> list[Field]:
    """Fields found alike in every page that move across pages as within them: fields of
    the whole frame."""
    pages = list(per_page.values())
    if len(pages) < 2:
        return []
    common = {_signature(f): f for f in pages[0] if f.kind != "constant"}
    for other in pages[1:]:
        present = {_signature(f) for f in other}
        common = {k: f for k, f in common.items() if k in present}
    if not common:
        return []
    before = np.flatnonzero(frames.cont[1:])
    a, b = page_pairs(value, frames.cont)
    out = []
    for f in common.values():
        raw = f.raw(bits).astype(np.float64)
        if not len(before) or not len(a):
            continue
        across = float(np.mean(np.abs(raw[before + 1] - raw[before])))
        within = float(np.mean(np.abs(raw[b] - raw[a])))
        if across <= SMOOTH_ACROSS * within:
            distinct = len(np.unique(raw))
            out.append(replace(f, multiplexer_ids=None, distinct=distinct))
    return out


def field_rows(fields: list[Field], f: Field, bits: U8) -> slice | IP:
    """The rows (of a bit matrix of the id's frames) in which `f` is present: the frames of
    its pages when it is multiplexed, all of them otherwise."""
    if f.multiplexer_ids is None:
        return slice(None)
    selector = next((g for g in fields if g.is_multiplexer), None)
    if selector is None:
        return slice(None)
    rows: IP = np.flatnonzero(np.isin(values(bits, selector.bits), f.multiplexer_ids))
    return rows


def layout_name(name: str, f: Field) -> str:
    """The report's name of a field from its plain one (SIG_1A0_8): MUX_1A0_0 for the
    multiplexer, SIG_1A0_8_m3 for a field of page 3."""
    if f.is_multiplexer:
        return "MUX_" + name.split("_", 1)[-1]
    if f.multiplexer_ids is not None:
        return name + "".join(f"_m{v}" for v in f.multiplexer_ids)
    return name


def first_row(fields: list[Field], f: Field, data: U8) -> int | None:
    """The first frame (row of `data`) in which `f` is present; None: in none."""
    if not len(data):
        return None
    selector = next((g for g in fields if g.is_multiplexer), None)
    if f.multiplexer_ids is None or selector is None:
        return 0
    first = min(selector.bits) // 8  # only the multiplexer's bytes are read
    last = max(selector.bits) // 8
    bits = bit_matrix(np.ascontiguousarray(data[:, first : last + 1]))
    value = values(bits, tuple(b - first * 8 for b in selector.bits))
    rows = np.flatnonzero(np.isin(value, f.multiplexer_ids))
    return int(rows[0]) if len(rows) else None


def describe_layout(f: Field, plain: str) -> str:
    """How a field was found, for the draft's comment: `plain` (its kind) said of a float,
    of the multiplexer, or of a field of some pages."""
    if f.is_multiplexer:
        text = (
            "multiplexer: its value selects the layout of the rest of the frame (the other"
            " bits flip far less between frames of one value than between consecutive frames)"
        )
    elif f.is_float:
        text = (
            f"IEEE 754 float{f.length}: every frame reads as a finite, plausible number that"
            " moves smoothly, across zero where every integer reading of its bits jumps, or"
            " across powers of two as one number"
        )
    else:
        text = plain
    if f.multiplexer_ids is not None:
        pages = ", ".join(str(v) for v in f.multiplexer_ids)
        text += f", in the frames whose multiplexer is {pages}"
    return text
