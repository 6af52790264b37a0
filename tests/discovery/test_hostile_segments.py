"""The segmentation passes on hostile payloads and at the edges of what they read: work
bounded per payload (counted, not timed), numbers of 63 bits read without wrapping int64,
and the other byte order of a field always one chain."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.segment import _code_length, _other_order
from hwbridge.discovery.bits import ByteOrder, cantools_chain, chain, next_up
from tests.discovery.frames import frameset

ORDERS: tuple[ByteOrder, ...] = ("little_endian", "big_endian")


def _reference_code_length(raw: list[int], width: int) -> float:
    """_code_length's sum in Python integers (no int64 to wrap), first differences only."""
    span, half = 1 << width, 1 << (width - 1)
    total = 0.0
    for a, b in itertools.pairwise(raw):
        d = (b - a + half) % span - half
        total += math.log2(1 + abs(d)) + (d != 0)
    return total


def test_a_63_bit_value_is_written_down_without_wrapping_int64() -> None:
    """A 64-bit field is read as 63 bits and one (no wider number is read): its changes are
    taken modulo 2**63, a range int64 cannot hold (1 << 63 wraps to its most negative);
    the lengths are still those Python's integers give, at the edges of the range too."""
    top = (1 << 63) - 1
    raw = [0, top, 5, 1 << 62, (1 << 62) - 1, top - 3, 0]
    got = _code_length(np.array(raw, np.int64), 63, np.arange(len(raw) - 1, dtype=np.intp)[::2])
    pairs = [raw[i : i + 2] for i in range(0, len(raw) - 1, 2)]
    want = sum(_reference_code_length(p, 63) for p in pairs)
    assert got == want
    for width in (1, 8, 31, 62, 63):
        rng = np.random.default_rng(width)
        values = [int(v) for v in rng.integers(0, 1 << width, 50, dtype=np.uint64)]
        got = _code_length(np.array(values, np.int64), width, np.arange(49, dtype=np.intp)[::2])
        want = sum(_reference_code_length(values[i : i + 2], width) for i in range(0, 49, 2))
        assert math.isclose(got, want, rel_tol=1e-12), width


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 8 * 64 - 1),
    st.integers(1, 63),
    st.sampled_from(ORDERS),
)
def test_the_other_order_is_every_bit_once_in_one_chain(
    lsb: int, length: int, order: ByteOrder
) -> None:
    """Whatever field (a chain in one order), its reading in the other order is None or holds
    every bit of it exactly once, each the next bit up of the one before in that order; and
    when the bits make a chain of the other order, it is found."""
    bits = chain(lsb, length, order)
    if min(bits) < 0 or max(bits) >= 8 * 64:
        return
    other: ByteOrder = "big_endian" if order == "little_endian" else "little_endian"
    got = _other_order(bits, order)
    exists = [
        c
        for start in bits
        if set(c := chain(start, length, other)) == set(bits) and len(set(c)) == length
    ]
    if got is None:
        assert not exists
        return
    assert sorted(got) == sorted(bits)
    assert all(next_up(a, other) == b for a, b in itertools.pairwise(got))
    assert got in exists


ROWS = 2000  # the work counted below does not grow with the rows


def _straddling(rng: np.random.Generator, rising: bool = False) -> np.ndarray:
    """64-byte payloads of single quiet flags, with a two-bit state across every byte edge
    (bits 7-8, 15-16, ...): 449 pieces, each continuing the one below it, little endian,
    from bit 0 to bit 511 (nothing stops a run of pieces). `rising`: every flag goes on
    once and stays on, so that no piece ever falls, as a clock's top never does."""
    if rising:
        on = rng.integers(0, ROWS, 512)
        bits = (np.arange(ROWS)[:, None] >= on[None, :]).astype(np.uint8)
    else:
        bits = (np.cumsum(rng.random((ROWS, 512)) < 0.01, axis=0) % 2).astype(np.uint8)
    for edge in range(7, 511, 8):
        state = np.cumsum(rng.random(ROWS) < 0.02) % 4
        bits[:, edge], bits[:, edge + 1] = state & 1, state >> 1
    packed: np.ndarray = np.packbits(bits, axis=1, bitorder="little")
    return packed


class _TooMuch(Exception):
    pass


def _counting(monkeypatch: Any, module: Any, name: str, limit: int) -> dict[str, int]:
    """Count the calls of `module.name` (the real function still runs); past `limit` the
    call raises, so that unbounded work fails at once instead of running for minutes."""
    real = getattr(module, name)
    seen = {"calls": 0}

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen["calls"] += 1
        if seen["calls"] > limit:
            raise _TooMuch(f"{name} called more than {limit} times")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return seen


@pytest.mark.parametrize("rising", [False, True])
def test_clocks_are_looked_for_in_bounded_work(monkeypatch: Any, rising: bool) -> None:
    """From each of 449 pieces a run of pieces goes up to the frame's top: every run up to
    63 bits was read as a number, each run found again by going through every piece at
    every step (24,160 numbers read and 30 million steps for 16,384 frames: 190 s). Now a
    run stops at 63 bits, is found by the bottom bit of the next piece, is read only where
    its top piece never falls, and at most CLOCK_BUDGET runs are judged."""
    from hwbridge.discovery.analysis import analyse as module
    from hwbridge.discovery.analysis.analyse import CLOCK_BUDGET, analyse

    data = _straddling(np.random.default_rng(3), rising=rising)
    read = _counting(monkeypatch, module, "values", 4 * 512)
    steps = _counting(monkeypatch, module, "_continues", 512 * 2 * 80)
    judged = _counting(monkeypatch, module, "_clock", 2 * CLOCK_BUDGET)
    fields = analyse(frameset(data, 0.01))
    assert read["calls"] <= 4 * 512 and steps["calls"] <= 512 * 2 * 80
    assert judged["calls"] <= 2 * CLOCK_BUDGET
    # nothing in them is a clock: every moving bit is still in a field of its own
    assert sum(f.length for f in fields) == 512


def test_joins_by_code_length_are_judged_in_bounded_work(monkeypatch: Any) -> None:
    """64 bytes, each a value walking through 0, 85, 170 and 255 and now and then one off:
    the pieces of every byte join by code length, and each pair judged takes up to 41 code
    lengths over all the frames (11,922 of them here; 6.7 s of 16,384 frames). At most
    CODE_BUDGET are reckoned for the joins, and a few more for the byte orders."""
    from hwbridge.discovery.analysis import segment as module
    from hwbridge.discovery.analysis.analyse import analyse
    from hwbridge.discovery.analysis.segment import CODE_BUDGET

    rng = np.random.default_rng(5)
    steps = rng.choice([-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], (ROWS, 64))
    walk = np.abs((np.cumsum(steps, axis=0) % 6) - 3) * 85
    data = np.clip(walk + (rng.random((ROWS, 64)) < 0.002), 0, 255).astype(np.uint8)
    reckoned = _counting(monkeypatch, module, "_code_length", CODE_BUDGET + 2 * 512)
    fields = analyse(frameset(data, 0.01))
    assert reckoned["calls"] <= CODE_BUDGET + 2 * 512
    assert sorted(b for f in fields for b in f.bits) == list(range(512))


@pytest.mark.parametrize("step", [3, 5])
@pytest.mark.parametrize("order", ORDERS)
def test_two_quantised_values_side_by_side_stay_two(step: int, order: ByteOrder) -> None:
    """Two bytes, each a sensor moving by multiples of `step`, and a third moving by ones:
    joined, the first two also move only by multiples of `step` (the upper one's moves are
    multiples of 256 * step), and were read as one 16-bit value; each part is quantised on
    its own, which the parts of one value split in two are not."""
    from hwbridge.discovery.analysis.analyse import analyse
    from tests.discovery.frames import Layout, encode, walk

    rng = np.random.default_rng(step)
    n = 3000
    layout = [Layout(name, 8 * k, 8, order) for k, name in enumerate("abc")]
    raws = {
        "a": walk(rng, n, 0, 255 // step, 0.3) * step,
        "b": walk(rng, n, 0, 255 // step, 0.3) * step,
        "c": walk(rng, n, 0, 255, 2.0),
    }
    fields = analyse(frameset(encode(layout, raws)))
    found = {f.bits for f in fields if f.kind != "constant"}
    want = {tuple(cantools_chain(x.start, x.length, order)) for x in layout}
    assert found == want
