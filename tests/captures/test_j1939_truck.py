"""The real truck log's J1939 diagnostics and multi-packet messages, offline: through
decode_captures, `hwbridge decode`, and the capture tools' SQL.

The log (CSS Electronics, a parked truck) holds 127 DM1 messages from the engine (address 0),
each a BAM of 18 bytes: MIL on, four trouble codes; and 25 EC1 (engine configuration, PGN
65251, 39 bytes). The expected values were read with python-can and the J1939 driver's own
TpReceiver and parse_dm, independently of the capture path."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cantools
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

import can
from hwbridge.captures import CaptureDriver, decode_captures
from hwbridge.captures.summary import DecodeSummary
from hwbridge.cli.main import main
from hwbridge.j1939.database.dm import parse_dm
from hwbridge.j1939.database.ids import DM1_PGN
from hwbridge.j1939.transport.tp import Completed, TpReceiver
from tests.shared_data import require_shared

from .conftest import GPS_DBC, J1939_DBC, TRUCK, ask_query

EC1_DBC = Path(__file__).parent / "data" / "j1939_ec1.dbc"
EC1_PGN = 0xFEE3
DTCS = [(980, 9, 126), (3216, 20, 2), (609, 9, 1), (609, 12, 3)]
LAMPS = {"mil": "on", "red_stop": "off", "amber_warning": "off", "protect": "not_available"}
EC1 = {
    "EngSpeedAtIdlePoint1": 650.0,
    "EngPercentTorqueAtIdlePoint1": 64,
    "EngSpeedAtPoint2": 2086.25,
    "EngPercentTorqueAtPoint2": 15,
    "EngReferenceTorque": 2386,  # bytes 20-21: beyond the first packet
}


def _iso(us: int) -> str:
    t = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    """The log's DM1 messages read with python-can's reader and the J1939 driver's
    TpReceiver: their times (when their last packet came), and where SPN 3216 first shows."""
    require_shared()
    receiver = TpReceiver()
    times: list[int] = []
    ec1: list[tuple[int, bytes]] = []
    first_3216: int | None = None
    with can.LogReader(TRUCK) as reader:
        for msg in reader:
            for event in receiver.feed(msg.arbitration_id, bytes(msg.data), msg.timestamp):
                if isinstance(event, Completed) and event.pgn == EC1_PGN:
                    ec1.append((round(event.ended * 1e6), event.data))
                if isinstance(event, Completed) and event.pgn == DM1_PGN:
                    us = round(event.ended * 1e6)
                    times.append(us)
                    dm = parse_dm(event.data)
                    assert [(d.spn, d.fmi, d.occurrence_count) for d in dm.dtcs] == DTCS
                    if first_3216 is None and any(d.spn == 3216 for d in dm.dtcs):
                        first_3216 = us
    assert first_3216 is not None
    return {"times": times, "first_3216": first_3216, "ec1": ec1}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DecodeSummary]:
    require_shared()
    out = tmp_path_factory.mktemp("truck") / "ds"
    summary = decode_captures([TRUCK], [GPS_DBC, J1939_DBC, EC1_DBC], out)
    return out, summary


def test_the_dm1_is_decoded_exactly(
    dataset: tuple[Path, DecodeSummary], truth: dict[str, Any]
) -> None:
    out, summary = dataset
    rows = pq.read_table(out / "j1939_dm").to_pylist()
    assert len(rows) == 127 * 4 and summary.rows["j1939_dm"] == 508
    messages: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        messages.setdefault(row["timestamp"], []).append(row)
    assert len(messages) == 127
    stamps = [round(t.timestamp() * 1e6) for t in messages]
    assert stamps == truth["times"]
    for codes in messages.values():
        for row in codes:
            assert (row["message"], row["source_address"]) == ("DM1", 0)
            assert {lamp: row[lamp] for lamp in LAMPS} == LAMPS
            assert row["mil_flash"] is None  # the flash bits say "do not flash"
            assert row["conversion_method"] == 0
        assert [(r["spn"], r["fmi"], r["occurrence_count"]) for r in codes] == DTCS
    first = messages[next(iter(messages))]
    assert first[1]["spn_name"] == "Aftertreatment 1 Intake NOx"
    assert [r["fmi_text"] for r in first] == [
        "Abnormal update rate",
        "Data drifted high",
        "Abnormal update rate",
        "Bad intelligent device or component",
    ]


def test_the_summary_counts_the_transport_protocol(dataset: tuple[Path, DecodeSummary]) -> None:
    _, summary = dataset
    f = summary.files[0]
    assert (f.j1939_tp_frames, f.j1939_tp_completed, f.j1939_tp_aborted) == (683, 152, 0)
    assert f.j1939_dm_messages == 127
    # the transport-protocol frames themselves are what they were: frames no database knows
    assert (summary.frames_read, summary.frames_decoded) == (57_849, 26_269)


def test_ec1_of_39_bytes_is_decoded_into_its_table(
    dataset: tuple[Path, DecodeSummary], truth: dict[str, Any]
) -> None:
    out, summary = dataset
    assert summary.rows["EC1"] == 25
    rows = pq.read_table(out / "EC1").to_pylist()
    assert {k: rows[0][k] for k in EC1} == EC1
    db = cantools.database.load_file(str(EC1_DBC))
    assert isinstance(db, cantools.database.can.Database)
    message = db.get_message_by_name("EC1")
    assert len(truth["ec1"]) == 25 and all(len(data) == 39 for _, data in truth["ec1"])
    for row, (us, data) in zip(rows, truth["ec1"], strict=True):
        assert round(row["timestamp"].timestamp() * 1e6) == us
        assert {k: row[k] for k in EC1} == message.decode(data)


def test_no_j1939_leaves_the_tables_as_they_were(tmp_path: Path) -> None:
    require_shared()
    summary = decode_captures([TRUCK], [GPS_DBC, J1939_DBC, EC1_DBC], tmp_path / "ds", j1939=False)
    assert "j1939_dm" not in summary.rows and "EC1" not in summary.rows
    assert summary.files[0].j1939_tp_frames == 0
    assert summary.rows["EEC1"] == 12_719


def test_hwbridge_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_shared()
    out = tmp_path / "ds"
    code = main(
        ["decode", str(TRUCK), "--dbc", str(GPS_DBC), "--dbc", str(J1939_DBC), "--out", str(out)]
    )
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert (
        "J1939 transport protocol: 683 frames, 152 messages reassembled, 0 sessions aborted; "
        "127 DM1/DM2 messages in j1939_dm" in printed
    )
    assert "j1939_dm 508" in printed
    rows = pq.read_table(out / "j1939_dm").to_pylist()
    assert [(r["spn"], r["fmi"], r["occurrence_count"]) for r in rows[:4]] == DTCS
    code = main(["decode", str(TRUCK), "--dbc", str(GPS_DBC), "--out", str(tmp_path / "gps")])
    assert code == 0 and "j1939_dm" not in capsys.readouterr().out  # no J1939 database
    code = main(
        ["decode", str(TRUCK), "--dbc", str(GPS_DBC), "--out", str(tmp_path / "on"), "--j1939",
         "--json"]
    )  # fmt: skip
    assert code == 0 and json.loads(capsys.readouterr().out)["rows"]["j1939_dm"] == 508


@pytest.fixture(scope="module")
def driver(dataset: tuple[Path, DecodeSummary]) -> Iterator[CaptureDriver]:
    with CaptureDriver.from_dataset(dataset[0]) as d:
        yield d


def test_when_did_spn_3216_first_become_active(
    driver: CaptureDriver, truth: dict[str, Any]
) -> None:
    error, result = ask_query(
        driver,
        "SELECT min(timestamp) AS first_active FROM j1939_dm WHERE message = 'DM1' AND spn = 3216",
    )
    assert error is None, result
    assert result["rows"] == [[_iso(truth["first_3216"])]]
    assert result["rows"] == [["2021-10-25T19:00:55.718900Z"]]
    error, result = ask_query(
        driver,
        "SELECT source_address, spn, fmi, max(occurrence_count) AS oc, count(*) AS messages "
        "FROM j1939_dm GROUP BY ALL ORDER BY spn, fmi",
    )
    assert error is None, result
    assert result["rows"] == [[0, 609, 9, 1, 127], [0, 609, 12, 3, 127], [0, 980, 9, 126, 127],
                              [0, 3216, 20, 2, 127]]  # fmt: skip


def test_describe_dataset_lists_the_table(driver: CaptureDriver) -> None:
    r = driver.process_llm_response('{"tool": "describe_dataset", "arguments": {}}')
    assert r.call_executed, r.call_detail
    tables = {t["name"]: t for t in r.tool_call_result["tables"]}
    dm = tables["j1939_dm"]
    assert dm["rows"] == 508 and "DM1" in dm["about"] and "spn NULL" in dm["about"]
    names = [c["name"] if isinstance(c, dict) else c for c in dm["columns"]]
    assert names[:3] == ["source_address", "message", "mil"] and "occurrence_count" in names
    r = driver.process_llm_response(
        '{"tool": "signal_stats", "arguments": {"signal": "j1939_dm.occurrence_count"}}'
    )
    assert r.call_executed and r.tool_call_result["max"] == 126
