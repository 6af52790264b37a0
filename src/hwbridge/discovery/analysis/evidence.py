"""The evidence behind a discovery report collected from its frames (`report.evidence` holds
what it is): how often each bit of each id flipped, and for every field matched to a reference
signal, the field decoded with its scale and offset beside the reference signal.

`discover(..., evidence=True)` collects it while the frames are still in memory and keeps it
on the report (`report.evidence`); `render_html` (`hwbridge.discovery.report.html`) draws it.
Everything is bounded: the busiest `MAX_IDS` ids, `MAX_POINTS` points a series, and what was
left out is counted.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.bits import bit_matrix, cantools_chain, float_values, to_signed, values
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.report.evidence import (
    MAX_IDS,
    MAX_POINTS,
    Evidence,
    MessageEvidence,
    Plot,
)
from hwbridge.discovery.report.models import DiscoveryReport, FieldReport

__all__ = ["collect_evidence", "flip_rates"]

_CHUNK = 65_536  # frames compared at once when counting flips


def flip_rates(fs: FrameSet) -> tuple[list[float], int]:
    """How often each bit position changed between consecutive frames (0..1), and over how
    many pairs; counted in chunks, so memory stays small whatever the capture."""
    nbits = fs.length * 8
    counts = np.zeros(nbits, np.int64)
    pairs = 0
    for start in range(1, len(fs), _CHUNK):
        stop = min(len(fs), start + _CHUNK)
        cont = fs.cont[start:stop]
        changed = np.bitwise_xor(fs.data[start:stop], fs.data[start - 1 : stop - 1])[cont]
        if len(changed):
            counts += np.unpackbits(changed, axis=1, bitorder="little").sum(axis=0, dtype=np.int64)
        pairs += int(cont.sum())
    if not pairs:
        return [0.0] * nbits, 0
    return [round(float(c) / pairs, 4) for c in counts], pairs


def _sample(fs: FrameSet, points: int) -> FrameSet:
    """At most `points` frames of `fs`, evenly spread."""
    if len(fs) <= points:
        return fs
    idx = np.unique(np.linspace(0, len(fs) - 1, points).astype(np.int64))
    cont = np.zeros(len(idx), np.bool_)
    return FrameSet(fs.key, fs.t[idx], fs.data[idx], cont, fs.length, fs.frames, fs.period_ms)


def _floats(v: npt.NDArray[np.float64]) -> list[float]:
    return [float(x) if np.isfinite(x) else 0.0 for x in np.asarray(v, np.float64)]


def _field_series(
    sample: FrameSet, f: FieldReport, selector: FieldReport | None = None
) -> tuple[list[float], list[float]]:
    """A field's values over the sample (a float read as one; a page's field over the
    frames of its page, `selector` being the message's multiplexer)."""
    chain = cantools_chain(f.start_bit, f.length, f.byte_order)
    if not chain or max(chain) >= sample.length * 8 or min(chain) < 0:
        return [], []
    bits = bit_matrix(sample.data)
    if f.is_float and len(chain) in (32, 64):
        number = float_values(bits, chain)
    elif len(chain) <= 63:
        raw = values(bits, chain)
        number = (to_signed(raw, f.length) if f.signed else raw).astype(np.float64)
    else:
        return [], []
    t = sample.t
    if f.multiplexer_ids is not None and selector is not None:
        page = values(
            bits, cantools_chain(selector.start_bit, selector.length, selector.byte_order)
        )
        rows = np.isin(page, f.multiplexer_ids)
        t, number = t[rows], number[rows]
    return _floats(t), _floats(number * f.scale + f.offset)


def collect_evidence(
    report: DiscoveryReport,
    framesets: Mapping[FrameKey, FrameSet],
    reference: Reference,
    *,
    max_ids: int = MAX_IDS,
    points: int = MAX_POINTS,
) -> Evidence:
    """The evidence of `report`'s messages from the frames it was found in."""
    reported = [(m.id, m.extended) for m in report.messages if (m.id, m.extended) in framesets]
    busiest = sorted(reported, key=lambda k: -framesets[k].frames)[:max_ids]
    evidence = Evidence(ids_left_out=len(reported) - len(busiest))
    # the reference messages' own frames, by name, sampled once each
    by_name: dict[str, FrameSet] = {}
    for key, fs in framesets.items():
        message = reference.message(key)
        if message is not None and str(message.name) not in by_name:
            by_name[str(message.name)] = _sample(fs, points)
    chosen = set(busiest)
    for m in report.messages:
        key = (m.id, m.extended)
        if key not in chosen:
            continue
        fs = framesets[key]
        rates, pairs = flip_rates(fs)
        plots: dict[str, Plot] = {}
        sample = _sample(fs, points)
        for f in m.signals:
            if f.reference is None or f.reference.message not in by_name:
                continue
            ref = next(
                (
                    r
                    for r in reference.signals(by_name[f.reference.message])
                    if r.signal == f.reference.signal
                ),
                None,
            )
            if ref is None:
                continue
            selector = next((g for g in m.signals if g.is_multiplexer), None)
            t, v = _field_series(sample, f, selector)
            plots[f.name] = Plot(t, v, _floats(ref.series.t), _floats(ref.series.v))
        evidence.messages[key] = MessageEvidence(m.id, m.extended, fs.length, pairs, rates, plots)
    return evidence
