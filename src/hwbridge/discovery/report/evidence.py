"""The evidence behind a discovery report, for a person to check it: how often each bit of
each id flipped, and for every field matched to a reference signal, the field decoded with
its scale and offset beside the reference signal, over the capture.

`collect_evidence` (`hwbridge.discovery.analysis.evidence`) gathers it while the frames are
still in memory; `render_html` (`hwbridge.discovery.report.html`) draws it. Everything is
bounded: the busiest `MAX_IDS` ids, `MAX_POINTS` points a series, and what was left out is
counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwbridge.discovery.frames import FrameKey

__all__ = ["MAX_IDS", "MAX_POINTS", "Evidence", "MessageEvidence", "Plot"]

MAX_IDS = 64
"""Ids whose evidence is kept (the busiest); the others are counted in `ids_left_out`."""
MAX_POINTS = 400
"""Points of a drawn series, spread evenly over the capture."""


@dataclass(frozen=True)
class Plot:
    """A field decoded (scale and offset applied) and the reference signal it matched."""

    field_t: list[float]
    field_v: list[float]
    reference_t: list[float]
    reference_v: list[float]


@dataclass(frozen=True)
class MessageEvidence:
    """One id: the flip rate of every bit position (`byte * 8 + bit`), over `transitions`
    pairs of consecutive frames, and the plots of its matched fields by field name."""

    id: int
    extended: bool
    length: int
    transitions: int
    flip_rates: list[float]
    plots: dict[str, Plot] = field(default_factory=dict)


@dataclass
class Evidence:
    messages: dict[FrameKey, MessageEvidence] = field(default_factory=dict)
    ids_left_out: int = 0
