"""Signals of a live bus over time, from the monitor's history: the tools that show.

`signal_timeseries` decodes one signal from the frames the BusMonitor keeps (the last
`history_s` seconds) and downsamples it so that each time bucket keeps its minimum and
maximum (`hwbridge.plot.series`); `plot_signals` draws several the same way. Times an LLM
gives are seconds relative to now (`start=-10`: the last ten seconds).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

from hwbridge.can.database.database import CanDatabase
from hwbridge.can.database.values import SignalSpec
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord
from hwbridge.core.models import ToolError
from hwbridge.plot.series import Series, downsample

__all__ = ["MAX_SIGNALS", "frames_series", "history_series", "resolve_signals"]

MAX_SIGNALS = 12
_GLOB = frozenset("*?[")


def resolve_signals(
    db: CanDatabase, names: Sequence[str], limit: int = MAX_SIGNALS
) -> list[SignalSpec]:
    """Signals by name, `Message.Signal` or glob (`*Speed`, `Engine.*`), each once, in the
    order named; UNKNOWN_SIGNAL for a glob that finds none, TOO_MANY_SIGNALS past `limit`."""
    found: dict[str, SignalSpec] = {}
    for name in names:
        if _GLOB.isdisjoint(name):
            spec = db.resolve_signal(name)
            found.setdefault(spec.qualified, spec)
            continue
        pattern = name.strip().lower()
        matched = 0
        for message in db.messages:
            for spec in db.signals(message):
                target = spec.qualified if "." in pattern else spec.name
                if fnmatch.fnmatchcase(target.lower(), pattern):
                    found.setdefault(spec.qualified, spec)
                    matched += 1
        if not matched:
            raise ToolError(
                "UNKNOWN_SIGNAL", f"no signal matches {name[:100]!r}; search_signals finds them"
            )
    specs = list(found.values())
    if len(specs) > limit:
        raise ToolError(
            "TOO_MANY_SIGNALS",
            f"{len(specs)} signals match; draw at most {limit} at once: "
            + ", ".join(s.qualified for s in specs[:limit])
            + ", ...",
        )
    return specs


def frames_series(
    db: CanDatabase,
    frames: Sequence[FrameRecord],
    specs: Sequence[SignalSpec],
    buckets: int,
    *,
    extremes_only: bool = False,
) -> list[Series]:
    """Each of `specs` decoded from `frames` (oldest first) and downsampled to `buckets`."""
    wanted: dict[str, list[SignalSpec]] = {}
    for spec in specs:
        wanted.setdefault(spec.message, []).append(spec)
    messages = {m.name: m for m in db.messages if m.name in wanted}
    by_key: dict[tuple[int, bool], Any] = {}
    times: dict[str, list[float]] = {s.qualified: [] for s in specs}
    values: dict[str, list[float]] = {s.qualified: [] for s in specs}
    for rec in frames:
        if rec.is_error_frame or rec.is_remote_frame:
            continue
        key = (rec.arbitration_id, rec.is_extended_id)
        if key not in by_key:
            found = db.message_for_frame(*key)
            by_key[key] = found if found is not None and found.name in wanted else None
        message = by_key[key]
        if message is None:
            continue
        try:
            raw = db.decode_raw(messages[message.name], rec.data)
        except ToolError:
            continue
        for spec in wanted[message.name]:
            value = raw.get(spec.name)
            if value is not None:
                times[spec.qualified].append(rec.timestamp)
                values[spec.qualified].append(float(value) * spec.scale + spec.offset)
    out = []
    for spec in specs:
        t, v = times[spec.qualified], values[spec.qualified]
        kept_t, kept_v = downsample(t, v, buckets, extremes_only=extremes_only)
        labels = {raw * spec.scale + spec.offset: label for raw, label in spec.choices.items()}
        out.append(Series(spec.qualified, spec.unit, kept_t, kept_v, len(t), labels))
    return out


def history_series(
    db: CanDatabase,
    monitor: BusMonitor,
    specs: Sequence[SignalSpec],
    buckets: int,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
    extremes_only: bool = False,
) -> list[Series]:
    """`specs` from the monitor's history, `start_s` and `end_s` seconds relative to now
    (negative: in the past; None: the whole history)."""
    now = monitor.now()
    start = None if start_s is None else now + start_s
    end = None if end_s is None else now + end_s
    if start is not None and end is not None and end < start:
        raise ToolError("INVALID_VALUE", "end must not be before start")
    frames = monitor.history(start=start, end=end)
    return frames_series(db, frames, specs, buckets, extremes_only=extremes_only)
