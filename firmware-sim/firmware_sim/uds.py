"""Read-only UDS (ISO 14229) answers of the simulated ECUs, from the vehicle's state.

Supported: 0x22 ReadDataByIdentifier for the common identifiers (VIN, serial number, part
and software numbers, system name, active session, and F4xx = the mode 01 PID xx), 0x19
ReadDTCInformation (0x01 count, 0x02 by status mask, 0x0A supported codes), 0x3E
TesterPresent, 0x10 DiagnosticSessionControl to the default session, and 0x31 RoutineControl
to start routine 0x0203, the ECU's self test (manufacturer range, allowed in the default
session): it takes a while, so the ECU first says "response pending" (`7F 31 78`, see
`takes_time`) and then `71 01 02 03 00`. Everything else gets a negative response:
services that need another session or security access `7F xx 7F`
(serviceNotSupportedInActiveSession), other routines `7F 31 31`, unknown services
`7F xx 11`. A functional request gets no negative response that ISO 14229 suppresses for
functional addressing. This is the whole of the transmission ECU; the engine ECU on the bus
adds sessions, security access, a write and a reset on top (`firmware_sim.uds_server`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from firmware_sim.model import VehicleState

__all__ = [
    "PENDING",
    "SELF_TEST",
    "UdsIdentity",
    "answer_uds",
    "data_identifiers",
    "dtc_status",
    "negative",
    "read_dids",
    "takes_time",
]

_NEEDS_SESSION: Final = frozenset(
    {0x11, 0x14, 0x23, 0x27, 0x28, 0x2E, 0x2F, 0x34, 0x35, 0x36, 0x37, 0x3D, 0x85}
)
_SUPPRESSED_FUNCTIONAL: Final = frozenset({0x11, 0x12, 0x31, 0x7E, 0x7F})
_SERVICE_NOT_SUPPORTED = 0x11
_SUB_FUNCTION_NOT_SUPPORTED = 0x12
_LENGTH = 0x13
_OUT_OF_RANGE = 0x31
_NOT_IN_SESSION = 0x7F
_STATUS_AVAILABILITY = 0x2F  # testFailed, thisCycle, pending, confirmed, failedSinceClear
_MAX_DIDS = 8
PENDING: Final = 0x78  # requestCorrectlyReceived-ResponsePending
SELF_TEST: Final = 0x0203
_START_ROUTINE = 0x01


@dataclass(frozen=True)
class UdsIdentity:
    """What an ECU says about itself (its data identifiers)."""

    name: str
    serial: str
    part_number: str
    software_version: str
    supplier: str
    hardware_number: str = "HWB-H-0000"
    hardware_version: str = "H01"
    boot_software: str = "HWB-BOOT-1.0.0"
    odx_file: str = "HWB_ECU.pdx"


def dtc_status(code: str, state: VehicleState) -> int:
    """The ISO 14229 status byte of one code in `state` (0: the ECU does not report it)."""
    status = 0
    if code in state.pending_dtcs:
        status |= 0x04
    if code in state.stored_dtcs:
        status |= 0x08 | 0x20 | 0x80  # confirmed, failed since clear, warning indicator
    if status and state.overheating and code == "P0217":
        status |= 0x01 | 0x02  # failing now and this operation cycle
    return status


def _dtc3(code: str) -> bytes:
    systems = "PCBU"
    value = systems.index(code[0]) << 14 | int(code[1]) << 12 | int(code[2:], 16)
    return value.to_bytes(2, "big") + b"\x00"  # failure type byte 00: no subtype


def negative(service: int, code: int, functional: bool) -> bytes | None:
    if functional and code in _SUPPRESSED_FUNCTIONAL:
        return None
    return bytes([0x7F, service, code])


def data_identifiers(
    identity: UdsIdentity, vin: str, pids: Mapping[int, Callable[[VehicleState], bytes]]
) -> dict[int, Callable[[VehicleState], bytes]]:
    table: dict[int, Callable[[VehicleState], bytes]] = {
        0xF180: lambda s: identity.boot_software.encode(),
        0xF186: lambda s: b"\x01",  # the default session
        0xF187: lambda s: identity.part_number.encode(),
        0xF189: lambda s: identity.software_version.encode(),
        0xF18A: lambda s: identity.supplier.encode(),
        0xF18B: lambda s: bytes.fromhex("240315"),  # 2024-03-15, BCD
        0xF18C: lambda s: identity.serial.encode(),
        0xF190: lambda s: vin.encode(),
        0xF191: lambda s: identity.hardware_number.encode(),
        0xF193: lambda s: identity.hardware_version.encode(),
        0xF195: lambda s: identity.software_version.encode(),
        0xF197: lambda s: identity.name.encode(),
        0xF19E: lambda s: identity.odx_file.encode(),
    }
    for pid, encode in pids.items():
        table[0xF400 | pid] = encode
    return table


def read_dids(
    args: bytes,
    state: VehicleState,
    table: Mapping[int, Callable[[VehicleState], bytes]],
    functional: bool,
) -> bytes | None:
    if not args or len(args) % 2 or len(args) // 2 > _MAX_DIDS:
        return negative(0x22, _LENGTH, functional)
    out = bytearray([0x62])
    for i in range(0, len(args), 2):
        did = int.from_bytes(args[i : i + 2], "big")
        read = table.get(did)
        if read is not None:
            out += args[i : i + 2] + read(state)
    if len(out) == 1:
        return negative(0x22, _OUT_OF_RANGE, functional)
    return bytes(out)


def _read_dtc_information(
    args: bytes, state: VehicleState, codes: tuple[str, ...], functional: bool
) -> bytes | None:
    if not args:
        return negative(0x19, _LENGTH, functional)
    sub = args[0] & 0x7F
    if sub in (0x01, 0x02):
        if len(args) != 2:
            return negative(0x19, _LENGTH, functional)
        mask = args[1]
        found = [(c, dtc_status(c, state)) for c in codes]
        matching = [(c, st) for c, st in found if st & mask]
        if sub == 0x01:  # format 0x01: ISO 14229-1 DTC format
            return bytes([0x59, 0x01, _STATUS_AVAILABILITY, 0x01]) + len(matching).to_bytes(
                2, "big"
            )
        body = b"".join(_dtc3(c) + bytes([st]) for c, st in matching)
        return bytes([0x59, 0x02, _STATUS_AVAILABILITY]) + body
    if sub == 0x0A:
        if len(args) != 1:
            return negative(0x19, _LENGTH, functional)
        supported = ("P0217",) if "P0217" in codes else ()
        body = b"".join(_dtc3(c) + bytes([dtc_status(c, state)]) for c in supported)
        return bytes([0x59, 0x0A, _STATUS_AVAILABILITY]) + body
    return negative(0x19, _SUB_FUNCTION_NOT_SUPPORTED, functional)


def takes_time(request: bytes) -> bool:
    """Whether the ECU works on `request` before it can answer (it says "response pending"
    first): starting the self-test routine, when an answer is wanted."""
    return (
        len(request) >= 4
        and request[0] == 0x31
        and request[1] == _START_ROUTINE
        and int.from_bytes(request[2:4], "big") == SELF_TEST
    )


def _routine_control(args: bytes, functional: bool) -> bytes | None:
    """Only the self test, and only its start (it has no stop, and its result is the answer)."""
    if len(args) < 3:
        return negative(0x31, _LENGTH, functional)
    if int.from_bytes(args[1:3], "big") != SELF_TEST:
        return negative(0x31, _OUT_OF_RANGE, functional)  # ISO 14229: not in this session
    if args[0] & 0x7F != _START_ROUTINE:
        return negative(0x31, _SUB_FUNCTION_NOT_SUPPORTED, functional)
    if args[0] & 0x80:
        return None  # positive response suppressed
    return bytes([0x71, _START_ROUTINE]) + args[1:3] + b"\x00"  # routine info 00: passed


def answer_uds(
    request: bytes,
    state: VehicleState,
    *,
    identity: UdsIdentity,
    vin: str,
    pids: Mapping[int, Callable[[VehicleState], bytes]],
    codes: tuple[str, ...],
    functional: bool,
) -> bytes | None:
    """The response to one UDS request, or None when the ECU stays silent."""
    service, args = request[0], request[1:]
    if service == 0x22:
        return read_dids(args, state, data_identifiers(identity, vin, pids), functional)
    if service == 0x19:
        return _read_dtc_information(args, state, codes, functional)
    if service == 0x3E:
        if len(args) != 1:
            return negative(service, _LENGTH, functional)
        if args[0] & 0x7F != 0x00:
            return negative(service, _SUB_FUNCTION_NOT_SUPPORTED, functional)
        return None if args[0] & 0x80 else b"\x7e\x00"
    if service == 0x10:
        if len(args) != 1:
            return negative(service, _LENGTH, functional)
        if args[0] & 0x7F != 0x01:
            return negative(service, _SUB_FUNCTION_NOT_SUPPORTED, functional)
        # P2 50 ms, P2* 5000 ms (in units of 10 ms)
        return None if args[0] & 0x80 else b"\x50\x01\x00\x32\x01\xf4"
    if service == 0x31:
        return _routine_control(args, functional)
    if service in _NEEDS_SESSION:
        return negative(service, _NOT_IN_SESSION, functional)
    return negative(service, _SERVICE_NOT_SUPPORTED, functional)
