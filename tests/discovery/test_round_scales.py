"""A fitted scale snaps to a round one only when the data allow it: the round scale lies
within the slope's uncertainty (a confidence interval over the grid's effective points, and
the sensors' calibration) and fits as well. A noisy reference no longer lets a scale 1.5 to 4%
off a round number (0.2857 m/s a step, 1.0285 km/h) be taken for the round one, and a noisy
field no longer flattens the slope.

The properties are statistical (a 99% interval), so hypothesis draws its examples
deterministically: the same drives every run, none of them luck."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from benchmarks.drives import Drive
from benchmarks.drives_obd import with_obd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.correlate import Series, scale_fit
from hwbridge.discovery.api import discover

F64 = npt.NDArray[np.float64]
ROUND = [0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 0.0625, 0.03125]
"""Round scales with no other round number within 5% (1, 2, 2.5, 5 times powers of ten and
powers of two: 2^-10 = 0.000977 would sit 2.4% from 0.001)."""
STATISTICAL = settings(max_examples=25, deadline=None, derandomize=True)


def _stop_and_go(seed: int, seconds: float = 120.0, dt: float = 0.02) -> tuple[F64, F64]:
    """A town drive in km/h: stops, pulls away, brakes (accelerations limited)."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, dt)
    want = np.repeat(rng.uniform(0, 90, 10), len(t) // 10 + 1)[: len(t)]
    kmh = np.zeros(len(t))
    for i in range(1, len(t)):
        kmh[i] = max(0.0, kmh[i - 1] + np.clip(want[i] - kmh[i - 1], -0.18, 0.12))
    return t, kmh


def _fit(scale: float, seed: int, noise: float, lag: float) -> object:
    """A field of `scale` km/h a step at 50 Hz against a 10 Hz reference with `noise` km/h of
    its own, `lag` seconds late."""
    rng = np.random.default_rng(seed + 1)
    t, kmh = _stop_and_go(seed)
    field = Series(t, np.round(kmh / scale))
    ref_t = np.arange(0.05, t[-1], 0.1)
    at = np.clip(np.round((ref_t - lag) / 0.02).astype(int), 0, len(t) - 1)
    reference = Series(ref_t, kmh[at] + rng.normal(0, noise, len(ref_t)))
    fit = scale_fit(field, reference)
    assert fit is not None
    return fit


@STATISTICAL
@given(
    scale=st.sampled_from(ROUND),
    seed=st.integers(0, 10_000),
    noise=st.floats(0.3, 3.0),
    lag=st.floats(-0.5, 0.5),
)
def test_a_true_round_scale_under_noise_still_snaps(
    scale: float, seed: int, noise: float, lag: float
) -> None:
    fit = _fit(scale, seed, noise, lag)
    assert fit.snapped and fit.scale == scale  # type: ignore[attr-defined]


@STATISTICAL
@given(
    scale=st.sampled_from(ROUND),
    off=st.floats(0.015, 0.04),
    sign=st.sampled_from([-1.0, 1.0]),
    seed=st.integers(0, 10_000),
    noise=st.floats(0.3, 3.0),
    lag=st.floats(-0.5, 0.5),
)
@example(scale=1.0, off=0.0285, sign=1.0, seed=7, noise=3.0, lag=0.0)  # 0.2857 m/s a step
def test_a_scale_a_few_percent_off_a_round_one_is_not_snapped(
    scale: float, off: float, sign: float, seed: int, noise: float, lag: float
) -> None:
    true = scale * (1 + sign * off)
    fit = _fit(true, seed, noise, lag)
    assert not fit.snapped  # type: ignore[attr-defined]
    assert fit.scale == pytest.approx(true, rel=0.02)  # type: ignore[attr-defined]


@STATISTICAL
@given(seed=st.integers(0, 10_000), steps=st.floats(1.0, 3.0))
def test_a_noisy_field_does_not_flatten_the_slope(seed: int, steps: float) -> None:
    """A sensor's own noise, sampled at 50 Hz: the slope of a least-squares line through
    the points shrinks by the share of the field's variance it makes (7% here); through both
    series averaged over a second it does not."""
    rng = np.random.default_rng(seed + 2)
    scale = 1.02852  # km/h a step: 0.2857 m/s
    t = np.arange(0.0, 120.0, 0.02)
    kmh = 35 + 15 * np.sin(t / 9.0 + seed) + 3 * np.sin(t / 2.3)
    field = Series(t, np.round(kmh / scale + rng.normal(0, steps, len(t))))
    ref_t = np.arange(0.05, t[-1], 0.2)
    reference = Series(ref_t, np.round(np.interp(ref_t, t, kmh)))  # OBD-II: whole km/h
    fit = scale_fit(field, reference)
    assert fit is not None and not fit.snapped
    assert fit.scale == pytest.approx(scale, rel=0.01)


# -- a drive, through discover(reference="obd") ---------------------------------------------

SPEED_ID = 0x300


def _car(
    per_step: float, *, steps: float, seed: int, swing: float = 15.0, seconds: float = 90.0
) -> Drive:
    """A bare car whose 0x300 carries the speed (35 km/h, `swing` either way) at `per_step`
    km/h a step with `steps` steps of a sensor's noise, above 512 (as a radar's relative
    speed is), every 20 ms."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.02)
    speed = np.maximum(35 + swing * np.sin(t / 9.0) + 0.2 * swing * np.sin(t / 2.3), 0)
    raw = np.round(512 + speed / per_step + rng.normal(0, steps, len(t))).astype(np.int64)
    data = np.zeros((len(t), 8), np.uint8)
    data[:, 0], data[:, 1] = raw & 0xFF, raw >> 8
    data[:, 2] = np.arange(len(t)) % 256
    return Drive(
        name="round-scales",
        t=t,
        ids=np.full(len(t), SPEED_ID, np.int64),
        extended=np.zeros(len(t), np.bool_),
        length=np.full(len(t), 8, np.int64),
        data=data,
        truth=[],
        motion={"t": t, "speed_kmh": speed, "rpm": np.maximum(800.0, speed * 40)},
    )


@pytest.mark.parametrize(
    ("per_step", "steps", "snapped"),
    [
        (1.02852, 2.0, False),  # 0.2857 m/s a step, noisy: it was taken for 1 km/h (2.9% off)
        (1.02852, 0.0, False),
        (0.5, 1.0, True),
    ],
)
def test_the_speed_of_a_drive_scaled_by_obd(
    per_step: float, steps: float, snapped: bool, tmp_path: Path
) -> None:
    drive = with_obd(_car(per_step, steps=steps, seed=3), seed=3)
    report = discover(drive.write(tmp_path / "drive.blf"), reference="obd")
    speed = next(m for m in report.messages if m.id == SPEED_ID).signals[0]
    assert speed.start_bit == 0 and speed.reference is not None
    assert speed.reference.signal == "SPEED" and speed.unit == "km/h"
    assert abs(speed.scale / per_step - 1) <= 0.02  # the database's scale, within 2%
    if snapped:
        assert speed.scale == per_step
    else:
        assert speed.scale == speed.reference.fitted_scale  # the fit, not a round number
