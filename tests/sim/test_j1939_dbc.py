"""dbc/j1939_truck.dbc: loads strictly in cantools, follows J1939-71, decodes in hwbridge."""

from __future__ import annotations

from typing import Any

import cantools
import pytest

from hwbridge.can.database.database import CanDatabase
from hwbridge.resources import J1939_TRUCK_DBC, bundled_dbc, bundled_dbcs
from tests.sim.conftest import ROOT

TRUCK = ROOT / "dbc" / J1939_TRUCK_DBC

# message: (PGN, source address, length, {signal: (SPN, scale, offset, unit)})
EXPECTED: dict[str, tuple[int, int, int, dict[str, tuple[int, float, int, str]]]] = {
    "EEC1": (61444, 0x00, 8, {
        "EngineSpeed": (190, 0.125, 0, "rpm"),
        "ActualEnginePercentTorque": (513, 1, -125, "%"),
        "DriversDemandEnginePercentTorque": (512, 1, -125, "%"),
    }),
    "EEC2": (61443, 0x00, 8, {"AcceleratorPedalPosition1": (91, 0.4, 0, "%")}),
    "ET1": (65262, 0x00, 8, {
        "EngineCoolantTemperature": (110, 1, -40, "degC"),
        "EngineFuelTemperature1": (174, 1, -40, "degC"),
        "EngineOilTemperature1": (175, 0.03125, -273, "degC"),
    }),
    "EFL_P1": (65263, 0x00, 8, {
        "EngineOilPressure": (100, 4, 0, "kPa"),
        "EngineCoolantLevel": (111, 0.4, 0, "%"),
    }),
    "CCVS1": (65265, 0x00, 8, {
        "WheelBasedVehicleSpeed": (84, 1 / 256, 0, "km/h"),
        "BrakeSwitch": (597, 1, 0, ""),
        "ParkingBrakeSwitch": (70, 1, 0, ""),
    }),
    "ETC2": (61445, 0x03, 8, {
        "TransmissionSelectedGear": (524, 1, -125, ""),
        "TransmissionCurrentGear": (523, 1, -125, ""),
    }),
    "EBC1": (61441, 0x0B, 8, {
        "BrakePedalPosition": (521, 0.4, 0, "%"),
        "AntiLockBrakingActive": (563, 1, 0, ""),
    }),
    "HOURS": (65253, 0x00, 8, {"EngineTotalHoursOfOperation": (247, 0.05, 0, "h")}),
    "VEP1": (65271, 0x00, 8, {"BatteryPotentialPowerInput1": (168, 0.05, 0, "V")}),
    "EC1": (65251, 0x00, 39, {
        "EngineSpeedAtIdlePoint1": (188, 0.125, 0, "rpm"),
        "EnginePercentTorqueAtIdlePoint1": (539, 1, 0, "%"),
        "EngineReferenceTorque": (544, 1, 0, "Nm"),
    }),
}  # fmt: skip


@pytest.fixture(scope="module")
def db() -> Any:
    return cantools.database.load_file(str(TRUCK))  # strict: overlaps and overflows refused


def test_it_is_bundled_with_hwbridge() -> None:
    assert J1939_TRUCK_DBC in bundled_dbcs()
    assert bundled_dbc(J1939_TRUCK_DBC) == TRUCK
    assert bundled_dbc("j1939_truck") == TRUCK


def test_every_message_is_a_j1939_parameter_group(db: Any) -> None:
    for message in db.messages:
        assert message.is_extended_frame, message.name
        assert message.protocol == "j1939", message.name
        assert message.senders == [
            {0x00: "Engine", 0x03: "Transmission", 0x0B: "Brakes"}[message.frame_id & 0xFF]
        ]
        for signal in message.signals:
            assert signal.spn, f"{message.name}.{signal.name} has no SPN"
            assert not signal.is_signed and signal.byte_order == "little_endian"
            assert signal.comment, f"{message.name}.{signal.name}"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_parameter_groups_of_j1939_71(db: Any, name: str) -> None:
    pgn, source, length, signals = EXPECTED[name]
    message = db.get_message_by_name(name)
    frame_id = message.frame_id
    assert (frame_id >> 8) & 0x3FFFF == pgn
    assert frame_id & 0xFF == source
    assert message.length == length
    for signal_name, (spn, scale, offset, unit) in signals.items():
        signal = message.get_signal_by_name(signal_name)
        assert (signal.spn, signal.scale, signal.offset, signal.unit or "") == (
            spn,
            scale,
            offset,
            unit,
        )


def test_periodic_rates(db: Any) -> None:
    rates = {m.name: m.cycle_time for m in db.messages}
    assert rates["EEC1"] in (10, 20)
    assert rates["EEC2"] == 50
    assert rates["CCVS1"] == rates["ETC2"] == rates["EBC1"] == 100
    assert rates["ET1"] == rates["VEP1"] == 1000
    assert rates["HOURS"] is None  # on request


def test_a_client_database_decodes_the_multi_packet_ec1_by_pgn() -> None:
    db = CanDatabase.load(TRUCK)
    message = db.message_for_frame(0x18FEE3F9, True)  # any source address
    assert message is not None and message.name == "EC1"
    payload = bytearray(b"\xff" * 39)
    payload[0:2] = (600 * 8).to_bytes(2, "little")
    payload[2] = 42
    payload[19:21] = (2500).to_bytes(2, "little")
    signals = db.decode("EC1", bytes(payload)).signals
    assert signals["EngineSpeedAtIdlePoint1"] == 600
    assert signals["EnginePercentTorqueAtIdlePoint1"] == 42
    assert signals["EngineReferenceTorque"] == 2500
