"""Hypothesis strategies for CAN round trips: values within each signal's range and resolution.

Shared by the database round trips (encode -> decode) and the bus round trips (send -> monitor
-> decode): both must give back exactly the JSON values that were drawn.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from hwbridge.can.database.bits import bytes_needed
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.database.values import JsonValue, SignalSpec


def _bits(signal: Any) -> set[int]:
    if signal.byte_order == "little_endian":
        return set(range(signal.start, signal.start + signal.length))
    bits, pos = set(), signal.start
    for _ in range(signal.length):
        bits.add(pos)
        pos = pos - 1 if pos % 8 else pos + 15
    return bits


def _raw_range(spec: SignalSpec) -> tuple[int, int]:
    ends = sorted(((spec.low - spec.offset) / spec.scale, (spec.high - spec.offset) / spec.scale))
    lo = max(math.ceil(ends[0] - 1e-9), int(spec.raw_min))
    hi = min(math.floor(ends[1] + 1e-9), int(spec.raw_max))
    while lo < hi and spec.physical(lo) < spec.low:
        lo += 1
    while hi > lo and spec.physical(hi) > spec.high:
        hi -= 1
    return lo, hi


@st.composite
def value_for(draw: st.DrawFn, spec: SignalSpec) -> tuple[object, JsonValue]:
    """(what to send, what decoding must give back) for one signal."""
    if spec.is_float:
        ends = sorted(
            ((spec.low - spec.offset) / spec.scale, (spec.high - spec.offset) / spec.scale)
        )
        lo, hi = max(ends[0], spec.raw_min), min(ends[1], spec.raw_max)
        floats = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
        if spec.signal.length == 32:
            floats = floats.map(_float32).filter(lambda v: lo <= v <= hi)
        raw_float = draw(floats)
        return spec.physical(raw_float), spec.to_json(raw_float)[0]
    lo, hi = _raw_range(spec)
    raws = st.integers(lo, hi)
    if spec.choices:
        raws = st.one_of(raws, st.sampled_from(sorted(spec.choices)))
    raw = draw(raws)
    label = spec.choices.get(raw)
    if label is not None:
        sent: object = draw(st.sampled_from([label, label.upper(), spec.physical(raw)]))
        if list(spec.choices.values()).count(label) > 1:
            sent = spec.physical(raw)  # a label used twice cannot say which value
        want: dict[str, JsonValue] = {"value": spec.physical(raw), "label": label}
        if spec.physical(raw) != raw:
            want = {"value": spec.physical(raw), "raw": raw, "label": label}
        return sent, want
    return spec.physical(raw), spec.physical(raw)


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _same(spec: SignalSpec, got: JsonValue, want: JsonValue) -> bool:
    if isinstance(want, dict) or spec.int_like:
        return got == want
    assert isinstance(got, int | float) and isinstance(want, int | float)
    if spec.is_float and spec.signal.length == 32:
        if spec.scale != 1 or spec.offset != 0:
            return math.isclose(got, want, rel_tol=1e-6)
        return _float32(got) == _float32(want)
    return math.isclose(got, want, rel_tol=1e-12, abs_tol=abs(spec.scale) / 4)


@dataclass
class Drawn:
    """One message's drawn values: what to send and what decoding must give back."""

    message: Any
    sent: dict[str, object]
    want: dict[str, JsonValue]
    chosen: list[SignalSpec]

    @property
    def overlapping(self) -> bool:
        """Whether two of the signals sent share bits (real DBCs have such messages)."""
        seen: set[int] = set()
        for spec in self.chosen:
            bits = _bits(spec.signal)
            if bits & seen:
                return True
            seen |= bits
        return False

    def check(self, signals: dict[str, JsonValue]) -> None:
        """Every signal that does not overlap another decodes to the value drawn for it."""
        bits = {s.name: _bits(s.signal) for s in self.chosen}
        for spec in self.chosen:
            others = set().union(*(b for n, b in bits.items() if n != spec.name))
            if bits[spec.name] & others:
                continue  # overlapping signals in a real DBC cannot round-trip
            got = signals[spec.name]
            assert _same(spec, got, self.want[spec.name]), (
                spec.qualified,
                self.sent[spec.name],
                got,
            )


def draw_message(db: CanDatabase, data: st.DataObject, name: str | None = None) -> Drawn:
    """A message of `db` (or `name`) and values for every signal active in it."""
    messages = [m for m in db.messages if m.signals and not m.is_container]
    if name is None:
        message = data.draw(st.sampled_from(messages), label="message")
    else:
        message = db.message(name)
    specs = {s.name: s for s in db.signals(message)}
    mux_values: dict[str, int] = {}
    for spec in specs.values():  # pick every multiplexer value first
        if spec.is_multiplexer:  # also those cantools misses (`m` written for `M`)
            ids = sorted(
                i
                for s in specs.values()
                if s.multiplexer_signal == spec.name
                for i in s.multiplexer_ids
                if spec.raw_min <= i <= spec.raw_max  # some DBCs name ids the mux cannot hold
            )
            if ids:
                mux_values[spec.name] = data.draw(st.sampled_from(ids), label=spec.name)

    def active(spec: SignalSpec) -> bool:
        while spec.multiplexer_signal is not None:
            if mux_values.get(spec.multiplexer_signal) not in spec.multiplexer_ids:
                return False
            spec = specs[spec.multiplexer_signal]
        return True

    chosen = [s for s in specs.values() if active(s) and bytes_needed(s.signal) <= message.length]
    sent: dict[str, object] = {}
    want: dict[str, JsonValue] = {}
    for spec in chosen:
        if spec.name in mux_values:
            raw = mux_values[spec.name]
            sent[spec.name] = spec.physical(raw)
            want[spec.name] = spec.to_json(raw)[0]
        else:
            sent[spec.name], want[spec.name] = data.draw(value_for(spec), label=spec.name)
    return Drawn(message, sent, want, chosen)
