"""decode_captures end to end: captures in every format into a dataset equal to cantools."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

import can
from hwbridge.captures import decode_captures
from tests.shared_data import needs_shared

from .checks import assert_same_as_cantools, read_table
from .conftest import GPS_DBC, J1939_DBC, KONA, TRUCK, UDS_DBC, drive, write_capture


@pytest.mark.parametrize("suffix", [".blf", ".mf4", ".asc", ".log"])
def test_every_format_decodes_to_cantools_values(
    tmp_path: Path, fleet_dbc: Path, suffix: str
) -> None:
    capture = write_capture(tmp_path / f"drive{suffix}", drive(10.0))
    # ASC: absolute times from the file's date line, as decode_captures reads them
    options = {"relative_timestamp": False} if suffix == ".asc" else {}
    messages = list(can.LogReader(capture, **options))
    summary = decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    assert summary.ok, summary.failed
    counts = assert_same_as_cantools(tmp_path / "ds", messages, [fleet_dbc], capture.name)
    # every frame of a known id is one row; the unknown id is counted, not lost
    data_frames = [m for m in messages if not m.is_error_frame and not m.is_remote_frame]
    assert sum(counts.values()) == summary.frames_decoded
    assert summary.unknown_frames == sum(1 for m in data_frames if m.arbitration_id == 0x7FF)
    assert summary.unknown_ids == {"0x7FF": summary.unknown_frames}
    assert summary.rows == {k: v for k, v in counts.items() if v}
    assert set(counts) == {"Engine", "EEC1", "Mux", "FdFrame", "Turn"}


def test_layout_columns_and_types(tmp_path: Path, fleet_dbc: Path) -> None:
    capture = write_capture(tmp_path / "a.blf", drive(5.0))
    decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    part = tmp_path / "ds" / "Engine" / "source=a.blf" / "part-0.parquet"
    schema = pq.read_schema(part)
    assert schema.names == [
        "timestamp", "CoolantTemp", "EngineSpeed", "Gear", "Gear_label", "Torque"
    ]  # fmt: skip
    assert str(schema.field("timestamp").type) == "timestamp[us, tz=UTC]"
    assert schema.field("EngineSpeed").metadata[b"unit"] == b"rpm"
    rows = read_table(tmp_path / "ds", "Engine")
    assert rows[0]["source"] == "a.blf"
    assert {r["Gear_label"] for r in rows} == {"P", "R", "N", "D"}
    mux = read_table(tmp_path / "ds", "Mux")
    assert all((r["Voltage"] is None) == (r["Page"] != 1) for r in mux)
    assert all((r["Current"] is None) == (r["Page"] != 2) for r in mux)


def test_j1939_by_pgn_whatever_priority_and_source_address(tmp_path: Path, fleet_dbc: Path) -> None:
    capture = write_capture(tmp_path / "j.blf", drive(4.0))
    decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    rows = read_table(tmp_path / "ds", "EEC1")
    assert len(rows) == 20  # 40 steps, every other one, from SA 0x00 and 0x21
    assert rows[1]["EngineSpeedJ"] == 1002.0


def test_standard_and_extended_ids_stay_apart(tmp_path: Path, fleet_dbc: Path) -> None:
    capture = write_capture(tmp_path / "ids.mf4", drive(3.0))
    decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    fd = read_table(tmp_path / "ds", "FdFrame")  # 0x400, 11 bit, CAN FD, 32 bytes
    turn = read_table(tmp_path / "ds", "Turn")  # 0x400, 29 bit
    assert len(fd) == len(turn) == 3
    assert [r["Pressure"] for r in fd] == [-0.0, -10000.0, -20000.0]
    assert [r["TurnSignal_label"] for r in turn] == ["Off", "Left", "Right"]


def test_a_corrupt_capture_names_file_and_position_and_the_others_decode(
    tmp_path: Path, fleet_dbc: Path
) -> None:
    good = write_capture(tmp_path / "good.blf", drive(5.0))
    whole = write_capture(tmp_path / "whole.blf", drive(300.0))
    cut = tmp_path / "cut.blf"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    junk = tmp_path / "junk.blf"
    junk.write_bytes(b"LOGG" + bytes(200))
    summary = decode_captures([cut, good, junk], [fleet_dbc], tmp_path / "ds")
    by_name = {Path(f.path).name: f for f in summary.files}
    assert by_name["good.blf"].ok
    assert not by_name["cut.blf"].ok
    assert "truncated" in (by_name["cut.blf"].error or "")
    assert (by_name["cut.blf"].position or "").startswith("byte ")
    assert by_name["cut.blf"].rows["Engine"] > 100  # what came before the cut is kept
    assert not by_name["junk.blf"].ok
    assert sorted(Path(p).name for p in summary.failed) == ["cut.blf", "junk.blf"]
    assert len(read_table(tmp_path / "ds", "Engine", "good.blf")) == 50


def test_decoding_again_replaces_a_captures_rows(tmp_path: Path, fleet_dbc: Path) -> None:
    capture = write_capture(tmp_path / "again.blf", drive(2.0))
    decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    decode_captures([capture], [fleet_dbc], tmp_path / "ds")
    assert len(read_table(tmp_path / "ds", "Engine")) == 20


def test_same_file_names_get_their_folders(tmp_path: Path, fleet_dbc: Path) -> None:
    (tmp_path / "truck1").mkdir()
    (tmp_path / "truck2").mkdir()
    a = write_capture(tmp_path / "truck1" / "00000001.blf", drive(1.0))
    b = write_capture(tmp_path / "truck2" / "00000001.blf", drive(2.0))
    summary = decode_captures([a, b], [fleet_dbc], tmp_path / "ds")
    assert [f.source for f in summary.files] == ["truck1/00000001.blf", "truck2/00000001.blf"]
    rows = read_table(tmp_path / "ds", "Engine")
    assert {r["source"] for r in rows} == {"truck1/00000001.blf", "truck2/00000001.blf"}


@pytest.mark.slow
def test_local_worker_processes_write_the_same_dataset(tmp_path: Path, fleet_dbc: Path) -> None:
    captures = [write_capture(tmp_path / f"w{i}.blf", drive(2.0, start=1e9 + i)) for i in range(2)]
    one = decode_captures(captures, [fleet_dbc], tmp_path / "one")
    two = decode_captures(captures, [fleet_dbc], tmp_path / "two", workers=2)
    assert one.rows == two.rows
    for table in one.rows:
        assert read_table(tmp_path / "one", table) == read_table(tmp_path / "two", table)


def test_bad_arguments_fail_at_once(tmp_path: Path, fleet_dbc: Path) -> None:
    capture = write_capture(tmp_path / "x.blf", drive(1.0))
    with pytest.raises(ValueError, match="not both"):
        decode_captures([capture], [fleet_dbc], tmp_path / "ds", workers=2, dask="tcp://x:1")
    with pytest.raises(ValueError, match="database"):
        decode_captures([capture], [], tmp_path / "ds")
    bad = tmp_path / "bad.dbc"
    bad.write_text("BO_ nonsense")
    from hwbridge.can.database import DatabaseError

    with pytest.raises(DatabaseError):
        decode_captures([capture], [bad], tmp_path / "ds")


@pytest.mark.slow
@needs_shared
def test_the_real_truck_capture(tmp_path: Path) -> None:
    summary = decode_captures([TRUCK], [GPS_DBC, J1939_DBC], tmp_path / "ds")
    assert summary.ok
    assert summary.frames_read == 57_849
    assert summary.rows == {
        "CCVS1": 1272, "EEC1": 12719, "gnss_altitude": 115, "gnss_attitude": 115,
        "gnss_geofence": 115, "gnss_imu": 11358, "gnss_odo": 115, "gnss_pos": 115,
        "gnss_speed": 115, "gnss_status": 115, "gnss_time": 115, "j1939_dm": 508,
    }  # fmt: skip
    messages = list(can.LogReader(TRUCK))
    assert_same_as_cantools(tmp_path / "ds", messages, [GPS_DBC, J1939_DBC], TRUCK.name)
    status = read_table(tmp_path / "ds", "gnss_status")[0]
    assert (status["FixType_label"], status["Satellites"]) == ("3D-fix", 14)
    assert round(read_table(tmp_path / "ds", "gnss_pos")[0]["Latitude"], 4) == 41.4129
    speeds = [r["EngineSpeed"] for r in read_table(tmp_path / "ds", "EEC1")]
    assert min(speeds) > 640 and max(speeds) < 660
    json.loads(summary.model_dump_json())  # the summary crosses processes as JSON


@needs_shared
def test_the_real_kona_capture_with_isotp(tmp_path: Path) -> None:
    summary = decode_captures([KONA], [UDS_DBC], tmp_path / "ds", isotp=True)
    assert summary.ok
    assert summary.rows == {"Battery": 120, "Temperature": 150}
    assert summary.files[0].isotp_frames == 2010
    battery = read_table(tmp_path / "ds", "Battery")
    assert {r["M_SID_0x220101_StateOfChargeBMS"] for r in battery} == {50.0}
    temperature = read_table(tmp_path / "ds", "Temperature")
    assert {r["M_SID_0x220100_OutdoorTemp"] for r in temperature} == {7.0}
    plain = decode_captures([KONA], [UDS_DBC], tmp_path / "plain")  # frame by frame
    assert plain.rows["Temperature"] + plain.rows["Battery"] == 2010
