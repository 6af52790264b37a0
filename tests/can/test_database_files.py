"""Every real database under ../shared/data loads, and every message of those and of the demo
database round-trips (without ../shared, the demo database's alone).

Round trip: values drawn within each signal's range and resolution (labels for labelled
values, the multiplexer first) -> `encode` -> `decode` gives the same JSON values back.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import cantools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.can.database.database import CanDatabase, DatabaseError, DatabaseRepairWarning
from tests.can.strategies import draw_message
from tests.shared_data import DATA, needs_shared, shared_files, shared_params

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "dbc" / "demo_vehicle.dbc"
OPENDBC = shared_files("opendbc", ".dbc")
# The files cantools 45 refuses even with strict=False (README of the data set).
REFUSED_BY_CANTOOLS = {
    "chrysler_cusw.dbc",
    "fca_giorgio.dbc",
    "mazda_2017.dbc",
    "psa_aee2010_r3.dbc",
    "rivian_primary_actuator.dbc",
    "tesla_can.dbc",
    "toyota_2017_ref_pt.dbc",
    "toyota_radar_dsu_tssp.dbc",
    "vw_mqbevo.dbc",
}
OTHER = [
    p
    for folder in ("cantools", "css")
    for p in shared_files(folder, ".dbc", ".kcd", ".sym", ".arxml")
    if p.name != "issue_199.dbc"
]
# without ../shared, the demo database alone
ALL_FILES = [*OPENDBC, *OTHER, DEMO]


@functools.cache
def load(path: Path) -> tuple[CanDatabase, tuple[str, ...]]:
    """Each file is parsed once per session; returns the database and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = CanDatabase.load(path)
    return db, tuple(str(w.message) for w in caught if w.category is DatabaseRepairWarning)


@needs_shared
def test_the_data_set_is_complete() -> None:
    assert len(OPENDBC) == 46
    assert {p.suffix for p in OTHER} >= {".dbc", ".kcd", ".sym", ".arxml"}


@pytest.mark.parametrize("path", shared_params(OPENDBC), ids=lambda p: p.name)
def test_every_opendbc_file_loads(path: Path) -> None:
    db, repair_warnings = load(path)
    assert len(db) > 0
    if path.name in REFUSED_BY_CANTOOLS:
        assert len(repair_warnings) == 1 and db.repairs
        assert all(f"line {r.line}:" in repair_warnings[0] for r in db.repairs)
    else:
        assert repair_warnings == () and db.repairs == ()


@needs_shared
@pytest.mark.parametrize("name", sorted(REFUSED_BY_CANTOOLS))
def test_plain_cantools_refuses_what_we_repair(name: str) -> None:
    with pytest.raises(Exception):  # noqa: PT011 - any cantools error
        cantools.database.load_file(DATA / "opendbc" / name, strict=False)


@pytest.mark.parametrize("path", shared_params(OTHER), ids=lambda p: p.name)
def test_other_shared_databases_load(path: Path) -> None:
    db, repair_warnings = load(path)
    assert len(db) > 0 and repair_warnings == ()


@needs_shared
def test_issue_199_is_rejected_naming_file_line_and_problem() -> None:
    path = DATA / "cantools" / "issue_199.dbc"
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    error = info.value
    lines = path.read_text(encoding="cp1252").splitlines()
    assert error.line is not None
    assert lines[error.line - 1].startswith("BO_ 274923520 DriverDoorStatus")
    assert f"issue_199.dbc:{error.line}:" in str(error)
    assert "0x10630000" in error.problem and "DriverDoorStatus" in error.problem
    assert "UseGMParameterIDs" in error.problem  # why it was not repaired


@needs_shared
def test_kcd_sym_arxml_decode() -> None:
    homer, _ = load(DATA / "cantools" / "the_homer.kcd")
    jopp, _ = load(DATA / "cantools" / "jopp-6.0.sym")
    arxml, _ = load(DATA / "cantools" / "system-4.2.arxml")
    for db in (homer, jopp, arxml):
        message = next(m for m in db.messages if m.signals and not m.is_container)
        frame = db.encode(message.name, {})
        decoded = db.decode(message.name, frame.data)
        assert decoded.signals == frame.signals
        json.dumps(db.describe_message(message.name))


# -- round trips --------------------------------------------------------------------------


def _round_trip(db: CanDatabase, data: st.DataObject, name: str | None = None) -> None:
    drawn = draw_message(db, data, name)
    message = drawn.message
    frame = db.encode(message.name, drawn.sent)
    assert frame.defaulted == ()
    assert len(frame.data) == message.length
    assert frame.is_extended == message.is_extended_frame
    decoded = db.decode_frame(frame.arbitration_id, frame.data, frame.is_extended)
    assert decoded is not None and decoded.message in (message.name, *db.message_names)
    decoded = db.decode(message, frame.data)
    json.dumps(decoded.to_dict(), allow_nan=False)
    drawn.check(decoded.signals)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_real_databases(path: Path, data: st.DataObject) -> None:
    _round_trip(load(path)[0], data)


@pytest.mark.parametrize(
    "message",
    [
        "EngineData",
        "VehicleDynamics",
        "TransmissionStatus",
        "DoorStatus",
        "LightStatus",
        "ClimateCommand",
        "ClimateStatus",
        "BatteryCells",
        "BatteryPack",
        "AdasObjects",
        "EEC1",
    ],
)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_round_trip_every_demo_message(message: str, data: st.DataObject) -> None:
    _round_trip(load(DEMO)[0], data, message)


def test_demo_database_is_plain_cantools_strict_and_complete() -> None:
    db = cantools.database.load_file(DEMO, strict=True)
    assert isinstance(db, cantools.database.can.Database)
    assert {n.name for n in db.nodes} >= {"ECM", "TCM", "BCM", "HVAC", "BMS", "HMI"}
    for message in db.messages:
        assert message.cycle_time, message.name
        assert message.comment and message.senders, message.name
    assert [m.name for m in db.messages if m.is_fd] == ["AdasObjects"]
    assert [m.name for m in db.messages if m.protocol == "j1939"] == ["EEC1"]
    assert [m.name for m in db.messages if m.is_multiplexed()] == ["BatteryCells"]
    climate = db.get_message_by_name("ClimateCommand")
    setpoint = climate.get_signal_by_name("CabinSetpoint")
    assert (setpoint.minimum, setpoint.maximum, setpoint.unit) == (16, 30, "degC")
    assert {"RollingCounter", "Checksum", "FanLevel", "AcRequest"} <= {
        s.name for s in climate.signals
    }
    gear = db.get_message_by_name("TransmissionStatus").get_signal_by_name("GearLever").choices
    assert gear is not None
    assert [str(gear[k]) for k in sorted(gear)][:4] == ["P", "R", "N", "D"]


@needs_shared
def test_obd_response_decodes_through_extended_multiplexing() -> None:
    db, _ = load(DATA / "css" / "OBD-v4.4.dbc")
    decoded = db.decode_frame(0x7E8, bytes([0x04, 0x41, 0x0C, 0x1A, 0xF8, 0, 0, 0]))
    assert decoded is not None
    assert decoded.signals["S01PID0C_EngineRPM"] == 1726.0
