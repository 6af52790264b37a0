"""ISO-TP reassembly over captures keeps at most MAX_OPEN transfers open (issue 33, review 2):
first frames on ever new channels and ids, never finished, held 1.5 GB (65,536 channels,
4 KB each); now the transfer that waited longest for its next frame is dropped and counted."""

from __future__ import annotations

import numpy as np
import pytest

from hwbridge.can.io.frames import FrameChunk
from hwbridge.captures.isotp import MAX_OPEN, IsoTpAssembler

IDS = (0x7E8, 0x7E9, 0x7EA)


def _frames(channels: np.ndarray, can_id: int, first_byte: int, second_byte: int) -> FrameChunk:
    """One frame per channel: `first_byte`, `second_byte`, then 2, 3, ... 7."""
    n = len(channels)
    data = np.tile(np.arange(8, dtype=np.uint8), (n, 1))
    data[:, 0], data[:, 1] = first_byte, second_byte
    return FrameChunk(
        np.arange(n, dtype=np.int64) * 1000,
        np.full(n, can_id, np.uint32),
        np.zeros(n, np.bool_),
        np.full(n, 8, np.uint8),
        data,
        channels.astype(np.int16),
    )


def test_the_bound_is_the_one_stated() -> None:
    assert MAX_OPEN == 4096


@pytest.mark.timeout(120)
def test_first_frames_that_never_finish_stay_bounded() -> None:
    """30,000 channels x 3 ids of first frames announcing 4,095 bytes: 4,096 stay open."""
    assembler = IsoTpAssembler(frozenset(IDS))
    channels = np.arange(30_000)
    for can_id in IDS:
        rest, transfers = assembler.feed(_frames(channels, can_id, 0x1F, 0xFF))
        assert transfers is None and not len(rest)
        assert assembler.open_transfers == MAX_OPEN
    assert assembler.stats.evicted == 3 * 30_000 - MAX_OPEN
    assert assembler.stats.broken == assembler.stats.evicted


@pytest.mark.timeout(120)
def test_the_newest_transfers_complete_and_the_oldest_are_counted() -> None:
    """MAX_OPEN + 100 transfers of 20 bytes: the first 100 are dropped, the rest complete."""
    assembler = IsoTpAssembler(frozenset({0x7E8}))
    channels = np.arange(MAX_OPEN + 100)
    assembler.feed(_frames(channels, 0x7E8, 0x10, 20))  # first frames: 6 bytes each
    assembler.feed(_frames(channels, 0x7E8, 0x21, 0))  # 7 more
    _, transfers = assembler.feed(_frames(channels, 0x7E8, 0x22, 0))  # and the last 7
    assert transfers is not None
    assert sorted(transfers.channel.tolist()) == list(range(100, MAX_OPEN + 100))
    assert set(transfers.length.tolist()) == {21}
    assert (assembler.stats.transfers, assembler.stats.evicted) == (MAX_OPEN, 100)
    assert assembler.open_transfers == 0


def test_a_transfer_in_progress_outlives_idle_ones() -> None:
    """The one dropped is the one that waited longest, not the one opened first."""
    assembler = IsoTpAssembler(frozenset({0x7E8}), max_open=3)
    assembler.feed(_frames(np.arange(3), 0x7E8, 0x10, 20))  # channels 0, 1, 2 open
    assembler.feed(_frames(np.array([0]), 0x7E8, 0x21, 0))  # channel 0 goes on
    assembler.feed(_frames(np.array([3]), 0x7E8, 0x10, 20))  # a fourth: channel 1 goes
    _, done = assembler.feed(_frames(np.array([0]), 0x7E8, 0x22, 0))
    assert done is not None and done.channel.tolist() == [0]  # the one opened first: whole
    assembler.feed(_frames(np.array([1, 3]), 0x7E8, 0x21, 0))
    _, done = assembler.feed(_frames(np.array([1, 3]), 0x7E8, 0x22, 0))
    assert done is not None and done.channel.tolist() == [3]  # 1 was dropped
    assert (assembler.stats.evicted, assembler.stats.broken) == (1, 1)
