"""The pieces that make the simulator cheap per frame do exactly what the plain way does: the
schedule sends slots in the order of a heap of (due, slot), the raw encoder makes the payload
`Message.encode` makes, a counter or checksum written in place lands on the signal's bits, the
XOR checksum folded as one number is the XOR of the bytes, and the counter and checksum a
page writes with its positions worked out are those its slots write one by one."""

from __future__ import annotations

import heapq
import random
from typing import Any

import cantools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_sim.checksums import chrysler, honda, tesla, toyota, xor_bytes
from firmware_sim.e2e import BitSlot, read_raw, write_raw
from firmware_sim.live_plan import _any_stamp, _Page, _stamper
from firmware_sim.raw_codec import RawEncoder
from firmware_sim.schedule import Schedule


def _heap_order(periods: list[float], moments: list[float]) -> list[list[int]]:
    """What a heap of (due, slot) sends at each moment: the schedule as it was first written."""
    heap = [(0.0, slot) for slot in range(len(periods))]
    base, count = [0.0] * len(periods), [0] * len(periods)
    out = []
    for now in moments:
        sent = []
        while heap and heap[0][0] <= now:
            _, slot = heapq.heappop(heap)
            sent.append(slot)
            count[slot] += 1
            following = base[slot] + count[slot] * periods[slot]
            if following <= now:
                base[slot], count[slot] = now, 1
                following = now + periods[slot]
            heapq.heappush(heap, (following, slot))
        out.append(sent)
    return out


@settings(max_examples=80, deadline=None)
@given(
    periods=st.lists(st.sampled_from([0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 0.033]), max_size=12),
    steps=st.lists(st.floats(0.0, 0.3), min_size=1, max_size=60),
)
def test_the_schedule_sends_in_the_order_of_due_time_then_slot(
    periods: list[float], steps: list[float]
) -> None:
    moments, now = [], 0.0
    for step in steps:  # late moments too: a slot that missed several periods slips
        now += step
        moments.append(now)
    schedule = Schedule(periods, 0.0)
    assert [list(schedule.due(now)) for now in moments] == _heap_order(periods, moments)


def test_an_empty_schedule_has_nothing_due() -> None:
    schedule = Schedule([], 0.0)
    assert schedule.next_due() is None and list(schedule.due(10.0)) == []


SIGNALS_DBC = """VERSION ""
BS_:
BU_: ECU
BO_ 256 M: 8 ECU
 SG_ A : 0|12@1+ (0.1,-40) [-40|369.5] "" ECU
 SG_ B : 23|10@0- (0.25,0) [-128|127.75] "" ECU
 SG_ C : 33|3@1+ (1,0) [0|7] "" ECU
 SG_ D : 36|4@1+ (1,0) [0|15] "" ECU
 SG_ E : 47|8@0+ (1,0) [0|255] "" ECU
 SG_ F : 55|16@0+ (0.01,0) [0|655.35] "" ECU
VAL_ 256 C 0 "Off" 1 "On" 2 "Auto" 7 "Error" ;
"""


@pytest.fixture(scope="module")
def message() -> Any:
    db: Any = cantools.database.load_string(SIGNALS_DBC, strict=False)
    return db.get_message_by_name("M")


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_the_raw_encoder_makes_what_message_encode_makes(message: Any, seed: int) -> None:
    rng = random.Random(seed)
    values: dict[str, Any] = {}
    for signal in message.signals:
        raw = rng.randrange(1 << signal.length)
        if signal.is_signed and raw >= 1 << (signal.length - 1):
            raw -= 1 << signal.length
        values[signal.name] = raw * signal.scale + signal.offset
    values["C"] = rng.choice(["Off", "On", "Auto", "Error", 3])
    encoder = RawEncoder(message)
    assert RawEncoder.handles(message)
    expected = message.encode(values, padding=False, strict=False)
    assert encoder.encode(encoder.raws(values)) == expected


def test_the_raw_encoder_refuses_what_message_encode_refuses(message: Any) -> None:
    encoder = RawEncoder(message)
    with pytest.raises(KeyError):
        encoder.raw("C", "Sideways")


@settings(max_examples=200, deadline=None)
@given(
    start=st.integers(0, 63),
    length=st.integers(1, 16),
    big_endian=st.booleans(),
    raw=st.integers(-(1 << 16), 1 << 16),
    payload=st.binary(min_size=8, max_size=8),
)
def test_a_slot_writes_the_bits_write_raw_writes(
    start: int, length: int, big_endian: bool, raw: int, payload: bytes
) -> None:
    from cantools.database.can import Signal

    signal = Signal(
        "S", start=start, length=length, byte_order="big_endian" if big_endian else "little_endian"
    )
    slot = BitSlot(signal)
    expected, written = bytearray(payload), bytearray(payload)
    write_raw(expected, signal, raw)
    slot.write(written, raw)
    assert written == expected
    assert slot.read(written) == read_raw(bytes(expected), signal)


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=70))
def test_the_folded_xor_is_the_xor_of_every_byte(payload: bytes) -> None:
    expected = 0
    for byte in payload:
        expected ^= byte
    assert xor_bytes(0x123, payload, 0) == expected
    assert xor_bytes(0x123, bytearray(payload), 0) == expected


def _field(start: int, length: int, big_endian: bool) -> Any:
    from cantools.database.can import Signal

    if big_endian:
        return Signal("S", start=start, length=length, byte_order="big_endian")
    return Signal("S", start=start, length=length, byte_order="little_endian")


@settings(max_examples=300, deadline=None)
@given(
    size=st.sampled_from([8, 8, 8, 4, 12, 64]),
    counters=st.lists(
        st.tuples(st.integers(0, 63), st.integers(1, 8), st.booleans(), st.integers(0, 3)),
        max_size=2,
    ),
    checksum=st.none()
    | st.tuples(
        st.integers(0, 63),
        st.sampled_from([8, 8, 4]),
        st.booleans(),
        st.sampled_from([xor_bytes, toyota, tesla, chrysler, honda]),
        st.integers(0, 3),
    ),
    payload=st.binary(min_size=64, max_size=64),
    sequences=st.lists(st.integers(0, 10**6), min_size=1, max_size=5),
)
def test_a_page_stamps_what_its_slots_write_one_by_one(
    size: int,
    counters: list[tuple[int, int, bool, int]],
    checksum: tuple[int, int, bool, Any, int] | None,
    payload: bytes,
    sequences: list[int],
) -> None:
    page = _Page()
    for start, length, big_endian, first in counters:
        count = max(1, (1 << length) - first)
        page.counters.append((BitSlot(_field(start, length, big_endian)), first, count))
    if checksum is not None:
        start, length, big_endian, function, first = checksum
        count = max(1, (1 << length) - first * 7)
        slot = BitSlot(_field(start, length, big_endian))
        page.checksum = (slot, function, start, first, count)
    if not page.counters and page.checksum is None:
        return
    fast, plain = _stamper(page, 0x2A5, size), _any_stamp(page, 0x2A5)
    if fast is None:
        return  # a shape only `_any_stamp` writes
    for sequence in sequences:
        expected, written = bytearray(payload[:size]), bytearray(payload[:size])
        plain(expected, sequence)
        fast(written, sequence)
        assert written == expected


@settings(max_examples=200, deadline=None)
@given(
    cycle=st.floats(6.0, 15.0),
    length=st.floats(1.0, 4.0),
    first=st.floats(0.5, 8.0),
    dwell=st.floats(1.5, 4.0),
    shift=st.floats(0.0, 4.0),
    times=st.lists(st.floats(0.0, 10_000.0), min_size=1, max_size=20),
)
def test_a_steady_motion_at_a_time_is_its_value_and_until_when_it_stays(
    cycle: float, length: float, first: float, dwell: float, shift: float, times: list[float]
) -> None:
    from types import SimpleNamespace

    from firmware_sim.motion import _Constant, _Enumerate, _Toggle, steady_at, steady_until

    motions: list[Any] = [
        _Toggle(1.0, 0.0, cycle, length, first),
        _Enumerate(["Off", "On", "Auto"], dwell, shift),
        _Constant(3.5),
    ]
    for motion in motions:
        at, until = steady_at(motion), steady_until(motion)
        assert at is not None and until is not None
        for t in times:
            assert at(t) == (motion(SimpleNamespace(time_s=t)), until(t))


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    signals=st.lists(
        st.tuples(
            st.integers(1, 52),  # length
            st.booleans(),  # signed
            st.sampled_from([1.0, 0.1, 0.01, 0.25, 0.5, 2.0, 0.0625, 1e-3, 3.0, -0.5, 0.03125]),
            st.sampled_from([0.0, -40.0, 100.0, -0.5, 1e6, -273.15]),
            st.none() | st.floats(-1e4, 1e4),  # minimum
            st.none() | st.floats(-1e4, 1e4),  # maximum
        ),
        min_size=1,
        max_size=12,
    ),
    times=st.lists(st.floats(0.0, 50_000.0), min_size=1, max_size=8),
)
def test_a_walk_bank_gives_every_walk_and_raw_as_the_walk_fit_and_conversion_give_them(
    seed: int,
    signals: list[tuple[int, bool, float, float, float | None, float | None]],
    times: list[float],
) -> None:
    from cantools.database.can import Signal
    from cantools.database.conversion import BaseConversion

    from firmware_sim.live_plan import _Fit
    from firmware_sim.motion import Walk, _walk
    from firmware_sim.walk_bank import WalkBank

    rng = random.Random(seed)
    bank = WalkBank()
    walks = []
    for k, (length, signed, scale, offset, minimum, maximum) in enumerate(signals):
        choices: Any = {0: "Zero"} if k % 3 == 2 else None  # one label: a walk, a named one
        conversion = BaseConversion.factory(scale=scale, offset=offset, choices=choices)
        signal = Signal(
            f"S{k}", start=0, length=length, is_signed=signed, conversion=conversion,
            minimum=minimum, maximum=maximum,
        )  # fmt: skip
        walk, fit = _walk(signal, rng), _Fit(signal)
        assert isinstance(walk, Walk)
        to_raw = conversion.numeric_scaled_to_raw
        banked = bank.add(
            walk, lo=fit.lo, hi=fit.hi, scale=fit.scale, offset=fit.offset,
            raw_lo=fit.raw_lo, raw_hi=fit.raw_hi, is_float=fit.is_float, to_raw=to_raw,
        )  # fmt: skip
        assert banked is not None and banked[1]  # every one of these: its raw too
        walks.append((banked[0], walk, fit, to_raw))
    for t in times:
        values, raws = bank.at(t)
        for index, walk, fit, to_raw in walks:
            expected = fit.fit(walk.value_at(t))
            physical = values[index]
            assert isinstance(physical, float)
            found = int(physical) if physical.is_integer() else physical  # as LivePlan takes it
            assert (type(found), repr(found)) == (type(expected), repr(expected))
            assert isinstance(expected, int | float)
            raw = to_raw(expected)
            assert (type(raws[index]), raws[index]) == (type(raw), raw)


@settings(max_examples=150, deadline=None)
@given(
    counter_byte=st.integers(0, 7),
    counter_bit=st.integers(0, 4),
    counter_length=st.integers(2, 4),
    checksum_byte=st.integers(0, 7),
    checksum_range=st.sampled_from([(0, 255), (0, 255), (0, 200), (3, 255), (16, 31)]),
    bodies=st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=4),
    sequences=st.lists(st.integers(0, 10**6), min_size=1, max_size=6),
)
def test_a_counter_and_xor_checksum_apart_stamp_as_written_byte_by_byte(
    counter_byte: int,
    counter_bit: int,
    counter_length: int,
    checksum_byte: int,
    checksum_range: tuple[int, int],
    bodies: list[bytes],
    sequences: list[int],
) -> None:
    """Between refreshes a plan writes the XOR checksum as the XOR of its payload without the
    counter and checksum, worked out once a payload, and the counter's bits: the very bytes
    its slots write one by one."""
    from types import SimpleNamespace

    from firmware_sim.live_plan import LivePlan

    if checksum_byte == counter_byte:
        return
    dbc = (
        'VERSION ""\nBS_:\nBU_: ECU\nBO_ 256 M: 8 ECU\n'
        f" SG_ MSG_COUNTER : {counter_byte * 8 + counter_bit}|{counter_length}@1+ (1,0) "
        f'[0|{(1 << counter_length) - 1}] "" ECU\n'
        f" SG_ MSG_CHECKSUM : {checksum_byte * 8}|8@1+ (1,0) "
        f'[{checksum_range[0]}|{checksum_range[1]}] "" ECU\n'
    )
    database = cantools.database.load_string(dbc, strict=False)
    assert isinstance(database, cantools.database.can.Database)
    message = database.get_message_by_name("M")
    plan = LivePlan(message, 0.01)
    assert plan._xor is not None and plan.restamp == plan._restamp_xor
    stamp = _any_stamp(plan._only_page, plan._frame_id)
    for body in bodies:
        plan._only = SimpleNamespace(body=bytearray(body))  # type: ignore[assignment]
        for sequence in sequences:
            plan._sent = sequence
            plan._restamp_xor()
            expected = bytearray(body)
            stamp(expected, sequence)
            assert plan._buffer == expected
