"""From stored frames to a report: every id analysed, fields named and correlated.

Used by `discover` (captures) and by the live `survey_bus` tool (a monitor's history) alike.
Ids are analysed busiest first within a time budget; what the budget leaves out is reported
in `dropped`, never silently skipped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.analysis.correlate import (
    CONFIRMED_R2,
    ScaleFit,
    Series,
    align,
    correlate,
    scale_fit,
)
from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.analysis.multiplex import (
    analyse_layouts,
    describe_layout,
    field_rows,
    first_row,
    layout_name,
)
from hwbridge.discovery.analysis.reference import Reference, ReferenceSignal
from hwbridge.discovery.bits import bit_matrix, values
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.report.models import (
    DiscoveryReport,
    FieldReport,
    MessageReport,
    Note,
    ReferenceMatch,
)
from hwbridge.discovery.report.names import field_name, message_name

__all__ = ["MIN_R", "MIN_SAMPLES", "Found", "analyse_frames", "build_report", "significant"]

MIN_R = 0.9
"""|r| (linear and rank) a field needs to take a reference's meaning."""
MIN_R_CHANGES = 0.5
LOOSE_R, LOOSE_R_CHANGES = 0.6, 0.2
"""A field that misses MIN_R or MIN_R_CHANGES unaligned but reaches these is aligned with
the reference (`align`: a lagging reference lowers both, r of the changes most; a field
clipped by its range sits on a plateau that says nothing) and judged again at the lag where
the two agree best, off its plateaus, when at least MIN_JUDGED of the shared points are."""
MIN_JUDGED = 0.1
"""... and the r of their changes, so that two things that merely rise together do not."""
MAX_ANALYSED_ROWS = 16_384
"""Frames of one id its fields are found from (spread over the capture in blocks)."""
MIN_TRANSITIONS = 2
"""Pairs of consecutive frames an id needs before fields are looked for in it."""
MIN_SAMPLES = 16
"""Frames a field needs to be correlated: fewer are joined by straight lines on the grid,
and anything moving over a short window would seem to move with anything else."""
_BATCH = 256  # fields correlated at once


def significant(x: float) -> float:
    """Six significant digits: what a DBC needs, without the noise of the fit."""
    return float(f"{x:.6g}") if np.isfinite(x) else 0.0


@dataclass
class Found:
    """The fields of one id, before naming."""

    frames: FrameSet
    fields: list[Field]
    described: bool  # the reference knows this id
    analysed: bool = True  # False: too few frames to find fields in


def analyse_frames(
    framesets: Mapping[FrameKey, FrameSet],
    reference: Reference,
    *,
    deadline: float | None = None,
    extra_explained: Mapping[FrameKey, npt.NDArray[np.bool_]] | None = None,
) -> tuple[list[Found], int]:
    """The fields of every id the reference does not describe (busiest first) until
    `deadline` (time.monotonic()); the number of ids the deadline left out. The ids the
    reference describes are listed (`described`) without fields; `extra_explained` marks,
    per id, bits known otherwise (signals defined in a session), left out of the search."""
    found: list[Found] = []
    # the messages the reference describes are decoded with it, never rediscovered: no
    # field is looked for in them (not even in bits their signals leave out)
    for key, fs in framesets.items():
        if reference.message(key) is not None:
            found.append(Found(fs, [], described=True))
    order = sorted(
        (k for k in framesets if reference.message(k) is None),
        key=lambda k: -framesets[k].frames,
    )
    for done, key in enumerate(order):
        if deadline is not None and time.monotonic() > deadline:
            return found, len(order) - done
        fs = framesets[key]
        explained = (extra_explained or {}).get(key)
        if fs.pairs < MIN_TRANSITIONS:  # nothing can have been seen to move
            found.append(Found(fs, [], False, analysed=False))
            continue
        sample = _spread(fs, MAX_ANALYSED_ROWS)
        found.append(Found(fs, analyse_layouts(sample, explained, deadline=deadline), False))
    return found, 0


def _spread(fs: FrameSet, rows: int, block: int = 256) -> FrameSet:
    """At most `rows` frames of `fs`, in whole blocks spread over all of it."""
    n = len(fs)
    if n <= rows:
        return fs
    blocks = n // block
    keep_blocks = max(1, rows // block)
    chosen = np.linspace(0, blocks - 1, keep_blocks).astype(np.int64)
    idx = (chosen[:, None] * block + np.arange(block)[None, :]).ravel()
    idx = idx[idx < n]
    cont = fs.cont[idx].copy()
    cont[np.r_[True, idx[1:] != idx[:-1] + 1]] = False
    return FrameSet(fs.key, fs.t[idx], fs.data[idx], cont, fs.length, fs.frames, fs.period_ms)


def build_report(
    found: list[Found],
    reference: Reference,
    *,
    frames: int = 0,
    min_r: float = MIN_R,
) -> DiscoveryReport:
    """Name every field, correlate value fields with the reference, write the report."""
    refs: list[ReferenceSignal] = []
    described: list[str] = []
    for item in found:
        if item.described:
            message = reference.message(item.frames.key)
            if message is not None and message.name not in described:
                described.append(str(message.name))
            refs += [
                r
                for r in reference.signals(item.frames)
                if _varies(r.series.v) and len(r.series.t) >= MIN_SAMPLES
            ]
    report = DiscoveryReport(messages=[], frames=frames, reference_messages=described)
    # the value fields worth correlating: a few distinct values at least
    movable: list[tuple[int, int, Series]] = []
    for i, item in enumerate(found):
        bits = None
        for j, f in enumerate(item.fields):
            if f.kind == "value" and f.distinct >= 3 and refs and len(item.frames) >= MIN_SAMPLES:
                if bits is None:
                    bits = bit_matrix(item.frames.data)
                raw = f.raw(bits).astype(np.float64)
                rows = field_rows(item.fields, f, bits)  # a page's field: its frames
                movable.append((i, j, Series(item.frames.t[rows], raw[rows])))
    matches: dict[tuple[int, int], tuple[ReferenceSignal, float, ScaleFit]] = {}
    ref_series = [r.series for r in refs]
    for start in range(0, len(movable), _BATCH):
        batch = movable[start : start + _BATCH]
        c = correlate([s for _, _, s in batch], ref_series)
        for row, (i, j, _) in enumerate(batch):
            if not c.r.shape[1]:
                continue
            col = int(np.argmax(np.abs(c.r[row])))
            r, rho, dr = float(c.r[row, col]), float(c.rho[row, col]), c.r_changes[row, col]
            close = abs(r) >= min_r and abs(rho) >= min_r and abs(dr) >= MIN_R_CHANGES
            if not close and not (
                abs(r) >= LOOSE_R and abs(rho) >= LOOSE_R and abs(dr) >= LOOSE_R_CHANGES
            ):
                continue
            aligned = align(batch[row][2], ref_series[col])
            if not close:  # judged again where a lagging reference meets the field
                if aligned is None or not (
                    aligned.judged >= MIN_JUDGED * int(aligned.shared.sum())
                    and abs(aligned.r) >= min_r
                    and abs(aligned.rho) >= min_r
                    and abs(aligned.r_changes) >= MIN_R_CHANGES
                ):
                    continue
                r = aligned.r
            fit = scale_fit(batch[row][2], ref_series[col], aligned=aligned)
            if fit is None:  # too few points after the lag: the correlation's own line
                slope, intercept = float(c.scale[row, col]), float(c.offset[row, col])
                fit = ScaleFit(slope, intercept, slope, intercept, r * r, False)
            matches[i, j] = (refs[col], r, fit)
    for i, item in enumerate(found):
        if not item.described:
            report.messages.append(_message(report, item, i, matches))
    too_few = sum(1 for item in found if not item.analysed and not item.described)
    if too_few:
        report.notes.append(
            Note(
                message="*",
                text=f"{too_few} id(s) came fewer than {MIN_TRANSITIONS + 1} times in a row;"
                " no fields can be found in them, so they are listed without any",
            )
        )
    report.messages = [m for m in report.messages if not _described(found, m)]
    report.messages.sort(key=lambda m: (m.extended, m.id))
    return report


def _varies(v: npt.NDArray[np.float64]) -> bool:
    return bool(len(v) >= 2 and np.nanmax(v) > np.nanmin(v))


def _described(found: list[Found], m: MessageReport) -> bool:
    return any(f.described and f.frames.key == (m.id, m.extended) for f in found)


def _message(
    report: DiscoveryReport,
    item: Found,
    index: int,
    matches: Mapping[tuple[int, int], tuple[ReferenceSignal, float, ScaleFit]],
) -> MessageReport:
    fs = item.frames
    aid, extended = fs.key
    mname = message_name(aid, extended)
    signals: list[FieldReport] = []
    for j, f in enumerate(item.fields):
        name = layout_name(field_name(f.kind, aid, extended, f.start_bit), f)
        entry = FieldReport(
            name=name,
            start_bit=f.start_bit,
            length=f.length,
            byte_order=f.byte_order,
            signed=f.signed,
            kind=f.kind,
            is_float=f.is_float,
            is_multiplexer=f.is_multiplexer,
            multiplexer_ids=None if f.multiplexer_ids is None else list(f.multiplexer_ids),
        )
        parts = [describe_layout(f, _describe(f))]
        match = matches.get((index, j))
        if match is not None:
            ref, r, fit = match
            entry.scale, entry.offset = significant(fit.scale), significant(fit.offset)
            entry.unit = ref.unit
            entry.reference = ReferenceMatch(
                message=ref.message,
                signal=ref.signal,
                r=round(r, 3),
                r2=round(fit.r2, 4),
                verdict="confirmed" if fit.r2 >= CONFIRMED_R2 else "unconfirmed",
                fitted_scale=significant(fit.fitted_scale),
                lag_s=round(fit.lag_s, 3),
            )
            how = (
                f"the round scale {significant(fit.scale):g} explains it as well as the"
                f" least-squares {significant(fit.fitted_scale):g}"
                if fit.snapped
                else "scale and offset fitted to it by least squares"
            )
            late = (
                f"; the reference {abs(fit.lag_s):.2f} s {'after' if fit.lag_s > 0 else 'before'}"
                " it"
                if abs(fit.lag_s) >= 0.005
                else ""
            )
            parts.append(
                f"moves with {ref.message}.{ref.signal} (r={r:.3f}{late}); {how}; R²={fit.r2:.4f}"
                f" over the capture, {entry.reference.verdict}"
            )
        if f.kind == "constant":
            row = first_row(item.fields, f, fs.data)
            if row is not None:
                value = int(values(bit_matrix(fs.data[row : row + 1]), f.bits)[0])
                parts.append(f"its value was 0x{value:X} throughout")
        if f.wider:
            text = (
                f"the {f.wider} bit(s) above {name} never changed, so nothing tells whether"
                " they belong to it; only the bits that moved are given"
            )
            parts.append(text)
            report.notes.append(Note(message=mname, signal=name, text=text))
        report.comment(mname, name, "; ".join(parts) + ".")
        signals.append(entry)
    period = None if fs.period_ms is None else round(fs.period_ms, 1)
    report.comment(
        mname,
        None,
        f"Found by hwbridge discover: {fs.frames} frames"
        + (f", every {period} ms" if period else "")
        + ".",
    )
    return MessageReport(
        id=aid,
        extended=extended,
        dlc=fs.length,
        frames=fs.frames,
        period_ms=period,
        signals=signals,
    )


def _describe(f: Field) -> str:
    if f.kind == "checksum":
        return f"checksum, {f.detail}"
    if f.kind == "counter":
        return f"rolling counter, {f.detail}"
    if f.kind == "constant":
        return "bits that never changed"
    if f.kind == "flag":
        return "one bit that changed"
    kind = "signed value (it wraps around zero in two's complement)" if f.signed else "value"
    return f"{kind} found from how its bits flip"
