"""The ASC reader gives python-can's frames, line for line, and never crashes.

The reference is python-can's `ASCReader` (with absolute timestamps, as `PythonCanReader`
opens it) on the whole file. python-can stops at the first line it cannot read; the
reference notes that line, turns it into a comment and reads again, until it reads to the
end: the lines it noted are the ones our reader must count as malformed, and the frames of
that last read are the ones it must give, in the same order, with the same values.
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
from hwbridge.can.io.asc import AscReader
from hwbridge.can.io.frames import FrameChunk, concat_chunks
from hwbridge.can.io.pycan import PythonCanReader, pack_messages
from hwbridge.can.io.readers import open_capture
from hwbridge.can.io.text_blocks import unfit
from hwbridge.captures import decode_captures
from hwbridge.discovery import discover
from tests.captures.checks import assert_bounded
from tests.captures.conftest import TRUCK, drive, write_capture
from tests.shared_data import needs_shared


class _CountingText(io.StringIO):
    """Text whose iteration counts the lines handed out (the one python-can stopped at)."""

    handed_out = 0

    def __next__(self) -> str:  # type: ignore[override]
        line = super().__next__()
        self.handed_out += 1
        return line


def _reference(data: bytes) -> tuple[FrameChunk, int, int, list[int]]:
    """python-can on the file: (data frames, error frames, remote frames, the numbers of
    the lines it cannot read, or reads into a frame no column holds)."""
    lines = re.split(rb"\r\n|\r|\n", data)
    if lines and not lines[-1]:
        lines.pop()  # the text after the last line break
    texts: list[str] = []
    bad: set[int] = set()
    for number, raw in enumerate(lines, start=1):
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append("//")
            bad.add(number)
    while True:
        file = _CountingText("".join(text + "\n" for text in texts))
        read: list[tuple[int, Any]] = []
        try:
            for msg in can.ASCReader(file, relative_timestamp=False):
                read.append((file.handed_out, msg))
        except Exception:
            bad.add(file.handed_out)
            texts[file.handed_out - 1] = "//"
            continue
        unread = {number for number, msg in read if unfit(msg)}
        if not unread:
            break
        bad |= unread
        for number in unread:
            texts[number - 1] = "//"
    messages = [msg for _, msg in read]
    frames = [m for m in messages if not m.is_error_frame and not m.is_remote_frame]
    errors = sum(1 for m in messages if m.is_error_frame)
    remotes = sum(1 for m in messages if m.is_remote_frame and not m.is_error_frame)
    return pack_messages(frames), errors, remotes, sorted(bad)


def _ours(path: Path, block_bytes: int = 1 << 23) -> tuple[FrameChunk, AscReader]:
    reader = AscReader(path, block_bytes=block_bytes)
    return concat_chunks(list(reader.chunks())), reader


def _assert_same(ours: FrameChunk, theirs: FrameChunk) -> None:
    assert len(ours) == len(theirs)
    for name in ("timestamp_us", "arbitration_id", "extended", "length", "channel"):
        assert getattr(ours, name).tolist() == getattr(theirs, name).tolist(), name
    for i in range(len(ours)):
        n = int(ours.length[i])
        assert ours.data[i, :n].tobytes() == theirs.data[i, :n].tobytes(), i
        assert not ours.data[i, n:].any()


def _check(tmp_path: Path, data: bytes, block_bytes: int) -> AscReader:
    path = tmp_path / "x.asc"
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


# -- lines as CANoe and python-can write them, and the ways they go wrong --------------------

_HEXCHARS = "0123456789abcdefABCDEF"


def _hex(size: int) -> st.SearchStrategy[str]:
    return st.text(_HEXCHARS, min_size=size, max_size=size)


_stamp: st.SearchStrategy[str] = st.one_of(
    st.builds(lambda s, us: f"{s}.{us:06d}", st.integers(0, 100_000), st.integers(0, 999_999)),
    st.builds(lambda s, f: f"{s}.{f}", st.integers(0, 10**13),
              st.text("0123456789", min_size=1, max_size=12)),
    st.sampled_from(["1.5e3", "1", "-1.0", ".5", "5.", "1_0.5", "1.0.0", "12345678901234567.1",
                     "9007199254.740993", "１.５", "999999999999.5", "1000000000000.5"]),
)  # fmt: skip
_channel = st.sampled_from(["1", "1", "2", "0", "16", "99999", "123456", "01", "x", "-1", "+2"])
_sep = st.sampled_from([" ", " ", " ", "  ", "   ", "\t", " \t", "\x0c", "\xa0"])
_dir = st.sampled_from(["Rx", "Rx", "Tx", "rx", "TX", "Rxd", "Sx", "R"])


def _id(base: str) -> st.SearchStrategy[str]:
    plain = st.integers(1, 8).flatmap(_hex) if base == "hex" else st.integers(0, 2**32 + 5).map(str)
    weird = st.sampled_from(["0x12", "+1F", "G1", "1_2", "", "x", "123456789", "FFFFFFFFF",
                             "-1", "4294967296", "ErrorFrame", "00000123"])  # fmt: skip
    suffix = st.sampled_from(["", "", "x", "X"])
    return st.builds(lambda i, s: i + s, st.one_of(plain, plain, plain, weird), suffix)


def _byte(base: str) -> st.SearchStrategy[str]:
    plain = _hex(2) if base == "hex" else st.integers(0, 255).map(str)
    weird = st.sampled_from(["1", "001", "100", "256", "GG", "-1", "+1", "0x1", "1_0", "ff"])
    return st.one_of(plain, plain, plain, plain, weird)


def _dlc(base: str) -> st.SearchStrategy[str]:
    if base == "hex":
        plain = st.sampled_from("0123456789abcdefABCDEF")
    else:
        plain = st.integers(0, 15).map(str)
    return st.one_of(plain, plain, st.sampled_from(["10", "08", "-1", "g", "+8", "99"]))


_tail = st.sampled_from(["", "", "  Length = 228000 BitCount = 118 ID = 291x", " ", "\t",
                         " Length = 1 BitCount = 2 ID = 3 x"])  # fmt: skip
_fd_tail = st.sampled_from(["   102203  133   303000 e0006659 46500250 4b140250 20011736 2001040d",
                            " 0 0 1000 0 0 0 0 0", "", " 1331984 11 0"])  # fmt: skip
_other = st.sampled_from([
    "", "   ", "\t", "// a comment", "//0.000000 previous log file: x.asc", "End TriggerBlock",
    "Begin Triggerblock Sam Sep 30 15:06:13.191 2017", "begin triggerblock Tue Nov 14 22:13:20.0 2023",
    "Begin Triggerblock Thu Apr 28 10:44:52.480 am 2022", "Begin Triggerblock Foo bar baz",
    "Begin Triggerblock", "   0.000000 Start of measurement",
    "   1.015991 1  Statistic: D 0 R 0 XD 0 XR 0 E 0 O 0 B 0.00%",
    "   0.015991 CAN 1 Status:chip status error active",
    "   3.297743 1  J1939TP FEE3p        6    0  0   -   Rx   d 23 A0 0F A6 60 3B D1 40",
    "   2.501000 1 ErrorFrame", "   2.501010 1 ErrorFrame ECC: 10100010", "   2.5 1 errorframe Rx",
    "  30.806898 CANFD   5 Tx ErrorFrame Not Acknowledge error, dominant error flag fffe c7",
    "   2.510001 2 100 Tx r", "   2.584921 4 300 Tx r 8 Length = 1704000 BitCount = 145",
    "   2.584921 4 300 Tx r ²", "  30.300981 CANFD   3 Tx     50005x      0 0 5 0 140000 73 200050",
    "  30.3 CANFD 3 Tx 50005x 0 0 5 -3 1 2 3 4 5", "  30.3 canfd 3 Tx 5 0 0 5 1 01 00",
    "1.0 CANFD", "1.0 1 123 Rx", "1.0 1 123 Rx d", "date Sam Sep 30 15:06:13.191 2017",
    "base dec", "garbage", "1.0 1 EngineData Rx d 8 01 02 03 04 05 06 07 08",
    "\ufeff1.0 1 123 Rx d 1 01", "1.0 1 123 Rx d 1 01\x85", "1.0 1 123 Rx d 1 ０１",
])  # fmt: skip


@st.composite
def _classic(draw: st.DrawFn, base: str) -> str:
    sep = draw(_sep) if draw(st.integers(0, 5)) == 0 else " "
    fields = [draw(_stamp), draw(_channel), draw(_id(base)), draw(_dir),
              draw(st.sampled_from(["d", "d", "d", "D", "x", "dd", "r", "R"])), draw(_dlc(base))]  # fmt: skip
    fields += draw(st.lists(_byte(base), max_size=10))
    return " " * draw(st.integers(0, 3)) + sep.join(fields) + draw(_tail)


@st.composite
def _fd(draw: st.DrawFn, base: str) -> str:
    sep = draw(_sep) if draw(st.integers(0, 5)) == 0 else " "
    fields = [draw(_stamp), draw(st.sampled_from(["CANFD", "CANFD", "CANFD", "canfd"])),
              draw(_channel), draw(_dir), draw(_id(base))]  # fmt: skip
    name = draw(st.sampled_from(["", "", "Generic_Name_12", "AlphaNumericName_2", "1x", "7"]))
    if name:
        fields.append(name)
    fields += [draw(st.sampled_from(["0", "1", "1", "x"])), draw(st.sampled_from(["0", "1"]))]
    fields.append(draw(_dlc(base)))
    count = draw(st.sampled_from([0, 1, 2, 8, 12, 16, 20, 32, 48, 64]))
    length = draw(st.sampled_from([str(count), str(count), "0", "65", "100", "-2", "+8", "x"]))
    fields.append(length)
    fields += draw(st.lists(_byte(base), min_size=count, max_size=count))
    return "  " + sep.join(fields) + draw(_fd_tail)


_header_lines = st.sampled_from([
    "date Sam Sep 30 15:06:13.191 2017", "date Thu Apr 28 10:44:52.480 am 2022",
    "date Foo bar", "date Wed Nov 15 01:02:03 2023", "base hex  timestamps absolute",
    "base dec  timestamps relative", "base HEX", "// version 9.0.0", "  // comment",
    "internal events logged", "no internal events logged", "", "garbage",
])  # fmt: skip


@st.composite
def _asc(draw: st.DrawFn) -> bytes:
    header = draw(st.lists(_header_lines, max_size=4))
    base = draw(st.sampled_from(["hex", "hex", "dec"]))
    if draw(st.booleans()):
        header.insert(0, f"base {base}  timestamps absolute")
    else:
        base = "hex"
    line = st.one_of(_classic(base), _classic(base), _classic(base), _fd(base), _other)
    body = draw(st.lists(line, max_size=40))
    end = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])
    text = "".join(line + draw(end) for line in header + body)
    if text and draw(st.booleans()):
        text = text.rstrip("\r\n")  # no line break after the last line
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:  # bytes that are not UTF-8 at all
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return data


@pytest.mark.slow
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_asc(), block_bytes=st.sampled_from([1, 7, 64, 1 << 20]))
@example(data=b"base dec\n1.0 1 123 Rx d 2 1 255\n", block_bytes=1 << 20)
@example(data=b"1.0 1 123 Rx d 1 01\r\n2.0 1 124 Rx d 1 02\r", block_bytes=20)
@example(data=b"Begin Triggerblock Foo\n1.0 1 1 Rx d 1 01\n", block_bytes=1 << 20)
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
                    is_rx=False, channel=3),
    ]  # fmt: skip
    return out


def test_python_can_written_asc(tmp_path: Path) -> None:
    path = write_capture(tmp_path / "drive.asc", _messages())
    ours, reader = _ours(path, block_bytes=4096)  # many blocks, lines split between them
    theirs = concat_chunks(list(PythonCanReader(path).chunks()))
    _assert_same(ours, theirs)
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 2)
    assert reader.counts.malformed_lines == 0
    assert ours.length.max() == 64
    assert sorted(set(ours.channel.tolist())) == [0, 3]


def test_gzip_through_open_capture(tmp_path: Path) -> None:
    plain = write_capture(tmp_path / "drive.asc", _messages())
    packed = tmp_path / "drive.asc.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    reader = open_capture(packed)
    assert isinstance(reader.reader, AscReader)
    ours = concat_chunks(list(reader.chunks()))
    _assert_same(ours, concat_chunks(list(PythonCanReader(packed).chunks())))
    assert reader.progress == 1.0


@pytest.mark.slow
@needs_shared
def test_the_truck_log_as_asc(tmp_path: Path) -> None:
    """The real truck capture, written by python-can's ASCWriter."""
    path = tmp_path / "truck.asc"
    with can.ASCWriter(path) as writer:
        for msg in can.MF4Reader(TRUCK):
            writer.on_message_received(msg)
    ours, reader = _ours(path, block_bytes=1 << 20)
    _assert_same(ours, concat_chunks(list(PythonCanReader(path).chunks())))
    assert len(ours) == 57_849
    assert reader.counts.malformed_lines == 0


CANOE = """date Sam Sep 30 15:06:13.191 2017
base hex  timestamps absolute
internal events logged
// version 9.0.0
Begin Triggerblock Sam Sep 30 15:06:13.191 2017
   0.000000 Start of measurement
   0.015991 CAN 1 Status:chip status error passive - TxErr: 132 RxErr: 0
   1.015991 1  Statistic: D 0 R 0 XD 0 XR 0 E 0 O 0 B 0.00%
   2.501000 1 ErrorFrame
   2.510001 2 100 Tx r
   3.098426 1  18EBFF00x       Rx d 8 01 A0 0F A6 60 3B D1 40    Length = 273910 BitCount = 141
   3.297743 1  J1939TP FEE3p        6    0  0   -   Rx   d 23 A0 0F A6 60 3B D1 40 1F DE 80
  17.876708 1  6F9             Rx   d 8 05 0C 00 00 00 00 00 00  Length = 240015 BitCount = 124
  17.876976 1  3FF             Tx   d D 55 AA 01 02 03 04 05 06  Length = 232016 BitCount = 119
  30.005071 CANFD   2 Rx        300  Generic_Name_12                  1 0 8  8 01 02 03 04 05 06 07 08   102203  133   303000 e0006659 46500250
  30.300981 CANFD   3 Tx     50005x                                0 0 5 0 140000 73 200050 7a60 46500250
  30.506898 CANFD   4 Rx        4EE                                   0 0 c 24 01 02 03 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 AA 64 1331984 11 0
End TriggerBlock
Begin Triggerblock Sun Oct 1 09:00:00.000 2017
   0.250000 1  123             Rx   d 2 CA FE
End TriggerBlock
"""


def test_a_canoe_style_log(tmp_path: Path) -> None:
    """Events, statistics, J1939 lines, symbolic names, two trigger blocks: as python-can."""
    reader = _check(tmp_path, CANOE.encode(), 1 << 20)
    ours, _ = _ours(tmp_path / "x.asc")
    assert ours.arbitration_id.tolist() == [0x18EBFF00, 0x6F9, 0x3FF, 0x300, 0x4EE, 0x123]
    assert ours.length.tolist() == [8, 8, 8, 8, 24, 2]
    assert (reader.counts.error_frames, reader.counts.remote_frames) == (1, 2)
    # the second block starts on its own date: times step forward by its offset
    gap = (ours.timestamp_us[-1] - ours.timestamp_us[0]) / 1e6
    assert 17 * 3600 < gap < 19 * 3600


def test_decimal_base(tmp_path: Path) -> None:
    text = "base dec  timestamps absolute\ninternal events logged\n1.5 1 291 Rx d 3 1 255 16\n1.6 2 291x Rx d 1 0\n"
    _check(tmp_path, text.encode(), 1 << 20)
    ours, _ = _ours(tmp_path / "x.asc")
    assert ours.arbitration_id.tolist() == [291, 291]
    assert ours.extended.tolist() == [False, True]
    assert ours.data[0, :3].tolist() == [1, 255, 16]


def test_malformed_lines_are_counted_with_their_numbers(tmp_path: Path) -> None:
    lines = ["base hex  timestamps absolute", "internal events logged"]
    lines += [f"{i / 100:.6f} 1  100  Rx d 8 {i:02X} 00 00 00 00 00 00 00" for i in range(30)]
    lines[5] = "0.030000 1  100  Rx d 8 0 00 00 00 00 00 00 00"  # one digit: python-can reads it
    lines[9] = "0.070000 1  100  Rx d 8 ZZ 00 00 00 00 00 00 00"
    lines[14] = "0.120000 1  100  Rx d 8 00 00"  # fewer bytes than its DLC: python-can reads it
    lines[22] = "0.200000 1  1G0  Rx d 8 00 00 00 00 00 00 00 00"
    lines[25] = "0.230000 CANFD 1 Rx 100 1 0 8 8 00 00 00 00 00 00 00 100"
    reader = _check(tmp_path, ("\n".join(lines) + "\n").encode(), 1 << 20)
    assert reader.counts.malformed_lines == 3
    assert [n.split(":")[0] for n in reader.counts.malformed] == ["line 10", "line 23", "line 26"]


def test_the_summary_reports_malformed_lines(tmp_path: Path, fleet_dbc: Path) -> None:
    path = write_capture(tmp_path / "drive.asc", drive(10.0))
    text = path.read_text().splitlines()
    text.insert(8, "  0.1 1  1X0 Rx d 1 00")
    path.write_text("\n".join(text) + "\n")
    summary = decode_captures([path], [fleet_dbc], tmp_path / "out")
    assert summary.ok
    f = summary.files[0]
    assert (f.malformed_lines, summary.malformed_lines) == (1, 1)
    assert f.malformed[0].startswith("line 9: ValueError")
    assert f.frames_read == len(list(drive(10.0)))


def test_discover_reads_asc_through_the_fast_reader(tmp_path: Path) -> None:
    """A line python-can stops at costs `discover` one line, not the rest of the capture."""
    path = write_capture(tmp_path / "drive.asc", drive(60.0))
    text = path.read_text().splitlines()
    text.insert(len(text) // 10, "  0.1 1  1X0 Rx d 1 00")
    path.write_text("\n".join(text) + "\n")
    report = discover(path)
    assert not [n for n in report.notes if "drive.asc" in n.message]
    assert report.frames == len(list(drive(60.0)))
    assert {0x100, 0x200} <= {m.id for m in report.messages}


def test_frames_arrive_in_file_order_across_slow_lines(tmp_path: Path) -> None:
    lines = ["1.000000 1 100 Rx d 1 01", "2.0 1 100 Rx d 1 2", "3.000000 CANFD 1 Rx 100 1 0 1 1 03 0",
             "4.0\t1 100 Rx d 1 04", "5.000000 1 100 Rx d 1 05"]  # fmt: skip
    path = tmp_path / "mixed.asc"
    path.write_text("internal events logged\n" + "\n".join(lines))
    ours, _ = _ours(path)
    assert (ours.timestamp_us // 1_000_000).tolist() == [1, 2, 3, 4, 5]
    assert np.array_equal(ours.data[:, 0], [1, 2, 3, 4, 5])


def test_a_line_too_long_is_one_malformed_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from hwbridge.can.io import text_blocks

    monkeypatch.setattr(text_blocks, "MAX_LINE_BYTES", 100)
    good = "1.000000 1 123 Rx d 1 00\n"
    path = tmp_path / "long.asc"
    path.write_text(
        "internal events logged\n" + good + "2.0 1 123 Rx d 8" + " 00" * 500 + "\n" + good
    )
    ours, reader = _ours(path, block_bytes=64)
    assert len(ours) == 2
    assert reader.counts.malformed == ["line 3: longer than 100 bytes"]
