"""29-bit J1939 identifiers (SAE J1939-21): priority, PGN, source and destination address.

A PDU1 PGN (PDU format below 240) is addressed: the PDU-specific byte of its identifier is
the destination and is not part of the PGN. A PDU2 PGN is broadcast: that byte is the group
extension and belongs to the PGN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "ACK_PGN",
    "ADDRESS_CLAIMED_PGN",
    "DM1_PGN",
    "DM2_PGN",
    "DM3_PGN",
    "DM11_PGN",
    "GLOBAL",
    "MAX_PGN",
    "NULL_ADDRESS",
    "REQUEST_PGN",
    "TP_CM_PGN",
    "TP_DT_PGN",
    "J1939Id",
    "is_pdu1",
    "make_id",
    "parse_id",
]

REQUEST_PGN: Final = 0xEA00  # 59904
ACK_PGN: Final = 0xE800  # 59392
TP_CM_PGN: Final = 0xEC00  # 60416: connection management (RTS, CTS, EoMA, BAM, abort)
TP_DT_PGN: Final = 0xEB00  # 60160: data transfer packets
ADDRESS_CLAIMED_PGN: Final = 0xEE00  # 60928
DM1_PGN: Final = 0xFECA  # 65226: active diagnostic trouble codes
DM2_PGN: Final = 0xFECB  # 65227: previously active diagnostic trouble codes
DM3_PGN: Final = 0xFECC  # 65228: clear previously active DTCs
DM11_PGN: Final = 0xFED3  # 65235: clear active DTCs
GLOBAL: Final = 0xFF
NULL_ADDRESS: Final = 0xFE
MAX_PGN: Final = 0x3FFFF


def is_pdu1(pgn: int) -> bool:
    """Whether `pgn` is destination specific (PDU format below 240)."""
    return (pgn >> 8) & 0xFF < 240


@dataclass(frozen=True, slots=True)
class J1939Id:
    """The fields of one 29-bit identifier."""

    priority: int
    pgn: int
    source: int
    destination: int  # GLOBAL for a PDU2 (broadcast) PGN

    @property
    def frame_id(self) -> int:
        return make_id(self.pgn, self.source, self.destination, self.priority)


def parse_id(frame_id: int) -> J1939Id:
    """The fields of `frame_id` (29 bits)."""
    priority = (frame_id >> 26) & 0x7
    pgn = (frame_id >> 8) & MAX_PGN
    source = frame_id & 0xFF
    if is_pdu1(pgn):
        return J1939Id(priority, pgn & 0x3FF00, source, pgn & 0xFF)
    return J1939Id(priority, pgn, source, GLOBAL)


def make_id(pgn: int, source: int, destination: int = GLOBAL, priority: int = 6) -> int:
    """The identifier of `pgn` from `source` (to `destination` when the PGN is PDU1)."""
    if not 0 <= pgn <= MAX_PGN:
        raise ValueError(f"a PGN is 0..{MAX_PGN}, not {pgn}")
    if not 0 <= source <= 0xFF or not 0 <= destination <= 0xFF:
        raise ValueError("addresses are 0..255")
    if not 0 <= priority <= 7:
        raise ValueError("a priority is 0..7")
    if is_pdu1(pgn):
        pgn = (pgn & 0x3FF00) | destination
    return (priority << 26) | (pgn << 8) | source
