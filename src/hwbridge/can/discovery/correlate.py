"""Meaning from a reference: which field moves with which known signal, and how.

Every series (a field's raw values, a reference signal's physical values, each at its own
timestamps) is put on one time grid by linear interpolation, inside its own time span only.
Pearson's r (linear), Spearman's rho (rank: any monotonic relation) and r of the changes
(so two quantities that merely both rise during a drive, a temperature and an odometer, are
not taken for one another) are computed for every pair at once with matrix products, each
pair over the grid points where both exist. A least-squares line through the same points
gives scale and offset: physical = scale * raw + offset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Correlation", "Series", "correlate", "line_fit"]

F64 = npt.NDArray[np.float64]

GRID_POINTS = 4096
MIN_OVERLAP = 16  # grid points two series must share to be compared


@dataclass(frozen=True, slots=True)
class Series:
    """Values at times (seconds, ascending)."""

    t: F64
    v: F64


@dataclass(frozen=True, slots=True)
class Correlation:
    """Every field (rows) against every reference (columns)."""

    r: F64  # Pearson
    rho: F64  # Spearman
    r_changes: F64  # Pearson of the changes over about a second
    scale: F64
    offset: F64
    overlap: npt.NDArray[np.int64]


def _grid(series: list[Series], points: int) -> F64:
    starts = [float(s.t[0]) for s in series if len(s.t)]
    ends = [float(s.t[-1]) for s in series if len(s.t)]
    if not starts:
        return np.zeros(0)
    lo, hi = min(starts), max(ends)
    if hi <= lo:
        return np.array([lo])
    return np.linspace(lo, hi, points)


def _on_grid(series: list[Series], grid: F64) -> F64:
    """(series, grid) values, NaN outside each series' own span."""
    out = np.full((len(series), len(grid)), np.nan)
    for i, s in enumerate(series):
        if len(s.t) < 2:
            continue
        inside = (grid >= s.t[0]) & (grid <= s.t[-1])
        out[i, inside] = np.interp(grid[inside], s.t, s.v)
    return out


def _ranks(values: F64) -> F64:
    """Rank of each finite value within its row (NaN stays NaN)."""
    out = np.full(values.shape, np.nan)
    for i, row in enumerate(values):
        ok = np.flatnonzero(np.isfinite(row))
        if len(ok):
            order = np.argsort(row[ok], kind="stable")
            ranks = np.empty(len(ok))
            ranks[order] = np.arange(len(ok), dtype=np.float64)
            out[i, ok] = ranks
    return out


def _pearson(x: F64, y: F64) -> tuple[F64, F64, F64, npt.NDArray[np.int64]]:
    """r, slope and intercept (y on x) of every row pair, over the points both have."""
    mx, my = np.isfinite(x).astype(np.float64), np.isfinite(y).astype(np.float64)
    # centre each row on its own mean first: sums of squares stay well conditioned
    x = x - np.nanmean(np.where(mx > 0, x, np.nan), axis=1, keepdims=True) if len(x) else x
    y = y - np.nanmean(np.where(my > 0, y, np.nan), axis=1, keepdims=True) if len(y) else y
    xz, yz = np.nan_to_num(x) * mx, np.nan_to_num(y) * my
    n = mx @ my.T
    sx, sy = xz @ my.T, mx @ yz.T
    sxx, syy = (xz * xz) @ my.T, mx @ (yz * yz).T
    sxy = xz @ yz.T
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = sxy - sx * sy / n
        vx = sxx - sx * sx / n
        vy = syy - sy * sy / n
        r = cov / np.sqrt(vx * vy)
        slope = cov / vx
        x_mean, y_mean = sx / n, sy / n
    r = np.where((n >= MIN_OVERLAP) & (vx > 0) & (vy > 0), r, np.nan)
    return r, slope, (x_mean, y_mean), n.astype(np.int64)  # type: ignore[return-value]


def correlate(
    fields: list[Series], references: list[Series], points: int = GRID_POINTS
) -> Correlation:
    """Every field against every reference (see the module's docstring)."""
    shape = (len(fields), len(references))
    if not fields or not references:
        empty = np.zeros(shape)
        return Correlation(empty, empty, empty, empty, empty, np.zeros(shape, np.int64))
    grid = _grid(fields + references, points)
    x, y = _on_grid(fields, grid), _on_grid(references, grid)
    r, slope, (x_mean, y_mean), overlap = _pearson(x, y)
    rho, _, _, _ = _pearson(_ranks(x), _ranks(y))
    span = float(grid[-1] - grid[0]) if len(grid) > 1 else 0.0
    lag = max(1, round(len(grid) * 1.0 / span)) if span > 0 else 1
    r_changes, _, _, _ = _pearson(x[:, lag:] - x[:, :-lag], y[:, lag:] - y[:, :-lag])
    # the centred means are per row; put the raw means back for the intercept
    fx = np.nanmean(x, axis=1) if x.size else np.zeros(0)
    fy = np.nanmean(y, axis=1) if y.size else np.zeros(0)
    offset = (fy[None, :] + y_mean) - slope * (fx[:, None] + x_mean)
    return Correlation(
        np.nan_to_num(r),
        np.nan_to_num(rho),
        np.nan_to_num(r_changes),
        np.nan_to_num(slope),
        np.nan_to_num(offset),
        overlap,
    )


PLATEAU = 0.01
"""Share of the points at a field's lowest or highest value that makes that end a plateau."""
MAX_LAG_S = 1.0
"""The reference may lag the field (or lead it) by up to this long: a GNSS speed is computed
from fixes and comes a few hundred milliseconds late."""
_LAG_STEP_S = 0.02


def line_fit(field: Series, reference: Series, points: int = GRID_POINTS) -> tuple[float, float]:
    """Scale and offset (reference = scale * field + offset) by least squares over the
    points both series share, with the reference moved in time by the lag (within
    MAX_LAG_S) at which the two agree best, and leaving out a plateau at either end of the
    field's values: a field pinned at the end of its range (a setpoint that saturates, a
    speed clipped by its bits) says nothing about the slope there. (nan, nan) when too few
    points remain."""
    grid = _grid([field, reference], points)
    x = _on_grid([field], grid)[0]
    best_r, y = -2.0, _on_grid([reference], grid)[0]
    for lag in np.arange(-MAX_LAG_S, MAX_LAG_S + _LAG_STEP_S / 2, _LAG_STEP_S):
        moved = _on_grid([Series(reference.t - lag, reference.v)], grid)[0]
        ok = np.isfinite(x) & np.isfinite(moved)
        if int(ok.sum()) < MIN_OVERLAP or float(np.ptp(x[ok])) == 0.0:
            continue
        if float(np.ptp(moved[ok])) == 0.0:
            continue
        r = abs(float(np.corrcoef(x[ok], moved[ok])[0, 1]))
        if r > best_r + 1e-9 or (abs(r - best_r) <= 1e-9 and abs(lag) < 1e-9):
            best_r, y = r, moved
    ok = np.isfinite(x) & np.isfinite(y)
    if int(ok.sum()) < MIN_OVERLAP:
        return float("nan"), float("nan")
    lo, hi = float(np.min(x[ok])), float(np.max(x[ok]))
    for end in (lo, hi):
        at_end = ok & (x == end)
        if int(at_end.sum()) > PLATEAU * int(ok.sum()) and int((ok & ~at_end).sum()) >= MIN_OVERLAP:
            ok &= ~at_end
    xs, ys = x[ok], y[ok]
    if float(np.ptp(xs)) == 0.0:
        return float("nan"), float("nan")
    scale, offset = np.polyfit(xs, ys, 1)
    return float(scale), float(offset)
