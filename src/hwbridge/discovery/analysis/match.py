"""The database that fits: known databases ranked by how much of a capture each explains.

Every candidate (`known.known_databases`: opendbc's and the user's) is read cheaply first
(`known.index_of`: ids, lengths and cycle times from the DBC text) and scored on what that
table can tell: the capture's ids it has a message for whose frames have the message's
length, and whose rate is near its cycle time. The best (at least `MIN_DEEP`, at most
`MAX_DEEP`) are then loaded with cantools and checked in depth on each id they explain
(`MatchChecks`): do the bits that moved lie inside its signals, do its counters count, do
its checksums check (the families of `checksums.py`), do its values stay in their ranges.
An id's *fit* is the share of its checks that pass, and a database's `score` is the sum of
its ids' fits over the capture's ids: ranked by it, best first. Since a fit is at most 1,
the cheap share is an upper bound of the score, so candidates are checked in that order
until none left could do better.

The best match is adopted (decoded with, as a reference is) when it explains at least
`MIN_EXPLAINED` of the capture's ids, they fit (`MIN_FIT` of their checks pass, on
average) and they could not be explained and fit by coincidence (`chance` below
`MAX_CHANCE`: see `_chance`); only the messages of ids that fit are used. Further matches
are adopted the same way on the ids the adopted ones leave unexplained. Databases the
capture cannot tell apart (the same ids explained, each fitting as well: opendbc's Honda
and Toyota variants share most messages) are named in `tied_with` and a note; the one
describing the fewest messages the capture did not show is listed first and used.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hwbridge.can.database.database import CanDatabase
from hwbridge.discovery.analysis.checksums import MIN_DISTINCT, find_checksums
from hwbridge.discovery.analysis.known import (
    DatabaseIndex,
    KnownDatabase,
    SkippedDatabase,
    candidates,
    index_of,
    load_known,
)
from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.bits import ByteOrder, bit_matrix, cantools_chain, values
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.report.models import DatabaseMatch, DiscoveryReport, MatchChecks, Note

__all__ = [
    "MATCH_BUDGET_S",
    "MAX_CHANCE",
    "MAX_DEEP",
    "MIN_FIT",
    "MatchResult",
    "match_candidates",
    "match_databases",
    "with_matches",
]

MAX_DEEP = 12
"""Candidates loaded with cantools and checked in depth, at most ..."""
MIN_DEEP = 3
"""... and at least (when that many explain an id), so the first few listed are measured."""
MAX_MATCHES = 10
"""Matches listed in a report (every one explaining at least one id, best first)."""
MAX_ADOPTED = 4
"""Matched databases decoded with, at most."""
MAX_CHANCE = 1e-6
"""A match is decoded with only when its ids could not be explained and fit by chance ..."""
MIN_FIT = 0.9
"""... when they pass this share of their checks, on average ..."""
MIN_EXPLAINED = 0.5
"""... and when it explains this share of the capture's ids (less is as likely a neighbour's
ids as the car's: such a database is given with --reference by someone who knows)."""
WINDOW = 32
"""Ids either side of a capture's id over which a database's density is taken."""
COINCIDENT_FIT = 0.4
"""How often a message lying on a capture's id by coincidence (another layout than the
capture's) still fits (MIN_FIT): 37% over the drives the rule was developed on (2,035 such
messages of the 15 best candidates of 46 captures), rounded up."""
MATCH_BUDGET_S = 60.0
SAMPLE_ROWS = 2048
"""Frames of one id the depth checks read (in blocks spread over the capture)."""
RATE_LOW, RATE_HIGH = 0.7, 1.5
COUNTING = 0.9
IN_RANGE = 0.99
MAX_NOTES = 8
_FD_SIZES = (12, 16, 20, 24, 32, 48, 64)
_COUNTER = re.compile(
    r"(^|_)(counter|cnt|alive|bz|zaehler|rolling_?counter)$|counter$|^counter", re.I
)
_CHECKSUM = re.compile(r"(checksum|crc|chksum|chks)$", re.I)

B = npt.NDArray[np.bool_]


@dataclass
class MatchResult:
    """The ranking, the databases to decode with (best first) and what to say about it."""

    matches: list[DatabaseMatch]
    adopted: list[CanDatabase] = field(default_factory=list)
    decoded_with: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def apply(self, report: DiscoveryReport, notes: list[Note]) -> None:
        """Put the ranking and what was decoded with in `report`, the notes in `notes`."""
        report.matches, report.decoded_with = self.matches, self.decoded_with
        notes += [Note(message="*", text=text) for text in self.notes]


def frame_size(length: int) -> int:
    """The payload size a frame of `length` bytes is sent in (CAN FD rounds up)."""
    if length <= 8:
        return length
    return next((size for size in _FD_SIZES if size >= length), 64)


@dataclass
class _Sample:
    """One id's frames as the depth checks read them."""

    frames: FrameSet
    moving: B  # per bit position: it changed somewhere in the capture
    distinct: int


class _Capture:
    """The capture's ids, their frames, and what every candidate is measured against."""

    def __init__(self, framesets: Mapping[FrameKey, FrameSet], total_frames: int | None) -> None:
        self.framesets = {k: fs for k, fs in framesets.items() if fs.length > 0}
        self.keys = sorted(self.framesets, key=lambda k: (k[1], k[0]))
        self.total = total_frames or sum(fs.frames for fs in self.framesets.values()) or 1
        self._samples: dict[FrameKey, _Sample] = {}

    def sample(self, key: FrameKey) -> _Sample:
        found = self._samples.get(key)
        if found is None:
            from hwbridge.discovery.analysis.survey import _spread

            fs = self.framesets[key]
            part = _spread(fs, SAMPLE_ROWS)
            changed = np.bitwise_or.reduce(fs.data ^ fs.data[:1], axis=0)
            moving = np.unpackbits(changed[:, None], axis=1, bitorder="little").ravel() == 1
            distinct = len(np.unique(part.data, axis=0)) if len(part) else 0
            found = _Sample(part, moving, distinct)
            self._samples[key] = found
        return found


@dataclass
class _Candidate:
    known: KnownDatabase
    index: DatabaseIndex
    explained: list[FrameKey]
    matched: int
    rate: tuple[int, int]  # (ok, checked)
    bound: float
    chance: float | None = None  # computed for the candidates listed or checked
    fits: dict[FrameKey, float] | None = None  # after the depth checks
    tally: dict[str, list[int]] = field(default_factory=dict)  # check -> [ok, applicable]
    bits: list[int] = field(default_factory=lambda: [0, 0])  # [inside a signal, moved]
    db: CanDatabase | None = None
    fitted: float = 0.0  # the score, once checked

    @property
    def checked(self) -> bool:
        return self.fits is not None

    @property
    def score(self) -> float:
        return self.bound if self.fits is None else self.fitted


def match_databases(
    framesets: Mapping[FrameKey, FrameSet],
    candidates: Sequence[KnownDatabase],
    *,
    total_frames: int | None = None,
    deadline: float | None = None,
    max_deep: int = MAX_DEEP,
    adopt: bool = True,
) -> MatchResult:
    """Rank `candidates` against the frames of a capture (see the module's docstring).

    `total_frames`: every frame of the capture (ids past the collector's bound included),
    for `frames_explained`. A candidate that cannot be read or loaded is skipped with a
    note. `deadline` (time.monotonic()) ends the depth checks early (a note says so)."""
    capture = _Capture(framesets, total_frames)
    notes: list[str] = []
    skipped: list[str] = []
    ranked: list[_Candidate] = []
    if not capture.keys:
        return MatchResult([], notes=["no frame to match a database against"])
    for known in candidates:
        try:
            index = index_of(known)
        except SkippedDatabase as exc:
            skipped.append(f"{known.name} {exc}")
            continue
        ranked.append(_cheap(capture, known, index))
    ranked = [c for c in ranked if c.explained]
    ranked.sort(key=lambda c: (-c.bound, -_share(c.rate), c.index.messages, c.known.name))
    deep = 0
    best = 0.0
    for cand in ranked:
        if deep >= max_deep or (cand.bound < best - 1e-9 and deep >= MIN_DEEP):
            break
        if deadline is not None and time.monotonic() > deadline:
            notes.append("the time budget ended the depth checks; the rest are ranked by ids")
            break
        try:
            cand.db = load_known(cand.known)
        except SkippedDatabase as exc:
            skipped.append(f"{cand.known.name} {exc}")
            cand.explained = []
            continue
        _deep(capture, cand)
        deep += 1
        best = max(best, cand.score)
    ranked = [c for c in ranked if c.explained]
    ranked.sort(key=_rank)
    ties = _ties(ranked)
    matches = [_report(c, capture, ties.get(id(c), [])) for c in ranked[:MAX_MATCHES]]
    result = MatchResult(matches, notes=notes)
    if skipped:
        shown = "; ".join(skipped[:MAX_NOTES])
        more = f" and {len(skipped) - MAX_NOTES} more" if len(skipped) > MAX_NOTES else ""
        result.notes.append(f"skipped: {shown}{more}")
    if adopt:
        _adopt(capture, ranked, result)
    if ranked and ranked[0].checked and ties.get(id(ranked[0])):
        others = ", ".join(ties[id(ranked[0])][:MAX_NOTES])
        result.notes.append(
            f"the capture cannot tell {ranked[0].known.name} from {others}: they explain the"
            f" same ids, each as well; {ranked[0].known.name} is listed first as it describes"
            " the fewest messages the capture did not show"
        )
    return result


def match_candidates(
    match_known: bool, known: Sequence[str | Path]
) -> tuple[list[KnownDatabase], list[str]] | None:
    """`discover`'s candidates (`known.candidates`), None when it is not matching.
    Raises ValueError for databases given without `match_known`."""
    if not match_known:
        if known:
            raise ValueError("known databases are matched only with match_known=True")
        return None
    return candidates(known)


def with_matches(
    reference: Reference,
    framesets: Mapping[FrameKey, FrameSet],
    matching: tuple[list[KnownDatabase], list[str]] | None,
    total_frames: int,
    budget_s: float = MATCH_BUDGET_S,
) -> tuple[Reference, MatchResult]:
    """`discover`'s step: the candidates of `match_candidates` matched against the
    capture, and `reference` with the databases that fit after its own (as they were,
    and nothing to say, when it is not matching)."""
    if matching is None:
        return reference, MatchResult([])
    candidates, notes = matching
    result = match_databases(
        framesets,
        candidates,
        total_frames=total_frames,
        deadline=time.monotonic() + min(MATCH_BUDGET_S, budget_s),
    )
    result.notes[:0] = notes
    return Reference(reference.databases + tuple(result.adopted)), result


def _share(pair: tuple[int, int] | list[int]) -> float:
    return pair[0] / pair[1] if pair[1] else 1.0


def _rank(c: _Candidate) -> tuple[Any, ...]:
    """Checked candidates first, by score; then the others by what the cheap table says.
    Among equals, the one whose counters and checksums confirm it more often (a database
    naming a counter where one counts says more than one that names none), then the one
    describing the fewest messages the capture did not show."""
    return (not c.checked, -round(c.score, 9), -_confirmed(c), c.index.messages, c.known.name)


def _size_ok(db_length: int, frame_length: int) -> bool:
    return frame_size(db_length) == frame_length or db_length == frame_length


def _cheap(capture: _Capture, known: KnownDatabase, index: DatabaseIndex) -> _Candidate:
    explained: list[FrameKey] = []
    matched = 0
    rate_ok = rate_checked = 0
    for key in capture.keys:
        entry = index.lookup(*key)
        if entry is None:
            continue
        matched += 1
        fs = capture.framesets[key]
        if not _size_ok(entry[0], fs.length):
            continue
        explained.append(key)
        if entry[1] > 0 and fs.period_ms:
            rate_checked += 1
            rate_ok += RATE_LOW <= fs.period_ms / entry[1] <= RATE_HIGH
    return _Candidate(
        known,
        index,
        explained,
        matched,
        (rate_ok, rate_checked),
        len(explained) / len(capture.keys),
    )


def _chance(capture: _Capture, index: DatabaseIndex, k: int, keys: Sequence[FrameKey]) -> float:
    """How likely `index`'s database explains `k` of `keys` by coincidence: the Poisson
    tail of the expected number of ids it explains and fits as a database whose messages
    lie as densely around each id would (its messages of the right length within `WINDOW`
    ids either side, the id itself left out, over the ids there are: ids are far from
    uniform on a real bus), each fitting with probability COINCIDENT_FIT."""
    if k <= 0:
        return 1.0
    lam = 0.0
    for extended in (False, True):
        mine = [key for key in keys if key[1] == extended]
        if not mine:
            continue
        near = index.near(extended)
        if not near:
            continue
        places = np.array([p for p, _ in near], np.int64)
        sizes = np.array([frame_size(n) for _, n in near], np.int64)
        for key in mine:
            x = index.place(*key)
            lo, hi = np.searchsorted(places, [x - WINDOW, x + WINDOW + 1])
            around = (sizes[lo:hi] == capture.framesets[key].length) & (places[lo:hi] != x)
            lam += float(around.sum()) / (2 * WINDOW) * COINCIDENT_FIT
    return _poisson_tail(lam, k)


def _poisson_tail(lam: float, k: int) -> float:
    """P(X >= k) for X ~ Poisson(lam)."""
    if lam <= 0:
        return 0.0 if k > 0 else 1.0
    log_lam = math.log(lam)

    def pmf(i: int) -> float:
        return math.exp(-lam + i * log_lam - math.lgamma(i + 1))

    if k <= lam:
        return max(0.0, 1.0 - sum(pmf(i) for i in range(k)))
    return min(1.0, sum(pmf(i) for i in range(k, k + 200)))


def _deep(capture: _Capture, cand: _Candidate) -> None:
    """Measure `cand` on every id its database (loaded) explains: the checks, and each id's
    fit (the share of its checks that pass)."""
    db = cand.db
    assert db is not None
    reference = Reference((db,))
    tally: dict[str, list[int]] = {k: [0, 0] for k in ("rate", "counters", "checksums", "values")}
    fits: dict[FrameKey, float] = {}
    explained: list[FrameKey] = []
    matched = 0
    for key in capture.keys:
        message = db.message_for_frame(*key)
        if message is None:
            continue
        matched += 1
        fs = capture.framesets[key]
        if not _size_ok(int(message.length), fs.length):
            continue
        explained.append(key)
        fits[key] = _fit(capture.sample(key), message, reference, tally, cand.bits)
    cand.explained = explained
    cand.matched = matched
    cand.fits = fits
    cand.tally = tally
    cand.fitted = sum(fits.values()) / len(capture.keys)
    good = sum(1 for f in fits.values() if f >= MIN_FIT)
    cand.chance = _chance(capture, cand.index, good, capture.keys)


def _fit(
    sample: _Sample,
    message: Any,
    reference: Reference,
    tally: dict[str, list[int]],
    bits_tally: list[int],
) -> float:
    """The share of the checks of one id that pass (1.0 when nothing can be checked)."""
    fs = sample.frames
    nbits = fs.length * 8
    parts: list[float] = []
    cycle = float(message.cycle_time or 0)
    if cycle > 0 and fs.period_ms:
        ok = RATE_LOW <= fs.period_ms / cycle <= RATE_HIGH
        tally["rate"][0] += ok
        tally["rate"][1] += 1
        parts.append(float(ok))
    chains: dict[str, tuple[int, ...]] = {}
    covered = np.zeros(nbits, np.bool_)
    for s in message.signals:
        order: ByteOrder = "big_endian" if s.byte_order == "big_endian" else "little_endian"
        chain = tuple(p for p in cantools_chain(int(s.start), int(s.length), order) if p < nbits)
        if chain:
            chains[s.name] = chain
            covered[list(chain)] = True
    moving = sample.moving[:nbits]
    n_moving = int(moving.sum())
    if n_moving:
        inside = int((moving & covered).sum())
        bits_tally[0] += inside
        bits_tally[1] += n_moving
        parts.append(inside / n_moving)
    counted = _named_checks(sample, message, chains)
    counted["values"] = _in_range(fs, message, reference)
    for name, pair in counted.items():
        tally[name][0] += pair[0]
        tally[name][1] += pair[1]
        if pair[1]:
            parts.append(pair[0] / pair[1])
    return sum(parts) / len(parts) if parts else 1.0


def _named_checks(
    sample: _Sample, message: Any, chains: Mapping[str, tuple[int, ...]]
) -> dict[str, list[int]]:
    """[passed, checked] of the counters and of the checksums the message names."""
    out = {"counters": [0, 0], "checksums": [0, 0]}
    for s in message.signals:
        chain = chains.get(s.name)
        if chain is None or s.multiplexer_ids:
            continue
        if _COUNTER.search(s.name) and 2 <= len(chain) <= 8:
            result, kind = _counts(sample, chain), "counters"
        elif _CHECKSUM.search(s.name) and len(chain) in (4, 8):
            result, kind = _checks(sample, chain), "checksums"
        else:
            continue
        if result is not None:
            out[kind][0] += result
            out[kind][1] += 1
    return out


def _in_range(fs: FrameSet, message: Any, reference: Reference) -> list[int]:
    """[in range, checked] of the message's signals with a range (counters and checksums
    aside): in range when at least IN_RANGE of their values are."""
    out = [0, 0]
    if len(fs) < 2:
        return out
    limits = {
        s.name: (float(s.minimum), float(s.maximum), abs(float(s.scale)) / 2 + 1e-9)
        for s in message.signals
        if s.minimum is not None
        and s.maximum is not None
        and float(s.maximum) > float(s.minimum)
        and not _COUNTER.search(s.name)
        and not _CHECKSUM.search(s.name)
    }
    if not limits:
        return out
    for signal in reference.signals(fs):
        found = limits.get(signal.signal)
        if found is None:
            continue
        lo, hi, tol = found
        v = signal.series.v
        out[0] += float(((v >= lo - tol) & (v <= hi + tol)).mean()) >= IN_RANGE
        out[1] += 1
    return out


def _counts(sample: _Sample, chain: tuple[int, ...]) -> bool | None:
    """A counter steps by one amount (modulo its range) from frame to frame; None when too
    few consecutive frames were kept to tell."""
    fs = sample.frames
    pairs = fs.cont[1:]
    if int(pairs.sum()) < 3:
        return None
    raw = values(bit_matrix(fs.data), chain)
    steps = ((raw[1:] - raw[:-1]) % (1 << len(chain)))[pairs]
    counts = np.bincount(steps, minlength=2)
    return bool(counts[1:].max() >= COUNTING * len(steps))


def _checks(sample: _Sample, chain: tuple[int, ...]) -> bool | None:
    """A checksum is computed by one of the families cars use; None when the capture
    cannot tell (the field or the frames barely moved, or it is not a byte or a nibble)."""
    lo = min(chain)
    if sorted(chain) != list(range(lo, lo + len(chain))) or lo % len(chain):
        return None  # neither a whole byte nor a nibble
    if sample.distinct < MIN_DISTINCT or int(sample.moving[list(chain)].sum()) < 2:
        return None
    fs = sample.frames
    usable = np.zeros(fs.length * 8, np.bool_)
    usable[list(chain)] = True
    hits = find_checksums(fs.data, fs.key[0], fs.key[1], usable)
    return any(set(hit.bits) == set(chain) for hit in hits)


def _ties(ranked: list[_Candidate]) -> dict[int, list[str]]:
    """Per checked candidate, the other checked ones the capture cannot tell from it: the
    same ids explained, each fitting as well, as many counters and checksums confirmed."""
    out: dict[int, list[str]] = {}
    checked = [c for c in ranked if c.checked]
    evidence = {id(c): _evidence(c) for c in checked}
    for c in checked:
        same = [o.known.name for o in checked if o is not c and evidence[id(o)] == evidence[id(c)]]
        if same:
            out[id(c)] = same
    return out


def _evidence(c: _Candidate) -> tuple[Any, ...]:
    fits = tuple(sorted((k, round(f, 6)) for k, f in (c.fits or {}).items()))
    return fits, _confirmed(c)


def _confirmed(c: _Candidate) -> int:
    return sum(c.tally.get(k, [0, 0])[0] for k in ("counters", "checksums"))


def _maybe(pair: list[int] | tuple[int, int]) -> float | None:
    return pair[0] / pair[1] if pair[1] else None


def _report(c: _Candidate, capture: _Capture, tied: list[str]) -> DatabaseMatch:
    frames = sum(capture.framesets[k].frames for k in c.explained)
    if c.chance is None:
        c.chance = _chance(capture, c.index, len(c.explained), capture.keys)
    checks = MatchChecks(
        length_ok=_round(len(c.explained) / c.matched if c.matched else None),
        rate_ok=_round(_maybe(c.tally["rate"]) if c.checked else _maybe(c.rate)),
    )
    if c.checked:
        checks.bits_covered = _round(_maybe(c.bits))
        checks.counters_ok = _round(_maybe(c.tally["counters"]))
        checks.checksums_ok = _round(_maybe(c.tally["checksums"]))
        checks.values_in_range = _round(_maybe(c.tally["values"]))
    return DatabaseMatch(
        database=c.known.name,
        source=c.known.source,
        ids_explained=round(len(c.explained) / len(capture.keys), 4),
        frames_explained=round(min(1.0, frames / capture.total), 4),
        ids=len(c.explained),
        score=round(c.score, 4),
        chance=float(f"{c.chance:.3g}"),
        checked=c.checked,
        checks=checks,
        tied_with=tied[:MAX_MATCHES],
    )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _adopt(capture: _Capture, ranked: list[_Candidate], result: MatchResult) -> None:
    """The best match when it explains at least MIN_EXPLAINED of the capture's ids, is no
    coincidence and fits; then, on the ids left, the next that does the same, up to
    MAX_ADOPTED. Only the messages of ids that fit (MIN_FIT) are decoded with."""
    left = set(capture.keys)
    for c in ranked:
        if len(result.adopted) >= MAX_ADOPTED or not left:
            break
        if not c.checked or c.fits is None or c.db is None:
            continue
        mine = [k for k in c.explained if k in left]
        if not mine:
            continue
        good = [k for k in mine if c.fits[k] >= MIN_FIT]
        fit = sum(c.fits[k] for k in mine) / len(mine)
        chance = _chance(capture, c.index, len(good), sorted(left))
        share = len(mine) / len(left)
        if share >= MIN_EXPLAINED and fit >= MIN_FIT and chance < MAX_CHANCE:
            result.adopted.append(_only(c.db, capture, good))
            result.decoded_with.append(c.known.name)
            left -= set(good)
            continue
        if not result.adopted:
            if share < MIN_EXPLAINED:
                why = (
                    f"it explains {share:.0%} of the capture's ids, less than"
                    f" {MIN_EXPLAINED:.0%} (give it as a reference if it belongs to this bus)"
                )
            elif fit < MIN_FIT:
                why = f"its checks pass on {fit:.0%} of the ids it explains"
            else:
                why = f"a database as dense as it could explain its ids by chance (p={chance:.2g})"
            result.notes.append(f"the best match, {c.known.name}, was not decoded with: {why}")
        break


def _only(db: CanDatabase, capture: _Capture, keys: list[FrameKey]) -> CanDatabase:
    """`db` with only the messages of `keys` (those that fit)."""
    from cantools.database.can import Database

    messages: list[Any] = []
    for key in keys:
        m = db.message_for_frame(*key)
        if m is not None and all(m is not other for other in messages):
            messages.append(m)
    return CanDatabase(Database(messages=messages, strict=False), path=db.path)
