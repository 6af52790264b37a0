"""Captures for the tests, written with python-can's own writers into tmp_path, plus the
shared real ones. `FLEET_DBC` covers what decoding must handle: 11- and 29-bit ids, J1939 by
PGN, labels, multiplexing, big-endian, signed and float signals, a CAN FD message."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import can
from tests.shared_data import DATA

REPO = Path(__file__).resolve().parents[2]
CSS = DATA / "css"  # tests that read these are marked @needs_shared
TRUCK = CSS / "truck_j1939_gps.MF4"
KONA = CSS / "kona_ev_uds.MF4"
GPS_DBC = CSS / "canmod-gps.dbc"
J1939_DBC = CSS / "CSS-Electronics-SAE-J1939-DEMO.dbc"
UDS_DBC = CSS / "tp_uds.dbc"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z

FLEET_DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 256 Engine: 8 ECU
 SG_ CoolantTemp : 0|8@1+ (1,-40) [-40|215] "degC" ECU
 SG_ EngineSpeed : 8|16@1+ (0.25,0) [0|16383.75] "rpm" ECU
 SG_ Gear : 24|4@1+ (1,0) [0|15] "" ECU
 SG_ Torque : 39|12@0- (0.5,0) [-1024|1023.5] "Nm" ECU

BO_ 2364540158 EEC1: 8 ECU
 SG_ EngineTorqueMode : 0|4@1+ (1,0) [0|15] "" ECU
 SG_ EngineSpeedJ : 24|16@1+ (0.125,0) [0|8031.875] "rpm" ECU

BO_ 512 Mux: 8 ECU
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" ECU
 SG_ Voltage m1 : 8|16@1+ (0.01,0) [0|655.35] "V" ECU
 SG_ Current m2 : 8|16@1- (0.1,0) [-3276.8|3276.7] "A" ECU
 SG_ Always : 56|8@1+ (1,0) [0|255] "" ECU

BO_ 1024 FdFrame: 32 ECU
 SG_ Pressure : 200|32@1- (1,0) [0|0] "kPa" ECU
 SG_ FirstByte : 0|8@1+ (1,0) [0|255] "" ECU

BO_ 2147484672 Turn: 2 ECU
 SG_ TurnSignal : 0|2@1+ (1,0) [0|3] "" ECU

VAL_ 256 Gear 0 "P" 1 "R" 2 "N" 3 "D" ;
VAL_ 2147484672 TurnSignal 0 "Off" 1 "Left" 2 "Right" 3 "Both" ;
BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","reserved","J1939PG","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","StandardCAN_FD","ExtendedCAN_FD";
BA_DEF_ "ProtocolType" STRING ;
BA_DEF_DEF_ "VFrameFormat" "StandardCAN";
BA_DEF_DEF_ "ProtocolType" "";
BA_ "ProtocolType" "J1939";
BA_ "VFrameFormat" BO_ 2364540158 3;
BA_ "VFrameFormat" BO_ 1024 14;
SIG_VALTYPE_ 1024 Pressure : 1;
"""


@pytest.fixture
def fleet_dbc(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.dbc"
    path.write_text(FLEET_DBC)
    return path


Writer = Callable[[Path, Iterable[can.Message]], Path]


def write_capture(path: Path, messages: Iterable[can.Message]) -> Path:
    """Write messages with python-can's writer for the suffix (BLF, ASC, log, MF4, CSV, TRC)."""
    with can.Logger(str(path)) as logger:
        for msg in messages:
            logger.on_message_received(msg)
    return path


def engine_frame(t: float, coolant: int, rpm: float, gear: int, torque: float) -> can.Message:
    raw_torque = round(torque / 0.5) & 0xFFF
    data = bytearray(8)
    data[0] = coolant + 40
    data[1:3] = int(rpm / 0.25).to_bytes(2, "little")
    data[3] = gear
    # Motorola 12-bit signal starting at bit 39 (MSB of byte 4): byte 4 = high 8 bits,
    # byte 5 high nibble = low 4 bits
    data[4] = raw_torque >> 4
    data[5] = (raw_torque & 0xF) << 4
    return can.Message(timestamp=t, arbitration_id=0x100, is_extended_id=False, data=data)


def drive(seconds: float = 20.0, period: float = 0.1, start: float = T0) -> Iterator[can.Message]:
    """A short drive: the engine warms past 100 degC twice, a J1939 EEC1 from two source
    addresses, a multiplexed message, an FD frame, a turn signal, and one unknown id."""
    steps = int(seconds / period)
    for i in range(steps):
        t = start + i * period
        coolant = 101 if 50 <= i < 80 or 120 <= i < 125 else 90
        yield engine_frame(t, coolant, 800 + i, i % 4, -10.5 + i * 0.5)
        if i % 2 == 0:
            sa = 0x00 if i % 4 == 0 else 0x21
            priority = 3 if i % 4 == 0 else 6
            eec1 = (priority << 26) | (0xF004 << 8) | sa
            rpm = int((1000 + i) / 0.125)
            data = bytes([1, 0, 0]) + rpm.to_bytes(2, "little") + bytes(3)
            yield can.Message(timestamp=t + 0.001, arbitration_id=eec1, data=data)
        page = 1 + i % 2
        value = (1200 + i) if page == 1 else (-50 - i) & 0xFFFF
        mux = bytes([page]) + value.to_bytes(2, "little") + bytes(4) + bytes([i % 256])
        yield can.Message(timestamp=t + 0.002, arbitration_id=0x200, is_extended_id=False, data=mux)
        if i % 10 == 0:
            fd = bytearray(32)
            fd[0] = i % 256
            fd[25:29] = struct.pack("<f", -1000.0 * i)
            yield can.Message(
                timestamp=t + 0.003, arbitration_id=0x400, is_extended_id=False, is_fd=True, data=fd
            )
            yield can.Message(
                timestamp=t + 0.004,
                arbitration_id=0x400,
                is_extended_id=True,
                data=bytes([(i // 10) % 4, 0]),
            )
        if i % 25 == 0:
            yield can.Message(
                timestamp=t + 0.005, arbitration_id=0x7FF, is_extended_id=False, data=b"\x01"
            )


def ask_query(driver: Any, sql: str) -> tuple[str | None, Any]:
    """(error code or None, result) of the `query` tool, called as an LLM writes it."""
    r = driver.process_llm_response(json.dumps({"tool": "query", "arguments": {"sql": sql}}))
    if r.call_failed:
        return (r.call_detail or "").split(":", 1)[0], r.call_detail
    return None, r.tool_call_result
