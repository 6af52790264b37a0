"""`discover`: captures in, a report (and a draft DBC) out.

    from hwbridge.can import discover
    report = discover(["drive.blf"], reference="gnss.dbc")   # or reference="obd"
    print(report.to_json())
    Path("draft.dbc").write_text(report.to_dbc())

Captures are read in chunks with the capture readers (BLF, MF4, candump .log, ASC and CSV as
arrays, every other format python-can reads through python-can), so memory stays bounded
whatever their size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.discovery._deps import require_numpy
from hwbridge.discovery.analysis.match import match_candidates, with_matches
from hwbridge.discovery.analysis.reference import ReferenceSpec
from hwbridge.discovery.report.models import DiscoveryReport, Note

if TYPE_CHECKING:
    from hwbridge.discovery.analysis.events import Mark
    from hwbridge.discovery.analysis.obd_reference import ObdFrames
    from hwbridge.discovery.analysis.reference import Reference
    from hwbridge.discovery.analysis.survey import Found
    from hwbridge.discovery.frames import Collector

__all__ = ["TIME_BUDGET_S", "discover"]

TIME_BUDGET_S = 300.0
"""Analysis stops after this long; ids not analysed by then are reported as dropped."""
EVENTS_BUDGET_S = 60.0
"""Ranking fields against marked events stops looking at more ids after this long."""


def discover(
    captures: str | Path | Sequence[str | Path],
    reference: ReferenceSpec | Sequence[ReferenceSpec] | None = None,
    *,
    min_r: float | None = None,
    time_budget_s: float = TIME_BUDGET_S,
    max_ids: int | None = None,
    max_bytes: int | None = None,
    progress: Callable[[str, float], None] | None = None,
    evidence: bool = False,
    events: str | Path | Iterable[Mark | tuple[float, str]] | None = None,
    window_s: float | None = None,
    match_known: bool = False,
    known: Sequence[str | Path] = (),
) -> DiscoveryReport:
    """Find the signals of the frames in `captures` (any format python-can reads, and MF4).

    `reference` (a DBC path or a database, or several) describes the part of the bus that
    is known: its messages are decoded, not rediscovered, and every value field is
    correlated with its signals; a field with |r| >= `min_r` (0.9) takes the signal's unit
    and a least-squares scale and offset. `progress(capture, fraction)` is called as
    captures are read. A truncated capture keeps the frames read before the break (a note
    says so). `evidence=True` also keeps, on `report.evidence`, what a person needs to check
    it (each bit's flip rate, each matched field drawn beside its reference signal; see
    `hwbridge.discovery.report.html.render_html`). `match_known=True` ranks known databases
    (opendbc's when the `opendbc` extra is installed, and the files or folders of `known`)
    by how much of the capture each explains (`report.matches`, best first) and decodes with
    the best when it fits (`report.decoded_with`), as with a reference: its messages are
    not rediscovered (see `hwbridge.discovery.analysis.match`). `reference="obd"` (alone or
    among others) takes the OBD-II exchanges in the captures as the reference: their answers
    are decoded into python-OBD's signals (`SPEED`, `RPM`, ...), their ids never
    rediscovered. `events` (a `time_s,name` CSV path, or marks, or `(time_s, name)` pairs on
    the captures' clock) ranks fields by how well they changed at the marked moments and not
    elsewhere (`report.events`; `window_s` either side of a mark, 1 s by default). Raises
    FileNotFoundError / ValueError for a capture that cannot be opened, `EventsError` (a
    ValueError) for events that cannot be read.
    """
    require_numpy()
    from hwbridge.can.io.readers import check_capture
    from hwbridge.discovery import frames as frames_module
    from hwbridge.discovery.analysis.survey import MIN_R, analyse_frames, build_report

    paths = [captures] if isinstance(captures, str | Path) else list(captures)
    if not paths:
        raise ValueError("discover needs at least one capture")
    checked = [check_capture(p) for p in paths]
    marks, ref, obd_frames = _inputs(events, reference)
    matching = match_candidates(match_known, known)  # a wrong path costs no capture read
    collector = frames_module.Collector(
        max_ids=max_ids or frames_module.MAX_IDS,
        max_bytes=max_bytes or frames_module.MAX_BYTES,
    )
    notes: list[Note] = []
    for path in checked:
        if (note := _read_capture(path, collector, obd_frames, progress)) is not None:
            notes.append(note)
        collector.end_segment()
    deadline = time.monotonic() + time_budget_s
    framesets = collector.framesets()
    # the known databases that fit join the reference: decoded, not rediscovered
    ref, matched = with_matches(ref, framesets, matching, collector.frames, time_budget_s)
    ref = _with_obd(ref, obd_frames, notes)
    found, left_out = analyse_frames(framesets, ref, deadline=deadline)
    report = build_report(found, ref, frames=collector.frames, min_r=min_r or MIN_R)
    _rank_marks(report, found, marks, window_s, notes)
    if evidence:
        from hwbridge.discovery.analysis.evidence import collect_evidence

        report._evidence = collect_evidence(report, framesets, ref)
    report.captures = [p.name for p in checked]
    matched.apply(report, notes)
    report.dropped = collector.report_dropped().to_dict()
    if left_out:
        report.dropped["ids_not_analysed"] = left_out
        notes.append(
            Note(
                message="*",
                text=f"{left_out} id(s) with the fewest frames were not analysed within the"
                f" time budget of {time_budget_s:g} s",
            )
        )
    if collector.frames == 0:
        notes.append(Note(message="*", text="no CAN frame was found in the capture(s)"))
    _explain_dropped(report, notes)
    report.notes = notes + report.notes
    return report


def _read_capture(
    path: Path,
    collector: Collector,
    obd_frames: ObdFrames | None,
    progress: Callable[[str, float], None] | None,
) -> Note | None:
    """The frames of one capture into `collector` (and `obd_frames`); a note when the capture
    ends in a CaptureError (truncated, corrupt, or junk), its frames before that kept. Raises
    ValueError when it is no capture at all."""
    from hwbridge.can.io.frames import CaptureError
    from hwbridge.can.io.readers import open_capture

    try:
        reader = open_capture(path)
    except CaptureError as exc:  # not a capture at all: the caller's mistake, one line
        raise ValueError(f"{path.name}: {exc.reason}") from None
    used = 0
    try:
        for chunk in reader.chunks():
            used += len(chunk)
            seconds = chunk.timestamp_us / 1e6
            collector.add(seconds, chunk.arbitration_id, chunk.extended, chunk.length, chunk.data)
            if obd_frames is not None:
                obd_frames.add(
                    seconds, chunk.arbitration_id, chunk.extended, chunk.length, chunk.data
                )
            if progress is not None:
                progress(path.name, reader.progress)
    except CaptureError as exc:
        kept = f"the frames before it were used ({used})" if used else "no frame of it was used"
        return Note(message=path.name, text=f"{exc.reason} at {exc.position}; {kept}")
    finally:
        reader.close()
    return None


def _inputs(
    events: str | Path | Iterable[Mark | tuple[float, str]] | None, reference: Any
) -> tuple[list[Mark] | None, Reference, ObdFrames | None]:
    """The marks `events` holds, the databases of `reference`, and where to keep the OBD-II
    frames when "obd" is in it (all checked before any capture is read)."""
    from hwbridge.discovery.analysis.events import as_marks
    from hwbridge.discovery.analysis.obd_reference import ObdFrames, split_obd
    from hwbridge.discovery.analysis.reference import load_reference

    marks = None if events is None else as_marks(events)
    databases, obd = split_obd(reference)
    return marks, load_reference(databases), (ObdFrames() if obd else None)


def _with_obd(ref: Reference, obd_frames: ObdFrames | None, notes: list[Note]) -> Reference:
    """`ref` with the OBD-II exchanges read, when OBD-II is the reference."""
    if obd_frames is None:
        return ref
    from hwbridge.discovery.analysis.obd_reference import ObdReference, obd_notes

    exchanges = obd_frames.exchanges()
    notes += obd_notes(exchanges)
    return ObdReference(ref.databases, exchanges)


def _rank_marks(
    report: DiscoveryReport,
    found: list[Found],
    marks: list[Mark] | None,
    window_s: float | None,
    notes: list[Note],
) -> None:
    """`report.events`: the fields ranked against the marks, if any."""
    if not marks:
        return
    from hwbridge.discovery.analysis.events import WINDOW_S, rank_found

    report.events, marked = rank_found(
        marks, found, window_s=window_s or WINDOW_S, deadline=time.monotonic() + EVENTS_BUDGET_S
    )
    notes += marked


def _explain_dropped(report: DiscoveryReport, notes: list[Note]) -> None:
    d = report.dropped
    if d.get("ids"):
        notes.append(
            Note(
                message="*",
                text=f"about {d['ids']} more distinct id(s) ({d['frames_of_dropped_ids']}"
                " frames) came after the first ids analysed filled the bound; they were"
                " counted, not analysed",
            )
        )
    if d.get("frames_not_stored"):
        notes.append(
            Note(
                message="*",
                text=f"{d['frames_not_stored']} frame(s) of busy ids were counted but not"
                " kept, to stay within memory; the rest are spread over the whole capture",
            )
        )
    if d.get("frames_of_impossible_ids"):
        notes.append(
            Note(
                message="*",
                text=f"{d['frames_of_impossible_ids']} frame(s) had an id no CAN bus carries"
                " (11-bit above 0x7FF, 29-bit above 0x1FFFFFFF); they were left out",
            )
        )
    if d.get("frames_of_other_lengths"):
        notes.append(
            Note(
                message="*",
                text=f"{d['frames_of_other_lengths']} frame(s) whose length differed from"
                " their id's usual length were left out",
            )
        )
