"""Fields from how bits flip: boundaries, byte order, sign, counters, clocks, constants.

Payloads are encoded by cantools from a layout the test chooses; the fields discovery finds
must be exactly that layout's moving bits, in the layout's byte order.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.analyse import analyse
from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.analysis.survey import analyse_frames, build_report
from hwbridge.discovery.bits import cantools_chain
from tests.discovery.frames import Layout, counter, encode, frameset, load_dbc_text, walk

N = 2000


def chain(layout: Layout) -> tuple[int, ...]:
    return cantools_chain(layout.start, layout.length, layout.order)  # type: ignore[arg-type]


def by_bits(fields: list[Field]) -> dict[tuple[int, ...], Field]:
    return {f.bits: f for f in fields}


def test_a_frame_of_mixed_fields_is_split_exactly() -> None:
    rng = np.random.default_rng(1)
    speed = Layout("speed", 8, 16)  # little endian across bytes 1-2
    angle = Layout("angle", 39, 12, "big_endian", signed=True)  # Motorola across bytes 4-5
    count = Layout("count", 48, 4)
    flag = Layout("flag", 0, 1)
    data = encode(
        [flag, speed, angle, count, Layout("crc", 56, 8)],
        {
            "flag": (np.arange(N) // 150) % 2,
            "speed": walk(rng, N, 0, 60000, 400),
            "angle": walk(rng, N, -1500, 1500, 40, start=0),
            "count": counter(N, 4),
        },
    )
    data[:, 7] = np.bitwise_xor.reduce(data[:, :7], axis=1)  # an XOR checksum
    fields = by_bits(analyse(frameset(data)))
    assert fields[chain(speed)].kind == "value"
    assert fields[chain(speed)].byte_order == "little_endian"
    assert fields[chain(angle)].byte_order == "big_endian"
    assert fields[chain(angle)].signed
    assert fields[chain(count)].kind == "counter"
    assert fields[chain(flag)].kind == "flag"
    crc = fields[tuple(range(56, 64))]
    assert crc.kind == "checksum" and crc.algorithm == "xor"
    moving = {b for f in fields.values() if f.kind != "constant" for b in f.bits}
    assert moving == {0, *chain(speed), *chain(angle), *chain(count), *range(56, 64)}


def test_sign_is_told_from_wrap_arounds() -> None:
    rng = np.random.default_rng(2)
    signed = Layout("s", 0, 12, signed=True)
    unsigned = Layout("u", 16, 12)
    data = encode(
        [signed, unsigned],
        {"s": walk(rng, N, -800, 800, 15, start=0), "u": walk(rng, N, 1200, 2900, 15)},
    )
    fields = by_bits(analyse(frameset(data)))
    assert fields[chain(signed)].signed
    assert not fields[chain(unsigned)].signed  # it crosses mid-range, never zero


def test_bits_that_never_moved_are_not_invented() -> None:
    """A 16-bit value that stayed below 1024: only its 10 moving bits are a field; the bits
    above it are constant (the 6 of the value and the rest of the frame), and the report
    says they may be its own."""
    rng = np.random.default_rng(3)
    data = encode([Layout("v", 0, 16)], {"v": walk(rng, N, 0, 1023, 20)})
    found, _ = analyse_frames({(0x123, False): frameset(data)}, Reference(()))
    report = build_report(found, Reference(()))
    signals = report.messages[0].signals
    value = next(s for s in signals if s.kind == "value")
    assert (value.start_bit, value.length) == (0, 10)
    assert any(s.kind == "constant" and s.start_bit == 10 for s in signals)
    note = next(n for n in report.notes if n.signal == value.name)
    assert "54 bit(s) above" in note.text and "never changed" in note.text


def test_a_two_bit_counter_beside_a_value_stays_a_counter() -> None:
    """GM's layout: a 2-bit Motorola counter whose next bit up is a value's lowest."""
    rng = np.random.default_rng(4)
    cnt = Layout("cnt", 23, 2, "big_endian")
    value = Layout("cmd", 5, 14, "big_endian", signed=True)
    data = encode(
        [value, cnt], {"cnt": counter(N, 2), "cmd": walk(rng, N, -3000, 3000, 60, start=0)}
    )
    fields = by_bits(analyse(frameset(data)))
    assert fields[chain(cnt)].kind == "counter"
    assert fields[chain(value)].kind == "value"


def test_a_millisecond_clock_sent_every_second_is_one_field() -> None:
    """A GNSS epoch in ms: +1000 a frame (+-1 of jitter), so its bits above 2**3 flip on
    nearly every frame; it rises in a straight line with time, so it is one field."""
    rng = np.random.default_rng(5)
    steps = 1000 + rng.integers(-1, 2, 200)
    epoch = 57_348_058_999 + np.cumsum(steps)
    data = encode([Layout("epoch", 8, 40)], {"epoch": epoch}, length=6)
    t_seen = epoch[-1] ^ epoch[0]
    top = int(t_seen).bit_length()
    fields = by_bits(analyse(frameset(data, period_s=1.0)))
    clock = [f for f in fields.values() if f.kind != "constant"]
    assert len(clock) == 1
    assert clock[0].bits == tuple(range(8, 8 + top)) and clock[0].kind == "value"


def test_a_frame_that_never_changes_is_only_constants() -> None:
    data = np.tile(np.array([1, 2, 3, 4, 5, 6, 7, 8], np.uint8), (50, 1))
    fields = analyse(frameset(data))
    assert {f.kind for f in fields} == {"constant"}
    assert sorted(b for f in fields for b in f.bits) == list(range(64))


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[Layout], int]:
    """Non-overlapping fields of random places, lengths and orders in a 2-16 byte frame."""
    length = draw(st.sampled_from([2, 4, 8, 12, 16]))
    free = set(range(length * 8))
    out: list[Layout] = []
    for i in range(draw(st.integers(1, 6))):
        order = draw(st.sampled_from(["little_endian", "big_endian"]))
        size = draw(st.integers(1, 20))
        start = draw(st.integers(0, length * 8 - 1))
        bits = set(cantools_chain(start, size, order))  # type: ignore[arg-type]
        if min(bits) < 0 or max(bits) >= length * 8 or not bits <= free:
            continue
        free -= bits
        out.append(Layout(f"s{i}", start, size, order, draw(st.booleans())))
    return out, length


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(), st.integers(0, 2**32 - 1))
def test_the_draft_dbc_always_loads_strictly(drawn: tuple[list[Layout], int], seed: int) -> None:
    """Whatever the frames, the draft is a DBC plain cantools loads with strict=True (no
    overlapping signals, none outside its frame), and every bit that moved is in exactly one
    of its fields."""
    layout, length = drawn
    rng = np.random.default_rng(seed)
    n = 400
    raws = {}
    for x in layout:
        lo, hi = (
            (-(1 << (x.length - 1)), (1 << (x.length - 1)) - 1)
            if x.signed
            else (0, (1 << x.length) - 1)
        )
        kind = rng.integers(0, 4)
        if kind == 0 and x.length <= 8:
            raws[x.name] = counter(n, x.length)
            if x.signed:
                raws[x.name] = np.where(
                    raws[x.name] > hi, raws[x.name] - (1 << x.length), raws[x.name]
                )
        elif kind == 1:
            raws[x.name] = rng.integers(lo, hi + 1, n)
        else:
            raws[x.name] = walk(rng, n, lo, hi, max(1.0, (hi - lo) / 50))
    data = (
        encode(layout, raws or {"_": np.zeros(n, np.int64)}, length=length)
        if layout
        else np.zeros((n, length), np.uint8)
    )
    key = (0x18FEF100, True)
    found, _ = analyse_frames({key: frameset(data, key=key)}, Reference(()))
    report = build_report(found, Reference(()))
    db = load_dbc_text(report.to_dbc())
    message = db.get_message_by_frame_id(0x18FEF100)
    assert message.is_extended_frame and message.length == length
    seen: list[int] = []
    for s in message.signals:
        seen += cantools_chain(s.start, s.length, s.byte_order)
    assert len(seen) == len(set(seen))  # no bit in two fields
    moved = np.flatnonzero(
        np.unpackbits(data[1:] ^ data[:-1], axis=1, bitorder="little").any(axis=0)
    )
    assert set(moved.tolist()) <= set(seen)
    assert sorted(s.name for s in report.messages[0].signals) == sorted(
        s.name for s in message.signals
    )  # the names in the report are the draft's


def test_a_wide_counter_in_a_short_capture_is_one_counter() -> None:
    """An 8-bit counter of a message sent twice a second: 240 frames, so it never goes round
    twice; it still steps +1 on every frame and shows a new value on nearly each, all 8 bits
    of it. A 4-bit counter under a state that changes now and then stays 4 bits."""
    rng = np.random.default_rng(6)
    wide = Layout("cnt", 0, 8)
    state = Layout("state", 12, 4)
    low = Layout("cnt4", 8, 4)
    n = 240
    raws = {
        "cnt": (np.arange(n) + 37) % 256,
        "cnt4": np.arange(n) % 16,
        "state": np.repeat(rng.choice([3, 9, 12], 6), n // 6),
    }
    fields = by_bits(analyse(frameset(encode([wide, low, state], raws), period_s=0.5)))
    assert fields[chain(wide)].kind == "counter"
    assert fields[chain(low)].kind == "counter"
    assert not any(f.kind == "counter" and set(f.bits) & set(chain(state)) for f in fields.values())


def test_a_value_s_top_bit_set_in_one_spell_is_not_a_state_with_the_flag_above() -> None:
    """A 9-bit value reaches 256 and more in one spell of a few seconds (its top bit set
    and cleared a dozen times there) while a flag above it, on for a third of the capture,
    happens to be off. Counted per entry the top bit never meeting the flag looks like a
    state's missing combination; but its dozen entries are one spell, and shifted in time
    against the flag's run it would miss it most of the time: two fields."""
    rng = np.random.default_rng(12)
    n = 1500
    value = Layout("value", 16, 9)
    raws = {
        "value": walk(rng, n, 0, 511, 511 / 40),
        "flag": np.cumsum(np.isin(np.arange(n), rng.choice(n, 3, replace=False))) % 2,
    }
    assert not np.any((raws["value"] >= 256) & (raws["flag"] == 1))
    fields = by_bits(analyse(frameset(encode([value, Layout("flag", 25, 1)], raws, length=5))))
    assert fields[(25,)].kind == "flag"
    assert fields[chain(value)].kind == "value"


def test_a_top_bit_that_flips_twice_in_a_slow_message_stays_with_its_value() -> None:
    """A 9-bit value of a message sent once a second, between 290 and 450, drops below 256
    for one frame (two flips of its top bit, each with a jump of a hundred steps or more,
    too large to read as a carry bit by bit): written down as one value it jumps once there
    and back, apart its top bit would cost two moves more. The top bit stays with the value
    on every one of ten such captures; a flag right above it stays a flag."""
    value = Layout("accel", 3, 9)
    flag = Layout("flag", 12, 1)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        n = 120
        x = np.clip(np.round(370 + np.cumsum(rng.normal(0, 6, n))), 290, 450)
        x[60] = 220 + seed
        raws = {"accel": x.astype(np.int64), "flag": np.repeat([0, 1, 0], [30, 40, 50])}
        fields = analyse(frameset(encode([value, flag], raws, length=3), period_s=1.0))
        holding = next(f for f in fields if 11 in f.bits)
        assert 10 in holding.bits and holding.kind == "value", seed
        assert any(f.bits == chain(flag) and f.kind == "flag" for f in fields), seed


def test_a_flag_of_its_own_above_a_value_is_hardly_ever_joined_to_it() -> None:
    """A value using its whole range (its top bit flipping now and then) with a flag right
    above it that toggles at moments of its own, over 128 captures of every width, order
    and pace: two fields, but where chance lines the flag's few toggles up with the value's
    wraps (at most two captures in a hundred and twenty-eight)."""
    joined = []
    for width in (3, 5, 8, 12):
        for order in ("little_endian", "big_endian"):
            for toggles in (3, 9):
                for seed in range(8):
                    rng = np.random.default_rng(1000 * width + 10 * toggles + seed)
                    n = 1500
                    value = Layout("value", 16 if order == "little_endian" else 23, width, order)
                    bits = chain(value)
                    above = (
                        bits[-1] + 1
                        if bits[-1] % 8 != 7 or order == "little_endian"
                        else bits[-1] - 15
                    )
                    flips = np.isin(np.arange(n), rng.choice(n, toggles, replace=False))
                    raws = {
                        "value": walk(rng, n, 0, (1 << width) - 1, max(1.0, (1 << width) / 40)),
                        "flag": np.cumsum(flips) % 2,
                    }
                    fields = analyse(
                        frameset(encode([value, Layout("flag", above, 1)], raws, length=5))
                    )
                    if not any(f.bits == (above,) and f.kind == "flag" for f in fields):
                        joined.append((width, order, toggles, seed))
    assert len(joined) <= 2, joined


def test_a_field_read_in_the_wrong_byte_order_is_turned_round() -> None:
    """A signed 16-bit little-endian steering angle that carries between its bytes as
    readily in either order (large moves, each held over ten frames by a slower sensor)
    may be linked big-endian first; read that way its value jumps by 256 each time its
    low byte wraps, which costs more to write down than the value read little-endian, so
    the field is turned round. Read the right way, it is left as it is."""
    from hwbridge.discovery.analysis.segment import Segment, _cheaper_orders, bit_stats
    from hwbridge.discovery.bits import bit_matrix

    rng = np.random.default_rng(7)
    samples = np.cumsum(rng.normal(0, 120, 300))
    angle = np.repeat(np.round(samples - samples.mean()), 10).astype(np.int64)
    layout = Layout("angle", 0, 16, "little_endian", signed=True)
    fs = frameset(encode([layout], {"angle": angle}))
    stats = bit_stats(bit_matrix(fs.data), fs.cont)
    little = Segment(tuple(range(16)), "little_endian")
    big = Segment((*range(8, 16), *range(8)), "big_endian")
    assert _cheaper_orders(stats, [big]) == [little]
    assert _cheaper_orders(stats, [little]) == [little]
