"""The tables that describe the services: PIDs, trouble codes, UDS names, ELM327 replies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from udsoncan.Response import Response

from hwbridge.obd.database import (
    PIDS,
    decode_did,
    decode_dtc,
    describe_dtc,
    encode_dtc,
    find_pid,
    nrc_name,
    policy_service,
)
from hwbridge.obd.database.uds import uds_names
from hwbridge.obd.transport.elm327_reply import parse_reply

COMMON = [
    "SPEED", "RPM", "COOLANT_TEMP", "INTAKE_TEMP", "MAF", "INTAKE_PRESSURE", "THROTTLE_POS",
    "FUEL_LEVEL", "SHORT_FUEL_TRIM_1", "LONG_FUEL_TRIM_1", "ENGINE_LOAD", "TIMING_ADVANCE",
    "O2_B1S1", "RUN_TIME", "DISTANCE_W_MIL", "CONTROL_MODULE_VOLTAGE", "AMBIENT_AIR_TEMP",
]  # fmt: skip


def test_the_pid_table_covers_what_cars_commonly_support() -> None:
    data_pids = [p for p in PIDS.values() if p.pid % 0x20]
    assert len(data_pids) >= 40
    for name in COMMON:
        assert find_pid(name) is not None, name
    rpm = find_pid("0C")
    assert rpm is find_pid("rpm") is find_pid("0x0c") is find_pid("ENGINE_RPM")
    assert rpm is not None and not isinstance(rpm, int)
    assert rpm.decode(bytes([0x1A, 0xF8])) == 1726.0 and rpm.unit == "rpm"
    assert find_pid("FF") == 0xFF  # a PID hwbridge cannot decode: its number
    assert find_pid("not a pid") is None
    voltage = PIDS[0x42]
    assert voltage.decode(b"\x37\x78") == 14.2 and voltage.unit == "V"
    assert PIDS[0x05].decode(b"\x00") == -40
    assert PIDS[0x06].decode(b"\x80") == 0.0


@given(st.integers(0, 0xFFFF))
def test_dtc_bytes_round_trip(value: int) -> None:
    data = value.to_bytes(2, "big")
    assert encode_dtc(decode_dtc(data)) == data


def test_generic_codes_have_their_j2012_description_and_others_none() -> None:
    assert describe_dtc("p0217 ")["description"] == "Engine coolant over temperature condition"
    assert describe_dtc("U0100")["description"].startswith("Lost communication with ECM")
    own = describe_dtc("P1234")
    assert own["generic"] is False and own["description"] is None


def test_nrc_names_agree_with_udsoncan() -> None:
    for code, name in uds_names().nrc.items():
        theirs = Response.Code.get_name(code)
        assert theirs.lower().replace("_", "") == name.lower(), (hex(code), theirs, name)
    assert nrc_name(0x31) == "requestOutOfRange"
    assert nrc_name(0xEE) == "0xEE"


def test_dids_and_which_services_change_state() -> None:
    assert decode_did(0xF190, b"5HWSM1DE8R0000817")["value"] == "5HWSM1DE8R0000817"
    assert decode_did(0xF40D, b"\x3d") == {
        "did": "F40D", "raw": "3D", "name": "SPEED", "value": 61, "unit": "km/h"
    }  # fmt: skip
    for request in ("22F190", "1902FF", "3E00", "1001", "1081"):
        assert policy_service(bytes.fromhex(request)) is None, request
    for request, service in (("1003", "uds_0x10"), ("2EF19000", "uds_0x2E"), ("1101", "uds_0x11"),
                             ("14FFFFFF", "uds_0x14"), ("2701", "uds_0x27"), ("8502", "uds_0x85"),
                             ("3101FF00", "uds_0x31"), ("BA", "uds_0xBA")):  # fmt: skip
        assert policy_service(bytes.fromhex(request)) == service


def test_elm327_replies_with_headers() -> None:
    text = "SEARCHING...\r7E8 06 41 00 BE 3F B8 13 00\r7E90641008000001100\r"
    reply = parse_reply(text, extended=False)
    assert reply.messages == {
        0x7E8: bytes.fromhex("4100BE3FB813"),
        0x7E9: bytes.fromhex("410080000011"),
    }
    vin = parse_reply(
        "7E8 10 14 49 02 01 35 48 57\r7E8 21 53 4D 31 44 45 38 52\r7E8 22 30 30 30 30 38 31 37",
        extended=False,
    )
    assert vin.messages[0x7E8] == b"\x49\x02\x01" + b"5HWSM1DE8R0000817"
    cut = parse_reply("18DAF110101449020135485\r18DAF1101014490201354857", extended=True)
    assert cut.incomplete and not cut.messages and cut.garbage == 1
    assert parse_reply("NO DATA", extended=False).no_data
    assert parse_reply("CAN ERROR", extended=False).errors == [("BUS_ERROR", "CAN ERROR")]
    assert parse_reply("BUS INIT: ...ERROR", extended=False).errors[0][0] == "NO_VEHICLE"
    assert parse_reply("UNABLE TO CONNECT", extended=False).errors[0][0] == "NO_VEHICLE"
    assert parse_reply("STOPPED", extended=False).errors[0][0] == "ADAPTER_STOPPED"
    assert parse_reply("7E8 03 7F 22 78\r7E8 03 62 F1 86 01", extended=False).messages == {
        0x7E8: bytes.fromhex("62F186")  # response pending is waited through
    }


@given(st.text(max_size=3000), st.booleans())
def test_any_reply_text_parses_without_error(text: str, extended: bool) -> None:
    reply = parse_reply(text, extended)
    assert all(len(v) <= 4095 for v in reply.messages.values())
