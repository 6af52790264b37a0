"""The CSV reader gives python-can's frames, line for line, and never crashes.

The reference is python-can's `CSVReader` on each text-mode line on its own (its lines do
not depend on each other, and python-can stops at the first one it cannot read): those it
cannot read, or reads into a frame no column holds, must be the ones counted as malformed.
"""

from __future__ import annotations

import base64
import gzip
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io.csv import CsvReader
from hwbridge.can.io.frames import FrameChunk, concat_chunks
from hwbridge.can.io.pycan import PythonCanReader, pack_messages
from hwbridge.can.io.readers import open_capture
from hwbridge.can.io.text_blocks import unfit
from tests.captures.checks import assert_bounded
from tests.captures.conftest import TRUCK, drive, write_capture
from tests.shared_data import needs_shared


def _reference(data: bytes) -> tuple[FrameChunk, int, int, list[int]]:
    lines = re.split(rb"\r\n|\r|\n", data)
    if lines and not lines[-1]:
        lines.pop()
    frames: list[Any] = []
    errors = remotes = 0
    bad: list[int] = []
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(number)
            continue
        if number == 1:
            continue  # the header, skipped whatever it says
        try:
            messages = list(can.CSVReader(io.StringIO("header\n" + text + "\n")))
        except Exception:
            bad.append(number)
            continue
        if any(unfit(m) for m in messages):
            bad.append(number)
            continue
        for m in messages:
            if m.is_error_frame:
                errors += 1
            elif m.is_remote_frame:
                remotes += 1
            else:
                frames.append(m)
    return pack_messages(frames), errors, remotes, bad


def _ours(path: Path, block_bytes: int = 1 << 23) -> tuple[FrameChunk, CsvReader]:
    reader = CsvReader(path, block_bytes=block_bytes)
    return concat_chunks(list(reader.chunks())), reader


def _assert_same(ours: FrameChunk, theirs: FrameChunk) -> None:
    assert len(ours) == len(theirs)
    for name in ("timestamp_us", "arbitration_id", "extended", "length", "channel"):
        assert getattr(ours, name).tolist() == getattr(theirs, name).tolist(), name
    for i in range(len(ours)):
        n = int(ours.length[i])
        assert ours.data[i, :n].tobytes() == theirs.data[i, :n].tobytes(), i
        assert not ours.data[i, n:].any()


def _check(tmp_path: Path, data: bytes, block_bytes: int) -> CsvReader:
    path = tmp_path / "x.csv"
    path.write_bytes(data)
    ours, reader = _ours(path, block_bytes)
    theirs, errors, remotes, bad = _reference(data)
    _assert_same(ours, theirs)
    assert_bounded(ours, data)
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (errors, remotes)
    assert reader.counts.malformed_lines == len(bad)
    numbers = [int(note.split(":")[0].removeprefix("line ")) for note in reader.counts.malformed]
    assert numbers == bad[: len(numbers)]
    return reader


_stamp: st.SearchStrategy[str] = st.one_of(
    st.floats(0, 2e9, allow_nan=False).map(repr),
    st.floats(0, 2e9, allow_nan=False).map(repr),
    st.builds(lambda s, f: f"{s}.{f}", st.integers(0, 10**14),
              st.text("0123456789", min_size=1, max_size=14)),
    st.sampled_from(["1.5e3", "1e-05", "1", "-1.0", ".5", "5.", "1_0.5", "inf", "nan", " 1.5",
                     "1.0.0", "１.５", "1e300", "999999999999.5", "1000000000000.5", ""]),
)  # fmt: skip
_id = st.one_of(
    st.integers(0, 0x1FFFFFFF).map(hex),
    st.integers(0, 0x1FFFFFFF).map(hex),
    st.sampled_from(["0X1F", "1f", "0x", "-0x1", "0x1_f", "0xFFFFFFFF", "0x100000000", " 0x5",
                     "0x123456789", "zz", ""]),
)  # fmt: skip
_flag = st.sampled_from(["0", "0", "0", "1", "2", " 1", "", "true"])
_dlc = st.one_of(st.integers(0, 64).map(str), st.sampled_from(["", "x", " 8", "-1", "100"]))
_data = st.one_of(
    st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode()),
    st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
    st.binary(min_size=65, max_size=70).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["AQ=", "AQ", "A===", "AQ==AQ==", "AR==", "A@B=", "AQID BA==", "====", "", "é"]),
)  # fmt: skip


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 15))
    if kind == 0:
        return draw(st.sampled_from(["", "garbage", "1,2,3", "a,b,c,d,e,f,g,h", ",,,,,,"]))
    if kind == 1:
        return draw(st.text(max_size=30).map(lambda s: s.replace("\n", "").replace("\r", "")))
    fields = [draw(_stamp), draw(_id), draw(_flag), draw(_flag), draw(_flag), draw(_dlc),
              draw(_data)]  # fmt: skip
    return ",".join(fields)


@st.composite
def _csv(draw: st.DrawFn) -> bytes:
    header = draw(st.sampled_from(["timestamp,arbitration_id,extended,remote,error,dlc,data",
                                   "", "1.0,0x1,0,0,0,1,AQ=="]))  # fmt: skip
    lines = [header, *draw(st.lists(_line(), max_size=40))]
    end = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])
    text = "".join(line + draw(end) for line in lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return data


@pytest.mark.slow
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_csv(), block_bytes=st.sampled_from([1, 7, 64, 1 << 20]))
@example(data=b"h\n1.5,0x1,0,0,0,1,AQ==\r\n2.5,0x2,1,0,0,2,AQI=\r", block_bytes=20)
@example(data=b"h\n0.0,0x0,0,0,0,0," + b"A" * 87 + b"=\n", block_bytes=1 << 20)  # 65 bytes
def test_generated_logs_read_as_python_can_reads_them(tmp_path: Path, data: bytes, block_bytes: int) -> None:  # fmt: skip
    _check(tmp_path, data, block_bytes)


def _messages() -> list[can.Message]:
    out = list(drive(60.0))
    t = out[-1].timestamp
    out += [
        can.Message(timestamp=t + 0.1, is_error_frame=True),
        can.Message(timestamp=t + 0.2, arbitration_id=0x5, is_remote_frame=True, dlc=2),
        can.Message(timestamp=t + 0.3, arbitration_id=0x123, is_fd=True, data=bytes(range(64))),
        can.Message(timestamp=t + 0.4, arbitration_id=0x7FF, is_extended_id=False, data=b""),
    ]
    return out


def test_python_can_written_csv(tmp_path: Path) -> None:
    path = write_capture(tmp_path / "drive.csv", _messages())
    ours, reader = _ours(path, block_bytes=4096)
    _assert_same(ours, concat_chunks(list(PythonCanReader(path).chunks())))
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 1)
    assert reader.counts.malformed_lines == 0
    assert ours.length.max() == 64


def test_gzip_through_open_capture(tmp_path: Path) -> None:
    plain = write_capture(tmp_path / "drive.csv", _messages())
    packed = tmp_path / "drive.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    reader = open_capture(packed)
    assert isinstance(reader.reader, CsvReader)
    _assert_same(concat_chunks(list(reader.chunks())),
                 concat_chunks(list(PythonCanReader(packed).chunks())))  # fmt: skip


@pytest.mark.slow
@needs_shared
def test_the_truck_log_as_csv(tmp_path: Path) -> None:
    path = tmp_path / "truck.csv"
    with can.CSVWriter(path) as writer:
        for msg in can.MF4Reader(TRUCK):
            writer.on_message_received(msg)
    ours, reader = _ours(path, block_bytes=1 << 20)
    _assert_same(ours, concat_chunks(list(PythonCanReader(path).chunks())))
    assert len(ours) == 57_849
    assert reader.counts.malformed_lines == 0


def test_malformed_lines_are_counted_with_their_numbers(tmp_path: Path) -> None:
    lines = ["timestamp,arbitration_id,extended,remote,error,dlc,data"]
    lines += [f"{1 + i / 100!r},{hex(0x100 + i)},0,0,0,1,{base64.b64encode(bytes([i])).decode()}"
              for i in range(20)]  # fmt: skip
    lines[3] = "1.02,0x102,0,0,0,1,AQ"  # unpadded: python-can cannot read it
    lines[7] = "1.06,0x106,0,0,0"
    lines[11] = "1.10,0X10A,0,0,0,1,AQ=="  # upper-case prefix: python-can reads it
    reader = _check(tmp_path, ("\n".join(lines) + "\n").encode(), 1 << 20)
    assert [n.split(":")[0] for n in reader.counts.malformed] == ["line 4", "line 8"]


def test_timestamps_round_as_float_does(tmp_path: Path) -> None:
    """17 significant digits, as repr() writes them: read by numpy, rounded as float()."""
    rng = np.random.default_rng(5)
    stamps = 1.7e9 + rng.random(2000) * 1e6
    lines = ["h"] + [f"{t!r},0x1,0,0,0,0," for t in stamps.tolist()]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    ours, _ = _ours(path)
    assert ours.timestamp_us.tolist() == [round(t * 1e6) for t in stamps.tolist()]
