"""A signal over time, and the downsampling that keeps it faithful.

A picture `W` pixels wide can show at most `W` columns; drawing ten million samples into
them costs time and shows nothing more than the minimum and maximum of each column. So a
long series is cut into time buckets (one per pixel column) and each bucket keeps its first,
last, minimum and maximum sample (M4): lines drawn through the kept samples cover exactly
the pixels the full series would. `downsample` does it with numpy (vectorised, O(n)) and
falls back to plain Python when numpy is not installed (the core install; the live history
of a bus is small). A dataset does the same in SQL (`hwbridge.captures.series`), so its rows
never come to Python.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_POINTS",
    "Series",
    "bucket_points",
    "downsample",
    "iso_utc",
    "series_summary",
    "timeseries_result",
]

MAX_POINTS = 500
"""The most points `signal_timeseries` returns: a result stays within a prompt's bounds."""
MAX_LABELS = 32


@dataclass(frozen=True, slots=True)
class Series:
    """One signal over time: `t` in seconds since the epoch (UTC), ascending, and `v`.

    `total` is how many samples the window held before downsampling; `labels` maps a
    physical value to its label (signals with value tables are drawn as steps).
    """

    name: str
    unit: str | None
    t: Sequence[float]
    v: Sequence[float]
    total: int
    labels: Mapping[float, str] = field(default_factory=dict)

    @property
    def downsampled(self) -> bool:
        return len(self.t) < self.total


def iso_utc(seconds: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC with microseconds, e.g. 2021-10-25T19:00:55.0299Z."""
    value = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"


def downsample(
    t: Sequence[float] | Any,
    v: Sequence[float] | Any,
    buckets: int,
    *,
    extremes_only: bool = False,
) -> tuple[list[float], list[float]]:
    """The samples of (t, v) to keep for `buckets` time buckets: per bucket its first, last,
    minimum and maximum (just minimum and maximum with `extremes_only`), in time order.

    `t` must be ascending; NaN values are left out. A series that already fits is returned
    whole.
    """
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    try:
        import numpy as np
    except ImportError:  # the core install: plain Python, for the small live histories
        return _downsample_python(list(t), list(v), buckets, extremes_only)
    ta = np.asarray(t, dtype=np.float64)
    va = np.asarray(v, dtype=np.float64)
    keep = ~np.isnan(va)
    if not keep.all():
        ta, va = ta[keep], va[keep]
    n = len(ta)
    per_bucket = 2 if extremes_only else 4
    if n <= buckets * per_bucket:
        return ta.tolist(), va.tolist()
    t0, t1 = float(ta[0]), float(ta[-1])
    span = t1 - t0
    if span <= 0:
        k = np.zeros(n, dtype=np.int64)
    else:
        k = np.minimum(((ta - t0) * (buckets / span)).astype(np.int64), buckets - 1)
    starts = np.flatnonzero(np.diff(k)) + 1
    starts = np.concatenate(([0], starts))
    ends = np.concatenate((starts[1:], [n])) - 1
    seg = np.repeat(np.arange(len(starts)), np.diff(np.concatenate((starts, [n]))))
    mins = np.minimum.reduceat(va, starts)
    maxs = np.maximum.reduceat(va, starts)
    at_min = np.flatnonzero(va == mins[seg])
    at_max = np.flatnonzero(va == maxs[seg])
    first_min = at_min[np.concatenate(([True], np.diff(seg[at_min]) != 0))]
    first_max = at_max[np.concatenate(([True], np.diff(seg[at_max]) != 0))]
    parts = [first_min, first_max] if extremes_only else [starts, ends, first_min, first_max]
    index = np.unique(np.concatenate(parts))  # sorted: time order
    return ta[index].tolist(), va[index].tolist()


def _downsample_python(
    t: list[float], v: list[float], buckets: int, extremes_only: bool
) -> tuple[list[float], list[float]]:
    pairs = [(a, b) for a, b in zip(t, v, strict=True) if not math.isnan(b)]
    per_bucket = 2 if extremes_only else 4
    if len(pairs) <= buckets * per_bucket:
        return [a for a, _ in pairs], [b for _, b in pairs]
    t0, t1 = pairs[0][0], pairs[-1][0]
    scale = buckets / (t1 - t0) if t1 > t0 else 0.0
    kept: set[int] = set()
    bucket = -1
    first = lo = hi = 0
    for i, (a, b) in enumerate(pairs):
        k = min(int((a - t0) * scale), buckets - 1)
        if k != bucket:
            if bucket >= 0:
                kept.update((lo, hi) if extremes_only else (first, i - 1, lo, hi))
            bucket, first, lo, hi = k, i, i, i
            continue
        if b < pairs[lo][1]:
            lo = i
        if b > pairs[hi][1]:
            hi = i
    kept.update((lo, hi) if extremes_only else (first, len(pairs) - 1, lo, hi))
    order = sorted(kept)
    return [pairs[i][0] for i in order], [pairs[i][1] for i in order]


def bucket_points(
    rows: Sequence[Sequence[Any]], extremes_only: bool = False
) -> tuple[list[float], list[float]]:
    """Points from per-bucket rows (t_first, v_first, t_last, v_last, t_min, v_min, t_max,
    v_max) with times in microseconds, as the dataset's SQL returns them; in time order."""
    points: dict[int, float] = {}
    for row in rows:
        pairs: list[tuple[Any, Any]] = [(row[4], row[5]), (row[6], row[7])]
        if not extremes_only:
            pairs += [(row[0], row[1]), (row[2], row[3])]
        for us, value in pairs:
            if us is not None and value is not None:
                points[int(us)] = float(value)
    ordered = sorted(points)
    return [us / 1e6 for us in ordered], [points[us] for us in ordered]


def _number(x: float) -> int | float | None:
    if not math.isfinite(x):
        return None
    if x.is_integer() and abs(x) < 2**53:
        return int(x)
    return float(f"{x:.9g}")


def timeseries_result(series: Series, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-safe answer of `signal_timeseries`: times as seconds after `start`."""
    out: dict[str, Any] = {"signal": series.name, "unit": series.unit}
    if extra:
        out.update(extra)
    t0 = series.t[0] if series.t else None
    out["start"] = None if t0 is None else iso_utc(t0)
    out["end"] = None if not series.t else iso_utc(series.t[-1])
    out["t_s"] = [round(x - t0, 6) for x in series.t] if t0 is not None else []
    out["values"] = [_number(float(x)) for x in series.v]
    if series.labels:
        shown = list(series.labels.items())[:MAX_LABELS]
        out["labels"] = {str(_number(float(k))): name for k, name in shown}
    out["total"] = series.total
    out["returned"] = len(series.t)
    out["truncated"] = series.downsampled
    if series.downsampled:
        out["downsampled"] = "min_max_per_bucket"
    return out


def series_summary(series: Series) -> dict[str, Any]:
    """What a picture of `series` shows, in numbers: its span, extremes and sample count."""
    values = [float(x) for x in series.v if math.isfinite(float(x))]
    out: dict[str, Any] = {"signal": series.name, "unit": series.unit, "total": series.total}
    out["drawn"] = len(series.t)
    if values:
        out["min"], out["max"] = _number(min(values)), _number(max(values))
        out["first_value"], out["last_value"] = _number(values[0]), _number(values[-1])
    if series.t:
        out["start"], out["end"] = iso_utc(series.t[0]), iso_utc(series.t[-1])
    if series.labels and values:
        shown = {float(x) for x in values}
        out["labels_seen"] = [name for k, name in series.labels.items() if float(k) in shown][
            :MAX_LABELS
        ]
    return out
