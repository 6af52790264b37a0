"""Bounded: a hostile capture answers in bounded time and memory and says what it dropped;
every discovery tool argument is bounded; the tools only listen."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import can
from hwbridge import CanDriver
from hwbridge.discovery.analysis.known import opendbc_available
from hwbridge.discovery.frames import Collector

HOSTILE_IDS = 100_000  # the benchmark runs the full million


@pytest.mark.slow
def test_a_hostile_capture_answers_and_says_what_it_dropped(tmp_path: Path) -> None:
    """100,000 distinct 29-bit ids, 64 bytes of zeros each: the first 4,096 ids are kept
    (listed without fields: one frame tells nothing), the rest counted and estimated."""
    from hwbridge.discovery.api import discover

    path = tmp_path / "hostile.blf"
    zeros = bytes(64)
    with can.BLFWriter(str(path)) as writer:
        for i in range(HOSTILE_IDS):
            writer.on_message_received(
                can.Message(
                    timestamp=i * 1e-4,
                    arbitration_id=i,
                    is_extended_id=True,
                    is_fd=True,
                    data=zeros,
                )
            )
    start = time.monotonic()
    report = discover(path)
    assert time.monotonic() - start < 30
    assert report.frames == HOSTILE_IDS
    assert len(report.messages) == 4096
    assert all(m.dlc == 64 and not m.signals for m in report.messages)
    dropped = report.dropped
    assert dropped["frames_of_dropped_ids"] == HOSTILE_IDS - 4096
    assert abs(dropped["ids"] / (HOSTILE_IDS - 4096) - 1) < 0.05  # a HyperLogLog estimate
    texts = " ".join(n.text for n in report.notes)
    assert "more distinct id(s)" in texts and "counted, not analysed" in texts
    assert "fewer than 3 times" in texts
    assert len(report.to_json()) < 2_000_000


def test_a_busy_id_is_thinned_in_whole_blocks_within_the_budget() -> None:
    """One id sending far more frames than the budget holds: every frame is counted, the
    stored ones are thinned in blocks (consecutive frames stay consecutive), and the number
    not stored is reported."""
    collector = Collector(max_bytes=400_000, max_rows_per_id=1 << 20, block=64)
    n = 200_000
    for start in range(0, n, 50_000):
        rows = np.arange(start, start + 50_000, dtype=np.int64)
        data = np.zeros((len(rows), 8), np.uint8)
        data[:, 0] = (rows % 256).astype(np.uint8)
        collector.add(rows.astype(np.float64) * 1e-3, np.full(len(rows), 0x100), np.zeros(len(rows), bool),
                      np.full(len(rows), 8), data)  # fmt: skip
    fs = collector.frameset((0x100, False))
    assert fs is not None and fs.frames == n
    assert len(fs) * (8 + 8 + 2 + 8) <= 400_000
    dropped = collector.report_dropped()
    assert dropped.frames_not_stored == n - len(fs)
    assert dropped.thinned_ids == 1
    steps = np.mod(np.diff(fs.data[:, 0].astype(np.int64))[fs.cont[1:]], 256)
    assert set(steps.tolist()) == {1}  # transitions are only ever between true neighbours
    assert fs.pairs > len(fs) * 0.9


@pytest.fixture
def driver() -> Iterator[CanDriver]:
    with CanDriver.from_bus(f"virtual:bounds-{uuid.uuid4().hex[:8]}") as d:
        yield d


DISCOVERY = (
    "survey_bus",
    "snapshot_bus",
    "diff_snapshots",
    "correlate_signal",
    "define_signal",
    "draft_dbc",
    "mark_event",
    "rank_events",
    # offered when there are databases to match: opendbc's (the dev extra has them)
    *(("match_known_databases",) if opendbc_available() else ()),
)


def test_every_discovery_tool_is_read_only_and_bounded(driver: CanDriver) -> None:
    tools = {t.name: t for t in driver.list_tools()}
    assert set(DISCOVERY) <= set(tools)
    for name in DISCOVERY:
        tool = tools[name]
        assert tool.read_only, name
        for p in tool.parameters:
            schema = p.schema or {}
            kinds = schema.get("type")
            kinds = kinds if isinstance(kinds, list) else [kinds]
            if "string" in kinds:
                assert "maxLength" in schema or "enum" in schema, (name, p.name)
            if "integer" in kinds and p.name != "id":
                assert "maximum" in schema and "minimum" in schema, (name, p.name)
    # what the schema promises is what the driver takes: the monitor's history (30 s here)
    assert (tools["survey_bus"].parameters[0].schema or {})["maximum"] == 30_000
    r = call(driver, "snapshot_bus", name="long", duration_ms=45_000)
    assert r.call_detail.startswith("INVALID_ARGUMENTS") and "at most 30000" in r.call_detail


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.one_of(
        st.text(max_size=80), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,70}", fullmatch=True)
    ),
    frame_id=st.one_of(
        st.integers(-5, 2**30),
        st.text(max_size=40),
        st.sampled_from(["0x110", "0x7FF", "0x18FEF100", "0x800", "0x20000000", "272"]),
    ),
    start_bit=st.one_of(st.integers(0, 63), st.integers(-3, 600)),
    length=st.one_of(st.integers(1, 16), st.integers(-1, 70)),
    byte_order=st.sampled_from(["little_endian", "big_endian", "middle"]),
    scale=st.floats(allow_nan=False, allow_infinity=False, width=32),
    unit=st.text(max_size=40),
)
def test_define_signal_accepts_a_signal_or_says_why_not(
    driver: CanDriver,
    name: str,
    frame_id: int | str,
    start_bit: int,
    length: int,
    byte_order: str,
    scale: float,
    unit: str,
) -> None:
    """Whatever the arguments, define_signal either defines a signal the grown database
    reads, or fails with a sentence and a code; the database stays loadable either way."""
    before = len(driver.database.messages)
    r = call(driver, "define_signal", name=name, id=frame_id, start_bit=start_bit, length=length,
             byte_order=byte_order, scale=scale, unit=unit)  # fmt: skip
    if r.call_failed:
        assert r.call_detail and r.call_detail.split(":")[0].isupper()
        assert len(driver.database.messages) >= before
    else:
        event("defined")
        assert r.call_executed
        defined = r.tool_call_result["defined"]
        spec = driver.database.resolve_signal(defined)
        assert spec.name == defined
    draft = call(driver, "draft_dbc")
    assert not draft.call_failed
    if draft.tool_call_result["signals"]:
        import cantools

        cantools.database.load_string(draft.tool_call_result["dbc"], strict=True)


def test_define_signal_refuses_what_cannot_be(driver: CanDriver) -> None:
    ok = call(driver, "define_signal", name="Speed", id="0x110", start_bit=0, length=16, byte_order="little_endian", scale=0.01, unit="km/h")  # fmt: skip
    assert ok.call_executed and not ok.call_failed
    cases = {
        "overlap": {"name": "Other", "id": "0x110", "start_bit": 8, "length": 8, "byte_order": "little_endian"},
        "outside": {"name": "Wide", "id": "0x110", "start_bit": 60, "length": 8, "byte_order": "little_endian"},
        "name": {"name": "1bad name", "id": "0x110", "start_bit": 40, "length": 4, "byte_order": "little_endian"},
        "scale": {"name": "Zero", "id": "0x110", "start_bit": 40, "length": 4, "byte_order": "little_endian", "scale": 0},
        "unit": {"name": "Quoted", "id": "0x110", "start_bit": 40, "length": 4, "byte_order": "little_endian", "unit": 'km" BO_ 1 X: 8 Y'},
        "unit_text": {"name": "Umlaut", "id": "0x110", "start_bit": 40, "length": 4, "byte_order": "little_endian", "unit": "Ü\x1c"},
    }  # fmt: skip
    for label, args in cases.items():
        r = call(driver, "define_signal", **args)
        assert r.call_failed, label
        assert r.call_detail.startswith(("INVALID_VALUE:", "INVALID_ARGUMENT")), (
            label,
            r.call_detail,
        )
    again = call(driver, "define_signal", name="Speed", id="0x110", start_bit=0, length=12, byte_order="little_endian")  # fmt: skip
    assert not again.call_failed  # defining a name again replaces it
    assert driver.database.resolve_signal("Speed").signal.length == 12
    missing = call(driver, "diff_snapshots", a="x", b="y")
    assert missing.call_failed and missing.call_detail.startswith("UNKNOWN_SNAPSHOT:")


frames_strategy = st.lists(
    st.tuples(
        st.integers(0, 5),  # one of a few ids, so ids repeat
        st.booleans(),
        st.binary(min_size=0, max_size=64),
    ),
    min_size=0,
    max_size=300,
)


@settings(max_examples=40, deadline=None)
@given(frames_strategy)
def test_any_frames_give_a_report_and_a_strict_draft(frames: list[tuple[int, bool, bytes]]) -> None:
    """Whatever the frames (empty payloads, lengths changing within an id, 11 and 29 bits),
    discovery answers: every frame counted, the draft loads strictly, frames of another
    length than their id's usual one are reported, not mixed in."""
    from hwbridge.discovery.analysis.reference import Reference
    from hwbridge.discovery.analysis.survey import analyse_frames, build_report
    from tests.discovery.frames import load_dbc_text

    collector = Collector()
    collector.add_frames(
        (i * 0.01, 0x100 + k, ext, data) for i, (k, ext, data) in enumerate(frames)
    )
    assert collector.frames == len(frames)
    found, _ = analyse_frames(collector.framesets(), Reference(()))
    report = build_report(found, Reference(()), frames=collector.frames)
    db = load_dbc_text(report.to_dbc())
    assert len(db.messages) == len(report.messages)
    lengths: dict[tuple[int, bool], list[int]] = {}
    for k, ext, data in frames:
        lengths.setdefault((0x100 + k, ext), []).append(len(data))
    other = sum(len(v) - max(v.count(n) for n in set(v)) for v in lengths.values())
    assert collector.report_dropped().frames_of_other_lengths == other
