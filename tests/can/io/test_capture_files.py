"""What a capture file may be and what its times may say (issue 33, review 2).

A FIFO or a device named like a capture is refused before anything opens it (`open()` of a
FIFO blocks until a writer comes); a SQLite capture in WAL mode gets no `-shm` or `-wal` file
beside it; a time no later stage can hold (nanoseconds since 1970 overflow 64 bits past the
year 2262) is a malformed frame, and so is a BLF time whose count of 10 us units would wrap
when multiplied.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import can
from hwbridge.can.io.asc import AscReader
from hwbridge.can.io.blf import BlfReader
from hwbridge.can.io.canutils import CanutilsReader
from hwbridge.can.io.capture_file import NotARegularFileError, regular_file
from hwbridge.can.io.csv import CsvReader
from hwbridge.can.io.frame_checks import MAX_SECONDS, frame_fault
from hwbridge.can.io.frames import concat_chunks
from hwbridge.can.io.readers import check_capture, open_capture
from hwbridge.can.io.sqlite import SqliteReader
from hwbridge.captures import decode_captures
from tests.can.io.blf_build import BASE, CAN_MSG, HEADER_BYTES, OBJ_V1, container
from tests.captures.conftest import drive, write_capture

READERS = [CanutilsReader, AscReader, CsvReader, BlfReader, SqliteReader]


# -- item 5: a FIFO or a device is not a capture ----------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "x.log"
    os.mkfifo(path)
    return path


def _refused_in_a_subprocess(code: str, path: Path) -> str:
    """Runs `code` (with `path` as PATH) in a fresh interpreter: open() of a FIFO blocks in C,
    where no timeout of this process reaches. Returns what it printed; fails if it hung."""
    script = f"from pathlib import Path\nPATH = Path({str(path)!r})\n{code}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the FIFO was opened: the reader hung")
    assert done.returncode == 0, done.stderr
    return done.stdout


_TRY = """
try:
    {call}
except OSError as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.timeout(60)
def test_a_fifo_is_refused_before_it_is_opened(fifo: Path) -> None:
    for call in ("regular_file(PATH)", "open_regular(PATH)"):
        code = "from hwbridge.can.io.capture_file import open_regular, regular_file\n"
        said = _refused_in_a_subprocess(code + _TRY.format(call=call), fifo)
        assert said.startswith("NotARegularFileError") and "FIFO" in said, said


@pytest.mark.timeout(200)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_no_reader_opens_a_fifo(tmp_path: Path, reader: type) -> None:
    path = tmp_path / "x.capture"
    os.mkfifo(path)
    code = f"from {reader.__module__} import {reader.__name__}\n"
    said = _refused_in_a_subprocess(code + _TRY.format(call=f"{reader.__name__}(PATH)"), path)
    assert "not a regular file" in said, said


@pytest.mark.timeout(60)
def test_open_capture_refuses_a_fifo_named_like_a_log(fifo: Path) -> None:
    code = "from hwbridge.can.io.readers import open_capture\n"
    said = _refused_in_a_subprocess(code + _TRY.format(call="open_capture(PATH)"), fifo)
    assert "FIFO, not a regular file" in said, said


@pytest.mark.timeout(20)
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_named_like_a_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "zero.log"
    path.symlink_to("/dev/zero")
    with pytest.raises(NotARegularFileError, match="character device"):
        regular_file(path)
    with pytest.raises(OSError, match="character device"):
        CanutilsReader(path)


def test_regular_files_and_links_to_them_pass(tmp_path: Path) -> None:
    path = write_capture(tmp_path / "drive.log", drive(1.0))
    link = tmp_path / "link.log"
    link.symlink_to(path)
    regular_file(path)
    regular_file(link)
    assert len(concat_chunks(list(CanutilsReader(link).chunks()))) == len(list(drive(1.0)))
    with pytest.raises(IsADirectoryError):
        regular_file(tmp_path)
    with pytest.raises(FileNotFoundError):
        regular_file(tmp_path / "missing.log")


# -- item 6: a WAL-mode SQLite capture is never written to ------------------------------------


def test_a_wal_mode_sqlite_capture_gets_no_files_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "drive.db"
    with can.SqliteWriter(str(path)) as writer:
        for msg in drive(2.0):
            writer.on_message_received(msg)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    db.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drive.db"]
    before = path.read_bytes()
    reader = open_capture(path)
    frames = concat_chunks(list(reader.chunks()))
    assert len(frames) == len(list(drive(2.0)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drive.db"]
    assert path.read_bytes() == before


# -- item 4: times every later stage can hold -------------------------------------------------


def test_the_time_bound_fits_nanoseconds_in_64_bits() -> None:
    assert MAX_SECONDS * 1e9 < 2**63
    assert frame_fault(8.99e9, 0x100, 8) is None
    assert frame_fault(-8.99e9, 0x100, 8) is None
    assert frame_fault(1.2e10, 0x100, 8) == "timestamp 12000000000.0 out of range"
    assert frame_fault(9.3e9, 0x100, 8) is not None


_Y2350 = (
    "(1700000000.000000) can0 100#0102030405060708\n"
    "(1700000001.000000) can0 100#0102030405060709\n"
    "(12000000000.0) can0 100#0102030405060709\n"
)


def test_a_frame_in_the_year_2350_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "y2350.log"
    path.write_text(_Y2350)
    reader = open_capture(path)
    frames = concat_chunks(list(reader.chunks()))
    assert (frames.timestamp_us // 10**6).tolist() == [1_700_000_000, 1_700_000_001]
    assert reader.counts.malformed == ["line 3: timestamp 12000000000.0 out of range"]


def test_a_dataset_of_any_capture_holds_its_times_in_nanoseconds(
    tmp_path: Path, fleet_dbc: Path
) -> None:
    """DuckDB's epoch_ns (and every ns timestamp after it) holds each decoded time."""
    import duckdb

    path = tmp_path / "y2350.log"
    path.write_text(_Y2350 + "(8990000000.0) can0 100#0102030405060709\n")
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    assert summary.files[0].ok and summary.files[0].rows["Engine"] == 3
    files = str(tmp_path / "out" / "Engine" / "*" / "*.parquet")
    with duckdb.connect() as db:
        sql = f"SELECT max(epoch_ns(timestamp)) FROM read_parquet('{files}')"
        assert db.execute(sql).fetchall() == [(8_990_000_000 * 10**9,)]


def _blf_object(flags: int, stamp: int, can_id: int = 0x100) -> bytes:
    body = CAN_MSG.pack(1, 0, 8, can_id, bytes(range(8)))
    return BASE.pack(b"LOBJ", 32, 1, 48, 1) + OBJ_V1.pack(flags, 0, 0, stamp) + body


def _blf(path: Path, objects: list[bytes]) -> Path:
    header = bytearray(HEADER_BYTES)
    struct.pack_into("<4sL", header, 0, b"LOGG", HEADER_BYTES)
    path.write_bytes(bytes(header) + container(b"".join(objects), compress=False))
    return path


def test_blf_times_that_would_wrap_are_out_of_range(tmp_path: Path) -> None:
    """10 us counts whose microseconds pass 2^64 or 2^63, nanoseconds near 2^64: python-can
    reads 1.8e13 s and more; wrapped, they became 2023 and the year -12,187."""
    path = _blf(
        tmp_path / "time.blf",
        [
            _blf_object(2, 1_700_000_000 * 10**9),  # a real time: kept
            _blf_object(1, (2**64 + 1_700_000_000_000_000) // 10 + 1),
            _blf_object(1, 1_800_000_000_000_000_000),
            _blf_object(2, 2**64 - 400),
            _blf_object(1, 900_000_000_000_000),  # 9e9 s: just out of range
            _blf_object(1, 899_999_999_999_999, can_id=0x101),  # just in range
        ],
    )
    reader = open_capture(path)
    frames = concat_chunks(list(reader.chunks()))
    assert frames.timestamp_us.tolist() == [1_700_000_000 * 10**6, 8_999_999_999_999_990]
    assert frames.arbitration_id.tolist() == [0x100, 0x101]
    assert reader.counts.malformed_frames == 4
    assert reader.counts.frame_notes == [
        "frame 2: timestamp beyond 64 bits of microseconds out of range",
        "frame 3: timestamp beyond 64 bits of microseconds out of range",
        "frame 4: timestamp 1.84467e+10 s out of range",
        "frame 5: timestamp 9e+09 s out of range",
    ]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", ["x.trc", "x.mf4", "x.trc.gz", "x.blf.gz"])
def test_every_format_is_refused_as_a_fifo_before_any_reader_opens_it(
    tmp_path: Path, name: str
) -> None:
    """check_capture refuses it, so no reader (python-can's TRC reader included) blocks."""
    path = tmp_path / name
    os.mkfifo(path)
    with pytest.raises(NotARegularFileError, match="FIFO, not a regular file"):
        check_capture(path)
