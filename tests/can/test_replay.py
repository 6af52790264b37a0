"""Replaying captures as a live bus: every python-can format, pacing, looping, read-only,
clear errors, and a real 127 s J1939 + GNSS truck capture decoded through CanDriver."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge import CanDriver, DriverResponse, SendPolicy
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.bus_url import ACCEPTED_FORMS, parse_bus_url
from hwbridge.can.transport.replay import (
    REPLAY_OPTIONS,
    ReplayAdapter,
    ReplayOptions,
    parse_replay_url,
)
from hwbridge.core.models import ToolError
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.shared_data import DATA, needs_shared

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
CSS = DATA / "css"
TRUCK = CSS / "truck_j1939_gps.MF4"

WRITERS: dict[str, Any] = {
    ".asc": can.ASCWriter,
    ".blf": can.BLFWriter,
    ".csv": can.CSVWriter,
    ".log": can.CanutilsLogWriter,
    ".trc": can.TRCWriter,
    ".mf4": can.MF4Writer,
}

T0 = 1_700_000_000.0
MAX_LAG_S = 0.5
"""How far a live stamp may fall behind the clock before the schedule restarts (replay.py)."""
JOIN_TIMEOUT_S = 2.0
"""How long `ReplayAdapter.close()` waits for its thread (its `join_timeout_s`)."""


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def frames(n: int, gap_s: float, *, first_id: int = 0x100, channel: int = 0) -> list[can.Message]:
    """n frames gap_s apart, alternating standard and extended IDs, payload = index."""
    return [
        can.Message(
            timestamp=T0 + i * gap_s,
            arbitration_id=first_id + i,
            data=bytes([i % 256, 0xA5, i // 256]),
            is_extended_id=i % 2 == 1,
            channel=channel,
        )
        for i in range(n)
    ]


def write_log(path: Path, messages: Sequence[can.Message]) -> Path:
    writer = WRITERS[path.suffix.lower()](path)
    for msg in messages:
        writer.on_message_received(msg)
    writer.stop()
    return path


class Collector:
    """A listener keeping (monotonic arrival, message) pairs."""

    def __init__(self) -> None:
        self.got: list[tuple[float, can.Message]] = []

    def __call__(self, msg: can.Message) -> None:
        self.got.append((time.monotonic(), msg))

    @property
    def messages(self) -> list[can.Message]:
        return [m for _, m in self.got]


@pytest.fixture
def replay() -> Iterator[list[ReplayAdapter]]:
    """Adapters a test opens; all closed at the end even when the test fails."""
    opened: list[ReplayAdapter] = []
    yield opened
    for adapter in opened:
        adapter.close()


def open_replay(opened: list[ReplayAdapter], path: Path, **kwargs: Any) -> ReplayAdapter:
    adapter = ReplayAdapter(path, **kwargs)
    opened.append(adapter)
    return adapter


# --- every format ------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", sorted(WRITERS))
def test_each_format_replays_every_frame_in_order(
    suffix: str, tmp_path: Path, replay: list[ReplayAdapter]
) -> None:
    recorded = frames(40, 0.01)
    path = write_log(tmp_path / f"capture{suffix}", recorded)
    sink = Collector()
    started = time.time()
    adapter = open_replay(replay, path, speed=None, listeners=[sink])
    assert adapter.wait_finished(10)
    got = sink.messages
    assert [(m.arbitration_id, bytes(m.data), m.is_extended_id) for m in got] == [
        (m.arbitration_id, bytes(m.data), m.is_extended_id) for m in recorded
    ]
    stamps = [m.timestamp for m in got]
    assert stamps == sorted(stamps)
    assert started - 0.01 <= stamps[0] and stamps[-1] <= time.time() + 0.01  # live clock
    status = adapter.status()
    assert status.bus_state == "finished" and status.finished and not status.connected
    assert status.frames_replayed == status.frames_per_play == 40
    assert status.duration_s == pytest.approx(0.39, abs=0.01)
    assert status.progress == 1.0


def test_upper_case_suffix_and_gzip(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    import gzip

    plain = write_log(tmp_path / "capture.asc", frames(5, 0.01))
    packed = tmp_path / "capture.asc.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    upper = tmp_path / "CAPTURE.ASC"
    upper.write_bytes(plain.read_bytes())
    for path in (packed, upper):
        sink = Collector()
        assert open_replay(replay, path, speed=None, listeners=[sink]).wait_finished(5)
        assert len(sink.got) == 5


# --- pacing ------------------------------------------------------------------------------


def test_speed_factor_divides_the_recorded_gaps(
    tmp_path: Path, replay: list[ReplayAdapter]
) -> None:
    path = write_log(tmp_path / "ten_seconds.blf", frames(21, 0.5))  # 10 s recorded
    played_s = 10.0 / 100  # what the replay promises at speed=100; at speed 1: 10 s
    sink = Collector()
    adapter = open_replay(replay, path, speed=100, listeners=[sink])
    assert adapter.wait_finished(played_s + BUSY_MARGIN_S)
    arrivals = [t for t, _ in sink.got]
    stamps = [m.timestamp for m in sink.messages]
    elapsed = arrivals[-1] - arrivals[0]
    assert 0.095 <= elapsed < played_s + BUSY_MARGIN_S  # never early
    # the gaps of the stamps sum to their span: 0.005 s each on average, 0.5 s undivided
    assert 0.095 <= stamps[-1] - stamps[0] < played_s + BUSY_MARGIN_S
    gaps = [b - a for a, b in pairwise(stamps)]
    assert min(gaps) >= 0.0
    assert abs(time.time() - stamps[-1]) < MAX_LAG_S + BUSY_MARGIN_S  # the live clock


def test_default_speed_is_real_time(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    path = write_log(tmp_path / "short.log", frames(4, 0.1))  # 0.3 s recorded
    sink = Collector()
    assert open_replay(replay, path, listeners=[sink]).wait_finished(0.3 + BUSY_MARGIN_S)
    assert 0.29 <= sink.got[-1][0] - sink.got[0][0] < 0.3 + BUSY_MARGIN_S


def test_speed_max_does_not_wait(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    path = write_log(tmp_path / "long.asc", frames(200, 0.5))  # 100 s recorded
    sink = Collector()
    started = time.monotonic()
    adapter = ReplayAdapter.from_url(f"replay:{path}?speed=max", listeners=[sink])
    replay.append(adapter)
    # unpaced, it is a read of 200 frames; paced, it would take the 100 s recorded
    assert adapter.wait_finished(BUSY_MARGIN_S)
    assert time.monotonic() - started < BUSY_MARGIN_S
    assert len(sink.got) == 200
    assert adapter.status().speed is None


def test_out_of_order_timestamps_never_go_back(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    recorded = frames(6, 0.02)
    recorded[3].timestamp = T0 - 5.0  # a stray frame stamped in the past
    path = write_log(tmp_path / "shuffled.log", recorded)
    sink = Collector()
    open_replay(replay, path, speed=2, listeners=[sink]).wait_finished(5)
    stamps = [m.timestamp for m in sink.messages]
    assert len(stamps) == 6 and stamps == sorted(stamps)


# --- looping -----------------------------------------------------------------------------


def test_plays_n_times_then_finishes(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    path = write_log(tmp_path / "three.trc", frames(10, 0.01))
    sink = Collector()
    adapter = ReplayAdapter.from_url(f"replay:{path}?speed=max&plays=3", listeners=[sink])
    replay.append(adapter)
    assert adapter.wait_finished(5)
    ids = [m.arbitration_id for m in sink.messages]
    assert ids == [0x100 + i for i in range(10)] * 3
    stamps = [m.timestamp for m in sink.messages]
    assert stamps == sorted(stamps)
    status = adapter.status()
    assert (status.play, status.plays, status.frames_replayed, status.finished) == (3, 3, 30, True)


def test_loop_runs_until_closed_and_keeps_pacing_across_the_seam(
    tmp_path: Path, replay: list[ReplayAdapter], no_thread_leaks: None
) -> None:
    path = write_log(tmp_path / "loop.asc", frames(5, 0.02))  # 0.08 s recorded
    sink = Collector()
    adapter = ReplayAdapter.from_url(f"replay:{path}?speed=4&loop=1", listeners=[sink])
    replay.append(adapter)
    assert wait_until(lambda: len(sink.got) >= 12, timeout_s=5)
    status = adapter.status()
    assert status.connected and status.bus_state == "replaying" and status.plays is None
    assert status.play >= 3 and status.duration_s == pytest.approx(0.08, abs=0.005)
    assert status.progress is not None and 0.0 <= status.progress <= 1.0
    started = time.monotonic()
    adapter.close()  # stops the thread within one frame; joins it for up to its join timeout
    assert time.monotonic() - started < JOIN_TIMEOUT_S + BUSY_MARGIN_S
    assert adapter.wait_finished(BUSY_MARGIN_S)  # the thread has ended: no frame can follow
    assert adapter.status().bus_state == "closed" and not adapter.connected
    stamps = [m.timestamp for m in sink.messages]
    gaps = [b - a for a, b in pairwise(stamps)]
    assert min(gaps) > 0.0  # the seam also gets a gap, so periods stay plausible


# --- read-only ---------------------------------------------------------------------------


def test_sending_is_refused_with_read_only_bus(tmp_path: Path) -> None:
    db = CanDatabase.load(DEMO)
    engine = db.encode("EngineData", {"EngineSpeed": 1500, "CoolantTemp": 90})
    recorded = [
        can.Message(
            timestamp=T0 + i * 0.01,
            arbitration_id=engine.arbitration_id,
            data=engine.data,
            is_extended_id=False,
        )
        for i in range(20)
    ]
    path = write_log(tmp_path / "engine.blf", recorded)
    audit = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_messages=["ClimateCommand"], allow_raw_frames=True, audit_log=audit)
    with CanDriver.from_dbc(DEMO, bus=f"replay:{path}?speed=max&loop=1", policy=policy) as d:
        read = call(d, "read_signals", signals=["EngineSpeed"], timeout_ms=2000)
        assert read.tool_call_result["values"]["EngineSpeed"]["value"] == 1500
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("send_message", {"message": "ClimateCommand", "signals": {"CabinSetpoint": 21}}),
            ("send_frame", {"id": "0x3C0", "data": "00"}),
            ("start_periodic", {"message": "ClimateCommand", "signals": {}, "period_ms": 100}),
        ]
        for tool, args in attempts:
            r = call(d, tool, **args)
            assert r.call_failed, tool
            assert (r.call_detail or "").startswith("READ_ONLY_BUS"), r.call_detail
            assert "replayed capture cannot be sent to" in (r.call_detail or "")
        assert call(d, "bus_status").tool_call_result["periodic_sends"] == []
        adapter = d.networks["can"].adapter
        assert isinstance(adapter, ReplayAdapter)
        with pytest.raises(ToolError) as info:
            adapter.send_periodic(can.Message(arbitration_id=1), 0.1)
        assert info.value.code == "READ_ONLY_BUS"
    sent = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
    assert not [x for x in sent if x.get("outcome") in ("sent", "periodic_started")]


# --- errors at construction --------------------------------------------------------------


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "capture.blf"
    with pytest.raises(FileNotFoundError, match=r"nope/capture\.blf"):
        CanDriver.from_dbc(DEMO, bus=f"replay:{missing}")
    folder = tmp_path / "dir.asc"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"dir\.asc"):
        ReplayAdapter(folder)


def test_unknown_suffix_lists_supported_formats(tmp_path: Path) -> None:
    odd = tmp_path / "capture.pcapng"
    odd.write_bytes(b"\x00")
    with pytest.raises(ValueError, match="unknown capture format") as info:
        CanDriver.from_dbc(DEMO, bus=f"replay:{odd}")
    for suffix in (".asc", ".blf", ".log", ".trc", ".mf4"):
        assert suffix in str(info.value)
    assert "capture.pcapng" in str(info.value)


@pytest.mark.parametrize(
    "query",
    [
        "speed=-1",
        "speed=fast",
        "speed=nan",
        "loop=2",
        "plays=0",
        "plays=1.5",
        "sped=2",
        "loop=1&plays=2",
        "speed=1&speed=2",
        "novalue",
        "channel=",
    ],
)
def test_bad_query_lists_accepted_options(query: str, tmp_path: Path) -> None:
    path = write_log(tmp_path / "c.log", frames(2, 0.01))
    with pytest.raises(ValueError, match="accepted options") as info:
        CanDriver.from_dbc(DEMO, bus=f"replay:{path}?{query}")
    assert all(option in str(info.value) for option in REPLAY_OPTIONS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("replay:a.asc", ReplayOptions(Path("a.asc"))),
        ("REPLAY:a.asc?speed=2.5", ReplayOptions(Path("a.asc"), speed=2.5)),
        ("replay:a.asc?speed=max", ReplayOptions(Path("a.asc"), speed=None)),
        ("replay:a.asc?speed=0", ReplayOptions(Path("a.asc"), speed=None)),
        ("replay:a.asc?loop=1&speed=10", ReplayOptions(Path("a.asc"), speed=10, plays=None)),
        ("replay:a.asc?loop=true", ReplayOptions(Path("a.asc"), plays=None)),
        ("replay:a.asc?loop=0", ReplayOptions(Path("a.asc"))),
        ("replay:a.asc?plays=4", ReplayOptions(Path("a.asc"), plays=4)),
        ("replay:/abs/x y.MF4?channel=2", ReplayOptions(Path("/abs/x y.MF4"), channel="2")),
    ],
)
def test_replay_strings_parse(text: str, expected: ReplayOptions) -> None:
    assert parse_replay_url(text) == expected


def test_bus_url_lists_replay_and_refuses_it_for_can_bus() -> None:
    assert any(form.startswith("replay:") for form in ACCEPTED_FORMS)
    with pytest.raises(ValueError, match="ReplayAdapter"):
        parse_bus_url("replay:x.asc")


def test_unreadable_content_fails_on_the_thread_with_the_file_named(
    tmp_path: Path, replay: list[ReplayAdapter]
) -> None:
    broken = tmp_path / "broken.blf"
    broken.write_bytes(b"this is not a BLF file at all")
    adapter = open_replay(replay, broken)
    assert adapter.wait_finished(5)
    status = adapter.status()
    assert status.bus_state == "failed" and not status.connected
    assert status.last_error is not None and "broken.blf" in status.last_error


# --- listeners and channels --------------------------------------------------------------


def test_a_raising_listener_does_not_stop_the_others(
    tmp_path: Path, replay: list[ReplayAdapter]
) -> None:
    path = write_log(tmp_path / "c.asc", frames(20, 0.001))

    def broken(msg: can.Message) -> None:
        raise RuntimeError("listener bug")

    first, last = Collector(), Collector()
    adapter = open_replay(replay, path, speed=None, listeners=[first, broken, last])
    assert adapter.wait_finished(5)
    assert len(first.got) == len(last.got) == 20
    assert adapter.status().listener_errors == 20


def test_listeners_can_be_added_and_removed(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    path = write_log(tmp_path / "c.log", frames(30, 0.01))
    early, late = Collector(), Collector()
    adapter = open_replay(replay, path, speed=1, listeners=[early])
    assert wait_until(lambda: len(early.got) >= 5)
    adapter.add_listener(late)
    adapter.remove_listener(early)
    adapter.remove_listener(early)  # unknown: ignored
    assert adapter.wait_finished(5)
    assert len(early.got) < 30 and 0 < len(late.got) < 30
    assert len(early.got) + len(late.got) >= 30  # no frame lost in the swap


def test_channel_filter(tmp_path: Path, replay: list[ReplayAdapter]) -> None:
    mixed = sorted(
        frames(10, 0.01, channel=0) + frames(10, 0.01, first_id=0x200, channel=1),
        key=lambda m: m.timestamp,
    )
    path = write_log(tmp_path / "two.blf", mixed)
    sink = Collector()
    adapter = ReplayAdapter.from_url(f"replay:{path}?speed=max&channel=1", listeners=[sink])
    replay.append(adapter)
    assert adapter.wait_finished(5)
    assert [m.arbitration_id for m in sink.messages] == [0x200 + i for i in range(10)]
    assert adapter.status().channels == ["0", "1"]


# --- the real truck capture --------------------------------------------------------------


@needs_shared
def test_truck_capture_gnss_through_the_driver() -> None:
    started = time.monotonic()
    with CanDriver.from_dbc(CSS / "canmod-gps.dbc", bus=f"replay:{TRUCK}?speed=25") as d:
        # the MF4 is read on the replay thread: constructing only checks the path and the
        # options (played in the constructor, 127 s at speed 25 would take 5 s)
        assert time.monotonic() - started < BUSY_MARGIN_S
        r = call(d, "read_signals", signals=["FixType", "Satellites", "Latitude"], timeout_ms=5000)
        assert r.call_executed, r.retry_prompt
        values = r.tool_call_result["values"]
        assert values["FixType"]["label"] == "3D-fix"
        assert 4 <= values["Satellites"]["value"] <= 31
        assert values["Latitude"]["value"] == pytest.approx(41.41, abs=0.02)
        assert values["Latitude"]["unit"] == "deg"
        assert 0 <= values["Latitude"]["age_ms"] < (MAX_LAG_S + BUSY_MARGIN_S) * 1000  # live
        status = call(d, "bus_status").tool_call_result
        assert status["state"] == "replaying"
        assert status["source"]["speed"] == 25
        assert status["source"]["frames_replayed"] > 0
        assert status["frames_per_s"] > 1000  # ~455 frames/s recorded, times 25
        closing = time.monotonic()
    assert time.monotonic() - closing < JOIN_TIMEOUT_S + BUSY_MARGIN_S  # mid-file


@needs_shared
def test_truck_capture_engine_speed_by_j1939_pgn(no_thread_leaks: None) -> None:
    dbc = CSS / "CSS-Electronics-SAE-J1939-DEMO.dbc"
    with CanDriver.from_dbc(dbc, bus=f"replay:{TRUCK}?speed=10") as d:
        r = call(d, "read_signals", signals=["EngineSpeed"], timeout_ms=3000)
        assert r.call_executed, r.retry_prompt
        rpm = r.tool_call_result["values"]["EngineSpeed"]
        assert rpm["value"] == pytest.approx(650, abs=60)
        assert rpm["unit"] == "rpm"
        adapter = d.networks["can"].adapter
        assert isinstance(adapter, ReplayAdapter)
        first = adapter.time_to_first_frame_s  # the first frame is due at once, once open
        assert first is not None and first < BUSY_MARGIN_S
        assert adapter.status().position_s > 0


@needs_shared
def test_truck_capture_reads_keep_the_last_values_when_finished() -> None:
    with CanDriver.from_dbc(CSS / "canmod-gps.dbc", bus=f"replay:{TRUCK}?speed=max") as d:
        adapter = d.networks["can"].adapter
        assert isinstance(adapter, ReplayAdapter)
        assert adapter.wait_finished(20)
        status = adapter.status()
        assert status.finished and status.frames_replayed == 57_849
        assert status.duration_s == pytest.approx(127.2, abs=0.5)
        assert status.channels == ["1", "2"]
        r = call(d, "read_signals", signals=["Latitude", "Longitude"], timeout_ms=100)
        values = r.tool_call_result["values"]
        assert math.isfinite(values["Latitude"]["value"])
        assert values["Longitude"]["value"] == pytest.approx(-92.9, abs=0.5)
        assert call(d, "bus_status").tool_call_result["bus_state"] == "finished"


@needs_shared
def test_close_is_prompt_while_the_mf4_is_being_read(no_thread_leaks: None) -> None:
    for delay in (0.0, 0.05):
        adapter = ReplayAdapter(TRUCK, speed=None)
        time.sleep(delay)
        started = time.monotonic()
        adapter.close()
        assert time.monotonic() - started < JOIN_TIMEOUT_S + BUSY_MARGIN_S
        assert not any(t.name.startswith("hwbridge-replay") for t in threading.enumerate())
