"""The MDF4 block reader reads what python-can's MF4Reader (through asammdf) reads, frame for
frame, on every layout it takes; any other layout goes to asammdf's reader unchanged."""

from __future__ import annotations

import gc
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from hwbridge.can.io.mf4 import MdfReader, Mf4Reader, Unsupported, _Field, _uint
from hwbridge.can.io.readers import open_capture
from tests.captures.conftest import KONA, TRUCK, drive
from tests.shared_data import needs_shared


def _python_can(path: Path) -> list[can.Message]:
    return [m for m in can.MF4Reader(path) if not m.is_error_frame and not m.is_remote_frame]


def _assert_same(chunk: FrameChunk, path: Path) -> None:
    frames = _python_can(path)
    assert len(chunk) == len(frames)
    stamps = np.array([round(m.timestamp * 1e6) for m in frames], np.int64)
    assert int(np.max(np.abs(stamps - chunk.timestamp_us), initial=0)) <= 1
    assert chunk.arbitration_id.tolist() == [m.arbitration_id for m in frames]
    assert chunk.extended.tolist() == [m.is_extended_id for m in frames]
    assert chunk.length.tolist() == [len(m.data) for m in frames]
    assert chunk.channel.tolist() == [m.channel for m in frames]
    for i, m in enumerate(frames):
        assert chunk.data[i, : chunk.length[i]].tobytes() == bytes(m.data)


def _same_chunks(a: FrameChunk, b: FrameChunk) -> None:
    for name in ("timestamp_us", "arbitration_id", "extended", "length", "channel"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    width = max(a.data.shape[1], b.data.shape[1])
    first, second = (np.pad(c.data, ((0, 0), (0, width - c.data.shape[1]))) for c in (a, b))
    assert np.array_equal(first, second)


def _messages() -> list[can.Message]:
    out = list(drive(120.0))
    t = out[-1].timestamp
    out += [
        can.Message(timestamp=t + 0.1, is_error_frame=True),
        can.Message(timestamp=t + 0.2, arbitration_id=0x5, is_remote_frame=True, dlc=2),
        can.Message(timestamp=t + 0.3, arbitration_id=0x123, is_fd=True, bitrate_switch=True,
                    data=bytes(range(64)), channel=1),
        can.Message(timestamp=t + 0.4, arbitration_id=0x18DAF110, is_fd=True, data=b"\x01\x02"),
        can.Message(timestamp=t + 0.5, arbitration_id=0x7FF, is_extended_id=False, data=b""),
    ]  # fmt: skip
    return out


@pytest.mark.parametrize("compression", [0, 1, 2], ids=["plain", "deflate", "transposed"])
def test_python_can_written_files(tmp_path: Path, compression: int) -> None:
    path = tmp_path / "drive.mf4"
    with can.MF4Writer(path, compression_level=compression) as writer:
        for msg in _messages():
            writer.on_message_received(msg)
    reader = open_capture(path)
    assert isinstance(reader.reader, MdfReader)
    chunks = list(MdfReader(path, chunk_frames=500).chunks())  # several chunks
    assert len(chunks) > 1
    ours = concat_chunks(chunks)
    _assert_same(ours, path)
    _same_chunks(ours, concat_chunks(list(Mf4Reader(path).chunks())))
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 1)
    assert ours.length.max() == 64


@needs_shared
@pytest.mark.parametrize("compression", [0, 2], ids=["plain", "transposed"])
def test_the_truck_saved_sorted_by_asammdf(tmp_path: Path, compression: int) -> None:
    """CANedge's bit-packed members and variable-length DataBytes (signal data blocks)."""
    from asammdf import MDF

    path = tmp_path / "truck.mf4"
    MDF(TRUCK).save(path, compression=compression)  # type: ignore[arg-type]
    reader = open_capture(path)
    assert isinstance(reader.reader, MdfReader)
    ours = concat_chunks(list(MdfReader(path, chunk_frames=10_000).chunks()))
    assert len(ours) == 57_849
    _assert_same(ours, path)
    _same_chunks(ours, concat_chunks(list(Mf4Reader(TRUCK).chunks())))


@needs_shared
@pytest.mark.parametrize("path", [TRUCK, KONA], ids=["truck", "kona"])
def test_unsorted_logger_files_go_to_asammdf(path: Path) -> None:
    with pytest.raises(Unsupported):
        MdfReader(path)
    assert isinstance(open_capture(path).reader, Mf4Reader)


def test_a_truncated_file_breaks_where_the_records_end(tmp_path: Path) -> None:
    path = tmp_path / "drive.mf4"
    with can.MF4Writer(path, compression_level=0) as writer:
        for msg in drive(300.0):
            writer.on_message_received(msg)
    whole = concat_chunks(list(MdfReader(path).chunks()))
    data = path.read_bytes()
    reader = MdfReader(path)  # the layout is read on opening; the records go missing after
    path.write_bytes(data[: len(data) // 2])
    read: list[FrameChunk] = []

    def read_all() -> None:
        read.extend(reader.chunks())

    with pytest.raises(CaptureError) as caught:
        read_all()
    assert "truncated" in caught.value.reason or "corrupt" in caught.value.reason
    kept = concat_chunks(read)
    assert 0 < len(kept) < len(whole)
    assert np.array_equal(kept.timestamp_us, whole.timestamp_us[: len(kept)])


def test_a_deflate_bomb_stops_at_the_size_its_block_gives(tmp_path: Path) -> None:
    """A DZ block whose data inflates to far more than its header says (here 90 MB of zeros
    in a block that says a few hundred kB) is corrupt at once, not inflated whole."""
    path = tmp_path / "drive.mf4"
    with can.MF4Writer(path, compression_level=1) as writer:
        for msg in drive(300.0):
            writer.on_message_received(msg)
    data = bytearray(path.read_bytes())
    at = data.find(b"##DZ")
    length = int.from_bytes(data[at + 8 : at + 16], "little")
    links = int.from_bytes(data[at + 16 : at + 24], "little")
    head = at + 24 + 8 * links
    room = at + length - (head + 24)
    bomb = zlib.compress(bytes(90_000_000), 9)
    assert len(bomb) <= room
    data[head + 16 : head + 24] = len(bomb).to_bytes(8, "little")  # the compressed size
    data[head + 24 : head + 24 + len(bomb)] = bomb
    path.write_bytes(bytes(data))
    reader = MdfReader(path)
    tracemalloc.start()
    try:
        with pytest.raises(CaptureError) as caught:
            list(reader.chunks())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "DZ block" in caught.value.reason
    assert peak < 20_000_000  # the block's own size, not the bomb's


def test_a_data_list_that_lists_itself_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "drive.mf4"
    with can.MF4Writer(path) as writer:
        for msg in drive(30.0):
            writer.on_message_received(msg)
    data = bytearray(path.read_bytes())
    at = data.find(b"##DZ")  # the records' one block becomes a list whose block is itself
    data[at : at + 56] = struct.pack("<4s4xQQqqB3xIQ", b"##DL", 56, 2, 0, at, 1, 1, 0)
    path.write_bytes(bytes(data))
    with pytest.raises(CaptureError) as caught:
        list(MdfReader(path).chunks())
    assert "nest" in caught.value.reason


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_garbage_named_mf4_is_a_capture_error(tmp_path: Path) -> None:
    path = tmp_path / "x.mf4"
    path.write_bytes(b"MDF     4.10    " + bytes(200))
    with pytest.raises(Unsupported):
        MdfReader(path)
    with pytest.raises(CaptureError):
        open_capture(path)
    gc.collect()  # asammdf's half-built MDF complains when collected: here, not in the next test


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=12, max_size=12),
    byte_offset=st.integers(0, 4),
    bit_offset=st.integers(0, 7),
    bits=st.integers(1, 56),
    big_endian=st.booleans(),
)
def test_bit_fields_as_mdf_lays_them_out(
    data: bytes, byte_offset: int, bit_offset: int, bits: int, big_endian: bool
) -> None:
    rows = np.frombuffer(data, np.uint8).reshape(1, 12)
    field = _Field(byte_offset, bit_offset, bits, 1 if big_endian else 0)
    width = (bit_offset + bits + 7) // 8
    cells = data[byte_offset : byte_offset + width]
    whole = int.from_bytes(cells, "big" if big_endian else "little")
    assert int(_uint(rows, field)[0]) == (whole >> bit_offset) & ((1 << bits) - 1)


def test_decoding_a_sorted_mf4_imports_no_asammdf(tmp_path: Path) -> None:
    path = tmp_path / "drive.mf4"
    with can.MF4Writer(path) as writer:
        for msg in drive(5.0):
            writer.on_message_received(msg)
    code = (
        "import sys; from hwbridge._deferred import defer_asammdf; defer_asammdf();"
        "from hwbridge.can.io.readers import open_capture;"
        f"n = sum(len(c) for c in open_capture({str(path)!r}).chunks());"
        "print(n, [m for m in ('asammdf', 'pandas') if sys.modules.get(m)])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=1)[1].strip() == "[]"
    assert int(out.stdout.split()[0]) == len(list(drive(5.0)))
