"""Marked events: the `time_s,name` file read strictly, fields ranked against the marks on a
bare car and on generated drives with their truth (the field that changed first), offline
(`discover(events=...)`, `hwbridge discover --events`)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from benchmarks.drives import generate
from benchmarks.drives_heldout import generate_heldout
from benchmarks.drives_obd import MarkedEvent, marked_events
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.events import (
    MAX_EVENT_NAMES,
    EventsError,
    Mark,
    load_events,
    parse_events,
)
from hwbridge.discovery.api import discover
from hwbridge.discovery.report.models import DiscoveryReport
from tests.cli.conftest import Result
from tests.discovery.bare_car import BRAKE_BIT, LAMP_BIT, SPEED_ID, bare_car
from tests.shared_data import DATA, require_shared

# -- the file ------------------------------------------------------------------------------

names = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Co", "Cn")),
    min_size=1,
    max_size=64,
).filter(lambda s: s.strip() == s and s.isprintable() and not s.startswith("#"))
times = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9)


def _csv(rows: list[tuple[float, str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time_s", "name"])
    for t, name in rows:
        writer.writerow([repr(t), name])
    return out.getvalue()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(times, names), min_size=1, max_size=40))
def test_marks_written_as_csv_read_back_exactly(rows: list[tuple[float, str]]) -> None:
    if len({n for _, n in rows}) > MAX_EVENT_NAMES:
        return
    marks = parse_events(_csv(rows))
    assert sorted((m.t, m.name) for m in marks) == sorted(rows)
    assert [m.t for m in marks] == sorted(m.t for m in marks)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_any_text_is_marks_or_one_clear_error(text: str) -> None:
    error = None
    try:
        marks = parse_events(text)
    except EventsError as exc:
        error = str(exc)
    if error is not None:
        assert error.startswith("events: ") and "\n" not in error
        return
    assert marks and all(isinstance(m, Mark) and math.isfinite(m.t) for m in marks)
    assert all(m.name and len(m.name) <= 64 for m in marks)


def test_bad_lines_are_named_by_number_and_nothing_is_guessed() -> None:
    text = "time_s,name\n1.5,brake pressed\nsoon,brake released\n\n# a comment\n3,a,b\n4,\nnan,x\n"
    with pytest.raises(EventsError) as caught:
        parse_events(text, source="events.csv")
    message = str(caught.value)
    assert message.startswith("events.csv: line 3: 'soon' is not a time in seconds")
    assert "line 6: 3 column(s)" in message
    assert "line 7: the name is empty" in message
    assert "line 8: 'nan' is not a finite number of seconds" in message
    assert "line 2" not in message
    with pytest.raises(EventsError, match="no mark"):
        parse_events("time_s,name\n# nothing else\n")
    many = "\n".join(f"{i},event {i}" for i in range(MAX_EVENT_NAMES + 1))
    with pytest.raises(EventsError, match="distinct event names"):
        parse_events(many)
    with pytest.raises(EventsError, match=r"and 20 more bad line\(s\)"):
        parse_events("\n".join(f"x{i},e" for i in range(30)))


def test_a_file_is_read_within_bounds(tmp_path: Path) -> None:
    good = tmp_path / "events.csv"
    good.write_text('time_s,name\n2.0,"door, front left"\n1.0,brake pressed\n', encoding="utf-8")
    assert load_events(good) == [Mark(1.0, "brake pressed"), Mark(2.0, "door, front left")]
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"1,a\n" * 300_000)
    with pytest.raises(EventsError, match="larger than"):
        load_events(huge)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(EventsError, match="not UTF-8"):
        load_events(binary)


# -- ranking on a bare car -----------------------------------------------------------------


def _marks(changes: np.ndarray, seed: int = 0) -> list[tuple[float, str]]:
    """A person's marks: 0.1-0.5 s late (one in four early), pressed then released."""
    rng = np.random.default_rng(seed)
    late = np.where(rng.random(len(changes)) < 0.75, 1.0, -1.0)
    marked = changes + rng.uniform(0.1, 0.5, len(changes)) * late
    return [(float(t), "brake pressed" if i % 2 == 0 else "brake released")
            for i, t in enumerate(marked)]  # fmt: skip


def test_the_brake_switch_ranks_first_and_the_blinking_lamp_below(tmp_path: Path) -> None:
    drive, changes = bare_car(60.0)
    capture = drive.write(tmp_path / "bare.blf")
    report = discover(capture, events=_marks(changes))
    assert [e.name for e in report.events] == ["brake pressed", "brake released"]
    for event in report.events:
        top = event.candidates[0]
        assert (top.id, top.extended, top.start_bit, top.length) == (SPEED_ID, False, BRAKE_BIT, 1)
        assert top.score == 1.0 and top.marks_hit == event.marks == 5
        assert top.field == f"FLAG_200_{BRAKE_BIT}" and top.changes_elsewhere == 0
        lamp = [c for c in event.candidates if c.start_bit == LAMP_BIT]
        assert not lamp or lamp[0].score < 0.5
        assert [c.score for c in event.candidates] == sorted(
            (c.score for c in event.candidates), reverse=True
        )
    doc = json.loads(report.to_json())
    assert set(doc["events"][0]) == {"name", "marks", "candidates"}
    assert {"id", "extended", "start_bit", "length", "score"} <= set(
        doc["events"][0]["candidates"][0]
    )


def test_marks_in_seconds_from_the_start_are_read_so_and_said(tmp_path: Path) -> None:
    drive, changes = bare_car(40.0)
    drive.t = drive.t + 1_700_000_000.0  # a capture whose clock is the time of day
    capture = drive.write(tmp_path / "clock.blf")
    report = discover(capture, events=_marks(changes))
    assert report.events[0].candidates[0].start_bit == BRAKE_BIT
    assert any("read as seconds from its first frame" in n.text for n in report.notes)


def test_a_report_without_events_still_reads() -> None:
    old = {"messages": [], "frames": 0, "captures": [], "reference_messages": [],
           "dropped": {}, "notes": []}  # fmt: skip
    assert DiscoveryReport.model_validate(old).events == []


# -- ranking on generated drives with their truth ------------------------------------------


def _lies_in(c: object, event: MarkedEvent) -> bool:
    from benchmarks.bench_discovery_events import _lies_in as lies_in

    return lies_in(c.model_dump() if hasattr(c, "model_dump") else c, event)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "dbc", "car"),
    [(generate, "vw_pq.dbc", "xor"), (generate_heldout, "vw_mlb.dbc", None)],
    ids=["tuned generator", "held-out generator"],
)
def test_the_marked_signal_ranks_first_on_a_generated_drive(
    make: object, dbc: str, car: str | None, tmp_path: Path
) -> None:
    require_shared()
    drive = make(DATA / "opendbc" / dbc, 45.0, car=car, seed=3, max_messages=10)  # type: ignore[operator]
    events = marked_events(drive, np.random.default_rng(3))
    assert events
    marks = [(t, e.name) for e in events for t in e.times]
    report = discover(drive.write(tmp_path / "drive.blf"), events=marks)
    ranked = {e.name: e.candidates for e in report.events}
    for event in events:
        assert ranked[event.name] and _lies_in(ranked[event.name][0], event), event.name


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    from hwbridge.cli.main import main

    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return Result(code, out.out, out.err)


def test_the_command_takes_an_events_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)

    def run(*argv: str) -> Result:
        return _run(capsys, *argv)

    drive, changes = bare_car(40.0)
    capture = drive.write(tmp_path / "bare.blf")
    events = tmp_path / "events.csv"
    events.write_text(_csv(_marks(changes)))
    result = run("discover", str(capture), "--events", str(events), "--json")
    assert result.code == 0, result.err
    top = json.loads(result.out)["events"][0]["candidates"][0]
    assert (top["id"], top["start_bit"], top["length"]) == (SPEED_ID, BRAKE_BIT, 1)
    table = run("discover", str(capture), "--events", str(events))
    assert "brake pressed" in table.out and f"0x200 {BRAKE_BIT}|1" in table.out
    events.write_text("time_s,name\n1.0,brake\nlater,brake\n")
    bad = run("discover", str(capture), "--events", str(events))
    assert bad.code == 2
    assert bad.err.strip() == (
        "hwbridge: events.csv: line 3: 'later' is not a time in seconds (each line is time_s,name)"
    )


def test_on_the_real_truck_log_the_marked_field_ranks_first() -> None:
    """The GNSS module's position accuracy changes four times in the truck log (its DBC is
    the truth): marked 0.3 s late or 0.2 s early, the field discovery found in its bits
    ranks first."""
    require_shared()
    import cantools

    from hwbridge.can.io.readers import open_capture
    from hwbridge.discovery.bits import bit_matrix, cantools_chain, values
    from hwbridge.discovery.frames import Collector

    truck = DATA / "css" / "truck_j1939_gps.MF4"
    gps = cantools.database.load_file(DATA / "css" / "canmod-gps.dbc")
    signal = gps.get_message_by_name("gnss_pos").get_signal_by_name("PositionAccuracy")  # type: ignore[union-attr]
    chain = cantools_chain(signal.start, signal.length, signal.byte_order)
    collector = Collector()
    reader = open_capture(truck)
    for chunk in reader.chunks():
        collector.add(chunk.timestamp_us / 1e6, chunk.arbitration_id, chunk.extended,
                      chunk.length, chunk.data)  # fmt: skip
    reader.close()
    fs = collector.framesets()[(0x003, False)]
    raw = values(bit_matrix(fs.data), chain)
    changes = fs.t[1:][raw[1:] != raw[:-1]]
    assert len(changes) == 4
    marks = [
        (float(t) + (0.3 if i % 2 else -0.2), "accuracy changed") for i, t in enumerate(changes)
    ]
    report = discover(truck, events=marks)
    top = report.events[0].candidates[0]
    bits = set(cantools_chain(top.start_bit, top.length, top.byte_order))
    assert (top.id, top.extended) == (0x003, False) and bits <= set(chain), top
    assert top.score == 1.0 and top.field is not None
