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

__all__ = [
    "CONFIRMED_R2",
    "Alignment",
    "Correlation",
    "ScaleFit",
    "Series",
    "align",
    "correlate",
    "effective_points",
    "line_fit",
    "round_scales",
    "scale_fit",
    "slope_interval",
]

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
    step = max(1, round(len(grid) * CHANGES_S / span)) if span > 0 else 1
    r_changes, _, _, _ = _pearson(x[:, step:] - x[:, :-step], y[:, step:] - y[:, :-step])
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
MAX_LAG_S = 2.0
"""The reference may lag the field (or lead it) by up to this long: a GNSS speed is computed
from fixes and comes a few hundred milliseconds late, more through a slow module or gateway."""
_COARSE_LAG_S = 0.1
"""The lag is sought every this long over +-MAX_LAG_S, then refined around the best ..."""
_FINE_LAG_S = 0.01
"""... every this long."""
CHANGES_S = 1.0
"""The span over which `r_changes` compares changes."""


CONFIRMED_R2 = 0.95
"""R² over the capture at or above which a fitted scale is `confirmed`."""
SMOOTH_S = 1.0
"""The slope is fitted through both series averaged over this long: a field's own noise (an
ECU's sensor, sampled 10 to 100 times a second) would otherwise flatten it (regression
dilution: a least-squares slope shrinks by the share of the field's variance that is noise,
a few percent for a noisy speed), while a speed hardly changes its shape in a second."""
SNAP_WITHIN = 0.05
"""A round scale is tried when it is within this share of the fitted one ..."""
SNAP_LOSS = 0.1
"""... and taken when it lies within the fitted slope's uncertainty (its confidence interval,
`slope_interval`, and its spread over the lags the data cannot tell apart, `_lag_spread`) and
the share of the reference it leaves unexplained (1 - R²) grows by at most this share of the
fit's own (it fits as well)."""
SNAP_Z = 2.576
"""The normal quantile of the slope's two-sided confidence interval (99%), widened to
Student's t for the effective sample size."""
SNAP_CALIBRATION = 0.01
"""Two sensors of one quantity disagree by about this share whatever the statistics say (a
wheel speed against OBD-II's or a GNSS speed: tyre size and wear, each ECU's calibration):
part of the slope's uncertainty as a database's round scale is concerned, added to the
statistical part in quadrature."""


@dataclass(frozen=True, slots=True)
class ScaleFit:
    """How a field's raw values map onto a reference signal: reference = scale * raw + offset.

    `fitted_scale` is the least-squares slope; `scale` is a round number (1, 2, 2.5 or 5
    times a power of ten, or a power of two) when one explains the reference as well, the
    fitted slope otherwise (`snapped` says which). `r2` is the share of the reference's
    variance the line explains over every point the two share (plateaus included, at the
    lag where they agree best); `verdict` is `confirmed` when it is at least CONFIRMED_R2."""

    scale: float
    offset: float
    fitted_scale: float
    fitted_offset: float
    r2: float
    snapped: bool
    lag_s: float = 0.0  # how long the reference comes after the field (negative: before)

    @property
    def verdict(self) -> str:
        return "confirmed" if self.r2 >= CONFIRMED_R2 else "unconfirmed"


def round_scales(scale: float) -> list[float]:
    """Round numbers near `scale` (same sign), nearest first: 1, 2, 2.5, 5 times powers of
    ten and powers of two, within SNAP_WITHIN."""
    if not np.isfinite(scale) or scale == 0.0:
        return []
    size = abs(scale)
    exponent = int(np.floor(np.log10(size)))
    found: set[float] = set()
    for e in (exponent - 1, exponent, exponent + 1):
        for m in (1.0, 2.0, 2.5, 5.0):
            found.add(float(f"{m * 10.0**e:.12g}"))
    two = int(np.round(np.log2(size)))
    found |= {2.0**k for k in (two - 1, two, two + 1)}
    near = [c for c in found if abs(c / size - 1) <= SNAP_WITHIN]
    near.sort(key=lambda c: abs(c / size - 1))
    return [float(np.copysign(c, scale)) for c in near]


@dataclass(frozen=True, slots=True)
class Alignment:
    """A field (`x`) and a reference (`y`) on one time grid, the reference moved back by
    `lag_s` (positive: the reference comes that long after the field), `shared` the grid
    points both have; Pearson's r, Spearman's rho and r of the changes at that lag, off the
    plateaus where the field saturates."""

    x: F64
    y: F64
    shared: npt.NDArray[np.bool_]
    lag_s: float
    r: float
    rho: float
    r_changes: float
    judged: int  # the shared points off the plateaus, which r, rho and r_changes were taken on


def _off_plateaus(x: F64, ok: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """`ok` without a plateau at either end of x's values (more than PLATEAU of the points
    at its lowest or highest value), while MIN_OVERLAP points remain."""
    ok = ok.copy()
    if not ok.any():
        return ok
    lo, hi = float(np.min(x[ok])), float(np.max(x[ok]))
    for end in (lo, hi):
        at_end = ok & (x == end)
        if int(at_end.sum()) > PLATEAU * int(ok.sum()) and int((ok & ~at_end).sum()) >= MIN_OVERLAP:
            ok &= ~at_end
    return ok


def _r(x: F64, y: F64) -> float | None:
    """Pearson's r over the points both have (None when too few or one is flat)."""
    ok = np.isfinite(x) & np.isfinite(y)
    if int(ok.sum()) < MIN_OVERLAP:
        return None
    a, b = x[ok] - x[ok].mean(), y[ok] - y[ok].mean()
    den = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
    return float(np.dot(a, b)) / den if den > 0 else None


def align(
    field: Series, reference: Series, points: int = GRID_POINTS, max_lag_s: float = MAX_LAG_S
) -> Alignment | None:
    """The lag within +-`max_lag_s` at which the reference agrees best with the field (the
    largest |r| of the two on one grid, a cross-correlation over a bounded range: every
    _COARSE_LAG_S, then every _FINE_LAG_S around the best; the smaller lag on a tie), and
    the two aligned there. A GNSS or navigation module's speed lags a wheel speed by a few
    hundred milliseconds; compared unaligned, its changes meet the field's too late, and a
    slope fitted through them is flattened. None when the two share too few points."""
    grid = _grid([field, reference], points)
    x = _on_grid([field], grid)[0]
    # judged off the plateaus where the field saturates (a speed clipped by its range says
    # nothing there), as the scale is fitted
    judged = np.where(_off_plateaus(x, np.isfinite(x)), x, np.nan)

    def moved(lag: float) -> F64:
        out: F64 = _on_grid([Series(reference.t - lag, reference.v)], grid)[0]
        return out

    scores: dict[float, float] = {}

    def score(lag: float) -> float:
        lag = round(lag, 6)
        if lag not in scores:
            r = _r(judged, moved(lag)) if abs(lag) <= max_lag_s + 1e-9 else None
            scores[lag] = -1.0 if r is None else abs(r)
        return scores[lag]

    def best(lags: F64) -> float:
        ranked = sorted((-score(float(lag)), abs(float(lag)), float(lag)) for lag in lags)
        return round(ranked[0][2], 3)

    coarse = np.arange(-max_lag_s, max_lag_s + _COARSE_LAG_S / 2, _COARSE_LAG_S)
    lag = best(np.append(coarse, 0.0))
    fine = lag + np.arange(-_COARSE_LAG_S, _COARSE_LAG_S + _FINE_LAG_S / 2, _FINE_LAG_S)
    lag = best(np.append(fine, lag))
    y = moved(lag)
    r = _r(judged, y)
    shared = np.isfinite(x) & np.isfinite(y)
    if r is None or int(shared.sum()) < MIN_OVERLAP:
        return None
    both = np.isfinite(judged) & shared
    ranks = _ranks(np.stack([np.where(both, judged, np.nan), np.where(both, y, np.nan)]))
    rho = _r(ranks[0], ranks[1])
    span = float(grid[-1] - grid[0]) if len(grid) > 1 else 0.0
    step = max(1, round(len(grid) * CHANGES_S / span)) if span > 0 else 1
    changes = _r(judged[step:] - judged[:-step], y[step:] - y[:-step]) if len(grid) > step else None
    return Alignment(x, y, shared, lag, r, rho or 0.0, changes or 0.0, int(both.sum()))


def _r2(x: F64, y: F64, scale: float, offset: float) -> float:
    total = float(np.sum((y - y.mean()) ** 2))
    if total == 0.0:
        return 0.0
    return 1.0 - float(np.sum((y - (scale * x + offset)) ** 2)) / total


def _autocorrelations(rows: F64) -> F64:
    """Each row's autocorrelation at every lag (rows centred; one FFT for all, zero-padded:
    no wrap-around)."""
    rows = rows - rows.mean(axis=1, keepdims=True)
    n = rows.shape[1]
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(rows, size, axis=1)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size, axis=1)[:, :n]
    zero = acf[:, :1]
    out: F64 = np.divide(acf, zero, out=np.zeros_like(acf), where=zero > 0)
    return out


def effective_points(x: F64, residuals: F64) -> float:
    """How many independent points the slope's evidence is worth: n / (1 + 2 sum of
    rho_x(k) rho_e(k)) over the lags k until the residuals' autocorrelation first falls to
    zero (Bartlett; Bretherton et al. 1999). The grid interpolates each series between its
    samples, so neighbouring residuals repeat one another: a reference sampled at 5 Hz on a
    grid of 4096 points is worth a few hundred points, a slow wander fewer still."""
    n = len(x)
    if n < 3:
        return float(n)
    rx, re = _autocorrelations(np.stack([x, residuals]))
    zero = np.flatnonzero(re[1:] <= 0.0)
    last = int(zero[0]) if len(zero) else n - 1  # lags 1..last are positive
    inflation = 1.0 + 2.0 * float(np.sum(rx[1 : last + 1] * re[1 : last + 1]))
    return float(min(max(n / max(inflation, 1.0), 3.0), n))


def _t_quantile(z: float, dof: float) -> float:
    """Student's t quantile for the normal quantile `z` (Cornish-Fisher, to 1/dof³)."""
    v = max(dof, 1.0)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def slope_interval(
    xs: F64,
    ys: F64,
    slope: float,
    offset: float,
    *,
    dof: float | None = None,
    z: float = SNAP_Z,
    calibration: float = SNAP_CALIBRATION,
) -> float:
    """How far from the least-squares slope the database's scale may lie: the half-width of
    the slope's confidence interval (its standard error with the residuals' variance over
    `dof` degrees of freedom, by default the effective points less two, `effective_points`,
    times Student's t for them), and the sensors' `calibration` share of the slope, added in
    quadrature."""
    residuals = ys - (slope * xs + offset)
    sxx = float(np.sum((xs - xs.mean()) ** 2))
    if sxx <= 0.0 or len(xs) < 3:
        return float("inf")
    if dof is None:
        dof = effective_points(xs, residuals) - 2.0
    dof = max(dof, 1.0)
    statistical = _t_quantile(z, dof) * float(np.sqrt(float(np.sum(residuals**2)) / (sxx * dof)))
    return float(np.hypot(statistical, calibration * slope))


def _samples(series: Series, lo: float, hi: float) -> int:
    """A series' own samples between two times: no more independent points than that."""
    return int(np.searchsorted(series.t, hi, side="right") - np.searchsorted(series.t, lo))


def _width(grid: F64) -> int:
    """Grid points in SMOOTH_S on the grid `align` put the two series on."""
    step = float(grid[1] - grid[0]) if len(grid) > 1 else 0.0
    return max(1, round(SMOOTH_S / step)) if step > 0 else 1


def _smoothed(x: F64, y: F64, ok: npt.NDArray[np.bool_], width: int) -> tuple[F64, F64] | None:
    """x and y averaged over each `width` grid points that are all `ok` (None when fewer than
    MIN_OVERLAP such windows remain or x is flat over them). Running sums of the centred
    values: one pass, however wide the window."""
    if width < 2 or len(x) < width:
        return None

    def window_sums(v: F64) -> F64:
        total = np.concatenate(([0.0], np.cumsum(v)))
        out: F64 = total[width:] - total[:-width]
        return out

    full = window_sums(ok.astype(np.float64)) > width - 0.5
    if int(full.sum()) < MIN_OVERLAP:
        return None
    cx, cy = float(np.mean(x[ok])), float(np.mean(y[ok]))
    sx = window_sums(np.where(ok, x - cx, 0.0))[full] / width + cx
    sy = window_sums(np.where(ok, y - cy, 0.0))[full] / width + cy
    return (sx, sy) if float(np.ptp(sx)) > 0.0 else None


_LAG_TRIED_S = (0.05, 0.1, 0.2, 0.3, 0.5)
"""Offsets from the best lag at which the slope is fitted again (`_lag_spread`)."""


def _lag_spread(
    reference: Series,
    *,
    grid: F64,
    lag: float,
    x: F64,
    ok: npt.NDArray[np.bool_],
    width: int,
    dof: float,
    z: float = SNAP_Z,
) -> float:
    """How far the slope moves over the lags the data cannot tell from the best one: the
    lag is found from the same data, and through a curve (a car pulling away) a lag a tenth
    of a second off tilts the slope by percents. A lag is as good when the residuals' sum of
    squares at it exceeds the best's by less than z² / `dof` of it (a likelihood-ratio
    interval for one parameter over the effective points), tried at `_LAG_TRIED_S` either
    way."""

    def fit(moved: float) -> tuple[float, float] | None:
        y = _on_grid([Series(reference.t - moved, reference.v)], grid)[0]
        both = ok & np.isfinite(y)
        sx, sy = _smoothed(x, y, both, width) or (x[both], y[both])
        if len(sx) < MIN_OVERLAP or float(np.ptp(sx)) == 0.0:
            return None
        slope, offset = (float(v) for v in np.polyfit(sx, sy, 1))
        return slope, float(np.mean((sy - (slope * sx + offset)) ** 2))

    best = fit(lag)
    if best is None:
        return 0.0
    spread = 0.0
    for step in _LAG_TRIED_S:
        for moved in (lag - step, lag + step):
            if abs(moved) > MAX_LAG_S + 1e-9 or (found := fit(moved)) is None:
                continue
            if found[1] <= best[1] * (1.0 + z * z / max(dof, 1.0)):
                spread = max(spread, abs(found[0] - best[0]))
    return spread


def scale_fit(
    field: Series,
    reference: Series,
    points: int = GRID_POINTS,
    *,
    aligned: Alignment | None = None,
) -> ScaleFit | None:
    """Scale and offset (reference = scale * field + offset) by least squares over the
    points both series share, with the reference moved in time by the lag (within
    MAX_LAG_S) at which the two agree best, and leaving out a plateau at either end of the
    field's values: a field pinned at the end of its range (a setpoint that saturates, a
    speed clipped by its bits) says nothing about the slope there; both averaged over
    SMOOTH_S. Then a round scale when the data allow it (SNAP_LOSS; its offset fitted again),
    and R² over every shared point (see `ScaleFit`). None when too few points remain."""
    if aligned is None:
        aligned = align(field, reference, points)
    if aligned is None:
        return None
    x, y, shared = aligned.x, aligned.y, aligned.shared
    ok = _off_plateaus(x, shared)
    xs, ys = x[ok], y[ok]
    if float(np.ptp(xs)) == 0.0:
        return None
    # the slope through both series smoothed alike (the line is the same); the reference's
    # share left unexplained judged on the points themselves, as R² is
    grid = _grid([field, reference], points)  # the one `align` put the two on
    width = _width(grid)
    sx, sy = _smoothed(x, y, ok, width) or (xs, ys)
    fitted, fitted_offset = (float(v) for v in np.polyfit(sx, sy, 1))
    scale, offset, snapped = fitted, fitted_offset, False
    own = 1.0 - _r2(xs, ys, fitted, fitted_offset)
    candidates = round_scales(fitted)
    within = 0.0
    if candidates:
        # independent points: no more than either series has samples there, nor than
        # one-second averages fit in it (each repeats its neighbours' samples)
        span = grid[ok]
        lo, hi, lag = float(span[0]), float(span[-1]), aligned.lag_s
        samples = min(_samples(field, lo, hi), _samples(reference, lo + lag, hi + lag))
        if len(sx) != len(xs):  # averaged
            samples = min(samples, int((hi - lo) / SMOOTH_S))
        residuals = sy - (fitted * sx + fitted_offset)
        dof = min(effective_points(sx, residuals), float(samples)) - 2.0
        lagged = _lag_spread(reference, grid=grid, lag=lag, x=x, ok=ok, width=width, dof=dof)
        statistical = slope_interval(sx, sy, fitted, fitted_offset, dof=dof)
        within = float(np.hypot(statistical, lagged))
    for candidate in candidates:
        if abs(candidate - fitted) > within:  # the data say the slope is not that
            continue
        candidate_offset = float(np.mean(ys - candidate * xs))
        loss = 1.0 - _r2(xs, ys, candidate, candidate_offset)
        if loss <= own * (1.0 + SNAP_LOSS) + 1e-6:
            scale, offset, snapped = candidate, candidate_offset, True
            break
    r2 = _r2(x[shared], y[shared], scale, offset)
    return ScaleFit(scale, offset, fitted, fitted_offset, r2, snapped, aligned.lag_s)


def line_fit(field: Series, reference: Series, points: int = GRID_POINTS) -> tuple[float, float]:
    """The scale and offset of `scale_fit` ((nan, nan) when too few points remain)."""
    fit = scale_fit(field, reference, points)
    if fit is None:
        return float("nan"), float("nan")
    return fit.scale, fit.offset
