"""Decoding to JSON-safe values and validated encoding, on the project's demo database."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import cantools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.can.database.bits import extract, insert
from hwbridge.can.database.database import CanDatabase
from hwbridge.core.models import ToolError

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


@pytest.fixture(scope="module")
def db() -> CanDatabase:
    return CanDatabase.load(DEMO, strict=True)


def error_of(db: CanDatabase, message: str, values: dict[str, Any]) -> ToolError:
    with pytest.raises(ToolError) as info:
        db.encode(message, values)
    return info.value


# -- decoding ----------------------------------------------------------------------------


def test_choices_decode_to_value_label_dicts_and_numbers_stay_numbers(db: CanDatabase) -> None:
    frame = db.encode("TransmissionStatus", {"GearLever": "D", "CurrentGear": 4})
    decoded = db.decode("TransmissionStatus", frame.data).to_dict()
    assert decoded["signals"]["GearLever"] == {"value": 3, "label": "D"}
    assert decoded["signals"]["CurrentGear"] == 4
    assert json.loads(json.dumps(decoded, allow_nan=False)) == decoded


def test_integers_for_integral_scaling_floats_otherwise(db: CanDatabase) -> None:
    data = bytes([0x10, 0x27, 0xFA, 90, 0x32, 2, 0, 0])  # 10000 * 0.25 rpm, 250*0.4 %, ...
    signals = db.decode("EngineData", data).signals
    assert signals["EngineSpeed"] == 2500.0 and isinstance(signals["EngineSpeed"], float)
    assert signals["ThrottlePosition"] == 100.0  # 250 * 0.4 without float noise
    assert signals["CoolantTemp"] == 50 and isinstance(signals["CoolantTemp"], int)
    assert signals["EngineLoad"] == 20.0
    assert signals["EngineState"] == {"value": 2, "label": "Running"}
    confidence = db.decode("AdasObjects", bytes(11) + b"\xa0" + bytes(52)).signals
    assert confidence["Obj1Confidence"] == 100 and isinstance(confidence["Obj1Confidence"], int)


def test_scaled_values_carry_no_float_noise(db: CanDatabase) -> None:
    frame = db.encode("BatteryPack", {"PackVoltage": 48.3, "PackCurrent": -12.7})
    signals = db.decode("BatteryPack", frame.data).signals
    assert (signals["PackVoltage"], signals["PackCurrent"]) == (48.3, -12.7)
    yaw = db.decode("AdasObjects", bytes(4) + struct.pack("<f", 0.01) + bytes(56)).signals
    assert yaw["SensorYawAngle"] == 0.01  # not 0.009999999776482582


def test_non_finite_floats_become_null_with_a_note(db: CanDatabase) -> None:
    data = bytes(4) + struct.pack("<f", math.nan) + bytes(32) + struct.pack("<d", math.inf)
    decoded = db.decode("AdasObjects", data.ljust(64, b"\0"))
    assert decoded.signals["SensorYawAngle"] is None
    assert decoded.signals["RoadCurvature"] is None
    assert any("SensorYawAngle" in n for n in decoded.notes)
    json.dumps(decoded.to_dict(), allow_nan=False)


def test_short_frame_decodes_what_it_holds(db: CanDatabase) -> None:
    decoded = db.decode("EngineData", bytes([0x10, 0x27]))
    assert decoded.signals == {"EngineSpeed": 2500.0}
    assert decoded.notes and "2 bytes" in decoded.notes[0]


def test_unknown_multiplexer_value_still_decodes_the_common_signals(db: CanDatabase) -> None:
    decoded = db.decode("BatteryCells", bytes([7, 0, 0, 0, 0, 0, 0, 65]))
    assert decoded.signals == {"CellGroup": 7, "ModuleTemp": 25}
    assert "CellGroup = 7 selects no signals" in decoded.notes[0]


# -- encoding ----------------------------------------------------------------------------


def test_out_of_range_names_signal_bounds_unit_and_value(db: CanDatabase) -> None:
    error = error_of(db, "ClimateCommand", {"CabinSetpoint": 45})
    assert error.code == "OUT_OF_RANGE"
    assert error.message == "CabinSetpoint must be between 16 and 30 degC, got 45"
    # 0..0 means "unset" in a DBC: the bit width is the limit then
    assert error_of(db, "EEC1", {"EngStarterMode": 16}).code == "OUT_OF_RANGE"


def test_labels_any_case_numbers_and_decoded_dicts_are_accepted(db: CanDatabase) -> None:
    for value in ("on", "ON", " On ", 1, 1.0, True, "1", "0x1", {"value": 1, "label": "On"}):
        frame = db.encode("ClimateCommand", {"AcRequest": value})
        assert frame.signals["AcRequest"] == {"value": 1, "label": "On"}, value


def test_unknown_label_lists_the_labels(db: CanDatabase) -> None:
    error = error_of(db, "TransmissionStatus", {"GearLever": "X"})
    assert error.code == "INVALID_VALUE"
    assert error.message.startswith("GearLever takes one of P, R, N, D, S, L")
    assert error.message.endswith("got 'X'")
    assert error_of(db, "ClimateCommand", {"CabinSetpoint": "warm"}).code == "INVALID_VALUE"
    assert error_of(db, "ClimateCommand", {"CabinSetpoint": math.nan}).code == "INVALID_VALUE"
    assert error_of(db, "ClimateCommand", {"CabinSetpoint": [21]}).code == "INVALID_VALUE"


def test_unknown_signal_and_message_suggest_close_names(db: CanDatabase) -> None:
    error = error_of(db, "ClimateCommand", {"CabinSetpont": 21})
    assert error.code == "UNKNOWN_SIGNAL"
    assert "Did you mean CabinSetpoint?" in error.message
    error = error_of(db, "ClimateComand", {})
    assert error.code == "UNKNOWN_MESSAGE"
    assert "ClimateCommand" in error.message


def test_omitted_signals_take_the_database_start_value(db: CanDatabase) -> None:
    frame = db.encode("ClimateCommand", {"AcRequest": "On"})
    assert frame.defaulted == (
        "CabinSetpoint",
        "FanLevel",
        "Recirculation",
        "AirDistribution",
        "RearDefrost",
        "RollingCounter",
        "Checksum",
    )
    assert frame.signals["CabinSetpoint"] == 21.0  # GenSigStartValue 42 * 0.5
    assert frame.signals["FanLevel"] == {"value": 8, "label": "Auto"}
    assert frame.data == bytes([42, 0x18, 1, 0, 0, 0, 0, 0])


def test_default_is_zero_or_the_minimum_when_zero_is_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "d.dbc"
    path.write_text(
        'VERSION ""\nNS_ :\nBS_:\nBU_: A\nBO_ 1 M: 2 A\n'
        ' SG_ Setpoint : 0|8@1+ (0.5,0) [16|30] "degC" A\n'
        ' SG_ Offset : 8|8@1+ (1,-40) [-40|100] "degC" A\n'
    )
    frame = CanDatabase.load(path).encode("M", {})
    assert frame.signals == {"Setpoint": 16.0, "Offset": 0}


def test_values_off_the_resolution_are_rounded_and_reported(db: CanDatabase) -> None:
    frame = db.encode("ClimateCommand", {"CabinSetpoint": 22.3})
    assert frame.signals["CabinSetpoint"] == 22.5
    assert frame.notes == ("CabinSetpoint 22.3 was sent as 22.5 (resolution 0.5)",)


def test_multiplexer_is_set_from_the_signals_given(db: CanDatabase) -> None:
    frame = db.encode("BatteryCells", {"Cell07Voltage": 3.7})
    assert frame.signals["CellGroup"] == 1
    assert set(frame.signals) == {
        "CellGroup",
        "Cell05Voltage",
        "Cell06Voltage",
        "Cell07Voltage",
        "Cell08Voltage",
        "ModuleTemp",
    }
    assert "CellGroup" not in frame.defaulted
    decoded = db.decode("BatteryCells", frame.data).signals
    assert decoded["Cell07Voltage"] == 3.7 and decoded["CellGroup"] == 1


def test_multiplexer_conflicts_are_refused(db: CanDatabase) -> None:
    both = error_of(db, "BatteryCells", {"Cell01Voltage": 3.6, "Cell07Voltage": 3.7})
    assert both.code == "INVALID_VALUE" and "never in the same BatteryCells frame" in both.message
    wrong = error_of(db, "BatteryCells", {"CellGroup": 0, "Cell07Voltage": 3.7})
    assert wrong.message == "CellGroup is 0 but Cell07Voltage needs CellGroup = 1"


def test_explicit_multiplexer_value_selects_its_branch(db: CanDatabase) -> None:
    frame = db.encode("BatteryCells", {"CellGroup": 3})
    assert "Cell13Voltage" in frame.defaulted and "Cell01Voltage" not in frame.signals


def test_can_fd_and_extended_frames(db: CanDatabase) -> None:
    fd = db.encode("AdasObjects", {"Obj1Class": "car", "RoadCurvature": 0.001})
    assert fd.is_fd and len(fd.data) == 64 and not fd.is_extended
    assert db.decode("AdasObjects", fd.data).signals["RoadCurvature"] == 0.001
    j1939 = db.encode("EEC1", {"EngSpeed": 650})
    assert j1939.is_extended and j1939.arbitration_id == 0x0CF00400
    assert j1939.to_dict()["id"] == "0x0CF00400"
    assert json.loads(json.dumps(j1939.to_dict()))["data"] == "00 7D 7D 50 14 00 00 7D"


def test_qualified_names_are_accepted_in_encode(db: CanDatabase) -> None:
    frame = db.encode("climatecommand", {"ClimateCommand.CabinSetpoint": 20, "acrequest": 1})
    assert frame.message == "ClimateCommand"
    assert frame.signals["CabinSetpoint"] == 20.0
    assert frame.signals["AcRequest"] == {"value": 1, "label": "On"}


# -- the signal-by-signal path used for layouts cantools cannot compile ------------------


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_bitwise_codec_agrees_with_cantools(db: CanDatabase, data: st.DataObject) -> None:
    message = data.draw(st.sampled_from([m for m in db.messages if not m.is_multiplexed()]))
    assert {m.name for m in db.messages} >= {"VehicleDynamics", "AdasObjects"}  # both byte orders
    raw: dict[str, int | float] = {}
    for signal in message.signals:
        if signal.is_float:
            floats = st.floats(-1e6, 1e6, width=32) if signal.length == 32 else st.floats(-1e6, 1e6)
            raw[signal.name] = data.draw(floats)
        elif signal.is_signed:
            half = 1 << (signal.length - 1)
            raw[signal.name] = data.draw(st.integers(-half, half - 1))
        else:
            raw[signal.name] = data.draw(st.integers(0, (1 << signal.length) - 1))
    payload = bytearray(message.length)
    for signal in message.signals:
        insert(signal, raw[signal.name], payload)
    assert bytes(payload) == message.encode(raw, scaling=False, strict=False)
    assert {s.name: extract(s, bytes(payload)) for s in message.signals} == raw


def test_overlapping_signals_still_decode_and_encode(tmp_path: Path) -> None:
    text = (
        'VERSION ""\nNS_ :\nBS_:\nBU_: A\nBO_ 303 Modes: 8 A\n'
        ' SG_ Counter : 59|4@0+ (1,0) [0|15] "" A\n'
        ' SG_ Mode : 6|2@0+ (1,0) [0|3] "" A\n'
        ' SG_ ModeBit : 5|1@0+ (1,0) [0|1] "" A\n'
    )
    path = tmp_path / "overlap.dbc"
    path.write_text(text)
    data = bytes([0b0110_0000, 0, 0, 0, 0, 0, 0, 0x09])
    plain = cantools.database.load_string(text, strict=False)
    assert isinstance(plain, cantools.database.can.Database)
    with pytest.raises(cantools.database.DecodeError):
        plain.messages[0].decode(data)  # cantools cannot compile this layout

    db = CanDatabase.load(path)
    assert db.decode("Modes", data).signals == {"Counter": 9, "Mode": 3, "ModeBit": 1}
    frame = db.encode("Modes", {"Counter": 9, "Mode": 3})
    assert frame.data == data


def test_signals_past_the_message_length_are_skipped_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.dbc"
    path.write_text(
        'VERSION ""\nNS_ :\nBS_:\nBU_: A\nBO_ 354 Keep: 8 A\n'
        ' SG_ First : 7|16@0+ (1,0) [0|65535] "" A\n'
        ' SG_ Beyond : 55|30@0+ (1,0) [0|65535] "" A\n'
    )
    db = CanDatabase.load(path)
    decoded = db.decode("Keep", bytes([1, 2, 0, 0, 0, 0, 0, 0]))
    assert decoded.signals == {"First": 0x0102}
    assert decoded.notes == (
        "Beyond lie beyond the 8 bytes of Keep in the database and are not decoded",
    )
    assert db.encode("Keep", {"First": 5}).data == bytes([0, 5, 0, 0, 0, 0, 0, 0])
    assert error_of(db, "Keep", {"Beyond": 1}).code == "INVALID_VALUE"
