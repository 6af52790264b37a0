"""The candump .log reader gives python-can's frames, line for line, and never crashes.

The reference is python-can's `CanutilsLogReader`: on whole files where it reads every line,
and line by line (each text-mode line on its own) where it raises on some, since python-can
stops at the first line it cannot read; those lines must be the ones counted as malformed.
"""

from __future__ import annotations

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
from hwbridge.can.io.canutils import CanutilsReader
from hwbridge.can.io.frame_checks import message_fault
from hwbridge.can.io.frames import FrameChunk, concat_chunks
from hwbridge.can.io.pycan import PythonCanReader, pack_messages
from hwbridge.can.io.readers import open_capture
from hwbridge.captures import decode_captures
from tests.captures.checks import assert_bounded
from tests.captures.conftest import TRUCK, drive, write_capture
from tests.shared_data import needs_shared


def _reference(data: bytes) -> tuple[FrameChunk, int, int, list[int]]:
    """python-can on each text-mode line: (data frames, error frames, remote frames, the
    numbers of the lines it cannot read, or reads into a frame no column holds)."""
    frames: list[Any] = []
    errors = remotes = 0
    bad: list[int] = []
    lines = re.split(rb"\r\n|\r|\n", data)
    if lines and not lines[-1]:
        lines.pop()  # the text after the last line break
    for number, raw in enumerate(lines, start=1):
        try:
            messages = list(can.CanutilsLogReader(io.StringIO(raw.decode("utf-8"))))
        except Exception:
            bad.append(number)
            continue
        if any(message_fault(m) for m in messages):  # a frame no column holds
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


def _ours(path: Path, block_bytes: int = 1 << 23) -> tuple[FrameChunk, CanutilsReader]:
    reader = CanutilsReader(path, block_bytes=block_bytes)
    return concat_chunks(list(reader.chunks())), reader


def _assert_same(ours: FrameChunk, theirs: FrameChunk) -> None:
    assert len(ours) == len(theirs)
    for name in ("timestamp_us", "arbitration_id", "extended", "length", "channel"):
        assert getattr(ours, name).tolist() == getattr(theirs, name).tolist(), name
    for i in range(len(ours)):
        n = int(ours.length[i])
        assert ours.data[i, :n].tobytes() == theirs.data[i, :n].tobytes(), i
        assert not ours.data[i, n:].any()


def _check(tmp_path: Path, data: bytes, block_bytes: int) -> CanutilsReader:
    path = tmp_path / "x.log"
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


# -- lines as candump and python-can write them, and the ways they go wrong ------------------

_HEXCHARS = "0123456789abcdefABCDEF"


def _hex(size: int) -> st.SearchStrategy[str]:
    return st.text(_HEXCHARS, min_size=size, max_size=size)


_stamp: st.SearchStrategy[str] = st.one_of(
    st.builds(lambda s, us: f"({s}.{us:06d})", st.integers(0, 2_000_000_000), st.integers(0, 999_999)),
    st.builds(lambda s, f: f"({s}.{f})", st.integers(0, 10**12), st.text("0123456789", min_size=1, max_size=12)),
    st.sampled_from(["(1.5e3)", "(-1.25)", "(1_0.5)", "(.5)", "(5.)", "(7)", "(inf)", "(nan)",
                     "1.0", "(1.0", "(12345678901234567.1)", "(9007199254.740993)", "()", "(１.５)",
                     "(999999999999.5)", "(1000000000000.5)", "(0000000000001.5)", "(1e300)"]),
)  # fmt: skip
_iface = st.sampled_from(["can0", "vcan1", "can1", "0", "7", "00012", "40000", "123456789",
                          "1234567890", "can.0", "x", "any", "٣"])  # fmt: skip
_id = st.one_of(
    st.integers(1, 8).flatmap(_hex),
    st.sampled_from(["20000080", "200000FF", "A0000080", "1FFFFFFF", "FFFFFFFF", "123456789",
                     "", "0x12", "+1F", "G1", "7ff", "1_2"]),
)  # fmt: skip
_classic = st.integers(0, 8).flatmap(lambda n: _hex(2 * n))
_fd: st.SearchStrategy[str] = st.builds(
    lambda flag, data: "#" + flag + data,
    st.sampled_from(["0", "1", "2", "3", "9", "A", ""]),
    st.sampled_from([0, 1, 2, 8, 12, 16, 20, 24, 32, 48, 64]).flatmap(lambda n: _hex(2 * n)),
)
_data = st.one_of(
    _classic,
    _classic,
    _fd,
    st.sampled_from(["R", "r", "R0", "R8", "R15", "R123456789", "Rx", "R-1", "#1R", "#0R8"]),
    st.sampled_from(["ABC", "1", "GG", "+1", "1 2", "##", "#", "0102#03", "-1"]),
    _hex(130),
)
_tail = st.sampled_from(["", "", " R", " T", " r", " t", " X", " RR", " ", "\t"])
_sep = st.sampled_from([" ", " ", " ", " ", "  ", "\t", "\x0c"])
_end = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.sampled_from(["", "   ", "\t", "garbage", "(1.0) can0", "(1.0) can0 123",
                                     "(1.0) can0 123#00 R T", "\ufeff(1.0) can0 123#00"]))  # fmt: skip
    if kind == 1:
        return draw(st.text(max_size=30).map(lambda s: s.replace("\n", "").replace("\r", "")))
    sep = draw(_sep) if kind == 2 else " "
    line: str = draw(_stamp) + sep + draw(_iface) + sep + draw(_id) + "#"
    line += draw(_data) + draw(_tail)
    return line


@st.composite
def _log(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_line(), max_size=40))
    text = "".join(line + draw(_end) for line in lines)
    unterminated = draw(st.booleans())
    if lines and unterminated:
        text = text.rstrip("\r\n")  # no line break after the last line
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:  # bytes that are not UTF-8 at all
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return data


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_log(), block_bytes=st.sampled_from([1, 7, 64, 1 << 20]))
@example(data=b"(1.0) can0 123#0011\r", block_bytes=1)
@example(data=b"(1.0) can0 123#0011\r\n(2.0) can0 124#R\r\n", block_bytes=20)
def test_generated_logs_read_as_python_can_reads_them(tmp_path: Path, data: bytes, block_bytes: int) -> None:  # fmt: skip
    _check(tmp_path, data, block_bytes)


def _messages() -> list[can.Message]:
    """Classic 11- and 29-bit, FD with and without BRS/ESI, remote and error frames."""
    out = list(drive(60.0))
    t = out[-1].timestamp
    out += [
        can.Message(timestamp=t + 0.1, is_error_frame=True),
        can.Message(timestamp=t + 0.2, arbitration_id=0x5, is_remote_frame=True, dlc=2),
        can.Message(timestamp=t + 0.3, arbitration_id=0x1ABCDEF0, is_remote_frame=True),
        can.Message(timestamp=t + 0.4, arbitration_id=0x123, is_fd=True, bitrate_switch=True,
                    data=bytes(range(64))),
        can.Message(timestamp=t + 0.5, arbitration_id=0x123, is_fd=True,
                    error_state_indicator=True, data=bytes(12)),
        can.Message(timestamp=t + 0.6, arbitration_id=0x18DAF110, is_fd=True, data=b"\x01\x02"),
        can.Message(timestamp=t + 0.7, arbitration_id=0x7FF, is_extended_id=False, data=b"",
                    is_rx=False),
    ]  # fmt: skip
    return out


def test_python_can_written_log(tmp_path: Path) -> None:
    path = write_capture(tmp_path / "drive.log", _messages())
    ours, reader = _ours(path, block_bytes=4096)  # many blocks, lines split between them
    theirs = concat_chunks(list(PythonCanReader(path).chunks()))
    _assert_same(ours, theirs)
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 2)
    assert reader.counts.malformed_lines == 0
    assert ours.length.max() == 64


def test_gzip(tmp_path: Path) -> None:
    plain = write_capture(tmp_path / "drive.log", _messages())
    packed = tmp_path / "drive.log.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    reader = open_capture(packed)
    assert isinstance(reader.reader, CanutilsReader)
    ours = concat_chunks(list(reader.chunks()))
    _assert_same(ours, concat_chunks(list(PythonCanReader(packed).chunks())))
    assert reader.progress == 1.0


@pytest.mark.slow
@needs_shared
def test_the_truck_log_as_candump_text(tmp_path: Path) -> None:
    """The real truck capture, written by python-can's CanutilsLogWriter."""
    path = tmp_path / "truck.log"
    with can.CanutilsLogWriter(path) as writer:
        for msg in can.MF4Reader(TRUCK):
            writer.on_message_received(msg)
    ours, reader = _ours(path, block_bytes=1 << 20)
    _assert_same(ours, concat_chunks(list(PythonCanReader(path).chunks())))
    assert len(ours) == 57_849
    assert reader.counts.malformed_lines == 0


def test_malformed_lines_are_counted_with_their_numbers(tmp_path: Path) -> None:
    lines = [f"({1.0 + i / 100:.6f}) can0 100#{i:02X}00000000000000" for i in range(30)]
    lines[3] = "(1.030000) can0 100#0"  # odd hex: python-can reads it (one byte 0x00)
    lines[7] = "(1.070000) can0 100#ZZ"
    lines[12] = "not a frame at all"
    lines[20] = "(x) can0 100#00"
    path = tmp_path / "bad.log"
    path.write_text("\n".join(lines) + "\n")
    reader = _check(tmp_path, path.read_bytes(), 1 << 20)
    assert reader.counts.malformed_lines == 3
    assert [n.split(":")[0] for n in reader.counts.malformed] == ["line 8", "line 13", "line 21"]


def test_the_summary_reports_malformed_lines(tmp_path: Path, fleet_dbc: Path) -> None:
    path = write_capture(tmp_path / "drive.log", drive(10.0))
    text = path.read_text().splitlines()
    text.insert(4, "(oops) can0 100#00")
    path.write_text("\n".join(text) + "\n")
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    assert summary.ok
    f = summary.files[0]
    assert (f.malformed_lines, summary.malformed_lines) == (1, 1)
    assert f.malformed[0].startswith("line 5: ValueError")
    assert f.frames_read == len(list(drive(10.0)))


def test_a_line_too_long_is_one_malformed_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from hwbridge.can.io import text_blocks

    monkeypatch.setattr(text_blocks, "MAX_LINE_BYTES", 100)
    good = "(1.000000) can0 123#00\n"
    path = tmp_path / "long.log"
    path.write_text(good + "(2.0) can0 123#" + "00" * 500 + "\n" + good)
    ours, reader = _ours(path, block_bytes=64)
    assert len(ours) == 2
    assert reader.counts.malformed == ["line 2: longer than 100 bytes"]


def test_frames_arrive_in_file_order_across_slow_lines(tmp_path: Path) -> None:
    lines = ["(1.000000) can0 100#01", "(2.0) can0 100#0", "(3.000000) can0 100#03",
             "(4.0)  can0 100#04", "(5.000000) can0 100#05"]  # fmt: skip
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines))
    ours, _ = _ours(path)
    assert (ours.timestamp_us // 1_000_000).tolist() == [1, 2, 3, 4, 5]
    assert np.array_equal(ours.data[:, 0], [1, 0, 3, 4, 5])
