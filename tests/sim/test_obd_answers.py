"""OBD-II answers as bytes (SAE J1979 encodings), without a bus."""

from __future__ import annotations

import dataclasses

import pytest

from firmware_sim.model import VehicleModel, VehicleState
from firmware_sim.obd import (
    DEFAULT_VIN,
    ENGINE,
    TRANSMISSION,
    EcuProfile,
    answer,
    decode_dtc,
    encode_dtc,
    supported_pids,
)
from firmware_sim.uds import takes_time


@pytest.fixture
def state() -> VehicleState:
    return VehicleModel(seed=2, driving=False).advance(1.0)


def ask(request: str, state: VehicleState, functional: bool = False) -> str | None:
    reply = answer(bytes.fromhex(request), state, vin=DEFAULT_VIN, functional=functional)
    return reply.hex(" ").upper() if reply is not None else None


def test_rpm_speed_coolant_and_friends_use_the_standard_formulas(state: VehicleState) -> None:
    s = dataclasses.replace(
        state,
        engine_speed_rpm=1726.0,
        vehicle_speed_kmh=61.4,
        coolant_temp_c=90.0,
        engine_load_pct=50.0,
        throttle_pct=100.0,
        intake_air_temp_c=-40.0,
        fuel_level_pct=68.0,
        module_voltage_v=14.2,
        outside_temp_c=21.0,
        soc_pct=80.0,
    )
    assert ask("01 0C", s) == "41 0C 1A F8"  # (256*0x1A + 0xF8) / 4 = 1726 rpm
    assert ask("01 0D", s) == "41 0D 3D"
    assert ask("01 05", s) == "41 05 82"
    assert ask("01 04", s) == "41 04 80"
    assert ask("01 11", s) == "41 11 FF"
    assert ask("01 0F", s) == "41 0F 00"
    assert ask("01 2F", s) == "41 2F AD"
    assert ask("01 42", s) == "41 42 37 78"  # 14200 mV
    assert ask("01 46", s) == "41 46 3D"
    assert ask("01 5B", s) == "41 5B CC"
    assert ask("01 1C", s) == "41 1C 01"
    assert ask("01 51", s) == "41 51 11"
    assert ask("01 0C 0D", s) == "41 0C 1A F8 0D 3D"  # several PIDs in one request


def test_values_are_clamped_to_what_a_byte_can_carry(state: VehicleState) -> None:
    s = dataclasses.replace(state, vehicle_speed_kmh=400.0, coolant_temp_c=-60.0)
    assert ask("01 0D", s) == "41 0D FF"
    assert ask("01 05", s) == "41 05 00"


def answered_pids(state: VehicleState, ecu: EcuProfile = ENGINE, mode: int = 1) -> set[int]:
    """The PIDs the bitmaps (00, 20, ... as long as the last bit says more follow) list."""
    found: set[int] = set()
    base = 0
    while True:
        request = bytes([mode, base] if mode == 1 else [mode, base, 0])
        reply = answer(request, state, vin=DEFAULT_VIN, functional=False, ecu=ecu)
        assert reply is not None and reply[0] == mode + 0x40 and reply[1] == base, reply
        bits = int.from_bytes(reply[-4:], "big")
        found |= {base + i for i in range(1, 33) if bits & 1 << (32 - i)}
        if base + 0x20 not in found:
            return found
        base += 0x20


def test_supported_pid_bitmaps_match_what_is_answered(state: VehicleState) -> None:
    answered = answered_pids(state)
    assert {0x01, 0x04, 0x05, 0x0C, 0x0D, 0x0F, 0x11, 0x1C, 0x2F, 0x42, 0x46, 0x51, 0x5B} <= (
        answered
    )
    assert len(answered - {0x20, 0x40, 0x60, 0x80, 0xA0}) >= 40
    assert 0xA0 in answered and 0xC0 not in answered
    for pid in answered:
        reply = answer(bytes([1, pid]), state, vin=DEFAULT_VIN, functional=True)
        assert reply is not None and reply[:2] == bytes([0x41, pid]), hex(pid)
    for pid in set(range(1, 0x100)) - answered:
        assert answer(bytes([1, pid]), state, vin=DEFAULT_VIN, functional=True) is None


def test_the_transmission_answers_its_own_few_pids(state: VehicleState) -> None:
    assert answered_pids(state, TRANSMISSION) == {0x01, 0x1C, 0x20, 0x40, 0x60, 0x80, 0xA0, 0xA4}
    gear = answer(b"\x01\xa4", state, vin=DEFAULT_VIN, functional=True, ecu=TRANSMISSION)
    assert gear == b"\x41\xa4\x02\x00\x00\x00"  # parked: neutral
    assert answer(b"\x01\x0c", state, vin=DEFAULT_VIN, functional=True, ecu=TRANSMISSION) is None
    assert answer(b"\x03", state, vin=DEFAULT_VIN, functional=True, ecu=TRANSMISSION) == b"\x43\x00"


def test_monitor_status_carries_mil_and_dtc_count(state: VehicleState) -> None:
    assert ask("01 01", state) == "41 01 00 07 65 00"
    faulty = dataclasses.replace(state, mil=True, stored_dtcs=("P0217", "P0301"))
    assert ask("01 01", faulty) == "41 01 82 07 65 00"


def test_unsupported_requests_silent_when_functional_negative_when_physical(
    state: VehicleState,
) -> None:
    assert ask("01 02", state, functional=True) is None
    assert ask("01 02", state) == "7F 01 12"
    assert ask("22 F1 00", state, functional=True) is None
    assert ask("22 F1 00", state) == "7F 22 31"  # requestOutOfRange
    assert ask("2E F1 90 00", state) == "7F 2E 7F"  # not in the default session
    assert ask("2E F1 90 00", state, functional=True) is None
    assert ask("BA", state) == "7F BA 11"
    assert ask("01", state) == "7F 01 13"
    assert ask("09 05", state) == "7F 09 12"
    assert ask("", state) is None


def test_dtc_lists_for_modes_03_07_0a_and_clear(state: VehicleState) -> None:
    assert ask("03", state) == "43 00"
    s = dataclasses.replace(
        state,
        stored_dtcs=("P0217",),
        pending_dtcs=("P0217", "C1234"),
        permanent_dtcs=("U0100",),
    )
    assert ask("03", s) == "43 01 02 17"
    assert ask("07", s) == "47 02 02 17 52 34"
    assert ask("0A", s) == "4A 01 C1 00"
    assert ask("04", s) == "44"


def test_vin_and_supported_info_types(state: VehicleState) -> None:
    assert ask("09 00", state) == "49 00 54 40 00 00"  # 0x02, 0x04, 0x06 and 0x0A
    reply = answer(b"\x09\x02", state, vin=DEFAULT_VIN, functional=False)
    assert reply == b"\x49\x02\x01" + DEFAULT_VIN.encode()
    name = answer(b"\x09\x0a", state, vin=DEFAULT_VIN, functional=False)
    assert name is not None and name.startswith(b"\x49\x0a\x01ECM") and len(name) == 23


@pytest.mark.parametrize("code", ["P0217", "C1234", "B0001", "U3FFF", "P0301"])
def test_dtc_codes_round_trip(code: str) -> None:
    assert decode_dtc(encode_dtc(code)) == code


def test_bad_dtc_and_bitmap_helper() -> None:
    with pytest.raises(ValueError, match="not a DTC"):
        encode_dtc("X0217")
    assert supported_pids(0x00, {0x01, 0x20}) == bytes([0x80, 0, 0, 0x01])


def test_freeze_frame_is_the_state_when_the_code_was_stored(state: VehicleState) -> None:
    assert ask("02 02 00", state) == "42 02 00 00 00"  # no freeze frame stored
    assert ask("02 0C 00", state) == "7F 02 12"
    frozen = dataclasses.replace(state, coolant_temp_c=121.0, engine_speed_rpm=2000.0)
    s = dataclasses.replace(
        state, coolant_temp_c=60.0, freeze_dtc="P0217", freeze_frame=frozen, stored_dtcs=("P0217",)
    )
    assert ask("02 02 00", s) == "42 02 00 02 17"
    assert ask("02 05 00 0C 00", s) == "42 05 00 A1 0C 00 1F 40"  # 121 degC, 2000 rpm
    assert ask("02 05 01", s) == "7F 02 12"  # only frame 0 exists
    # python-OBD asks without the frame number: frame 0, answered in the shape asked
    assert ask("02 0C", s) == "42 0C 1F 40"
    assert ask("02 02", s) == "42 02 02 17"
    assert ask("02 0C", state) == "7F 02 12"  # no freeze frame stored
    assert ask("02 0C", s, functional=True) == "42 0C 1F 40"
    assert ask("01 05", s) == "41 05 64"  # mode 01: now
    assert 0x05 in answered_pids(s, mode=2) and 0x01 not in answered_pids(s, mode=2)
    reply = answer(b"\x02\x02\x00", s, vin=DEFAULT_VIN, functional=True, ecu=TRANSMISSION)
    assert reply == b"\x42\x02\x00\x00\x00"


def test_uds_read_only_services(state: VehicleState) -> None:
    vin = answer(b"\x22\xf1\x90", state, vin=DEFAULT_VIN, functional=False)
    assert vin == b"\x62\xf1\x90" + DEFAULT_VIN.encode()
    assert ask("22 F4 0D", state) == "62 F4 0D 00"  # DID F4xx: mode 01 PID xx
    assert ask("3E 00", state) == "7E 00"
    assert ask("3E 80", state) is None  # positive response suppressed
    assert ask("10 01", state) == "50 01 00 32 01 F4"
    assert ask("10 03", state) == "7F 10 12"
    assert ask("19 02 FF", state) == "59 02 2F"
    s = dataclasses.replace(
        state, stored_dtcs=("P0217",), pending_dtcs=("P0217",), overheating=True
    )
    assert ask("19 02 FF", s) == "59 02 2F 02 17 00 AF"
    assert ask("19 02 04", s) == "59 02 2F 02 17 00 AF"
    assert ask("19 01 08", s) == "59 01 2F 01 00 01"
    assert ask("19 42", s) == "7F 19 12"


def test_the_self_test_routine_runs_in_the_default_session(state: VehicleState) -> None:
    assert ask("31 01 02 03", state) == "71 01 02 03 00"  # passed
    assert takes_time(bytes.fromhex("31 01 02 03"))  # the ECU says "response pending" first
    assert not takes_time(bytes.fromhex("31 81 02 03"))  # no answer wanted: nothing pends
    assert not takes_time(bytes.fromhex("22 F1 90"))
    assert ask("31 81 02 03", state) is None
    assert ask("31 01 FF 00", state) == "7F 31 31"  # erase memory: not in this session
    assert ask("31 02 02 03", state) == "7F 31 12"  # it has no stop
    assert ask("31 01", state) == "7F 31 13"
    assert ask("31 01 FF 00", state, functional=True) is None
    assert ask("2E F1 90 41", state) == "7F 2E 7F"  # writing still needs another session
