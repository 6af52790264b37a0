"""Multiplexed messages: the multiplexer is found, each page's signals are found over that
page's frames, the draft writes them as cantools multiplexed signals that load strictly,
and counters, correlated values and states are never taken for a multiplexer.

Frames are encoded by cantools from multiplexed messages the tests define; the drives of
`benchmarks/drives_mux.py` (opendbc messages, with their truth) when ../shared is there.
"""

from __future__ import annotations

import json
from pathlib import Path

import cantools
import numpy as np
import pytest
from cantools.database.can import Message, Signal
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.multiplex import analyse_layouts, page_pairs
from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.analysis.survey import analyse_frames, build_report
from hwbridge.discovery.bits import cantools_chain
from hwbridge.discovery.report.models import DiscoveryReport, FieldReport
from tests.discovery.frames import counter, frameset, load_dbc_text, walk
from tests.shared_data import DATA, needs_shared

N = 3000


def _mux_message() -> Message:
    """A frame whose 2-bit multiplexer (bits 0-1) selects three layouts; a counter and a
    flag are in every frame."""
    signals = [
        Signal("Page", 0, 2, is_multiplexer=True),
        Signal("Temp", 8, 8, multiplexer_ids=[0], multiplexer_signal="Page"),
        Signal("Pressure", 16, 12, multiplexer_ids=[0], multiplexer_signal="Page"),
        Signal("Level", 8, 10, multiplexer_ids=[1], multiplexer_signal="Page"),
        Signal("Mode", 24, 3, multiplexer_ids=[1], multiplexer_signal="Page"),
        Signal("Voltage", 8, 16, multiplexer_ids=[2], multiplexer_signal="Page"),
        Signal("Heater", 4, 1),
        Signal("Count", 56, 4),
    ]
    return Message(0x321, "Paged", 8, signals, strict=True)


def _sweep(rng: np.random.Generator, lo: int, hi: int, period: float) -> np.ndarray:
    """From `lo` to `hi` and back, `period` frames a sweep, with a little noise: every bit
    of a field as wide as `hi` moves."""
    x = lo + (hi - lo) * (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N) / period))
    out: np.ndarray = np.clip(np.round(x + rng.normal(0, 1.0, N)), lo, hi).astype(np.int64)
    return out


def _mux_frames(order: str = "turn", seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    message = _mux_message()
    pages = np.arange(N) % 3 if order == "turn" else rng.integers(0, 3, N)
    temp, pressure = _sweep(rng, 0, 255, 1400), _sweep(rng, 0, 4095, 1700)
    level, voltage = _sweep(rng, 0, 1023, 2600), _sweep(rng, 0, 65535, 2000)
    mode = (np.arange(N) // 400) % 5
    heater = (np.arange(N) // 700) % 2
    count = counter(N, 4)
    out = np.zeros((N, 8), np.uint8)
    for i in range(N):
        page = int(pages[i])
        values = {"Page": page, "Heater": int(heater[i]), "Count": int(count[i])}
        if page == 0:
            values |= {"Temp": int(temp[i]), "Pressure": int(pressure[i])}
        elif page == 1:
            values |= {"Level": int(level[i]), "Mode": int(mode[i])}
        else:
            values |= {"Voltage": int(voltage[i])}
        out[i] = np.frombuffer(message.encode(values, scaling=False, strict=False), np.uint8)
    return out


def _by_name(report: DiscoveryReport) -> dict[str, FieldReport]:
    return {s.name: s for m in report.messages for s in m.signals}


def _report(data: np.ndarray) -> DiscoveryReport:
    fs = frameset(data, key=(0x321, False))
    found, _ = analyse_frames({fs.key: fs}, Reference(()))
    return build_report(found, Reference(()), frames=len(fs))


@pytest.mark.parametrize("order", ["turn", "random"])
def test_the_multiplexer_and_each_pages_signals_are_found(order: str) -> None:
    fields = analyse_layouts(frameset(_mux_frames(order), key=(0x321, False)))
    selector = [f for f in fields if f.is_multiplexer]
    assert len(selector) == 1 and selector[0].bits == (0, 1)
    paged = {(f.bits, f.multiplexer_ids) for f in fields if f.kind != "constant"}
    for name, page in (("Temp", 0), ("Pressure", 0), ("Level", 1), ("Voltage", 2)):
        signal = _mux_message().get_signal_by_name(name)
        bits = cantools_chain(signal.start, signal.length, "little_endian")
        assert (bits, (page,)) in paged, name
    whole = {f.bits: f for f in fields if f.multiplexer_ids is None}
    assert whole[(56, 57, 58, 59)].kind == "counter"  # in every frame, not in a page
    assert whole[(4,)].kind == "flag"


def test_the_report_and_the_draft_say_multiplexed_and_load_strictly() -> None:
    report = _report(_mux_frames())
    doc = json.loads(report.to_json())
    signals = doc["messages"][0]["signals"]
    assert [s["name"] for s in signals if s["is_multiplexer"]] == ["MUX_321_0"]
    paged = [s for s in signals if s["multiplexer_ids"] is not None]
    assert {v for s in paged for v in s["multiplexer_ids"]} == {0, 1, 2}
    assert all(s["name"].endswith(f"_m{s['multiplexer_ids'][0]}") for s in paged)
    db = load_dbc_text(report.to_dbc())
    message = db.get_message_by_frame_id(0x321)
    assert message.is_multiplexed()
    mux = message.get_signal_by_name("MUX_321_0")
    assert mux.is_multiplexer
    temp = next(s for s in message.signals if s.start == 8 and s.multiplexer_ids == [0])
    assert temp.multiplexer_signal == "MUX_321_0"
    # the draft reads the frames: a page-2 frame decodes its own signals, not page 0's
    frame = bytes(_mux_frames()[2])
    decoded = message.decode_simple(frame, decode_choices=False)
    assert decoded["MUX_321_0"] == 2
    assert not any(name.endswith("_m0") for name in decoded)
    text = report.to_dbc()
    assert " M : " in text and " m0 : " in text and " m2 : " in text


def test_old_reports_without_the_new_keys_still_read() -> None:
    old = {
        "name": "SIG_1A0_7",
        "start_bit": 7,
        "length": 16,
        "byte_order": "big_endian",
        "signed": False,
        "kind": "value",
    }
    field = FieldReport.model_validate(old)
    assert not field.is_float and not field.is_multiplexer and field.multiplexer_ids is None


def test_a_counter_is_not_a_multiplexer() -> None:
    """A counter, its checksum and slowly moving values: frames of one counter value are
    far apart, so grouping by it explains nothing."""
    rng = np.random.default_rng(3)
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = counter(N, 4)
    speed = walk(rng, N, 0, 30000, 60)
    data[:, 1], data[:, 2] = speed & 0xFF, speed >> 8
    data[:, 3] = walk(rng, N, 0, 255, 0.5)
    data[:, 7] = np.bitwise_xor.reduce(data[:, :7], axis=1)
    fields = analyse_layouts(frameset(data))
    assert not any(f.is_multiplexer or f.multiplexer_ids for f in fields)


def test_a_counter_and_a_checksum_alone_are_not_a_multiplexer() -> None:
    """Only a counter moves: a checksum of an unknown kind follows it value for value, but
    in one byte, which a layout does not make."""
    rng = np.random.default_rng(4)
    table = rng.integers(0, 256, 16)
    data = np.zeros((N, 8), np.uint8)
    data[:, 1] = counter(N, 4)
    data[:, 7] = table[data[:, 1]]
    fields = analyse_layouts(frameset(data))
    assert not any(f.is_multiplexer for f in fields)


def test_values_moving_together_are_not_a_multiplexer() -> None:
    """Four wheel speeds, nearly equal: the middle bits of one predict the others', yet
    they are numbers, not a layout."""
    rng = np.random.default_rng(5)
    speed = walk(rng, N, 200, 7000, 25)
    data = np.zeros((N, 8), np.uint8)
    for k in range(4):
        wheel = np.clip(speed + rng.integers(-2, 3, N), 0, 0xFFFF)
        data[:, 2 * k], data[:, 2 * k + 1] = wheel & 0xFF, wheel >> 8
    fields = analyse_layouts(frameset(data))
    assert not any(f.is_multiplexer for f in fields)


def test_a_state_changing_now_and_then_is_not_a_multiplexer() -> None:
    """A gear and the values that depend on it: frames of one gear are consecutive anyway."""
    rng = np.random.default_rng(6)
    gear = (np.arange(N) // 250) % 4
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = gear
    data[:, 1] = np.where(gear == 0, 0, walk(rng, N, 10, 250, 1))
    data[:, 2] = walk(rng, N, 0, 255, 2)
    fields = analyse_layouts(frameset(data))
    assert not any(f.is_multiplexer for f in fields)


@settings(max_examples=60, deadline=None)
@given(
    value=st.lists(st.integers(0, 4), min_size=0, max_size=60),
    breaks=st.lists(st.booleans(), min_size=60, max_size=60),
)
def test_page_pairs_are_each_frame_and_the_next_of_its_value(
    value: list[int], breaks: list[bool]
) -> None:
    v = np.asarray(value, np.int64)
    cont = np.asarray([False, *breaks[1 : len(value)]], np.bool_)[: len(value)]
    a, b = page_pairs(v, cont)
    segment = np.cumsum(~cont)
    want = set()
    for i in range(len(v)):
        later = [j for j in range(i + 1, len(v)) if v[j] == v[i]]
        if later and segment[later[0]] == segment[i]:
            want.add((i, later[0]))
    assert set(zip(a.tolist(), b.tolist(), strict=True)) == want


@needs_shared
@pytest.mark.parametrize(
    ("dbc", "car", "held_out"),
    [("vw_mqb.dbc", "vw_mqb", False), ("tesla_model3_vehicle.dbc", "tesla", True)],
)
def test_opendbc_multiplexed_messages_are_found(
    dbc: str, car: str, held_out: bool, tmp_path: Path
) -> None:
    from benchmarks.drives_mux import generate_layouts, score_layouts

    from hwbridge.can import discover

    drive = generate_layouts(
        DATA / "opendbc" / dbc, 30.0, car=car, held_out=held_out, plain_messages=4
    )
    report = discover([drive.write(tmp_path / "drive.blf")])
    s = score_layouts(report.to_dict(), drive)
    assert s.muxes and s.muxes_found == s.muxes, s.misses
    assert s.page_exact >= 0.8 * s.page_signals, s.misses
    assert s.inside >= 0.95 * s.fields, s.misses
    assert s.false_muxes == 0, s.misses
    cantools.database.load_string(report.to_dbc(), strict=True)
