"""`WalkBank`: the walks of many signals (`firmware_sim.motion.Walk`), brought onto their
signals' resolution all at once.

Most signals of a database walk; the messages sent at the same moments (one period) bring
theirs up to date at the same moments too. Asked for one moment, a bank computes every walk
it holds in a few numpy operations instead of a few dozen Python operations each, and keeps
the answer for the other messages asking for the same moment.

The values are exactly those of `Walk.value_at` followed by `LivePlan`'s fit (clamped into
the signal's range, rounded to its resolution; tests/sim/test_frame_pieces.py): numpy's
`+ - * /`, comparisons and `rint` are IEEE operations, the very ones Python's floats do (each
a separate operation, nothing fused); the sines are `math.sin`'s, one by one; the three waves
are summed as `sum` sums them. A signal the bank cannot keep exact (a float signal, a raw
beyond 2**52, a scale of zero) is not taken (`add` says None) and goes the plain way.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Final

import numpy as np
from cantools.database.conversion import (
    IdentityConversion,
    LinearConversion,
    LinearIntegerConversion,
)

from firmware_sim.motion import Walk

__all__ = ["WalkBank"]

_EXACT_RAW: Final = 2**52  # every raw below is a double, exactly
# Python 3.11's sum of floats adds them from 0.0, one after the other; later versions
# compensate the rounding: there the bank sums each signal's three waves with `sum` itself
_PLAIN_SUM: Final = sys.version_info < (3, 12)


class WalkBank:
    """Walks and the fits of their signals; `at(t)` is every fitted value at time `t`."""

    def __init__(self) -> None:
        self._walks: list[Walk] = []
        self._fits: list[tuple[float, ...]] = []
        self._arrays: dict[str, np.ndarray] | None = None
        self._time: float | None = None
        self._values: list[float] = []
        self._raws: list[int] = []

    def __len__(self) -> int:
        return len(self._walks)

    def add(
        self,
        walk: Walk,
        *,
        lo: float,
        hi: float,
        scale: float,
        offset: float,
        raw_lo: int,
        raw_hi: int,
        is_float: bool,
        to_raw: Callable[[float], int | float] | None = None,
    ) -> tuple[int, bool] | None:
        """Hold `walk` of a signal with this range (`lo`, `hi`), resolution (`scale`,
        `offset`) and raws: (its index in `at`'s answers, whether the bank gives its raw as
        `to_raw`, its cantools conversion's method, gives it), or None if it is not taken."""
        if is_float or not scale or max(abs(raw_lo), abs(raw_hi)) >= _EXACT_RAW:
            return None
        if not all(math.isfinite(x) for x in (lo, hi, scale, offset, walk.center, walk.half)):
            return None
        conversion = _linear(to_raw)
        self._walks.append(walk)
        self._fits.append((lo, hi, scale, offset, raw_lo, raw_hi, *(conversion or (1.0, 0.0))))
        self._arrays, self._time = None, None
        return len(self._walks) - 1, conversion is not None

    def at(self, t: float) -> tuple[list[float], list[int]]:
        """Every walk's value at `t` on its signal's range and resolution, in the order they
        were added (a float: what the fit makes an int is an integral float here), and its
        raw (`add` says for which)."""
        if t == self._time:
            return self._values, self._raws
        arrays = self._arrays if self._arrays is not None else self._build()
        # the three waves of every walk, wave by wave: one array of three rows
        phases = np.add(np.divide(_TWO_PI * t, arrays["period"]), arrays["phase"])
        sines = np.fromiter(map(math.sin, phases.tolist()), float, len(phases))
        waves = np.multiply(arrays["weight"], sines).reshape(3, -1)
        if _PLAIN_SUM:
            mix = np.add(np.add(np.add(0.0, waves[0]), waves[1]), waves[2])
        else:
            triples = zip(*waves.tolist(), strict=True)
            mix = np.fromiter(map(sum, triples), float, waves.shape[1])
        stretched = np.maximum(
            -1.0, np.minimum(1.0, np.divide(np.multiply(1.6, mix), arrays["total"]))
        )
        value = np.add(arrays["center"], np.multiply(arrays["half"], stretched))
        physical = _fitted(value, arrays)
        # what the cantools conversions make of them: round((value - offset) / scale)
        raws = np.rint(np.divide(np.subtract(physical, arrays["c_offset"]), arrays["c_scale"]))
        self._values, self._raws = physical.tolist(), raws.astype(np.int64).tolist()
        self._time = t
        return self._values, self._raws

    def build(self) -> None:
        """Lay the walks out as arrays now (once every walk is added), not at the first `at`."""
        if self._arrays is None:
            self._build()

    def _build(self) -> dict[str, np.ndarray]:
        columns: dict[str, list[float]] = {name: [] for name in _COLUMNS}
        waves: list[list[tuple[float, float, float]]] = [[], [], []]
        for walk, fit in zip(self._walks, self._fits, strict=True):
            for row, wave in zip(waves, walk.waves, strict=True):
                row.append(wave)
            for name, x in zip(_COLUMNS, (walk.total, walk.center, walk.half, *fit), strict=True):
                columns[name].append(float(x))
        arrays = {name: np.array(values, dtype=np.float64) for name, values in columns.items()}
        for k, name in enumerate(("period", "phase", "weight")):
            arrays[name] = np.array([w[k] for row in waves for w in row], dtype=np.float64)
        self._arrays = arrays
        return arrays


_TWO_PI: Final = 2 * math.pi
_COLUMNS: Final = (
    "total", "center", "half", "lo", "hi", "scale", "offset", "raw_lo", "raw_hi",
    "c_scale", "c_offset",
)  # fmt: skip


def _linear(to_raw: Callable[[float], int | float] | None) -> tuple[float, float] | None:
    """(scale, offset) of a cantools conversion whose `numeric_scaled_to_raw` is
    `round((value - offset) / scale)` of a value on its resolution, or None for any other.

    LinearConversion divides so (not a float signal); LinearIntegerConversion divides a
    whole multiple exactly (its value is an integer, offset and scale too, all below 2**52:
    the floats are those numbers); IdentityConversion rounds the value, scale 1, offset 0. A
    signal with choices answers with its conversion's own method (NamedSignalConversion
    hands it over)."""
    owner = getattr(to_raw, "__self__", None)
    if owner is None or getattr(owner, "is_float", True):
        return None
    kind = type(owner)
    if kind is IdentityConversion:
        return 1.0, 0.0
    if kind in (LinearConversion, LinearIntegerConversion):
        scale, offset = float(owner.scale), float(owner.offset)
        exact = all(float(x).is_integer() and abs(x) < _EXACT_RAW for x in (scale, offset))
        if kind is LinearConversion or exact:
            return (scale, offset) if scale and math.isfinite(scale + offset) else None
    return None


def _fitted(value: np.ndarray, a: dict[str, np.ndarray]) -> np.ndarray:
    """`LivePlan`'s fit of finite values, for many signals at once: into the range, onto the
    resolution (raw rounded half to even as `round` does, kept within the raw bounds), a
    step back in when the rounding stepped outside the range."""
    lo, hi, scale, offset = a["lo"], a["hi"], a["scale"], a["offset"]
    value = np.where(value < lo, lo, np.where(value > hi, hi, value))
    raw = np.rint(np.divide(np.subtract(value, offset), scale))
    raw = np.minimum(np.maximum(raw, a["raw_lo"]), a["raw_hi"])
    physical = np.add(np.multiply(raw, scale), offset)
    below, above = physical < lo, physical > hi
    if below.any() or above.any():
        raw = np.where(below, raw + 1.0, np.where(above, raw - 1.0, raw))
        physical = np.where(below | above, np.add(np.multiply(raw, scale), offset), physical)
    result: np.ndarray = physical
    return result
