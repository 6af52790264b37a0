"""Checksums as real cars compute them are recognised and named; counters are not taken for
them, nor they for counters.

The frames are computed with `benchmarks/car_checksums.py`: plain Python written from the
algorithms as opendbc documents them, sharing nothing with the vectorised recognisers. Those
functions are first checked against the published check values of the CRCs they use.
"""

from __future__ import annotations

import numpy as np
import pytest
from benchmarks import car_checksums as cars

from hwbridge.discovery.analysis.analyse import analyse
from hwbridge.discovery.analysis.checksums import find_checksums
from tests.discovery.frames import frameset

CHECK = b"123456789"


def test_the_reference_crcs_give_their_published_check_values() -> None:
    """CRC-8/SAE-J1850 (poly 0x1D, init and xorout 0xFF) checks 0x4B; CRC-8/AUTOSAR
    (0x2F, init and xorout 0xFF) 0xDF; plain CRC-8 (0x07) 0xF4 (the CRC catalogue)."""
    assert cars.crc8_bitwise(CHECK, 0x1D, 0xFF) ^ 0xFF == 0x4B
    assert cars.crc8_bitwise(CHECK, 0x2F, 0xFF) ^ 0xFF == 0xDF
    assert cars.crc8_bitwise(CHECK, 0x07, 0x00) == 0xF4


def frames(
    algorithm: str, frame_id: int, checksum_byte: int, n: int = 600, nibble_high: bool = False
) -> np.ndarray:
    """n payloads of 8 bytes: a counter in byte 1's low nibble, two moving values, the
    checksum (byte `checksum_byte`, or the last byte's low nibble for nibble sums)."""
    rng = np.random.default_rng(frame_id)
    out = np.zeros((n, 8), np.uint8)
    speed = np.cumsum(rng.integers(-3, 4, n)) % 4096
    for i in range(n):
        d = bytearray(8)
        d[1] = i % 16 | 0x30
        d[2], d[3] = speed[i] & 0xFF, speed[i] >> 8
        d[5] = int(rng.integers(0, 256)) if i % 7 == 0 else (out[i - 1, 5] if i else 0)
        if checksum_byte != 0:
            d[0] = 0x11
        value = cars.CHECKSUMS[algorithm](frame_id, bytes(d), checksum_byte * 8)
        if algorithm in cars.NIBBLE_CHECKSUMS:
            d[7] = (d[7] & 0xF0) | (value & 0x0F)
        else:
            d[checksum_byte] = value & 0xFF
        out[i] = np.frombuffer(bytes(d), np.uint8)
    return out


@pytest.mark.parametrize(
    ("algorithm", "frame_id", "byte", "family"),
    [
        ("xor", 0x1A0, 0, "xor"),  # VW PQ
        ("toyota", 0x2E4, 7, "sum8"),
        ("tesla", 0x370, 7, "sum8"),
        ("chrysler", 0x220, 7, "crc8_1d"),
        ("fca_giorgio", 0x106, 7, "crc8_1d"),
        ("comma_body", 0x250, 7, "crc8_d5"),
        ("vw_mqb", 0x30C, 0, "crc8_2f_per_counter"),
        ("psa", 0x38D, 7, "nibble_sum_neg"),
        ("honda", 0x1FA, 7, "nibble_sum_neg"),
    ],
)
def test_each_cars_checksum_is_found_and_named(
    algorithm: str, frame_id: int, byte: int, family: str
) -> None:
    data = frames(algorithm, frame_id, byte)
    found = find_checksums(data, frame_id, False, np.ones(64, np.bool_))
    assert len(found) == 1, found
    hit = found[0]
    assert hit.algorithm == family
    want = (
        tuple(range(56, 60))
        if algorithm in cars.NIBBLE_CHECKSUMS
        else tuple(range(byte * 8, byte * 8 + 8))
    )
    assert hit.bits == want
    if algorithm == "toyota":
        assert hit.car == "toyota"  # the constant is the id's bytes plus the length
    if algorithm == "honda":
        assert hit.car == "honda"
    if algorithm == "vw_mqb":
        assert "AUTOSAR E2E profile 2" in hit.description


def test_the_counter_a_checksum_follows_is_still_the_counter() -> None:
    """Nothing moves but a counter and the checksum over it (XOR and sums make both a
    function of the other): the one that counts perfectly is the counter. When something
    else moves on a few frames only, the checksum follows the counter 98% of the time and
    is still found."""
    n = 800
    data = np.zeros((n, 8), np.uint8)
    data[:, 6] = (np.arange(n) % 16) << 4 | 0x03
    data[::60, 2] = 0x40  # something else, now and then
    data[:, 7] = (0x70 + data[:, :7].astype(np.int64).sum(axis=1)) & 0xFF
    fields = analyse(frameset(data))
    kinds = {f.bits: f.kind for f in fields}
    assert kinds[tuple(range(52, 56))] == "counter"
    assert kinds[tuple(range(56, 64))] == "checksum"


def test_a_value_byte_is_not_taken_for_a_checksum() -> None:
    """A 16-bit value's low byte is a function of nothing: no checksum in a frame of values."""
    rng = np.random.default_rng(9)
    n = 600
    v = np.cumsum(rng.integers(-40, 41, n)) % 65536
    data = np.zeros((n, 8), np.uint8)
    data[:, 0], data[:, 1] = v & 0xFF, v >> 8
    data[:, 4] = rng.integers(0, 256, n)
    assert find_checksums(data, 0x100, False, np.ones(64, np.bool_)) == []
