"""DM1/DM2 payloads, lamps and occurrence counts (J1939-73), NAMEs (J1939-81): no bus."""

from __future__ import annotations

import pytest

from firmware_sim.j1939.controllers import BRAKES, CONTROLLERS, ENGINE, TRANSMISSION, encode_name
from firmware_sim.j1939.diagnostics import (
    TRUCK_FAULTS,
    Dtc,
    DtcStore,
    dm_payload,
    encode_dtc,
    encode_lamps,
)

NO_FAULT = bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])


def decode_dtc(four: bytes) -> tuple[int, int, int, int]:
    """(SPN, FMI, CM, OC) the J1939-73 way (conversion method 0)."""
    spn = four[0] | four[1] << 8 | (four[2] >> 5) << 16
    return spn, four[2] & 0x1F, four[3] >> 7, four[3] & 0x7F


def lamp(payload: bytes, shift: int) -> tuple[int, int]:
    """(status, flash) bits of the lamp at `shift` (MIL 6, red stop 4, amber 2, protect 0)."""
    return payload[0] >> shift & 3, payload[1] >> shift & 3


def test_no_fault_is_spn_0_fmi_0_oc_0_with_the_lamps_off() -> None:
    assert DtcStore().dm1() == NO_FAULT
    assert DtcStore().dm2() == NO_FAULT


def test_the_dtc_bytes_carry_the_19_bit_spn_split_as_j1939_73_has_it() -> None:
    assert encode_dtc(110, 0, 1) == bytes([0x6E, 0x00, 0x00, 0x01])
    assert encode_dtc(3216, 20, 3) == bytes([0x90, 0x0C, 0x14, 0x03])
    assert decode_dtc(encode_dtc(524287, 31, 126)) == (524287, 31, 0, 126)
    assert decode_dtc(encode_dtc(0x5ABCD, 9, 7)) == (0x5ABCD, 9, 0, 7)
    with pytest.raises(ValueError, match="out of range"):
        encode_dtc(1 << 19, 0, 1)


def test_lamp_bits_and_flash_bits() -> None:
    assert encode_lamps({}) == bytes([0x00, 0xFF])
    assert encode_lamps({"mil": "on"}) == bytes([0x40, 0xFF])
    assert encode_lamps({"red_stop": "on", "amber_warning": "on"}) == bytes([0x14, 0xFF])
    assert encode_lamps({"protect": "on"}) == bytes([0x01, 0xFF])
    slow = encode_lamps({"mil": "slow_flash"})
    assert lamp(slow, 6) == (1, 0b00)  # on, slow flash
    assert lamp(slow, 4) == (0, 0b11)  # red stop off, do not flash
    fast = encode_lamps({"amber_warning": "fast_flash"})
    assert lamp(fast, 2) == (1, 0b01)


@pytest.mark.parametrize("name", list(TRUCK_FAULTS))
def test_each_fault_makes_a_one_dtc_dm1_with_its_lamps(name: str) -> None:
    fault = TRUCK_FAULTS[name]
    store = DtcStore()
    store.raise_fault(fault)
    payload = store.dm1()
    assert len(payload) == 8
    assert payload[6:] == b"\xff\xff"
    assert decode_dtc(payload[2:6]) == (fault.spn, fault.fmi, 0, 1)
    for key, shift in (("mil", 6), ("red_stop", 4), ("amber_warning", 2), ("protect", 0)):
        state = fault.lamps.get(key, "off")
        status, flash = lamp(payload, shift)
        assert status == (0 if state == "off" else 1), (key, state)
        assert flash == {"slow_flash": 0, "fast_flash": 1}.get(state, 3), (key, state)


def test_the_faults_are_the_ones_the_issue_names() -> None:
    expected = {
        "coolant_temp_high": ("engine", 110, 0, {"amber_warning": "on", "red_stop": "on"}),
        "oil_pressure_low": ("engine", 100, 1, {"red_stop": "on"}),
        "nox_sensor": ("engine", 3216, 20, {"mil": "on"}),
        "misfire": ("engine", 1322, 31, {"mil": "slow_flash"}),
        "transmission_oil_temp_high": ("transmission", 177, 16, {"amber_warning": "on"}),
        "wheel_speed_sensor": ("brakes", 84, 2, {"amber_warning": "on"}),
    }
    got = {n: (f.controller, f.spn, f.fmi, dict(f.lamps)) for n, f in TRUCK_FAULTS.items()}
    assert got == expected


def test_two_faults_make_a_longer_dm1_and_the_lamps_combine() -> None:
    store = DtcStore()
    store.raise_fault(TRUCK_FAULTS["nox_sensor"])
    store.raise_fault(TRUCK_FAULTS["misfire"])
    payload = store.dm1()
    assert len(payload) == 10
    assert lamp(payload, 6) == (1, 0b00)  # the MIL on, flashing slow (the stronger request)
    assert [decode_dtc(payload[i : i + 4])[:2] for i in (2, 6)] == [(3216, 20), (1322, 31)]


def test_occurrences_count_up_and_end_clear_move_them() -> None:
    store = DtcStore()
    nox = TRUCK_FAULTS["nox_sensor"]
    assert store.raise_fault(nox).occurrences == 1
    assert store.raise_fault(nox).occurrences == 2  # occurred again while active
    assert store.end_fault(nox)
    assert not store.end_fault(nox)
    assert store.dm1() == NO_FAULT
    assert decode_dtc(store.dm2()[2:6]) == (3216, 20, 0, 2)
    assert store.raise_fault(nox).occurrences == 3  # back from previously active
    assert not store.previous
    store.end_fault(nox)
    store.raise_fault(TRUCK_FAULTS["misfire"])
    assert [d.fault for d in store.clear_active()] == ["misfire"]  # DM11
    assert [d.fault for d in store.previous] == ["nox_sensor"]  # DM11 leaves these
    assert [d.fault for d in store.clear_previous()] == ["nox_sensor"]  # DM3
    assert store.dm2() == NO_FAULT


def test_the_occurrence_count_stops_at_126() -> None:
    dtc = Dtc(100, 1, 500)
    assert dm_payload({}, [dtc])[5] == 126


def test_names_follow_j1939_81() -> None:
    name = int.from_bytes(ENGINE.name, "little")
    assert name & 0x1FFFFF == ENGINE.identity
    assert name >> 21 & 0x7FF == 2047  # manufacturer
    assert name >> 40 & 0xFF == 0  # function: engine
    assert name >> 60 & 0x7 == 1  # industry group: on-highway
    assert name >> 63 == 0  # not arbitrary address capable
    functions = [int.from_bytes(c.name, "little") >> 40 & 0xFF for c in CONTROLLERS]
    assert functions == [0, 3, 9]
    assert [c.address for c in (ENGINE, TRANSMISSION, BRAKES)] == [0x00, 0x03, 0x0B]
    assert encode_name(identity=1, manufacturer=0, function=0, arbitrary_address=True)[7] == 0x90
    with pytest.raises(ValueError, match="does not fit"):
        encode_name(identity=1 << 21, manufacturer=0, function=0)


def test_identification_answers() -> None:
    assert ENGINE.component_id() == b"HWBSM*HD13-ECM*ECM0001939*UNIT01*"
    software = ENGINE.software_id()
    assert software[0] == 2
    assert software[1:].split(b"*") == [b"ECM 4.12.0", b"CAL 2024-03A", b""]
    assert len(TRANSMISSION.software_id()) > 8  # multi-packet, like every identification
