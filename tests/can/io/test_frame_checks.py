"""One set of frame checks for every reader, and lines bounded before python-can sees them.

A frame no column holds (a timestamp that is nan, inf or 9·10^9 s or more from 1970, an id outside 32
bits, more than 64 data bytes) is dropped and counted as a malformed frame, whichever reader
read it; a line longer than the bound is skipped and counted without ever being held whole;
a capture that gives no frame at all but malformed ones is an error, not "0 frames".
"""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import can
from hwbridge.can.io.canutils import CanutilsReader
from hwbridge.can.io.frame_checks import CheckedReader, chunk_faults
from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts, concat_chunks
from hwbridge.can.io.pycan import PythonCanReader
from hwbridge.can.io.readers import open_capture
from hwbridge.captures import CaptureDriver, decode_captures
from tests.captures.conftest import drive, write_capture

ENGINE_FRAMES = 20  # Engine (0x100) frames in drive(2.0)


def _trc_lines(tmp_path: Path) -> tuple[Path, list[str]]:
    path = write_capture(tmp_path / "drive.trc", drive(2.0))
    return path, path.read_text().splitlines()


def _first_frame_line(lines: list[str], hex_id: str) -> int:
    return next(i for i, line in enumerate(lines) if f" {hex_id} Rx" in line)


def _query(out: Path, sql: str) -> Any:
    with CaptureDriver.from_dataset(out) as driver:
        call = {"tool": "query", "arguments": {"sql": sql}}
        r = driver.process_llm_response(json.dumps(call))
        assert r.call_executed, r.call_detail
        return r.tool_call_result


def _stats(out: Path, signal: str) -> Any:
    with CaptureDriver.from_dataset(out) as driver:
        call = {"tool": "signal_stats", "arguments": {"signal": signal}}
        r = driver.process_llm_response(json.dumps(call))
        assert r.call_executed, r.call_detail
        return r.tool_call_result


# -- item 11: the python-can formats get the checks the text readers apply -------------------


def test_a_trc_frame_at_time_nan_is_dropped_counted_and_never_queried(
    tmp_path: Path, fleet_dbc: Path
) -> None:
    path, lines = _trc_lines(tmp_path)
    at = _first_frame_line(lines, "0100") + 1  # the second Engine frame: not the file's first
    at = _first_frame_line(lines[at:], "0100") + at
    offset = lines[at].split()[1]
    lines[at] = lines[at].replace(offset, "nan".rjust(len(offset)), 1)
    path.write_text("\n".join(lines) + "\n")
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    f = summary.files[0]
    assert f.ok, f.error
    assert (f.malformed_frames, summary.malformed_frames) == (1, 1)
    assert any(n.startswith("frame ") and "timestamp nan" in n for n in f.malformed), f.malformed
    assert f.rows["Engine"] == ENGINE_FRAMES - 1
    result = _query(tmp_path / "out", "SELECT min(timestamp) AS first, count(*) AS n FROM Engine")
    first, n = result["rows"][0]
    assert n == ENGINE_FRAMES - 1
    assert first.startswith("2023-11-14T"), first
    stats = _stats(tmp_path / "out", "CoolantTemp")
    assert stats["first"].startswith("2023-11-14T") and stats["count"] == ENGINE_FRAMES - 1


def test_a_trc_id_beyond_32_bits_is_a_malformed_frame_not_the_end(
    tmp_path: Path, fleet_dbc: Path
) -> None:
    path, lines = _trc_lines(tmp_path)
    at = _first_frame_line(lines, "0200")
    lines[at] = lines[at].replace(" 0200 Rx", " 123456789 Rx", 1)
    path.write_text("\n".join(lines) + "\n")
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    f = summary.files[0]
    assert f.ok, f.error
    assert f.malformed_frames == 1
    assert any("id 4886718345 out of range" in n for n in f.malformed), f.malformed
    assert f.rows["Mux"] == ENGINE_FRAMES - 1 and f.rows["Engine"] == ENGINE_FRAMES


def _sqlite(tmp_path: Path, extra: list[tuple[Any, ...]]) -> Path:
    path = tmp_path / "drive.db"
    with can.SqliteWriter(str(path)) as writer:
        for msg in drive(2.0):
            writer.on_message_received(msg)
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", extra)
    db.close()
    return path


def test_sqlite_rows_no_column_holds_are_malformed_frames(tmp_path: Path, fleet_dbc: Path) -> None:
    good = bytes(8)
    path = _sqlite(
        tmp_path,
        [
            (float("inf"), 0x100, 0, 0, 0, 8, good),
            (None, 0x100, 0, 0, 0, 8, good),  # SQLite stores nan as NULL
            (1.7e9, 2**40, 1, 0, 0, 8, good),
            (1.7e9, -1, 0, 0, 0, 8, good),
            (1.7e9, 0x100, 0, 0, 0, 8, bytes(1_000_000)),
            (1.7e9, 0x100, 0, 0, 0, 8, "text, not bytes"),
            ("not a time", 0x100, 0, 0, 0, 8, good),
        ],
    )
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    f = summary.files[0]
    assert f.ok, f.error
    assert f.malformed_frames == 7, f.malformed
    assert f.rows["Engine"] == ENGINE_FRAMES
    assert f.frames_read == len(list(drive(2.0)))


@pytest.mark.timeout(60)
def test_a_sqlite_view_that_never_ends_is_refused(tmp_path: Path) -> None:
    """A recursive view makes endless frames of a 8 KB file: only a table is read."""
    path = tmp_path / "endless.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE VIEW messages AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
            "SELECT i + 1 FROM n) SELECT 1.0 + i, 256, 0, 0, 0, 8, zeroblob(8) FROM n"
        )
    db.close()
    with pytest.raises(CaptureError, match="table"):
        list(open_capture(path).chunks())


def test_a_sqlite_capture_is_never_written(tmp_path: Path) -> None:
    path = _sqlite(tmp_path, [])
    before = path.read_bytes()
    frames = concat_chunks(list(open_capture(path).chunks()))
    assert len(frames) == len(list(drive(2.0)))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drive.db"]


def _chunk(stamps: list[int], ids: list[int], lengths: list[int], width: int = 8) -> FrameChunk:
    n = len(stamps)
    return FrameChunk(
        np.asarray(stamps, np.int64),
        np.asarray(ids, np.uint32),
        np.zeros(n, np.bool_),
        np.asarray(lengths, np.uint8),
        np.zeros((n, width), np.uint8),
    )


class _Reader:
    """A reader as BLF and MF4 readers are (owned elsewhere): chunks, counts, no checks."""

    def __init__(self, chunks: list[FrameChunk]) -> None:
        self.path = Path("x.blf")
        self.counts = ReaderCounts()
        self._chunks = chunks
        self.closed = False

    @property
    def progress(self) -> float:
        return 0.5

    @property
    def position(self) -> str:
        return "byte 7"

    def chunks(self) -> Iterator[FrameChunk]:
        yield from self._chunks

    def close(self) -> None:
        self.closed = True


def test_the_checked_reader_drops_and_counts_what_no_column_holds() -> None:
    nan = np.iinfo(np.int64).min  # what nan (and inf) become in the microsecond column
    first = _chunk([1, nan, 3], [0x100, 0x100, 0x100], [8, 8, 8])
    second = _chunk([4, 10**18, 6, 7], [0x100, 0x100, 0x1FFFFFFF + 1, 0x100], [8, 8, 8, 9])
    reader = CheckedReader(_Reader([first, second]))
    out = list(reader.chunks())
    assert [c.timestamp_us.tolist() for c in out] == [[1, 3], [4]]
    assert reader.counts.malformed_frames == 4
    assert [n.split(":")[0] for n in reader.counts.frame_notes] == [
        "frame 2", "frame 5", "frame 6", "frame 7"
    ]  # fmt: skip
    assert "timestamp" in reader.counts.frame_notes[0]
    assert "id" in reader.counts.frame_notes[2] and "9 data bytes" in reader.counts.frame_notes[3]
    assert (reader.progress, reader.position) == (0.5, "byte 7")
    reader.close()
    assert reader.reader.closed  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
def test_a_sorted_mf4_with_a_nan_time_loses_only_that_frame(tmp_path: Path) -> None:
    """The MF4 readers (hardened elsewhere) are checked too: a float time master can be nan."""
    messages = [can.Message(timestamp=1.7e9 + i / 10, arbitration_id=0x100, data=bytes(8))
                for i in range(5)]  # fmt: skip
    messages[2].timestamp = float("nan")
    with can.MF4Writer(tmp_path / "nan.mf4") as writer:
        for m in messages:
            writer.on_message_received(m)
    reader = open_capture(tmp_path / "nan.mf4")
    frames = concat_chunks(list(reader.chunks()))
    assert len(frames) == 4 and not chunk_faults(frames).any()
    assert reader.counts.malformed_frames == 1


# -- item 12: lines bounded before python-can sees them --------------------------------------

_HUGE = 24 * 1024 * 1024  # one line; the bound holds the reader far below it


def _trc_with_a_huge_line(tmp_path: Path, valid: bool = True) -> tuple[Path, int]:
    _, lines = _trc_lines(tmp_path)
    header = [line for line in lines if line.startswith(";")]
    body = [line for line in lines if not line.startswith(";")] if valid else []
    half = len(body) // 2
    text = "\n".join([*header, *body[:half], "0" * _HUGE, *body[half:]]) + "\n"
    packed = tmp_path / "huge.trc.gz"
    packed.write_bytes(gzip.compress(text.encode(), compresslevel=1))
    return packed, len(body)


@pytest.mark.timeout(120)
def test_a_trc_gz_line_of_24_mb_is_skipped_without_being_held(tmp_path: Path) -> None:
    packed, frames = _trc_with_a_huge_line(tmp_path)
    reader = PythonCanReader(packed)
    tracemalloc.start()
    try:
        read = sum(len(c) for c in reader.chunks())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read == frames
    assert peak < _HUGE // 4, f"peak {peak / 1e6:.1f} MB for a {_HUGE / 1e6:.0f} MB line"
    assert reader.counts.malformed_lines == 1
    assert reader.counts.malformed[0].startswith("line ")
    assert "longer than" in reader.counts.malformed[0]


@pytest.mark.timeout(120)
def test_a_capture_of_only_a_huge_line_fails_naming_it(tmp_path: Path, fleet_dbc: Path) -> None:
    packed, _ = _trc_with_a_huge_line(tmp_path, valid=False)
    summary = decode_captures([packed], [fleet_dbc], tmp_path / "out")
    f = summary.files[0]
    assert not f.ok and f.frames_read == 0
    assert "no frame" in (f.error or "") and "malformed" in (f.error or "")
    assert f.malformed_lines == 1 and "longer than" in f.malformed[0]


def test_python_can_never_logs_more_than_a_bounded_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, lines = _trc_lines(tmp_path)
    written = sum(1 for line in lines if not line.startswith(";"))  # TRC has no FD frames
    at = _first_frame_line(lines, "0100")
    # under the line bound: python-can reads it, and logs its type column ("unsupported")
    lines.insert(at, "      1         0.000 " + "X" * 300_000 + "  1     0100 Rx -  0")
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.DEBUG, logger="can"):
        frames = sum(len(c) for c in open_capture(path).chunks())
    assert frames == written
    assert any("Unsupported type" in r.getMessage() for r in caplog.records)
    assert max(len(r.getMessage()) for r in caplog.records) < 1_000


def test_a_trc_line_python_can_cannot_parse_is_a_malformed_line(tmp_path: Path) -> None:
    """python-can drops such a line with a warning (IndexError) or ends the capture
    (ValueError); here it is counted with its number, as in the other text formats."""
    path, lines = _trc_lines(tmp_path)
    written = sum(1 for line in lines if not line.startswith(";"))
    at = _first_frame_line(lines, "0100")
    lines[at + 1] = lines[at + 1].replace(" Rx ", "\x00Rx ", 1)  # ValueError: an odd id
    lines[at + 3] = "garbage"  # IndexError: too few columns
    path.write_text("\n".join(lines) + "\n")
    reader = open_capture(path)
    frames = sum(len(c) for c in reader.chunks())
    assert frames == written - 2
    assert [n.split(":")[0] for n in reader.counts.malformed] == [
        f"line {at + 2}", f"line {at + 4}"
    ]  # fmt: skip
    only_garbage = tmp_path / "garbage.trc"
    only_garbage.write_text("\n".join(line for line in lines if line.startswith(";")) + "\n"
                            + "x" * 1000 + "\n")  # fmt: skip
    with pytest.raises(CaptureError, match="no frame could be read: 1 malformed line"):
        list(open_capture(only_garbage).chunks())


# -- item 13: no frame wider than CAN FD allows, from any reader -----------------------------


def test_a_candump_frame_of_40000_bytes_is_refused_not_widened(tmp_path: Path) -> None:
    good = "(1.000000) can0 123#0011223344556677"
    path = tmp_path / "wide.log"
    path.write_text("\n".join([good, "(2.000000) can0 123#" + "00" * 40_000, good]) + "\n")
    reader = CanutilsReader(path)
    frames = concat_chunks(list(reader.chunks()))
    assert len(frames) == 2
    assert frames.data.shape[1] == 8 and frames.length.tolist() == [8, 8]
    assert reader.counts.malformed_lines == 1
    # refused before python-can reads it: no frame line is that long
    assert reader.counts.malformed == ["line 2: 80020 bytes, longer than any frame"]


def test_a_trc_frame_wider_than_64_bytes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.trc"
    header = ";$FILEVERSION=2.1\n;$STARTTIME=45244.9\n;$COLUMNS=N,O,T,B,I,d,R,L,D\n"
    lines = [
        "      1         1.000 FD  1     0123 Rx -  8    " + " ".join(["00"] * 8),
        "      2         2.000 FD  1     0123 Rx -  15   " + " ".join(["11"] * 300),
        "      3         3.000 FD  1     0123 Rx -  15   " + " ".join(["22"] * 64),
    ]
    path.write_text(header + "\n".join(lines) + "\n")
    reader = open_capture(path)
    frames = concat_chunks(list(reader.chunks()))
    assert frames.length.tolist() == [8, 64] and frames.data.shape[1] == 64
    assert reader.counts.malformed_frames == 1
    assert reader.counts.frame_notes == ["frame 2: 300 data bytes (at most 64)"]
