"""The multiplexers the first search missed (issue 24): one whose byte an XOR checksum was
taken for, one whose pages lie all within its own byte, and one whose pages hold one-bit
flags that change now and then, a flag of one page being on nearly all the time; and what
must still not be one: a number, even a quantised one, whose low bits predict the rest of
its byte, and a checksum's nibble."""

from __future__ import annotations

import numpy as np

from hwbridge.discovery.analysis.fields import Field
from hwbridge.discovery.analysis.multiplex import analyse_layouts
from tests.discovery.frames import frameset, walk

N = 3000


def _pages_in_turn(k: int) -> np.ndarray:
    return np.arange(N) % k


def _own_byte_pages(rng: np.random.Generator, page: np.ndarray) -> np.ndarray:
    """Six bits below a multiplexer in bits 6-7: a torque, a speed, a type code and flags,
    each page its own, moving now and then."""
    content = np.stack(
        [
            walk(rng, N, 20, 45, 0.3),  # a maximum torque, tens of Nm
            walk(rng, N, 30, 60, 0.3),  # the speed of the maximum torque, hundreds of rpm
            walk(rng, N, 2, 12, 0.1),  # a type code
            ((np.arange(N) // 500) % 2) * 0b101 + ((np.arange(N) // 330) % 2) * 0b10,  # flags
        ]
    )
    out: np.ndarray = content[page, np.arange(N)].astype(np.int64)
    return out


def _slow_rest(rng: np.random.Generator, data: np.ndarray) -> None:
    """Flags and a consumption value (its low bits noisy) in bytes 1-6."""
    data[:, 1] = ((np.arange(N) // 700) % 2) << 3 | ((np.arange(N) // 900) % 2) << 5
    fuel = walk(rng, N, 1000, 30000, 40)
    data[:, 2], data[:, 3] = fuel & 0xFF, fuel >> 8
    data[:, 4] = walk(rng, N, 0, 250, 0.5)
    data[:, 5] = ((np.arange(N) // 1100) % 2) << 1


def _selector(fields: list[Field]) -> tuple[int, ...] | None:
    found = [f.bits for f in fields if f.is_multiplexer]
    assert len(found) <= 1
    return found[0] if found else None


def test_a_multiplexer_in_the_byte_an_xor_checksum_was_taken_for() -> None:
    """An XOR of every byte makes any byte the function of the others; the multiplexer's,
    jumping frame after frame with its pages, was taken for it. The multiplexer is found in
    bits 6-7, its pages in bits 0-5, and the checksum in the last byte, of every frame."""
    rng = np.random.default_rng(11)
    page = _pages_in_turn(4)
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = page << 6 | _own_byte_pages(rng, page)
    _slow_rest(rng, data)
    data[:, 7] = np.bitwise_xor.reduce(data[:, :7], axis=1)
    fields = analyse_layouts(frameset(data))
    assert _selector(fields) == (6, 7)
    checksums = [f for f in fields if f.kind == "checksum"]
    assert [(f.bits, f.multiplexer_ids) for f in checksums] == [(tuple(range(56, 64)), None)]
    torque = [f for f in fields if f.multiplexer_ids == (0,) and f.kind == "value"]
    assert [f.bits for f in torque] == [(0, 1, 2, 3, 4, 5)]


def test_pages_all_within_the_multiplexers_own_byte() -> None:
    """Nothing outside its byte follows the pages: the byte, read as one number, jumps as
    the multiplexer changes, which the two parts of a number never do."""
    rng = np.random.default_rng(12)
    page = rng.integers(0, 4, N)  # pages at random, not in turn
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = page << 6 | _own_byte_pages(rng, page)
    _slow_rest(rng, data)
    assert _selector(analyse_layouts(frameset(data))) == (6, 7)


def test_a_quantised_number_is_not_split_into_a_multiplexer_and_its_pages() -> None:
    """A temperature read in steps of 3 (and the low byte of a 16-bit value read in steps
    of 13): its low bits predict the rest of its byte, yet it moves by small steps."""
    rng = np.random.default_rng(13)
    data = np.zeros((N, 8), np.uint8)
    temp = 41 + 3 * np.clip(np.round(walk(rng, N, 0, 60, 0.8) / 10), 0, 5)
    data[:, 0] = temp
    wide = (0xB700 + 13 * (walk(rng, N, 0, 1000, 0.7) // 10 - 50)) & 0xFFFF
    data[:, 1], data[:, 2] = wide & 0xFF, wide >> 8
    data[:, 3:] = 0xFF
    assert _selector(analyse_layouts(frameset(data))) is None


def test_a_checksums_nibble_is_not_a_multiplexer_behind_it() -> None:
    """An XOR checksum of a counter and a speed: its high nibble, freed, groups the frames
    by the speed's high bits, but explains nothing beside it in its own byte."""
    rng = np.random.default_rng(14)
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = np.arange(N) % 16
    speed = walk(rng, N, 0, 30000, 60)
    data[:, 1], data[:, 2] = speed & 0xFF, speed >> 8
    data[:, 3] = walk(rng, N, 0, 255, 0.5)
    data[:, 7] = np.bitwise_xor.reduce(data[:, :7], axis=1)
    fields = analyse_layouts(frameset(data))
    assert _selector(fields) is None
    assert [f.bits for f in fields if f.kind == "checksum"] == [tuple(range(56, 64))]


def test_pages_of_one_bit_flags_and_a_flag_on_in_one_page() -> None:
    """A 6-bit multiplexer (bits 2-7) whose pages are 8, 16 and 24, each a few one-bit
    flags that change a few times a minute; one flag of page 24 is on all the time, so it
    too groups the frames (page 24 against the rest), more coarsely. The multiplexer is the
    bits of it that move (5-6), not that flag, and the flags are found in their pages."""
    rng = np.random.default_rng(15)
    page = _pages_in_turn(3)
    data = np.zeros((N, 8), np.uint8)
    data[:, 0] = (8 * (page + 1)) << 2  # 8, 16, 24 in bits 2-7
    flags = {  # page: (bit, frames of one on and off cycle); on a fifth of the time, in page
        # 24 four fifths
        0: [(18, 1100), (19, 1400), (23, 900), (24, 2300)],
        1: [(23, 1700)],
        2: [(28, 2100), (29, 700), (32, 1500), (33, 2700), (38, 1200), (39, 1900)],
    }
    for p, bits in flags.items():
        rows = np.flatnonzero(page == p)
        for bit, every in bits:
            duty = 0.8 if p == 2 else 0.2
            on = ((rows + int(rng.integers(0, every))) % every < duty * every).astype(np.int64)
            data[rows, bit // 8] |= (on << (bit % 8)).astype(np.uint8)
    always = np.flatnonzero(page == 2)
    data[always, 3] |= 1 << 2  # bit 26, on in every frame of page 24
    fields = analyse_layouts(frameset(data))
    assert _selector(fields) == (5, 6)
    found = {(f.bits, f.multiplexer_ids) for f in fields if f.kind == "flag"}
    assert ((19,), (1,)) in found and ((33,), (3,)) in found and ((39,), (3,)) in found
