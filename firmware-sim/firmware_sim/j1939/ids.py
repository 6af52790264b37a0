"""29-bit J1939 identifiers (SAE J1939-21): priority, PGN, destination and source address.

An identifier is priority (3 bits), extended data page and data page (1 bit each), PDU format
(PF, 8 bits), PDU specific (PS, 8 bits) and source address (8 bits). A PF below 240 is PDU1:
PS is the destination address and the PGN carries PS as 0. A PF of 240 or more is PDU2: PS is
part of the PGN and the message goes to everyone (destination 0xFF).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import can

__all__ = [
    "GLOBAL",
    "NULL_ADDRESS",
    "PGN_ACKNOWLEDGEMENT",
    "PGN_ADDRESS_CLAIMED",
    "PGN_COMPONENT_ID",
    "PGN_DM1",
    "PGN_DM2",
    "PGN_DM3",
    "PGN_DM11",
    "PGN_REQUEST",
    "PGN_SOFTWARE_ID",
    "PGN_TP_CM",
    "PGN_TP_DT",
    "PGN_VEHICLE_ID",
    "J1939Id",
    "frame",
    "is_pdu1",
    "make_id",
    "parse_id",
]

GLOBAL: Final = 0xFF
"""The global destination address: every node."""
NULL_ADDRESS: Final = 0xFE
"""The source address of a node without one (its Cannot Claim Address message)."""

PGN_REQUEST: Final = 59904  # 0xEA00, J1939-21
PGN_ACKNOWLEDGEMENT: Final = 59392  # 0xE800, J1939-21
PGN_ADDRESS_CLAIMED: Final = 60928  # 0xEE00, J1939-81
PGN_TP_CM: Final = 60416  # 0xEC00, transport protocol connection management
PGN_TP_DT: Final = 60160  # 0xEB00, transport protocol data transfer
PGN_DM1: Final = 65226  # active DTCs, J1939-73
PGN_DM2: Final = 65227  # previously active DTCs
PGN_DM3: Final = 65228  # clear/reset previously active DTCs
PGN_DM11: Final = 65235  # clear/reset active DTCs
PGN_SOFTWARE_ID: Final = 65242  # J1939-71
PGN_COMPONENT_ID: Final = 65259
PGN_VEHICLE_ID: Final = 65260

_PDU2_FROM: Final = 240


def is_pdu1(pgn: int) -> bool:
    """Whether `pgn` is sent to one destination (PDU format below 240)."""
    return (pgn >> 8) & 0xFF < _PDU2_FROM


@dataclass(frozen=True, slots=True)
class J1939Id:
    """An identifier taken apart: `pgn` has PS 0 for PDU1, `da` is GLOBAL for PDU2."""

    priority: int
    pgn: int
    sa: int
    da: int


def parse_id(can_id: int) -> J1939Id:
    priority = (can_id >> 26) & 0x7
    pgn = (can_id >> 8) & 0x3FFFF
    sa = can_id & 0xFF
    if is_pdu1(pgn):
        return J1939Id(priority, pgn & 0x3FF00, sa, pgn & 0xFF)
    return J1939Id(priority, pgn, sa, GLOBAL)


def make_id(priority: int, pgn: int, sa: int, da: int = GLOBAL) -> int:
    """The 29-bit identifier; `da` goes into PS for a PDU1 PGN and is ignored for PDU2."""
    if not 0 <= priority <= 7 or not 0 <= pgn <= 0x3FFFF or not 0 <= sa <= 0xFF:
        raise ValueError(f"bad J1939 identifier fields: priority {priority}, PGN {pgn}, SA {sa}")
    if is_pdu1(pgn):
        pgn = (pgn & 0x3FF00) | (da & 0xFF)
    return (priority << 26) | (pgn << 8) | sa


def frame(priority: int, pgn: int, sa: int, data: bytes, da: int = GLOBAL) -> can.Message:
    """A classic extended data frame of at most 8 bytes."""
    if len(data) > 8:
        raise ValueError(f"a single frame carries at most 8 bytes, got {len(data)}")
    return can.Message(
        arbitration_id=make_id(priority, pgn, sa, da), is_extended_id=True, data=bytes(data)
    )
