"""The MF4 readers against the second adversarial review of issue 33: a signal-data link into
shared conversions (a walk of 4^30 paths), one 4 kB signal-data entry named by every record
(arrays of records x 4,096), a compressed MF4 (a crash on close, inflated whole into memory,
re-inflated on every backward seek), members whose values do not fit their columns (a length
of 300 wrapped to 44, an id of 2^32 + 0x100 cut to 0x100), asammdf's error text quoted
whole, and records of 4 bytes whose members overlap (258 frames per byte). Each hostile file
is a few kB built with struct; what could hang or flood runs in a subprocess with a timeout
(and an address-space limit), so a regression fails instead of taking the suite down."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io.frame_checks import CheckedReader, checked
from hwbridge.can.io.frames import MAX_NOTE, CaptureError, ReaderCounts, concat_chunks
from hwbridge.can.io.mf4 import MdfReader, Mf4Reader, data_frames
from hwbridge.can.io.pycan import PythonCanReader
from hwbridge.can.io.readers import open_capture
from tests.can.io.mdf_blocks import (
    BYTES,
    CG_DATA,
    CN_DATA,
    FLOAT,
    UINT,
    VLSD,
    Layout,
    append,
    block,
    blocks,
    decode_in_subprocess,
    long_entry,
    mf4_file,
    named,
    relaid,
    set_link,
    signal_data,
)
from tests.captures.conftest import KONA, REPO
from tests.shared_data import needs_shared

T0 = 1_700_000_000.0


def _clean(folder: Path) -> bytes:
    """Ten frames as python-can's MF4Writer saves them (records of 84 bytes)."""
    messages = [
        can.Message(timestamp=T0 + i / 100, arbitration_id=0x100, is_extended_id=False,
                    data=bytes([i, 1, 2, 3, 4, 5, 6, 7]))
        for i in range(10)
    ]  # fmt: skip
    return mf4_file(folder / "clean.mf4", messages=messages).read_bytes()


def _write(path: Path, data: bytes | bytearray) -> Path:
    path.write_bytes(bytes(data))
    return path


RUN = """
import json, resource, sys, tracemalloc
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from hwbridge.can.io.frames import CaptureError
from hwbridge.can.io.readers import open_capture
def rchar():
    with open("/proc/self/io") as io:
        return next(int(l.split()[1]) for l in io if l.startswith("rchar"))
tracemalloc.start()
read_before = rchar()
frames, error, kind, counts = 0, None, None, None
try:
    reader = open_capture(sys.argv[2], fast=sys.argv[3] == "fast")
    kind, counts = type(reader.reader).__name__, reader.counts
    try:
        for chunk in reader.chunks():
            frames += len(chunk)
    finally:
        reader.close()
except CaptureError as exc:
    error = exc.reason
except MemoryError:
    error = "MemoryError"
print(json.dumps({
    "frames": frames, "error": error, "reader": kind,
    "peak": tracemalloc.get_traced_memory()[1], "read": rchar() - read_before,
    "malformed": counts.malformed_frames if counts else 0,
    "notes": counts.frame_notes[:4] if counts else [],
}))
"""


def _read_in_subprocess(path: Path, timeout: float = 120.0, fast: bool = True) -> dict[str, Any]:
    """What `open_capture(path)` reads (`fast=False`: through python-can's reader), in a
    process of its own limited to 2 GiB of address space: frames, error (a CaptureError's
    reason, or "MemoryError"), the reader's class, the peak of memory allocated while reading
    (tracemalloc: numpy's arrays included), the bytes the process read from files while
    reading, and the malformed frames counted."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}", "OPENBLAS_NUM_THREADS": "1"}
    args = [sys.executable, "-c", RUN, str(2 << 30), str(path), "fast" if fast else "slow"]
    try:
        out = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"reading {path.name} ran past {timeout} s") from None
    if out.returncode:
        why = f"exit code {out.returncode}:\n{out.stderr[-3000:]}"  # -11: a crash in C
        raise AssertionError(f"reading {path.name} failed, {why}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# finding 1: a signal-data link into a chain of shared conversions


_CC_IDENTITY = struct.pack("<BBHHHdd", 0, 0, 0, 0, 0, 0.0, 0.0)


def _conversion_chain(data: bytearray, depth: int, fanout: int) -> int:
    """`depth` CC blocks, each naming the next `fanout` times (conversions may be shared):
    the address of the first, from which a walk that does not remember takes fanout^depth
    paths."""
    after = append(data, "CC", [0, 0, 0, 0], _CC_IDENTITY)
    for _ in range(depth):
        after = append(data, "CC", [0, 0, 0, *[after] * fanout], _CC_IDENTITY)
    return after


def _tree_file(folder: Path) -> Path:
    """12 kB: CAN_DataFrame.DataBytes made variable-length, its signal data a chain of 30
    conversions each naming the next 4 times."""
    data = bytearray(_clean(folder))
    cn = named(data, "CN", "CAN_DataFrame.DataBytes")
    _, sync, _, _, offset, _, flags = CN_DATA.unpack_from(data, cn.data_at)
    CN_DATA.pack_into(data, cn.data_at, VLSD, sync, BYTES, 0, offset, 64, flags)
    set_link(data, cn, 5, _conversion_chain(data, 30, 4))
    return _write(folder / "tree.mf4", data)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fast", [True, False], ids=["open_capture", "python-can"])
def test_signal_data_that_leads_to_conversions_is_corrupt(tmp_path: Path, fast: bool) -> None:
    """The walk of the signal data's blocks took 4^30 paths (for ever): a signal-data link
    may lead only to data blocks (or what the standard names: a VLSD channel group, ...), so
    the file is refused as corrupt before any reader follows it."""
    path = _tree_file(tmp_path)
    assert path.stat().st_size < 13_000
    result = decode_in_subprocess(path, max_frames=10, timeout=60, fast=fast)
    assert result["frames"] == 0
    assert "corrupt: a CC block where CN link 5 wants" in result.get("error", ""), result


@pytest.mark.timeout(60)
def test_a_walk_of_a_data_tree_visits_each_block_once() -> None:
    """Twenty data lists, each naming the next four times: the walk yields 21 blocks, not
    4^20 (the scan refuses such a file; the walk does not rely on it)."""
    from hwbridge.can.io.mf4_links import MdfLinks, _Node

    links = MdfLinks("4.10", 0)
    at = 64
    links.nodes[at] = _Node(at, "DT", 40, 40, (), b"")
    for _ in range(20):
        links.nodes[at + 64] = _Node(at + 64, "DL", 80, 80, (at,) * 4, b"")
        at += 64
    walked = [node.at for node in itertools.islice(links.tree(at), 10_000)]
    assert sorted(walked) == sorted(links.nodes)


# finding 2: every record's variable-length DataBytes at one 4 kB signal-data entry

_VLSD_LAYOUT: Layout = {
    "time": (0, 64, FLOAT, 2),
    "ID": (8, 32, UINT, 0),
    "DataLength": (12, 8, UINT, 0),
    "IDE": (13, 8, UINT, 0),
    "DLC": (14, 8, UINT, 0),
    "BusChannel": (15, 8, UINT, 0),
    "DataBytes": (16, 64, BYTES, VLSD),
}
_VLSD_RECORD = struct.Struct("<dIBBBBQ")


@pytest.mark.timeout(180)
def test_one_long_signal_data_entry_named_by_every_record_costs_no_memory(
    tmp_path: Path,
) -> None:
    """A 28 kB file: 262,144 records (deflated), all pointing their DataBytes at one
    4,096-byte entry. It took 4.58 GB (index arrays of 65,536 x 4,096 a chunk); now at most 65
    bytes of an entry are read, and each of those frames is malformed (a frame carries at
    most 64 bytes): counted, named, and the reading stays under 64 MB."""
    data = relaid(
        _clean(tmp_path),
        _VLSD_RECORD.size,
        _VLSD_RECORD.pack(0.0, 0x100, 1, 0, 1, 1, 0) * 262_144,
        _VLSD_LAYOUT,
    )
    signal_data(data, [bytes(range(256)) * 16])
    path = _write(tmp_path / "vlsd.mf4", data)
    assert path.stat().st_size < 32_000
    result = _read_in_subprocess(path)
    assert result["reader"] == "MdfReader"
    assert result["malformed"] == 262_144, result
    assert result["notes"][0] == "frame 1: 4096 data bytes (at most 64)", result
    assert "no frame could be read" in result["error"]
    assert result["peak"] < 64 << 20, result


@pytest.mark.timeout(120)
@pytest.mark.parametrize("length_member", [False, True], ids=["no-DataLength", "DataLength"])
def test_signal_data_entries_over_64_bytes_are_malformed_frames(
    tmp_path: Path, length_member: bool
) -> None:
    """Entries of 0, 8, 64, 65, 300 and 4,096 bytes: the first three are frames of those
    bytes, the others malformed frames named by their real size (an entry of 300 bytes and
    no DataLength member ended in an OverflowError)."""
    sizes = [0, 8, 64, 65, 300, 4096]
    entries = [bytes(range(256)) * 16 for _ in sizes]
    entries = [entry[:size] for entry, size in zip(entries, sizes, strict=True)]
    layout = dict(_VLSD_LAYOUT)
    if not length_member:
        del layout["DataLength"], layout["DLC"]
    data = bytearray(_clean(tmp_path))
    offsets = signal_data(data, entries)
    records = b"".join(
        _VLSD_RECORD.pack(i / 10, 0x100 + i, min(size, 255), 0, 15, 1, offset)
        for i, (size, offset) in enumerate(zip(sizes, offsets, strict=True))
    )
    data = relaid(bytes(data), _VLSD_RECORD.size, records, layout)
    path = _write(tmp_path / "entries.mf4", data)
    reader = open_capture(path)
    assert isinstance(reader.reader, MdfReader)
    chunk = concat_chunks(list(reader.chunks()))
    reader.close()
    assert chunk.arbitration_id.tolist() == [0x100, 0x101, 0x102]
    assert chunk.length.tolist() == [0, 8, 64]
    for row, size in enumerate(sizes[:3]):
        assert chunk.data[row, :size].tobytes() == entries[row]
    notes = reader.counts.frame_notes
    assert notes[0].startswith("frame 4: 65 data bytes")
    assert notes[1].startswith("frame 5: 300 data bytes")
    assert notes[2].startswith("frame 6: 4096 data bytes")


# the asammdf path's variable-length DataBytes (unfinalized or unsorted files)


def _one_entry_for_all(folder: Path, records: int, entry: int) -> Path:
    """An unfinalized file (asammdf's to read) whose `records` records all name one entry
    of `entry` bytes as their DataBytes."""
    record = _VLSD_RECORD.pack(0.0, 0x100, 1, 0, 1, 1, 0)
    data = relaid(_clean(folder), _VLSD_RECORD.size, record * records, _VLSD_LAYOUT)
    if entry <= 4096:
        signal_data(data, [(bytes(range(256)) * 16)[:entry]])
    else:
        long_entry(data, entry)
    return _write(folder / "entry.mf4", _unfinalized(data))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fast", [True, False], ids=["open_capture", "python-can"])
def test_one_entry_named_by_every_record_is_refused_before_asammdf_reads_them(
    tmp_path: Path, fast: bool
) -> None:
    """A 28 kB unfinalized file: 262,144 records all name one 4,096-byte entry. asammdf
    pads every entry of a read to the longest its records name, so it held 262,144 x 4,096
    bytes (1.24 GB; one read of 131,072 records, a few copies) and read 262,144 frames of one
    byte. The longest entry the records name is found first (asammdf's own pass, which its
    reads reuse): longer than the 64 bytes a frame carries, the group is corrupt, refused
    before a record is read."""
    path = _one_entry_for_all(tmp_path, 262_144, 4096)
    assert path.stat().st_size < 32_000
    result = _read_in_subprocess(path, fast=fast)
    assert result["frames"] == 0, result
    assert "corrupt: CAN_DataFrame.DataBytes entries of 4096 bytes" in result["error"], result
    assert result["peak"] < 128 << 20, result  # asammdf's imports included (about 45 MB)


@pytest.mark.timeout(300)
def test_signal_data_longer_than_its_records_can_name_is_refused_unread(tmp_path: Path) -> None:
    """1,000 records and one entry of 64 MiB (a 64 kB DZ block): asammdf held the whole
    entry to find the longest, then asked for 1,000 x 64 MiB at once. Signal data holds at
    most an entry of 64 bytes and its length (68 bytes) a record: more is corrupt, refused
    before asammdf holds any of it (it crashed the process, the address space limited)."""
    path = _one_entry_for_all(tmp_path, 1000, 64 << 20)
    assert path.stat().st_size < 100_000
    result = _read_in_subprocess(path)
    assert result["frames"] == 0, result
    assert "67108868 bytes of signal data for 1000 records" in result["error"], result
    assert result["peak"] < 64 << 20, result  # asammdf's imports included


@pytest.mark.timeout(120)
@pytest.mark.parametrize("longest", [0, 8, 64, 65, 100])
def test_the_asammdf_path_reads_entries_of_at_most_64_bytes(tmp_path: Path, longest: int) -> None:
    """Entries of up to 64 bytes (what a CAN FD frame carries) read as the block reader
    reads them; a longer one makes the group corrupt (asammdf pads each entry to the
    longest, so the frame it came from cannot be told and dropped on its own)."""
    sizes = [0, 8, longest, 3]
    entries = [bytes(range(1, 256)) * 2 for _ in sizes]
    entries = [entry[:size] for entry, size in zip(entries, sizes, strict=True)]
    data = bytearray(_clean(tmp_path))
    offsets = signal_data(data, entries)
    records = b"".join(
        _VLSD_RECORD.pack(i / 10, 0x100 + i, min(size, 255), 0, 15, 1, offset)
        for i, (size, offset) in enumerate(zip(sizes, offsets, strict=True))
    )
    data = relaid(bytes(data), _VLSD_RECORD.size, records, _VLSD_LAYOUT)
    sorted_path = _write(tmp_path / "sorted.mf4", data)
    path = _write(tmp_path / "unfinalized.mf4", _unfinalized(bytearray(data)))
    if longest > 64:
        with pytest.raises(CaptureError, match=f"DataBytes entries of {longest} bytes"):
            Mf4Reader(path)
        return
    read = concat_chunks(list(Mf4Reader(path).chunks()))
    block = concat_chunks(list(MdfReader(sorted_path).chunks()))
    assert read.length.tolist() == block.length.tolist() == sizes
    for row, entry in enumerate(entries):
        assert read.data[row, : len(entry)].tobytes() == entry
    assert np.array_equal(read.data[:, : block.data.shape[1]], block.data)


def _kona_one_entry(folder: Path, entry: int) -> Path:
    """The Kona's CANedge log (frames in unsorted records, their DataBytes in the records of
    a VLSD channel group, an unfinalized DT block to the end of the file) with its first
    DataBytes entry made `entry` bytes long and every frame naming it."""
    data = bytearray(KONA.read_bytes())
    found = blocks(data)
    dg = next(b for b in found.values() if b.kind == "DG")
    id_size = data[dg.data_at]
    sizes: dict[int, int | None] = {}
    for cg in (b for b in found.values() if b.kind == "CG"):
        record_id, _, flags, _, size, invalid = CG_DATA.unpack_from(data, cg.data_at)
        sizes[record_id] = None if flags & 1 else size + invalid
    cn = named(data, "CN", "CAN_DataFrame.DataBytes")
    offset = CN_DATA.unpack_from(data, cn.data_at)[4]
    vlsd_id = CG_DATA.unpack_from(data, block(data, cn.links[5]).data_at)[0]
    frame_id = next(i for i, size in sizes.items() if size == 22)  # CAN_DataFrame's records
    dt = block(data, dg.links[2])
    stream, out, at = bytes(data[dt.data_at :]), bytearray(), 0
    while at + id_size <= len(stream):
        record_id = int.from_bytes(stream[at : at + id_size], "little")
        body = at + id_size
        size = sizes[record_id]
        if size is None:
            end = body + 4 + int.from_bytes(stream[body : body + 4], "little")
            record = bytearray(stream[at:end])
            if record_id == vlsd_id and entry:
                record[id_size:] = struct.pack("<I", entry) + bytes(range(256)) * (entry // 256)
                entry = 0
        else:
            end = body + size
            record = bytearray(stream[at:end])
            if record_id == frame_id:
                record[id_size + offset : id_size + offset + 8] = bytes(8)  # the first entry
        out += record
        at = end
    data[dt.data_at :] = out
    return _write(folder / "kona.mf4", data)


@needs_shared
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fast", [True, False], ids=["open_capture", "python-can"])
def test_a_canedge_log_whose_frames_name_one_long_entry_is_refused(
    tmp_path: Path, fast: bool
) -> None:
    """CANedge's layout (a VLSD channel group among unsorted records): the 2,010 frames of
    the Kona log all name one 4,096-byte entry. asammdf read 2,010 x 4,096 bytes; the group
    is corrupt now, refused before a record is read. The same log with every frame naming
    its first 8-byte entry reads 2,010 frames."""
    path = _kona_one_entry(tmp_path, 4096)
    with pytest.raises(CaptureError, match="DataBytes entries of 4096 bytes"):
        open_capture(path, fast=fast)
    reader = open_capture(_kona_one_entry(tmp_path, 0), fast=fast)
    assert sum(len(chunk) for chunk in reader.chunks()) == 2010
    reader.close()


# finding 3: compressed MF4


def _gzip(path: Path, data: bytes, zeros: int = 0) -> Path:
    """`data` gzip-compressed, followed by `zeros` bytes of zeros (which nothing links to)."""
    with gzip.open(path, "wb", 6) as out:
        out.write(data)
        for _ in range(zeros >> 20):
            out.write(bytes(1 << 20))
    return path


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where temporary files go while the test runs (to see that none is left)."""
    folder = tmp_path / "spool"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fast", [True, False], ids=["open_capture", "python-can"])
def test_a_compressed_mf4_reads_as_the_plain_one_and_closes_twice(
    tmp_path: Path, spool_dir: Path, fast: bool
) -> None:
    """Every .mf4.gz crashed decode, discover and plot: the reader's chunks() closed it and
    the caller's close() closed python-can's reader again (AttributeError). A compressed MF4
    now reads exactly as the plain file does, closes any number of times, and leaves no
    temporary file behind."""
    clean = mf4_file(tmp_path / "drive.mf4", 20.0, 1)
    plain = concat_chunks(list(open_capture(clean).chunks()))
    reader = open_capture(_gzip(tmp_path / "drive.mf4.gz", clean.read_bytes()), fast=fast)
    if fast:
        assert isinstance(reader.reader.reader, MdfReader)  # type: ignore[attr-defined]
    chunk = concat_chunks(list(reader.chunks()))
    reader.close()
    reader.close()
    assert np.array_equal(chunk.arbitration_id, plain.arbitration_id)
    assert np.array_equal(chunk.timestamp_us, plain.timestamp_us)
    assert list(spool_dir.iterdir()) == []


@pytest.mark.timeout(120)
def test_every_mf4_reader_closes_any_number_of_times(tmp_path: Path, spool_dir: Path) -> None:
    """Before reading, after reading, twice: the block reader, asammdf's, python-can's, and
    the reader of a compressed MF4."""
    clean = mf4_file(tmp_path / "drive.mf4", 5.0, 0)
    gz = _gzip(tmp_path / "drive.mf4.gz", clean.read_bytes())
    frames = sum(len(c) for c in MdfReader(clean).chunks())
    for make in (
        lambda: MdfReader(clean),
        lambda: Mf4Reader(clean),
        lambda: PythonCanReader(clean),
        lambda: open_capture(gz),
        lambda: open_capture(gz, fast=False),
    ):
        unread = make()
        unread.close()
        unread.close()
        read = make()
        assert sum(len(c) for c in read.chunks()) == frames
        read.close()
        read.close()
    assert list(spool_dir.iterdir()) == []


@pytest.mark.timeout(180)
def test_a_compressed_mf4_is_never_held_in_memory(tmp_path: Path) -> None:
    """A valid file followed by 64 MiB of zeros, compressed to 64 kB: python-can's reader
    held all 64 MiB (a 1 MB file of 1 GiB reached 2.26 GB). The stream is spooled to a
    temporary file once and read as a plain .mf4: memory stays a few MB."""
    path = _gzip(tmp_path / "padded.mf4.gz", _clean(tmp_path), zeros=64 << 20)
    assert path.stat().st_size < 100_000
    result = _read_in_subprocess(path)
    assert (result["frames"], result["error"], result["reader"]) == (10, None, "Mf4GzReader")
    assert result["peak"] < 16 << 20, result


def _ping_pong(folder: Path, pairs: int, pad: int) -> Path:
    """A .mf4.gz whose file history list alternates between blocks after and before `pad`
    bytes of zeros: each link followed backwards rewound gzip to inflate from the start."""
    data = bytearray(_clean(folder))
    early_at = len(data)
    late_at = early_at + pairs * 56 + pad
    early = [early_at + 56 * i for i in range(pairs)]
    late = [late_at + 56 * i for i in range(pairs)]
    order = [at for pair in zip(late, early, strict=True) for at in pair]
    following = dict(zip(order, [*order[1:], 0], strict=True))

    def fh(at: int) -> bytes:
        return struct.pack("<4s4xQQQQQhhB3x", b"##FH", 56, 2, following[at], 0, 0, 0, 0, 0)

    struct.pack_into("<Q", data, 64 + 24 + 8, order[0])  # HD's file history: the first late FH
    path = folder / "pingpong.mf4.gz"
    with gzip.open(path, "wb", 6) as out:
        out.write(bytes(data) + b"".join(fh(at) for at in early))
        for _ in range(pad >> 20):
            out.write(bytes(1 << 20))
        out.write(b"".join(fh(at) for at in late))
    return path


@pytest.mark.timeout(300)
def test_a_compressed_mf4_is_inflated_once(tmp_path: Path) -> None:
    """100 pairs of links back and forth across 32 MiB of zeros: the link check read the
    compressed file again for each one (6 MB of it here; a 523 kB file took 48 s). It is
    inflated once now: the reading reads the compressed file once, and of the temporary
    file only the blocks its links name."""
    path = _ping_pong(tmp_path, 100, 32 << 20)
    size = path.stat().st_size
    result = _read_in_subprocess(path)
    assert (result["frames"], result["error"]) == (10, None), result
    assert result["read"] < 2 * size + (2 << 20), result


@pytest.mark.timeout(120)
def test_a_compressed_mf4_beyond_the_cap_is_refused(
    tmp_path: Path, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed MF4 that inflates past the cap (4 GiB; 1 MiB here) is refused, saying
    why, and its temporary file deleted."""
    from hwbridge.can.io import mf4_gz

    monkeypatch.setattr(mf4_gz, "MAX_SPOOL_BYTES", 1 << 20)
    path = _gzip(tmp_path / "big.mf4.gz", _clean(tmp_path), zeros=2 << 20)
    with pytest.raises(CaptureError, match="inflates to more than 1048576 bytes"):
        open_capture(path)
    assert list(spool_dir.iterdir()) == []


@pytest.mark.timeout(60)
def test_a_cut_compressed_mf4_is_a_capture_error(tmp_path: Path, spool_dir: Path) -> None:
    data = _gzip(tmp_path / "drive.mf4.gz", _clean(tmp_path)).read_bytes()
    path = _write(tmp_path / "cut.mf4.gz", data[: len(data) // 2])
    with pytest.raises(CaptureError, match="truncated"):
        open_capture(path)
    assert list(spool_dir.iterdir()) == []


# finding 4: values that do not fit their columns

_WIDE_LAYOUT: Layout = {
    "time": (0, 64, FLOAT, 2),
    "ID": (8, 32, UINT, 0),
    "IDE": (12, 8, UINT, 0),
    "DLC": (13, 8, UINT, 0),
    "DataLength": (14, 16, UINT, 0),
    "BusChannel": (16, 8, UINT, 0),
    "DataBytes": (17, 2400, BYTES, 0),
}
_WIDE_RECORD = struct.Struct("<dIBBHB300s")
_ID64_LAYOUT: Layout = {
    "time": (0, 64, FLOAT, 2),
    "ID": (8, 64, UINT, 0),
    "IDE": (16, 8, UINT, 0),
    "DLC": (17, 8, UINT, 0),
    "DataLength": (18, 8, UINT, 0),
    "BusChannel": (19, 8, UINT, 0),
    "DataBytes": (20, 64, BYTES, 0),
}
_ID64_RECORD = struct.Struct("<dQBBBB8s")


def _reader(path: Path, through: str) -> CheckedReader:
    return CheckedReader(MdfReader(path) if through == "block" else Mf4Reader(path))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("through", ["block", "asammdf"])
def test_a_data_length_over_64_is_a_malformed_frame(tmp_path: Path, through: str) -> None:
    """A 16-bit DataLength of 300 with 300 data bytes became a frame of 44 (300 as a byte):
    it is a malformed frame now, counted and named; its neighbours of 8 bytes are read."""
    payload = bytes(range(256)) + bytes(range(44))
    records = b"".join(
        _WIDE_RECORD.pack(i / 100, 0x100, 0, 8, 300 if i % 2 else 8, 1, payload) for i in range(10)
    )
    path = _write(tmp_path / "wrap.mf4", relaid(_clean(tmp_path), 317, records, _WIDE_LAYOUT))
    reader = _reader(path, through)
    chunk = concat_chunks(list(reader.chunks()))
    assert chunk.length.tolist() == [8] * 5
    assert chunk.data[:, :8].tobytes() == payload[:8] * 5
    assert reader.counts.malformed_frames == 5
    assert reader.counts.frame_notes[0] == "frame 2: 300 data bytes (at most 64)"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("through", ["block", "asammdf"])
def test_an_id_beyond_32_bits_is_a_malformed_frame(tmp_path: Path, through: str) -> None:
    """A 64-bit ID of 2^32 + 0x100 was cut to 0x100 and decoded as that message."""
    records = b"".join(
        _ID64_RECORD.pack(i / 100, (1 << 32) + 0x100 if i % 2 else 0x100, 0, 8, 8, 1, bytes(8))
        for i in range(10)
    )
    path = _write(tmp_path / "id64.mf4", relaid(_clean(tmp_path), 28, records, _ID64_LAYOUT))
    reader = _reader(path, through)
    chunk = concat_chunks(list(reader.chunks()))
    assert chunk.arbitration_id.tolist() == [0x100] * 5
    assert reader.counts.malformed_frames == 5
    assert reader.counts.frame_notes[0] == "frame 2: id 0x100000100 beyond 29 bits"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("through", ["block", "asammdf"])
def test_300_data_bytes_without_a_length_are_malformed_frames(tmp_path: Path, through: str) -> None:
    """DataBytes of 300 bytes and no DataLength nor DLC: `discover` ended in OverflowError
    (300 out of bounds for uint8); each frame is malformed, and a capture of nothing else
    fails as one whose frames could not be read."""
    layout = {k: v for k, v in _WIDE_LAYOUT.items() if k not in ("DataLength", "DLC")}
    records = _WIDE_RECORD.pack(0.0, 0x100, 0, 0, 0, 1, bytes(300)) * 10
    path = _write(tmp_path / "full.mf4", relaid(_clean(tmp_path), 317, records, layout))
    reader = _reader(path, through)
    with pytest.raises(CaptureError, match="no frame could be read"):
        list(reader.chunks())
    assert reader.counts.malformed_frames == 10
    assert reader.counts.frame_notes[0] == "frame 1: 300 data bytes (at most 64)"


_U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(_U64 | st.integers(0, 0x1FFFFFFF), _U64 | st.integers(0, 64)),
        min_size=1,
        max_size=20,
    ),
    width=st.integers(0, 300),
    with_length=st.booleans(),
)
def test_data_frames_never_wrap_a_value(
    rows: list[tuple[int, int]], width: int, with_length: bool
) -> None:
    """Whatever the members hold, a frame the checks keep is the one the record describes:
    its id is the record's (flags above the 29 bits masked), its length what DataLength
    says (at most the bytes stored); a frame whose id needs more than 32 bits, or that says
    (or, without DataLength, stores) more than 64 bytes is dropped and counted."""
    n = len(rows)
    ids = np.array([r[0] for r in rows], np.uint64)
    lengths = np.array([r[1] for r in rows], np.uint64)
    payload = np.arange(n * width, dtype=np.uint64).astype(np.uint8).reshape(n, width)
    fields: dict[str, Any] = dict.fromkeys(("IDE", "DLC", "BusChannel"))
    fields |= {"ID": ids, "DataLength": lengths if with_length else None, "DataBytes": payload}
    chunk = data_frames(n, fields, np.zeros(n, np.int64))
    counts = ReaderCounts()
    kept = checked(chunk, counts, 1)
    said = [r[1] if with_length else width for r in rows]
    good = [r[0] < 2**32 and s <= 64 for r, s in zip(rows, said, strict=True)]
    carried = [min(s, width) for s in said]
    assert counts.malformed_frames == good.count(False)
    assert kept.arbitration_id.tolist() == [
        r[0] & 0x1FFFFFFF for r, g in zip(rows, good, strict=True) if g
    ]
    assert kept.length.tolist() == [c for c, g in zip(carried, good, strict=True) if g]
    for row, source in enumerate(i for i, g in enumerate(good) if g):
        size = carried[source]
        assert kept.data[row, :size].tobytes() == payload[source, :size].tobytes()


# finding 5: asammdf's error text


@pytest.mark.timeout(180)
def test_a_library_error_quoting_the_file_is_cut_and_escaped(tmp_path: Path) -> None:
    """asammdf's error quotes a channel name: one of 60 kB of terminal escapes was passed
    whole into the error (3 MB on stderr). A reason is a note (`note_text`): at most
    MAX_NOTE characters of the text, each control character escaped (to at most 4)."""
    data = bytearray(_clean(tmp_path))
    name = b"CAN_DataFrame.DataBytes" + b"\x1b[31mA" * 10_000 + b"\0"
    cn = named(data, "CN", "CAN_DataFrame.DataBytes")
    set_link(data, cn, 2, append(data, "TX", [], name))
    _, sync, _, _, offset, _, flags = CN_DATA.unpack_from(data, cn.data_at)
    CN_DATA.pack_into(data, cn.data_at, VLSD, sync, BYTES, 0, offset, 64, flags)
    set_link(data, cn, 5, append(data, "DT", [], bytes(64)))  # not signal data for asammdf
    twice = struct.pack("<BBHHHdd2d", 1, 0, 0, 0, 2, 0.0, 0.0, 0.0, 2.0)  # ID x 2: asammdf's
    set_link(data, named(data, "CN", "CAN_DataFrame.ID"), 4, append(data, "CC", [0] * 4, twice))
    path = _write(tmp_path / "quote.mf4", data)
    result = decode_in_subprocess(path, max_frames=10, timeout=90)
    reason = result.get("error", "")
    assert "DataBytes" in reason, result
    assert len(reason) <= 4 * MAX_NOTE
    assert reason.isprintable()


# finding 6: records whose members overlap


def _unfinalized(data: bytearray) -> bytearray:
    """Marked as not closed by its writer: asammdf reads it, not the block reader."""
    data[0:8] = b"UnFinMF "
    struct.pack_into("<H", data, 60, 0)
    return data


_OVERLAPS: dict[str, tuple[Layout, str]] = {
    "id-and-length": (
        {"time": (0, 32, FLOAT, 2), "ID": (4, 16, UINT, 0), "DataLength": (5, 8, UINT, 0),
         "DataBytes": (7, 8, BYTES, 0)},
        "CAN_DataFrame.ID and CAN_DataFrame.DataLength overlap",
    ),
    "time-and-id": (
        {"time": (0, 32, FLOAT, 2), "ID": (2, 16, UINT, 0), "DataBytes": (7, 8, BYTES, 0)},
        "time and CAN_DataFrame.ID overlap",
    ),
}  # fmt: skip


@pytest.mark.timeout(180)
@pytest.mark.parametrize("through", ["block", "asammdf"])
@pytest.mark.parametrize("overlap", list(_OVERLAPS))
def test_members_that_overlap_are_corrupt(tmp_path: Path, through: str, overlap: str) -> None:
    """Members that share bits made one record several frames' worth of fields (with a
    4-byte record, 258 frames per byte of deflated data): CAN_DataFrame's members may not
    overlap each other or the time stamp."""
    layout, reason = _OVERLAPS[overlap]
    data = relaid(_clean(tmp_path), 8, bytes(range(8)) * 8192, layout)
    if through == "asammdf":
        _unfinalized(data)
    path = _write(tmp_path / "overlap.mf4", data)
    result = decode_in_subprocess(path, max_frames=8192, timeout=90)
    assert result["frames"] == 0
    assert reason in result.get("error", ""), result


_SMALL: dict[str, tuple[int, Layout]] = {
    "4-bytes": (  # the review's: time, id, length and data bytes in the same 4 bytes
        4,
        {"time": (0, 32, FLOAT, 2), "ID": (0, 16, UINT, 0), "DataLength": (2, 8, UINT, 0),
         "IDE": (3, 8, UINT, 0), "DLC": (3, 8, UINT, 0), "BusChannel": (3, 8, UINT, 0),
         "DataBytes": (0, 8, BYTES, 0)},
    ),
    "8-bit-id": (5, {"time": (0, 32, FLOAT, 2), "ID": (4, 8, UINT, 0)}),
}  # fmt: skip


@pytest.mark.timeout(180)
@pytest.mark.parametrize("through", ["block", "asammdf"])
@pytest.mark.parametrize("small", list(_SMALL))
def test_a_record_smaller_than_a_time_stamp_and_an_id_is_corrupt(
    tmp_path: Path, through: str, small: str
) -> None:
    """Records of 4 bytes (the review's 65,536 records in 260 bytes of DZ data) or of 5
    bytes (a 32-bit time and an 8-bit id): an id needs 11 bits, so a record holds at least
    6 bytes, and a file at most 1032 / 6 = 172 frames per byte."""
    size, layout = _SMALL[small]
    data = relaid(_clean(tmp_path), size, bytes([0, 1, 1, 0, 0]) * 13_108, layout)
    if through == "asammdf":
        _unfinalized(data)
    path = _write(tmp_path / "small.mf4", data)
    result = decode_in_subprocess(path, max_frames=65_536, timeout=90)
    assert result["frames"] == 0
    assert "corrupt: CAN_DataFrame" in result.get("error", ""), result


# replay reads through the same readers

REPLAY = """
import json, sys
from hwbridge.can.transport.replay import ReplayAdapter
adapter = ReplayAdapter(sys.argv[1], speed=None)
finished = adapter.wait_finished(float(sys.argv[2]))
status = adapter.status()
adapter.close()
print(json.dumps({"finished": finished, "state": status.bus_state,
                  "error": status.last_error, "closed": adapter.closed}))
"""


@pytest.mark.timeout(180)
def test_replaying_the_hanging_file_ends(tmp_path: Path) -> None:
    """`replay:tree.mf4` read through `open_capture` and never ended: it fails within a
    minute now (at once, in fact), naming why, and closes."""
    path = _tree_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", REPLAY, str(path), "60"],
            capture_output=True, text=True, timeout=120, env=env, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError("the replay did not end") from None
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["finished"] and result["closed"], result
    assert result["state"] == "failed"
    assert "corrupt" in result["error"]
