"""The array readers read exactly what python-can's readers read, frame for frame."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import can
from hwbridge.can.io.blf import BlfReader
from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from hwbridge.can.io.mf4 import Mf4Reader
from hwbridge.can.io.readers import open_capture
from tests.captures.conftest import KONA, TRUCK, drive, write_capture
from tests.shared_data import needs_shared


def _assert_same(chunk: FrameChunk, path: Path) -> None:
    frames = [m for m in can.LogReader(path) if not m.is_error_frame and not m.is_remote_frame]
    assert len(chunk) == len(frames)
    stamps = np.array([round(m.timestamp * 1e6) for m in frames], np.int64)
    assert int(np.max(np.abs(stamps - chunk.timestamp_us), initial=0)) <= 1
    assert chunk.arbitration_id.tolist() == [m.arbitration_id for m in frames]
    assert chunk.extended.tolist() == [m.is_extended_id for m in frames]
    assert chunk.length.tolist() == [len(m.data) for m in frames]
    for i, m in enumerate(frames):
        assert chunk.data[i, : chunk.length[i]].tobytes() == bytes(m.data)


@needs_shared
@pytest.mark.parametrize("path", [TRUCK, KONA], ids=["truck", "kona"])
def test_mf4_reader_reads_what_python_can_reads(path: Path) -> None:
    reader = Mf4Reader(path, chunk_frames=10_000)  # several chunks
    chunks = list(reader.chunks())
    assert len(chunks) == (6 if path == TRUCK else 1)
    _assert_same(concat_chunks(chunks), path)


def test_blf_reader_reads_what_python_can_reads(tmp_path: Path) -> None:
    """Several containers, objects split between them, FD frames, remote and error frames,
    and payloads that spell the object signature LOBJ."""
    messages = list(drive(120.0))
    for i in range(0, len(messages), 97):
        messages[i].data = bytearray(b"LOBJ\x10\x00\x01\x00")
        messages[i].dlc = 8
    messages.insert(5, can.Message(timestamp=messages[5].timestamp, is_error_frame=True))
    messages.insert(9, can.Message(timestamp=messages[9].timestamp, arbitration_id=0x5,
                                   is_remote_frame=True, dlc=2))  # fmt: skip
    path = write_capture(tmp_path / "x.blf", messages)
    reader = BlfReader(path)
    chunk = concat_chunks(list(reader.chunks()))
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 1)
    _assert_same(chunk, path)


def test_uncompressed_blf(tmp_path: Path) -> None:
    path = tmp_path / "plain.blf"
    with can.BLFWriter(path, compression_level=0) as writer:
        for msg in drive(30.0):
            writer.on_message_received(msg)
    _assert_same(concat_chunks(list(BlfReader(path).chunks())), path)


def test_a_truncated_blf_names_the_byte(tmp_path: Path) -> None:
    whole = write_capture(tmp_path / "whole.blf", drive(300.0))
    cut = tmp_path / "cut.blf"
    cut.write_bytes(whole.read_bytes()[:-1000])
    reader = open_capture(cut)
    read: list[int] = []

    def read_all() -> None:
        for chunk in reader.chunks():
            read.append(len(chunk))

    with pytest.raises(CaptureError) as caught:
        read_all()
    assert "truncated" in caught.value.reason
    assert caught.value.position.startswith("byte ")
    assert sum(read) > 0  # frames before the cut were read


def test_a_corrupt_container_is_reported(tmp_path: Path) -> None:
    whole = write_capture(tmp_path / "whole.blf", drive(30.0))
    data = bytearray(whole.read_bytes())
    header = 144
    struct.pack_into("<4s", data, header + 200, b"\xff\xff\xff\xff")  # inside the zlib stream
    bad = tmp_path / "bad.blf"
    bad.write_bytes(bytes(data))
    with pytest.raises(CaptureError, match="corrupt"):
        list(open_capture(bad).chunks())


def test_not_a_blf_at_all(tmp_path: Path) -> None:
    fake = tmp_path / "fake.blf"
    fake.write_bytes(b"hello world, this is text")
    with pytest.raises(CaptureError, match="not a BLF file"):
        open_capture(fake)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    odd = tmp_path / "capture.xyz"
    odd.write_bytes(b"")
    with pytest.raises(ValueError, match="unknown capture format"):
        open_capture(odd)


def test_small_chunks_are_joined_and_frames_before_an_error_come_first() -> None:
    from collections.abc import Iterator

    from hwbridge.can.io.frames import coalesced

    def chunk(n: int, first: int) -> FrameChunk:
        return FrameChunk(
            np.arange(first, first + n, dtype=np.int64),
            np.full(n, 0x100, np.uint32),
            np.zeros(n, np.bool_),
            np.full(n, 8, np.uint8),
            np.zeros((n, 8), np.uint8),
        )

    def reader() -> Iterator[FrameChunk]:
        yield chunk(30, 0)
        yield chunk(30, 30)
        yield chunk(30, 60)
        yield chunk(5, 90)
        raise CaptureError("x.blf", "byte 9", "truncated")

    out: list[FrameChunk] = []
    with pytest.raises(CaptureError):
        out.extend(coalesced(reader(), 50))
    assert [len(c) for c in out] == [60, 35]
    assert concat_chunks(out).timestamp_us.tolist() == list(range(95))
