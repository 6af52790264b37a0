"""The downsampling behind every picture and series: each bucket keeps its extremes, numpy and
plain Python agree, a series that fits comes back whole."""

from __future__ import annotations

import math
import random

import pytest

from hwbridge.plot import Series, bucket_points, downsample, panels, timeseries_result
from hwbridge.plot.series import _downsample_python

np = pytest.importorskip("numpy")


def test_every_bucket_keeps_its_minimum_and_maximum() -> None:
    rng = random.Random(3)
    t = [i * 0.001 for i in range(50_000)]
    v = [rng.gauss(0, 1) for _ in t]
    v[12_345] = 50.0  # a spike shorter than a pixel
    v[40_000] = -50.0
    kept_t, kept_v = downsample(t, v, 100)
    assert len(kept_t) <= 400 and kept_t == sorted(kept_t)
    assert 50.0 in kept_v and -50.0 in kept_v
    span = t[-1] - t[0]
    for k in range(100):  # per bucket, the kept extremes are the bucket's extremes
        inside = [x for x, ts in zip(v, t, strict=True) if min(int(ts / span * 100), 99) == k]
        kept = [
            x for x, ts in zip(kept_v, kept_t, strict=True) if min(int(ts / span * 100), 99) == k
        ]
        assert max(kept) == max(inside) and min(kept) == min(inside)


@pytest.mark.parametrize("extremes_only", [False, True])
def test_numpy_and_plain_python_agree(extremes_only: bool) -> None:
    rng = random.Random(5)
    t = sorted(rng.uniform(0, 100) for _ in range(20_000))
    v = [rng.choice([rng.gauss(0, 1), 1.0, float("nan")]) for _ in t]
    fast = downsample(np.array(t), np.array(v), 73, extremes_only=extremes_only)
    plain = _downsample_python(t, v, 73, extremes_only)
    assert fast == plain
    assert not any(math.isnan(x) for x in fast[1])


def test_a_series_that_fits_comes_back_whole() -> None:
    t, v = [1.0, 2.0, 3.0], [5.0, 6.0, 4.0]
    assert downsample(t, v, 10) == (t, v)
    assert _downsample_python(t, v, 10, False) == (t, v)
    with pytest.raises(ValueError, match="buckets"):
        downsample(t, v, 0)


def test_bucket_rows_become_points_in_time_order() -> None:
    rows = [(10, 1.0, 40, 2.0, 20, 0.5, 30, 3.0), (50, 1.0, 50, 1.0, 50, 1.0, 50, 1.0)]
    t, v = bucket_points(rows)
    assert t == [1e-5, 2e-5, 3e-5, 4e-5, 5e-5] and v == [1.0, 0.5, 3.0, 2.0, 1.0]
    t, v = bucket_points(rows, extremes_only=True)
    assert v == [0.5, 3.0, 1.0]


def test_result_is_bounded_and_says_what_was_cut() -> None:
    s = Series("M.S", "rpm", [1e9, 1e9 + 0.5], [1.0, 2.5], total=1000, labels={1.0: "On"})
    out = timeseries_result(s)
    assert out["total"] == 1000 and out["returned"] == 2 and out["truncated"] is True
    assert out["t_s"] == [0.0, 0.5] and out["values"] == [1, 2.5]
    assert out["start"] == "2001-09-09T01:46:40Z" and out["labels"] == {"1": "On"}


def test_panels_one_per_unit_and_one_per_labelled_signal() -> None:
    a = Series("A.x", "rpm", [], [], 0)
    b = Series("B.y", "km/h", [], [], 0)
    c = Series("C.z", "rpm", [], [], 0)
    g = Series("D.g", None, [], [], 0, {0.0: "P"})
    assert [[s.name for s in p] for p in panels([a, b, c, g])] == [
        ["A.x", "C.z"],
        ["B.y"],
        ["D.g"],
    ]
