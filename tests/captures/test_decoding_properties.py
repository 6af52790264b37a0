"""Decoding by message over numpy arrays gives exactly cantools' values, on random databases.

Hypothesis draws messages (classic and FD lengths, Intel and Motorola signals of 1..64 bits,
signed, float, every kind of cantools conversion, labels, multiplexing) and payloads (full and
truncated); every value, label and absence must equal `Message.decode(allow_truncated=True)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from cantools.database import Database
from cantools.database.can import Message, Signal
from cantools.database.conversion import BaseConversion
from cantools.database.errors import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.can.database import CanDatabase
from hwbridge.captures.tables import MessageTables

LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64]
SCALES: list[float] = [1, 2, 3, 0.5, 0.1, 0.25, 1e-6, 0.001, 2.0, 10]
OFFSETS: list[float] = [0, -40, 100, 1.5, -1000, 0.5, 3]


def _bits(start: int, length: int, little: bool) -> set[int]:
    if little:
        return set(range(start, start + length))
    bits, pos = set(), start
    for _ in range(length):
        bits.add(pos)
        pos = pos - 1 if pos % 8 else pos + 15
    return bits


def _fits(start: int, length: int, little: bool, size: int) -> bool:
    bits = _bits(start, length, little)
    return max(bits) < size * 8 and min(bits) >= 0


@st.composite
def messages(draw: st.DrawFn) -> Message:
    size = draw(st.sampled_from(LENGTHS))
    used: set[int] = set()
    signals: list[Signal] = []
    mux: Signal | None = None
    if draw(st.booleans()) and size >= 2:
        mux = Signal("Mux", 0, 8, "little_endian", is_multiplexer=True)
        used |= set(range(8))
        signals.append(mux)
    for index in range(draw(st.integers(1, 10))):
        is_float = draw(st.integers(0, 5)) == 0
        small = st.integers(1, 16)
        length = (
            draw(st.sampled_from([32, 64]))
            if is_float
            else draw(st.one_of(small, st.integers(1, 64)))
        )
        little = draw(st.booleans())
        start = draw(st.integers(0, size * 8 - 1))
        if not _fits(start, length, little, size) or _bits(start, length, little) & used:
            continue
        used |= _bits(start, length, little)
        signed = draw(st.booleans())
        scale = draw(st.sampled_from(SCALES))
        offset = draw(st.sampled_from(OFFSETS))
        choices: Any = None
        if not is_float and length <= 16 and draw(st.booleans()):
            lo = -(1 << (length - 1)) if signed else 0
            hi = (1 << (length - 1)) - 1 if signed else (1 << length) - 1
            keys = draw(st.sets(st.integers(lo, hi), min_size=1, max_size=4))
            choices = {k: f"L{k}" for k in sorted(keys)}
        conversion = BaseConversion.factory(scale, offset, choices, is_float)
        mux_ids = None
        if mux is not None and draw(st.booleans()):
            mux_ids = sorted(draw(st.sets(st.integers(0, 5), min_size=1, max_size=3)))
        signals.append(
            Signal(
                f"S{index}",
                start,
                length,
                "little_endian" if little else "big_endian",
                is_signed=signed,
                conversion=conversion,
                multiplexer_ids=mux_ids,
                multiplexer_signal="Mux" if mux_ids else None,
            )
        )
    extended = draw(st.booleans())
    frame_id = draw(st.integers(0, 0x1FFFFFFF if extended else 0x7FF))
    return Message(
        frame_id,
        "M",
        size,
        signals,
        is_extended_frame=extended,
        is_fd=size > 8,
        strict=True,
    )


def _expected(message: Message, data: bytes) -> dict[str, Any] | None:
    try:
        values: Any = message.decode(data, decode_choices=False, allow_truncated=True)
        named: Any = message.decode(data, decode_choices=True, allow_truncated=True)
    except DecodeError:
        return None  # a multiplexer value the database does not define
    out: dict[str, Any] = dict(values)
    for name, value in named.items():
        if not isinstance(value, int | float):
            out[f"{name}_label"] = str(value)
    return out


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and want != want:  # noqa: PLR0124 - NaN
        return isinstance(got, float) and got != got  # noqa: PLR0124
    return type(got) is type(want) and got == want if want is not None else got is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages(), data=st.data())
def test_values_equal_cantools(message: Message, data: st.DataObject) -> None:
    tables = MessageTables([CanDatabase.from_cantools(Database(messages=[message]))])
    plan = tables.plans[0]
    # integer signals whose scaled range does not fit 64 bits are float64 columns
    wide = {
        p.column
        for p in plan.signals
        if str(p.out_type) == "double"
        and type(p.conversion).__name__ != "LinearConversion"
        and not p.float_bits
    }
    frames = data.draw(st.integers(1, 12), label="frames")
    payloads = []
    for _ in range(frames):
        length = data.draw(
            st.sampled_from([message.length, message.length, 0, message.length // 2])
        )
        payload = bytearray(data.draw(st.binary(min_size=length, max_size=length)))
        if payload and any(s.is_multiplexer for s in message.signals):
            payload[0] = data.draw(st.integers(0, 6))
        payloads.append(bytes(payload))
    width = max(8, *(len(p) for p in payloads))
    buf = np.zeros((frames, width), np.uint8)
    for i, p in enumerate(payloads):
        buf[i, : len(p)] = np.frombuffer(p, np.uint8)
    lengths = np.array([len(p) for p in payloads], np.uint8)
    batch = plan.decode(np.arange(frames, dtype=np.int64), buf, lengths)
    rows = batch.to_pylist()
    for sent, row in zip(payloads, rows, strict=True):
        want = _expected(message, sent)
        if want is None:
            continue
        for column, value in row.items():
            if column == "timestamp":
                continue
            wanted = want.get(column)
            if column in wide and isinstance(wanted, int):
                wanted = float(wanted)  # beyond 64-bit integers: stored as float64
            assert _same(value, wanted), (column, value, wanted, sent.hex())
        assert set(want) <= set(row)


def test_int_and_float_columns_follow_cantools_conversions() -> None:
    """Integer scaling keeps integers (as cantools returns them), other scaling gives floats."""
    signals = [
        Signal("Ints", 0, 8, conversion=BaseConversion.factory(2, -40)),
        Signal("Floats", 8, 8, conversion=BaseConversion.factory(0.5, 0)),
        Signal("Raw64", 16, 48, conversion=BaseConversion.factory(1, 0)),
    ]
    message = Message(0x10, "M", 8, signals)
    plan = MessageTables([CanDatabase.from_cantools(Database(messages=[message]))]).plans[0]
    data = np.array([[200, 3, 255, 255, 255, 255, 255, 255]], np.uint8)
    row = plan.decode(np.zeros(1, np.int64), data, np.array([8], np.uint8)).to_pylist()[0]
    assert row["Ints"] == 360 and isinstance(row["Ints"], int)
    assert row["Floats"] == 1.5
    assert row["Raw64"] == 2**48 - 1
    assert message.decode(bytes(data[0])) == {"Ints": 360, "Floats": 1.5, "Raw64": 2**48 - 1}
