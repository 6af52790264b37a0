"""Quiet fields (states and flags that change a few times in a capture): which neighbouring
bits are one field, on small generated cases of the failure classes held-out drives showed.

Payloads are encoded by cantools from a layout the test chooses (tests/discovery/frames.py).
"""

from __future__ import annotations

import numpy as np

from hwbridge.discovery.analysis.analyse import analyse
from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.bits import cantools_chain
from tests.discovery.frames import Layout, encode, frameset, walk


def chain(layout: Layout) -> tuple[int, ...]:
    return cantools_chain(layout.start, layout.length, layout.order)  # type: ignore[arg-type]


def moving(fields: list[Field]) -> set[tuple[int, ...]]:
    return {f.bits for f in fields if f.kind != "constant"}


def held(levels: list[int], frames: list[int]) -> np.ndarray:
    """`levels[k]` held for `frames[k]` frames."""
    return np.repeat(np.array(levels, np.int64), frames)


def test_a_lever_state_seen_changing_a_few_times_is_one_field() -> None:
    """A turn lever (0 off, 1 left, 2 right) moved seven times in two minutes: never 3, and
    once straight from left to right (both bits on one frame). Two flags of their own would
    hardly flip on the same frame; the lever's other neighbours change just as rarely."""
    lever = Layout("lever", 4, 2)
    wiper = Layout("wiper", 8, 2)
    door = Layout("door", 16, 1)
    n = 6000
    raws = {
        "lever": held([0, 1, 0, 2, 0, 1, 2, 0], [900, 300, 1200, 400, 1100, 250, 350, 1500]),
        "wiper": held([0, 1, 0, 2], [1500, 1500, 1500, 1500]),
        "door": held([0, 1, 0], [2000, 300, 3700]),
    }
    data = encode([lever, wiper, door], raws)
    assert len(data) == n
    found = moving(analyse(frameset(data)))
    assert chain(lever) in found
    assert chain(door) in found


def test_two_flags_copying_one_event_with_their_own_lags_stay_two_flags() -> None:
    """Two door contacts read by two ECUs: they open and close with the same door, one a
    frame behind the other now and then. The bits of one field are written at once and
    never pass through a combination for a frame, so these are two flags."""
    left = Layout("left", 22, 1)
    right = Layout("right", 23, 1)
    n = 3000
    opened = np.zeros(n, np.int64)
    for a, b in ((300, 700), (1500, 1900), (2500, 2800)):
        opened[a:b] = 1
    late = np.roll(opened, 1)  # one frame behind
    late[0] = 0
    raws = {"left": opened, "right": np.where(np.arange(n) < 1400, opened, late)}
    data = encode([left, right], raws)
    found = moving(analyse(frameset(data)))
    assert found == {chain(left), chain(right)}


def test_a_three_bit_state_whose_top_bit_moves_with_its_lower_ones_is_one_field() -> None:
    """A state at 0, 1 and 6 (0b000, 0b001, 0b110) seen changing six times: its top bit
    only ever flips with the bits below it, and with 0b00 below it is never set."""
    state = Layout("state", 3, 3)
    raws = {"state": held([0, 1, 0, 6, 1, 6, 0], [700, 400, 900, 300, 800, 500, 1400])}
    found = moving(analyse(frameset(encode([state], raws))))
    assert found == {chain(state)}


def test_a_quantised_value_saturating_at_an_end_that_is_no_multiple_is_one_field() -> None:
    """A torque quantised by 4 whose DBC range ends at 65531 (0b...11111011): its two lowest
    bits are set only while it sits at that end, and it gets there with steps too large
    to look like carries, while the bits above flip on most changes."""
    rng = np.random.default_rng(13)
    x = walk(rng, 6000, 30000, 80000, 400.0, start=50000)
    level = np.minimum(4 * np.round(x / 4), 65531).astype(np.int64)
    value = Layout("value", 8, 16)
    found = moving(analyse(frameset(encode([value], {"value": level}, length=4))))
    assert int(np.count_nonzero(np.diff(level & 3))) >= 4
    assert found == {chain(value)}


def test_a_rare_flag_below_a_value_that_steps_with_it_stays_a_flag() -> None:
    """A flag right below a value quantised by 2, changing on the very frames the value's
    ECU refreshes it (every tenth), is set whatever the value is: it stays a flag."""
    rng = np.random.default_rng(12)
    n = 6000
    x = np.repeat(walk(rng, n // 10, 40, 160, 8.0, start=120), 10)
    level = np.minimum(2 * np.round(x / 2), 127).astype(np.int64)
    value = Layout("value", 9, 7)
    flag = Layout("flag", 8, 1)
    raws = {"value": level, "flag": held([0, 1, 0, 1, 0], [1000, 900, 1500, 1100, 1500])}
    found = moving(analyse(frameset(encode([flag, value], raws, length=4))))
    assert found == {chain(flag), chain(value)}


def test_a_noisy_value_whose_top_bit_is_rarely_reached_keeps_it() -> None:
    """A value of 0..10 that jumps by a few steps every frame (a noisy sensor) sets its
    top bit (8 and up) on about one frame in fifty. Its jumps carry into that bit on only
    part of its flips, but on far more of them than a flag of its own would show; the flag
    above it stays a flag."""
    rng = np.random.default_rng(22)
    n = 6000
    level = np.clip(np.round(3.3 + 1.8 * rng.normal(size=n)), 0, 10).astype(np.int64)
    value = Layout("value", 2, 4)
    flag = Layout("flag", 6, 1)
    raws = {"value": level, "flag": held([0, 1, 0], [2000, 1500, 2500])}
    found = moving(analyse(frameset(encode([value, flag], raws, length=2))))
    assert int(np.count_nonzero(np.diff(level >= 8))) < n // 20
    assert found == {chain(value), chain(flag)}


def test_a_bit_toggling_on_every_frame_is_not_the_bottom_of_its_neighbours() -> None:
    """A keep-alive bit toggling on every frame (bit 7 of byte 5) sits where a Motorola
    value in byte 4 would continue, and below a state: every flip of theirs comes with one
    of its own, which two bits alone always read as a small move. Only a count carries
    one way; these do not, and the toggle stays a bit of its own."""
    rng = np.random.default_rng(31)
    n = 6000
    alive = Layout("alive", 47, 1)
    pedal = Layout("pedal", 32, 8)
    state = Layout("state", 48, 2)
    raws = {
        "alive": np.arange(n) % 2,
        "pedal": walk(rng, n, 0, 200, 1.5),
        "state": held([0, 1, 2, 1, 0, 2, 0], [900, 700, 800, 1000, 600, 1200, 800]),
    }
    found = moving(analyse(frameset(encode([alive, pedal, state], raws))))
    assert found == {chain(alive), chain(pedal), chain(state)}


def test_a_wide_counter_of_a_message_sent_once_a_second_is_one_counter() -> None:
    """Two minutes of a message sent once a second: a 6-bit counter goes round about
    twice and an 8-bit one not even once. The counter's top bits flip a handful of times
    (half as often as the bit below, give or take one), and it shows every value it
    could have in that time; a state beside it stays apart."""
    for bits, frames in ((6, 120), (8, 240)):
        count = Layout("count", 8, bits)
        state = Layout("state", 20, 2)
        start = 5
        raws = {
            "count": (start + np.arange(frames)) % (1 << bits),
            "state": held([0, 1, 2, 0, 2], [20, 30, 25, 20, frames - 95]),
        }
        fields = analyse(frameset(encode([count, state], raws), period_s=1.0))
        counters = [f.bits for f in fields if f.kind == "counter"]
        assert counters == [chain(count)], (bits, counters)
        assert chain(state) in moving(fields)


def test_a_state_whose_lowest_bit_moves_only_with_its_top_one_is_one_field() -> None:
    """A state at 4, 1 and 2 (0b100, 0b001, 0b010): its lowest bit only ever flips with
    its top one, never with the bit right above it, so fields grown upwards bit by bit
    cut it off; the two pieces flipped together and take three values between them. A
    flag beside a state (bits 12 and 13-14) shows with several of its values and stays
    apart."""
    state = Layout("state", 3, 3)
    flag = Layout("flag", 12, 1)
    other = Layout("other", 13, 2)
    raws = {
        "state": held([4, 1, 4, 2, 4, 1, 4], [700, 400, 900, 300, 800, 500, 1400]),
        "flag": held([0, 1, 0, 1, 0], [1000, 1300, 1200, 800, 700]),
        "other": held([0, 1, 2, 0, 2, 1], [800, 900, 700, 1000, 900, 700]),
    }
    found = moving(analyse(frameset(encode([state, flag, other], raws))))
    assert found == {chain(state), chain(flag), chain(other)}
