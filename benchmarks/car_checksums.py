"""Counters' partners: the checksums real cars put in their frames, one frame at a time.

The simulator's own (`firmware_sim.checksums`: Toyota, Tesla, Chrysler, Honda, XOR), and the
others written here from the algorithms as opendbc documents them (opendbc/car/*/...can.py,
MIT), in plain Python and bit by bit where the original is a table, so that they share nothing with
hwbridge's vectorised recognisers (`hwbridge.discovery.analysis.checksums`): the drives generated
with these are an independent test of those. `tests/discovery/test_car_checksums.py`
checks them against frames recorded from real cars (opendbc's test vectors).

Each function takes the frame id, the payload (with the checksum field still zero) and the
checksum's start bit, and returns the checksum's raw value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from firmware_sim.checksums import chrysler, honda, tesla, toyota, xor_bytes

__all__ = ["CHECKSUMS", "NIBBLE_CHECKSUMS", "crc8_bitwise", "vw_data_ids"]

Checksum = Callable[[int, bytes, int], int]


def crc8_bitwise(data: Sequence[int], poly: int, init: int) -> int:
    """CRC-8, MSB first, computed one bit at a time (no final XOR)."""
    crc = init
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def fca_giorgio(frame_id: int, d: bytes, start: int) -> int:
    """J1850 CRC-8 from 0 over every byte but the last, XOR a constant of the id."""
    final = {0xDE: 0x10, 0x106: 0xF6, 0x122: 0xF1}.get(frame_id, 0x0A)
    return crc8_bitwise(d[:-1], 0x1D, 0x00) ^ final


def comma_body(frame_id: int, d: bytes, start: int) -> int:
    """CRC-8 with polynomial 0xD5 from 0xFF over every byte but the last, last one first."""
    return crc8_bitwise(list(reversed(d[:-1])), 0xD5, 0xFF)


def psa(frame_id: int, d: bytes, start: int) -> int:
    """A constant of the id minus the sum of every nibble, modulo 16."""
    first = {0x452: 0x4, 0x38D: 0x7, 0x42D: 0xC}.get(frame_id, 0xB)
    total = sum((b >> 4) + (b & 0xF) for b in d)
    return (first - total) & 0xF


def vw_data_ids(frame_id: int) -> list[int]:
    """Sixteen per-counter data ids for a VW message (AUTOSAR E2E profile 2).

    The real ones are a table per message in the cars; the generated drives use values
    drawn from the id, which the recogniser cannot know either.
    """
    out = []
    x = (frame_id * 2654435761) & 0xFFFFFFFF
    for _ in range(16):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x >> 16) & 0xFF)
    return out


def vw_mqb(frame_id: int, d: bytes, start: int, data_ids: Sequence[int] | None = None) -> int:
    """CRC-8 0x2F from 0xFF over bytes 1.., then the data id of the counter (byte 1's low
    nibble), final XOR 0xFF."""
    ids = list(data_ids) if data_ids is not None else vw_data_ids(frame_id)
    counter = d[1] & 0x0F
    crc = crc8_bitwise([*d[1:], ids[counter]], 0x2F, 0xFF)
    return crc ^ 0xFF


CHECKSUMS: dict[str, Checksum] = {
    "toyota": toyota,
    "tesla": tesla,
    "xor": xor_bytes,
    "chrysler": chrysler,
    "fca_giorgio": fca_giorgio,
    "comma_body": comma_body,
    "psa": psa,
    "honda": honda,
    "vw_mqb": vw_mqb,
}
NIBBLE_CHECKSUMS = frozenset({"psa", "honda"})
"""Their checksum is a nibble; the others' a byte."""
