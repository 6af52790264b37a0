"""Marked moments ("brake pressed now"): which field changed then, and not otherwise.

A user who cannot name a signal can still say when it changed. Each mark is a name and a
time on the bus's (or the capture's) clock; marks of one name are one event. Every field
discovery found, every single bit that moved and every run of neighbouring moving bits in a
byte (outside counters and checksums) is a candidate, scored per event by

    score = recall * precision

where `recall` is the share of the event's marks with a change of the candidate within
`window_s` either side (a person marks a little early or, more often, late), and `precision`
the share of the candidate's changes that a mark explains, one change per mark of any event
(a brake switch changes at "pressed" and at "released" alike, and nowhere else). A brake
switch scores 1; a brake pressure that moves throughout the stop scores its few changes at
the marks over its many; a counter, a noisy value or a blinking lamp scores near 0. Ties go
to the field that took the same value at each of the event's marks (a switch pressed is on
every time; a bit of a counter that happened to flip there is not), then to the one that
changed mostly at this event's own marks, then to a field discovery found
over a bit of it, then to values and flags over counters and checksums (a checksum over a
frame where only the switch moved changes with it).

Marks come from `parse_events` (the `time_s,name` CSV of `hwbridge discover --events`),
from `discover(..., events=...)`, or live from `mark_event` (`EventMarks`).
"""

from __future__ import annotations

import csv
import io
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.bits import bit_matrix, values
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.report.models import EventCandidate, EventReport, Note
from hwbridge.discovery.report.names import field_name

if TYPE_CHECKING:
    from hwbridge.discovery.analysis.survey import Found

__all__ = [
    "MAX_EVENT_BYTES",
    "MAX_EVENT_NAMES",
    "MAX_MARKS",
    "WINDOW_S",
    "EventMarks",
    "EventsError",
    "Mark",
    "load_events",
    "parse_events",
    "rank_events",
    "rank_found",
]

F64 = npt.NDArray[np.float64]

WINDOW_S = 1.0
"""A change counts for a mark within this long before or after it."""
MAX_MARKS = 10_000
"""Marks read from a file at most."""
MAX_EVENT_NAMES = 64
"""Distinct event names at most."""
MAX_EVENT_BYTES = 1_000_000
"""The size of an events file at most."""
MAX_NAME_CHARS = 64
MAX_LINE_CHARS = 512
MAX_CANDIDATES = 10
"""Candidates given per event, best first."""
MIN_SCORE = 0.01
"""Candidates scoring below this are left out."""
_ERRORS_SHOWN = 10
_HEADER = ("time_s", "name")
_KIND_ORDER = {"value": 0, "flag": 0, "bit": 1, "bits": 1, "counter": 3, "checksum": 3}


@dataclass(frozen=True, slots=True)
class Mark:
    """One marked moment: `name` (the event) at `t` seconds on the bus's clock."""

    t: float
    name: str


class EventsError(ValueError):
    """An events file that cannot be read: every bad line, with its number."""


# -- reading marks ---------------------------------------------------------------------------


def _check_name(name: str) -> str | None:
    """Why `name` cannot name an event (None: it can)."""
    if not name:
        return "the name is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"the name is longer than {MAX_NAME_CHARS} characters"
    if not name.isprintable():
        return "the name has characters that do not print"
    return None


def parse_events(text: str, *, source: str = "events") -> list[Mark]:
    """Marks from `time_s,name` lines (a `time_s,name` header, blank lines and lines starting
    with `#` are skipped; a name with a comma is quoted as CSV quotes it). Times are seconds
    on the capture's clock (finite numbers). Raises EventsError naming every bad
    line (the first few, and how many more) or a file past the bounds; nothing is guessed."""
    if len(text) > MAX_EVENT_BYTES:
        raise EventsError(f"{source}: more than {MAX_EVENT_BYTES:,} characters")
    marks: list[Mark] = []
    problems: list[str] = []
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(line) > MAX_LINE_CHARS:
            problems.append(f"line {number}: longer than {MAX_LINE_CHARS} characters")
            continue
        try:
            cells = next(csv.reader(io.StringIO(stripped), strict=True))
        except (csv.Error, StopIteration) as exc:
            problems.append(f"line {number}: not a CSV line ({exc})")
            continue
        cells = [c.strip() for c in cells]
        if tuple(c.lower() for c in cells) == _HEADER and not marks and not problems:
            continue
        if len(cells) != 2:
            problems.append(f"line {number}: {len(cells)} column(s), want time_s,name")
            continue
        why = _time_problem(cells[0]) or _check_name(cells[1])
        if why is not None:
            problems.append(f"line {number}: {why}")
            continue
        names.add(cells[1])
        if len(names) > MAX_EVENT_NAMES:
            raise EventsError(f"{source}: more than {MAX_EVENT_NAMES} distinct event names")
        marks.append(Mark(float(cells[0]), cells[1]))
        if len(marks) > MAX_MARKS:
            raise EventsError(f"{source}: more than {MAX_MARKS:,} marks")
    if problems:
        shown = "; ".join(problems[:_ERRORS_SHOWN])
        more = len(problems) - _ERRORS_SHOWN
        tail = f"; and {more} more bad line(s)" if more > 0 else ""
        raise EventsError(f"{source}: {shown}{tail} (each line is time_s,name)")
    if not marks:
        raise EventsError(f"{source}: no mark in it (each line is time_s,name)")
    marks.sort(key=lambda m: m.t)
    return marks


def _time_problem(cell: str) -> str | None:
    try:
        value = float(cell)
    except ValueError:
        return f"{cell[:40]!r} is not a time in seconds"
    if not math.isfinite(value):
        return f"{cell[:40]!r} is not a finite number of seconds"
    return None


def load_events(path: str | Path) -> list[Mark]:
    """`parse_events` of a file (at most MAX_EVENT_BYTES read). Raises OSError for a file
    that cannot be read, EventsError for one that is not an events file."""
    path = Path(path)
    with path.open("rb") as handle:
        raw = handle.read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise EventsError(f"{path.name}: larger than {MAX_EVENT_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EventsError(f"{path.name}: not UTF-8 text (byte {exc.start})") from None
    return parse_events(text, source=path.name)


def as_marks(events: str | Path | Iterable[Mark | tuple[float, str]]) -> list[Mark]:
    """Marks from a path, or from marks or `(time_s, name)` pairs (checked like a file's)."""
    if isinstance(events, str | Path):
        return load_events(events)
    lines = []
    for item in events:
        t, name = (item.t, item.name) if isinstance(item, Mark) else item
        lines.append(f"{float(t)!r},{_quoted(str(name))}")
    return parse_events("\n".join(lines), source="events")


def _quoted(name: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([name])
    return out.getvalue()


# -- live marks ------------------------------------------------------------------------------


class EventMarks:
    """The marks of a live session (`mark_event`), the newest MAX_LIVE_MARKS kept; safe to
    share between threads."""

    MAX_LIVE_MARKS = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marks: OrderedDict[int, Mark] = OrderedDict()
        self._next = 0
        self.dropped = 0

    def add(self, name: str, t: float) -> Mark:
        """Stamp `name` at `t`; ValueError for a name an event cannot have."""
        name = name.strip()
        why = _check_name(name)
        if why is not None:
            raise ValueError(why)
        mark = Mark(float(t), name)
        with self._lock:
            names = {m.name for m in self._marks.values()}
            if name not in names and len(names) >= MAX_EVENT_NAMES:
                raise ValueError(f"at most {MAX_EVENT_NAMES} distinct event names")
            self._marks[self._next] = mark
            self._next += 1
            while len(self._marks) > self.MAX_LIVE_MARKS:
                self._marks.popitem(last=False)
                self.dropped += 1
        return mark

    def all(self) -> list[Mark]:
        with self._lock:
            return sorted(self._marks.values(), key=lambda m: m.t)

    def clear(self) -> None:
        with self._lock:
            self._marks.clear()


# -- ranking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """Bits of one id that may be the marked signal: a field discovery found or one bit."""

    key: FrameKey
    bits: tuple[int, ...]  # least significant first
    byte_order: str
    kind: str  # the field's kind, or "bit" / "bits" (no field holds exactly these)
    start_bit: int
    name: str | None  # the field's name in the report


@dataclass(frozen=True, slots=True)
class _Scored:
    candidate: Candidate
    score: float
    own: float  # share of its changes at this event's own marks
    same: float  # share of the marks hit after which it took its most common value
    hits: int
    elsewhere: int


def _intervals(times: F64, window_s: float) -> tuple[F64, F64]:
    """The union of [t - w, t + w] over `times` (sorted), as disjoint (starts, ends)."""
    if not len(times):
        return np.zeros(0), np.zeros(0)
    starts, ends = times - window_s, times + window_s
    keep = np.r_[True, starts[1:] > ends[:-1]]
    return starts[keep], np.maximum.reduceat(ends, np.flatnonzero(keep))


def _inside(t: F64, starts: F64, ends: F64) -> npt.NDArray[np.bool_]:
    if not len(starts):
        return np.zeros(len(t), np.bool_)
    i = np.searchsorted(starts, t, side="right") - 1
    out: npt.NDArray[np.bool_] = (i >= 0) & (t <= ends[np.maximum(i, 0)])
    return out


def _candidates(
    fs: FrameSet, fields: Sequence[object], moved: npt.NDArray[np.bool_]
) -> list[Candidate]:
    """The fields found in `fs` that moved; then, outside counters and checksums (which
    change because the data did), every moving bit no one-bit field holds and every run of
    two or more neighbouring moving bits within a byte no field holds exactly (a state
    discovery split into flags is such a run)."""
    out: list[Candidate] = []
    aid, extended = fs.key
    taken: set[tuple[int, ...]] = set()
    derived = np.zeros(len(moved), np.bool_)
    for f in fields:
        bits = tuple(getattr(f, "bits", ()))
        kind = str(getattr(f, "kind", "value"))
        if kind in ("counter", "checksum"):
            derived[[b for b in bits if b < len(derived)]] = True
        if not bits or kind == "constant" or not moved[list(bits)].any():
            continue
        order = str(getattr(f, "byte_order", "little_endian"))
        start = int(getattr(f, "start_bit", bits[0]))
        out.append(
            Candidate(fs.key, bits, order, kind, start, field_name(kind, aid, extended, start))
        )
        taken.add(tuple(sorted(bits)))
    free = moved & ~derived
    for byte in range(len(free) // 8):
        positions = [p for p in range(byte * 8, byte * 8 + 8) if free[p]]
        runs: list[list[int]] = []
        for p in positions:
            if runs and runs[-1][-1] == p - 1:
                runs[-1].append(p)
            else:
                runs.append([p])
        for run in runs:
            for size in range(1, len(run) + 1):  # fewer bits first
                for lo in range(len(run) - size + 1):
                    bits = tuple(run[lo : lo + size])
                    if bits in taken:
                        continue
                    kind = "bit" if size == 1 else "bits"
                    out.append(Candidate(fs.key, bits, "little_endian", kind, bits[0], None))
    return out


@dataclass(frozen=True)
class _Marks:
    """The marks, per event and all together, with the windows around them."""

    order: list[str]  # event names, by their first mark
    times: dict[str, F64]  # per event, its marks
    every: F64  # all marks
    window_s: float
    windows: tuple[F64, F64]  # the union of every mark's window
    own: dict[str, tuple[F64, F64]]  # per event, the union of its marks' windows

    @classmethod
    def of(cls, marks: Sequence[Mark], window_s: float) -> _Marks:
        order: list[str] = []
        by_name: dict[str, list[float]] = {}
        for m in sorted(marks, key=lambda m: m.t):
            if m.name not in by_name:
                order.append(m.name)
            by_name.setdefault(m.name, []).append(m.t)
        every = np.array(sorted(m.t for m in marks))
        return cls(
            order,
            {n: np.array(ts) for n, ts in by_name.items()},
            every,
            window_s,
            _intervals(every, window_s),
            {n: _intervals(np.array(ts), window_s) for n, ts in by_name.items()},
        )

    def hit(self, times: F64, at: F64) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
        """Per mark `at`, the first change of `times` in its window, and whether there is one."""
        lo = np.searchsorted(times, at - self.window_s, side="left")
        hi = np.searchsorted(times, at + self.window_s, side="right")
        return lo, hi > lo


def _score(
    cand: Candidate, times: F64, after: npt.NDArray[np.int64], marks: _Marks
) -> list[tuple[str, _Scored]]:
    """The candidate scored for every event one of its changes is near (see the module's
    docstring); `times` are its changes, `after` its value after each."""
    total = len(times)
    at_any = int(_inside(times, *marks.windows).sum())
    if not at_any:
        return []
    # each mark explains one change: a field that changes over and over around the marks (a
    # value moving with what the event set going) is not the switch
    _, explained = marks.hit(times, marks.every)
    precision = min(at_any, int(np.count_nonzero(explained))) / total
    out = []
    for name in marks.order:
        first, hit = marks.hit(times, marks.times[name])
        hits = int(np.count_nonzero(hit))
        if not hits:
            continue
        recall = hits / len(hit)
        own = int(_inside(times, *marks.own[name]).sum()) / total
        _, counts = np.unique(after[first[hit]], return_counts=True)
        same = int(counts.max()) / hits
        out.append((name, _Scored(cand, recall * precision, own, same, hits, total - at_any)))
    return out


def _ranked(scored: list[_Scored], limit: int) -> list[EventCandidate]:
    best = sorted(
        (s for s in scored if s.score >= MIN_SCORE),
        key=lambda s: (
            -round(s.score, 6),
            -round(s.same, 6),
            -round(s.own, 6),
            _KIND_ORDER.get(s.candidate.kind, 2),
            s.candidate.name is None,
            len(s.candidate.bits),
            s.candidate.key[1],
            s.candidate.key[0],
            s.candidate.start_bit,
        ),
    )
    return [_entry(s) for s in best[:limit]]


def rank_events(
    marks: Sequence[Mark],
    framesets: Mapping[FrameKey, FrameSet],
    fields: Mapping[FrameKey, Sequence[object]] | None = None,
    *,
    window_s: float = WINDOW_S,
    skip: Iterable[FrameKey] = (),
    deadline: float | None = None,
    limit: int = MAX_CANDIDATES,
) -> list[EventReport]:
    """Per event (marks of one name, in order of their first mark), the candidates best
    first (see the module's docstring). `fields` are the fields discovery found per id (any
    objects with `bits`, `byte_order`, `kind`, `start_bit`); `skip` ids are left out (the
    ones a reference decodes). Stops looking at more ids after `deadline`
    (time.monotonic())."""
    if not marks:
        return []
    known = _Marks.of(marks, window_s)
    scored: dict[str, list[_Scored]] = {n: [] for n in known.order}
    skipped = set(skip)
    for key in sorted(framesets, key=lambda k: (k[1], k[0])):
        if deadline is not None and time.monotonic() > deadline:
            break
        fs = framesets[key]
        if key in skipped or len(fs) < 2:
            continue
        bits = bit_matrix(fs.data)
        flips = (bits[1:] != bits[:-1]) & fs.cont[1:, None]
        moved = flips.any(axis=0)
        seen: set[bytes] = set()
        for cand in _candidates(fs, (fields or {}).get(key, ()), moved) if moved.any() else []:
            changed = flips[:, list(cand.bits)].any(axis=1)
            pattern = np.packbits(changed).tobytes()
            if pattern in seen or not changed.any():
                continue  # bits that changed exactly when others did: one candidate of them
            seen.add(pattern)
            after = values(bits[1:][changed], list(cand.bits))
            for name, result in _score(cand, fs.t[1:][changed], after, known):
                scored[name].append(result)
    return [
        EventReport(name=n, marks=len(known.times[n]), candidates=_ranked(scored[n], limit))
        for n in known.order
    ]


def _entry(s: _Scored) -> EventCandidate:
    c = s.candidate
    return EventCandidate(
        id=c.key[0],
        extended=c.key[1],
        start_bit=c.start_bit,
        length=len(c.bits),
        byte_order="big_endian" if c.byte_order == "big_endian" else "little_endian",
        score=round(s.score, 4),
        field=c.name,
        marks_hit=s.hits,
        changes_elsewhere=s.elsewhere,
    )


def rank_found(
    marks: Sequence[Mark],
    found: Sequence[Found],
    *,
    window_s: float = WINDOW_S,
    deadline: float | None = None,
) -> tuple[list[EventReport], list[Note]]:
    """`rank_events` over what `analyse_frames` found (the ids a reference describes left
    out), and notes on marks the frames do not cover. Marks of which none falls within the
    capture's clock, but all within its length from its first frame, are read as seconds
    from its first frame (a note says so): a capture's clock is often the time of day."""
    framesets = {item.frames.key: item.frames for item in found if len(item.frames)}
    fields = {item.frames.key: item.fields for item in found if not item.described}
    skip = [item.frames.key for item in found if item.described]
    notes: list[Note] = []
    if not framesets or not marks:
        return [], notes
    t0 = min(float(fs.t[0]) for fs in framesets.values())
    t1 = max(float(fs.t[-1]) for fs in framesets.values())
    inside = [m for m in marks if t0 - window_s <= m.t <= t1 + window_s]
    if not inside and all(m.t <= t1 - t0 + window_s for m in marks):
        marks = [Mark(m.t + t0, m.name) for m in marks]
        inside = list(marks)
        notes.append(
            Note(
                message="*",
                text=f"no mark fell within the capture's clock ({t0:.3f} to {t1:.3f} s); the"
                " marks were read as seconds from its first frame",
            )
        )
    if len(inside) < len(marks):
        notes.append(
            Note(
                message="*",
                text=f"{len(marks) - len(inside)} mark(s) fell outside the capture"
                f" ({t0:.3f} to {t1:.3f} s on its clock) and were left out",
            )
        )
    events = rank_events(inside, framesets, fields, window_s=window_s, skip=skip, deadline=deadline)
    return events, notes
