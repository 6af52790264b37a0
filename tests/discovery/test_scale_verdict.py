"""A scale fitted from a reference: its verdict (R² over the capture) and round scales, and
signedness and states told on small synthetic fields."""

from __future__ import annotations

import numpy as np
import pytest

from hwbridge.discovery.analysis.analyse import _is_signed
from hwbridge.discovery.analysis.correlate import CONFIRMED_R2, Series, round_scales, scale_fit
from hwbridge.discovery.analysis.segment import _exclusive, bit_stats
from hwbridge.discovery.bits import bit_matrix


def _speed(seconds: float = 60.0, rate: float = 50.0) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(0, seconds, 1 / rate)
    kmh = 60 + 40 * np.sin(t / 7) + 10 * np.sin(t / 2.3)
    return t, kmh


def test_a_clean_fit_is_confirmed_and_snaps_to_the_round_scale() -> None:
    rng = np.random.default_rng(1)
    t, kmh = _speed()
    raw = np.round(kmh / 0.01)  # the field: 0.01 km/h a step
    ref_t = t[::5]
    ref = kmh[::5] + rng.normal(0, 0.05, len(ref_t))  # a reference with its own noise
    fit = scale_fit(Series(t, raw), Series(ref_t, ref))
    assert fit is not None
    assert fit.fitted_scale != 0.01 and fit.fitted_scale == pytest.approx(0.01, rel=0.01)
    assert fit.snapped and fit.scale == 0.01
    assert fit.r2 >= CONFIRMED_R2 and fit.verdict == "confirmed"


def test_a_scale_that_is_not_round_stays_fitted() -> None:
    t, kmh = _speed()
    raw = np.round(kmh / 0.01)
    ms = kmh / 3.6  # the reference in m/s: 0.0027778 m/s a step, no round number
    fit = scale_fit(Series(t, raw), Series(t, ms))
    assert fit is not None and not fit.snapped
    assert fit.scale == pytest.approx(0.01 / 3.6, rel=1e-3)
    assert fit.verdict == "confirmed"


def test_a_loose_fit_is_unconfirmed() -> None:
    rng = np.random.default_rng(2)
    t, kmh = _speed()
    raw = np.round(kmh / 0.01)
    ref = kmh + rng.normal(0, 12.0, len(t))  # moves with it, but explains little
    fit = scale_fit(Series(t, raw), Series(t, ref))
    assert fit is not None and fit.r2 < CONFIRMED_R2 and fit.verdict == "unconfirmed"


def test_round_scales_are_near_and_keep_the_sign() -> None:
    assert round_scales(0.0100002)[0] == 0.01
    assert round_scales(-0.0626)[0] == -0.0625
    assert round_scales(0.0027778) == []
    assert round_scales(0.0) == []


def test_a_state_jumping_to_its_top_value_is_not_signed() -> None:
    """0 <-> 7 ("not available") wraps like a signed value crossing zero; a few distinct
    values jumping between them are a state's."""
    rng = np.random.default_rng(3)
    state = np.repeat(rng.choice([0, 7, 3], 40), 25)
    assert not _is_signed(state[:-1], state[1:], state, 3)
    wave = np.round(20 * np.sin(np.arange(2000) / 40)).astype(np.int64) & 0x7F  # crosses 0
    assert _is_signed(wave[:-1], wave[1:], wave, 7)


def _stats(values: np.ndarray) -> object:
    data = values.astype(np.uint8)[:, None]
    return bit_stats(bit_matrix(data), np.ones(len(values), np.bool_))


def test_bits_of_a_state_that_never_shows_one_combination_are_one_field() -> None:
    rng = np.random.default_rng(4)
    state = np.repeat(rng.choice([0, 1, 2], 30), 40)  # 3 never happens
    assert _exclusive(_stats(state), [0], 1)  # type: ignore[arg-type]
    flags = np.repeat(rng.integers(0, 4, 30), 40)  # two flags of their own: all four
    assert not _exclusive(_stats(flags), [0], 1)  # type: ignore[arg-type]


def test_a_state_seen_changing_a_few_times_is_told_by_chance_per_change() -> None:
    """A state at 0, 1 and 2 about a third of the time each never shows 3: a combination
    chance would have given only a ninth of the frames, but over a dozen changes it would
    hardly have missed it. Two flags of their own changing as often show all four."""
    rng = np.random.default_rng(5)
    levels = rng.permutation(np.tile([0, 1, 2], 8))
    state = np.repeat(levels, rng.integers(20, 200, len(levels)))
    assert _exclusive(_stats(state), [0], 1)  # type: ignore[arg-type]
    low = np.repeat(rng.integers(0, 2, 24), rng.integers(20, 200, 24))
    high = np.repeat(rng.integers(0, 2, 24), rng.integers(20, 200, 24))
    n = min(len(low), len(high))
    assert not _exclusive(_stats(low[:n] + 2 * high[:n]), [0], 1)  # type: ignore[arg-type]


def _stop_and_go(seconds: float = 120.0, dt: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """A speed in km/h that stops, pulls away and brakes (accelerations limited)."""
    rng = np.random.default_rng(5)
    t = np.arange(0, seconds, dt)
    want = np.repeat(rng.uniform(0, 100, 12), len(t) // 12 + 1)[: len(t)]
    kmh = np.zeros(len(t))
    for i in range(1, len(t)):
        kmh[i] = max(0.0, kmh[i - 1] + np.clip(want[i] - kmh[i - 1], -0.11, 0.09))
    return t, kmh


@pytest.mark.parametrize("late", [0.35, 1.5, -0.6])
def test_a_lagging_reference_is_aligned_before_the_fit(late: float) -> None:
    from hwbridge.discovery.analysis.correlate import align

    rng = np.random.default_rng(4)
    t, kmh = _stop_and_go()
    field = Series(t[::2], np.round(kmh[::2] / 0.01))  # 50 Hz, 0.01 km/h a step
    ref_t = np.arange(0.13, 120.0, 0.2)  # a navigation module at 5 Hz, `late` seconds late
    at = np.clip(np.round((ref_t - late) / 0.01).astype(int), 0, len(t) - 1)
    reference = Series(ref_t, kmh[at] + rng.normal(0, 0.15, len(ref_t)))
    fit = scale_fit(field, reference)
    assert fit is not None
    assert fit.lag_s == pytest.approx(late, abs=0.03)
    assert fit.fitted_scale == pytest.approx(0.01, rel=0.005) and fit.scale == 0.01
    assert fit.verdict == "confirmed"
    aligned = align(field, reference)
    assert aligned is not None and aligned.r > 0.999 and aligned.r_changes > 0.99


def test_the_lag_is_sought_within_a_bounded_range() -> None:
    from hwbridge.discovery.analysis.correlate import MAX_LAG_S

    t, kmh = _stop_and_go()
    field = Series(t[::2], np.round(kmh[::2] / 0.01))
    at = np.clip(np.round((t - 5.0) / 0.01).astype(int), 0, len(t) - 1)
    fit = scale_fit(field, Series(t, kmh[at]))  # 5 s late: beyond the range
    assert fit is not None and abs(fit.lag_s) <= MAX_LAG_S
    assert fit.verdict == "unconfirmed"


def test_a_field_clipped_by_its_range_is_judged_off_its_plateau() -> None:
    from hwbridge.discovery.analysis.correlate import align

    t, kmh = _stop_and_go()
    raw = np.minimum(np.round(kmh / 0.5), 63)  # 6 bits of 0.5 km/h: pinned above 31.5 km/h
    field = Series(t[::2], raw[::2])
    at = np.clip(np.round((t - 0.3) / 0.01).astype(int), 0, len(t) - 1)
    reference = Series(t[::20], kmh[at][::20])
    aligned = align(field, reference)
    assert aligned is not None
    assert aligned.r > 0.95 and aligned.r_changes > 0.9  # unclipped, where it moves
    assert aligned.lag_s == pytest.approx(0.3, abs=0.05)
    fit = scale_fit(field, reference, aligned=aligned)
    assert fit is not None and fit.scale == pytest.approx(0.5, rel=0.01)
    assert fit.verdict == "unconfirmed"  # the plateau leaves most of the reference unexplained


def _frames(columns: list[tuple[np.ndarray, int, int, str]], n: int) -> np.ndarray:
    """8-byte payloads holding each (raw, lsb, length, order) column."""
    from hwbridge.discovery.bits import chain

    bits = np.zeros((n, 64), np.uint8)
    for raw, lsb, length, order in columns:
        for k, pos in enumerate(chain(lsb, length, order)):  # type: ignore[arg-type]
            bits[:, pos] = (raw >> k) & 1
    return np.packbits(bits.reshape(n, 8, 8)[:, :, ::-1], axis=2).reshape(n, 8)


@pytest.mark.parametrize("order", ["little_endian", "big_endian"])
def test_a_value_quantised_coarser_than_its_step_is_one_field(order: str) -> None:
    """A sensor reporting in steps of 5 raw units: its lowest bits carry as 5 = 0b101 makes
    them, not one by one. Every change a multiple of 5 says it is one value; a neighbour
    moving by ones beside it stays apart."""
    from hwbridge.discovery.analysis.segment import segment
    from hwbridge.discovery.bits import chain

    rng = np.random.default_rng(6)
    n = 3000
    t = np.arange(n) * 0.02
    speed = 60 + 50 * np.sin(t / 9) + 5 * np.sin(t / 1.7)  # km/h
    raw = (np.round(speed / 0.05 / 5) * 5).astype(np.int64)  # 0.01 km/h a step, 5 at a time
    level = np.repeat(rng.integers(0, 64, n // 50), 50)  # a neighbour stepping by ones
    lsb = 0 if order == "little_endian" else 8  # 12 bits across a byte edge
    data = _frames([(raw, lsb, 12, order), (level, 20, 6, "little_endian")], n)
    stats = bit_stats(bit_matrix(data), np.ones(n, np.bool_))
    fields = {s.bits for s in segment(stats, 8, np.ones(64, np.bool_))}
    assert tuple(chain(lsb, 12, order)) in fields  # type: ignore[arg-type]
    assert tuple(range(20, 26)) in fields
