"""A text capture costs work in proportion to its frames, not to its junk (issue 33, review 2).

A line that cannot be a frame of its format (a candump line of fewer than three fields or
without `#`, a CSV line without its six commas, an ASC line that no pattern of python-can's
reader matches) is judged with the block's arrays, never handed to python-can one at a time;
and a capture that is mostly junk is not a capture: once `JUNK` lines gave no frame and they
outnumber the frames read, the reader stops with a CaptureError ("not a candump log: ..."),
the frames before that line read. A truncated gzip stream gives every whole line before the
cut, then a CaptureError that names it. The hostile files are built small: a few MB of text,
some KB of gzip.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io import canutils, csv, text_blocks
from hwbridge.can.io.asc import AscReader
from hwbridge.can.io.blf import BlfReader
from hwbridge.can.io.canutils import CanutilsReader
from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from hwbridge.can.io.readers import open_capture
from tests.captures.conftest import drive, write_capture

JUNK = 10_000  # the bound docs/captures.md states: lines that gave no frame before a refusal
ASC_HEAD = (
    "date Tue Nov 14 10:13:20.000 pm 2023\nbase hex  timestamps absolute\ninternal events logged\n"
)
CSV_HEAD = "timestamp,arbitration_id,extended,remote,error,dlc,data\n"
FRAME = {
    ".log": "({t:.6f}) can0 100#0102030405060708\n",
    ".asc": "{t:.6f} 1  100             Rx   d 8 01 02 03 04 05 06 07 08\n",
    ".csv": "{t:.6f},0x100,0,0,0,8,AQIDBAUGBwg=\n",
}
HEAD = {".log": "", ".asc": ASC_HEAD, ".csv": CSV_HEAD}
FORMAT = {".log": "candump", ".asc": "ASC", ".csv": "CSV"}


class _Calls:
    """Counts the lines a reader reads one at a time (python-can's reader, or the ASC
    reader's own line by line code)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.python_can = 0
        self.one_by_one = 0
        for module, name in ((canutils, "_candump"), (csv, "_csv")):
            monkeypatch.setattr(module, name, self._counted(getattr(module, name), "python_can"))
        monkeypatch.setattr(
            AscReader, "_python_can", self._counted(AscReader._python_can, "python_can")
        )
        monkeypatch.setattr(AscReader, "_decode", self._counted(AscReader._decode, "one_by_one"))

    def _counted(self, function: Callable[..., Any], counter: str) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(self, counter, getattr(self, counter) + 1)
            return function(*args, **kwargs)

        return counted


def _read(path: Path) -> tuple[FrameChunk, Any, CaptureError | None]:
    reader = open_capture(path)
    chunks: list[FrameChunk] = []
    try:
        for chunk in reader.chunks():
            chunks.append(chunk)
    except CaptureError as exc:
        return concat_chunks(chunks), reader, exc
    return concat_chunks(chunks), reader, None


def _gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9))
    return path


def test_the_bound_is_the_one_the_docs_state() -> None:
    assert text_blocks.MAX_JUNK_LINES == JUNK


# -- item 1: junk is judged in bulk, and a capture of junk is refused after JUNK lines ---------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("suffix", "junk", "python_can_lines"),
    [
        (".log", "x\n", 0),  # one field: never a candump frame
        (".log", "(1.0) can0 100\n", 0),  # no '#'
        (".log", "a b c d e\n", 0),  # five fields
        (".csv", "x\n", 0),  # no commas
        (".csv", "1,2,3\n", 0),
        (".log", "é\n", JUNK),  # not ASCII: python-can reads it (a channel may be 'cän0')
        (".asc", "1.0 1 x Rx\n", JUNK),  # python-can's pattern matches, its reader raises
    ],
    ids=["log x", "log no hash", "log five", "csv x", "csv three", "log not ascii", "asc"],
)
def test_a_gzip_bomb_of_junk_is_refused_after_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, junk: str, python_can_lines: int
) -> None:
    """200,000 junk lines: refused at the 10,000th, python-can asked about none of them
    (only about the 20 that are named, for its reason) where the line cannot be a frame."""
    calls = _Calls(monkeypatch)
    path = _gz(tmp_path / f"junk{suffix}.gz", HEAD[suffix] + junk * 200_000)
    frames, reader, error = _read(path)
    assert error is not None
    assert f"not a{'n' if suffix == '.asc' else ''} {FORMAT[suffix]} log" in error.reason
    assert f"{JUNK} " in error.reason
    assert len(frames) == 0
    assert reader.counts.malformed_lines == JUNK
    assert len(reader.counts.malformed) == 20
    assert calls.python_can <= python_can_lines + 20


@pytest.mark.timeout(120)
@pytest.mark.parametrize("suffix", [".log", ".csv"])
def test_junk_lines_are_named_with_python_cans_reason(tmp_path: Path, suffix: str) -> None:
    lines = ["x", "(1.0) can0 100", "a b c d e", "1,2,3", ""]
    text = HEAD[suffix] + "".join(line + "\n" for line in lines)
    path = tmp_path / f"junk{suffix}"
    path.write_text(text)
    _, reader, _ = _read(path)
    read = can.CanutilsLogReader if suffix == ".log" else can.CSVReader
    expected = []
    first = 1 if suffix == ".log" else 2
    for number, line in enumerate(lines, start=first):
        prefix = "" if suffix == ".log" else "header\n"
        try:
            list(read(io.StringIO(prefix + line + "\n")))
        except Exception as exc:
            expected.append(f"line {number}: {type(exc).__name__}: {exc}")
    assert reader.counts.malformed == expected


@pytest.mark.timeout(120)
@pytest.mark.parametrize("suffix", [".log", ".asc", ".csv"])
def test_junk_that_outnumbers_the_frames_ends_the_capture(tmp_path: Path, suffix: str) -> None:
    """A frame, then two junk lines, over and over: at the 10,000th junk line 5,000 frames
    were read, and the capture stops there, its frames kept."""
    junk = "1.0 1 x Rx\n" if suffix == ".asc" else "x\n"
    body = "".join(FRAME[suffix].format(t=1.0 + i) + junk * 2 for i in range(30_000))
    frames, reader, error = _read(_gz(tmp_path / f"mixed{suffix}.gz", HEAD[suffix] + body))
    assert error is not None and "not a" in error.reason
    assert len(frames) == JUNK // 2
    assert reader.counts.malformed_lines == JUNK


@pytest.mark.timeout(120)
@pytest.mark.parametrize("suffix", [".log", ".asc", ".csv"])
def test_a_capture_with_some_junk_is_read_whole(tmp_path: Path, suffix: str) -> None:
    """15,000 junk lines among 45,000 frames: fewer than the frames, the capture is read."""
    junk = "1.0 1 x Rx\n" if suffix == ".asc" else "x\n"
    body = "".join(FRAME[suffix].format(t=1.0 + i) + (junk if i % 3 == 0 else "")
                   for i in range(45_000))  # fmt: skip
    frames, reader, error = _read(_gz(tmp_path / f"some{suffix}.gz", HEAD[suffix] + body))
    assert error is None
    assert len(frames) == 45_000
    assert reader.counts.malformed_lines == 15_000


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "line",
    ["1\n", "b\n", "é\n", "1.0 Start of measurement\n", "12.5 1 Statistic: D 1 R 0\n",
     "Begin x\n", "  \t// comment\n", "1.0 CAN 1 Status:chip status error active\n"],
)  # fmt: skip
def test_asc_lines_no_pattern_matches_are_skipped_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """Lines python-can skips (no trigger block, no frame) are skipped without being read
    one at a time: 100,000 of them cost the array path only."""
    calls = _Calls(monkeypatch)
    body = FRAME[".asc"].format(t=1.0) + line * 100_000 + FRAME[".asc"].format(t=2.0)
    frames, reader, error = _read(_gz(tmp_path / "quiet.asc.gz", ASC_HEAD + body))
    assert error is None
    assert len(frames) == 2 and reader.counts.malformed_lines == 0
    assert calls.one_by_one <= 10 and calls.python_can == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("comment", ["//\n", "//\r", "  // CANoe\r\n", "// é\n"])
def test_an_asc_header_of_comments_is_read_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, comment: str
) -> None:
    """100,000 comment lines in the header (python-can skips them) cost no line by line
    work; the header's own lines still count (date, base)."""
    calls = _Calls(monkeypatch)
    text = comment * 50_000 + ASC_HEAD.replace("base", comment * 50_000 + "base")
    text += FRAME[".asc"].format(t=1.0)
    frames, reader, error = _read(_gz(tmp_path / "head.asc.gz", text))
    assert error is None
    assert len(frames) == 1 and reader.counts.malformed_lines == 0
    assert calls.one_by_one <= 10
    # times count from the header's date (2023-11-14 22:13:20 local), as python-can's
    header_and_frame = io.StringIO(ASC_HEAD + FRAME[".asc"].format(t=1.0))
    theirs = list(can.ASCReader(header_and_frame, relative_timestamp=False))
    assert int(frames.timestamp_us[0]) == round(theirs[0].timestamp * 1e6)


def test_an_asc_header_line_too_many_is_junk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Header lines read one at a time (`base hex`, again and again) count as junk."""
    calls = _Calls(monkeypatch)
    path = _gz(tmp_path / "bases.asc.gz", "base hex\n" * 100_000)
    _, _, error = _read(path)
    assert error is not None and "not an ASC log" in error.reason
    assert calls.one_by_one <= JUNK + 10


# -- item 3: a truncated gzip stream gives every whole line before the cut ---------------------


def _cut(path: Path, text: str, share: float) -> int:
    """`text` gzipped into `path`, cut at `share` of its bytes; the whole lines before the
    cut (what zlib can inflate of it)."""
    packed = gzip.compress(text.encode(), compresslevel=6)
    cut = packed[: int(len(packed) * share)]
    path.write_bytes(cut)
    inflated = zlib.decompressobj(wbits=31).decompress(cut)
    return inflated.count(b"\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("suffix", [".log", ".asc", ".csv"])
def test_a_truncated_gzip_keeps_the_frames_before_the_cut(tmp_path: Path, suffix: str) -> None:
    body = "".join(FRAME[suffix].format(t=1.0 + i / 100) for i in range(20_000))
    lines = _cut(tmp_path / f"cut{suffix}.gz", HEAD[suffix] + body, 0.6)
    whole = lines - HEAD[suffix].count("\n")
    assert whole > 10_000
    frames, _, error = _read(tmp_path / f"cut{suffix}.gz")
    assert error is not None
    assert "truncated gzip stream" in error.reason
    assert len(frames) == whole
    assert f"line {lines + 1}" in error.position


def _packed_text(suffix: str) -> bytes:
    body = "".join(FRAME[suffix].format(t=1.0 + i / 100) for i in range(3_000))
    return gzip.compress((HEAD[suffix] + body).encode(), compresslevel=6)


@pytest.fixture(scope="module")
def packed_blf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_capture(tmp_path_factory.mktemp("blf") / "drive.blf", drive(30.0))
    return gzip.compress(path.read_bytes(), compresslevel=6)


@pytest.mark.timeout(300)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    suffix=st.sampled_from([".log", ".asc", ".csv", ".blf"]),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), max_size=3),
)
def test_a_damaged_gzip_stream_is_a_capture_error(
    tmp_path: Path,
    packed_blf: bytes,
    suffix: str,
    cut: float,
    flips: list[tuple[float, int]],
) -> None:
    """Cut anywhere, bytes changed anywhere (its header, its deflate blocks, its CRC): the
    reader gives frames and then ends, or raises CaptureError; never EOFError, zlib.error or
    gzip.BadGzipFile."""
    data = bytearray(packed_blf if suffix == ".blf" else _packed_text(suffix))
    for where, xor in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= xor
    data = data[: int(cut * len(data))] if cut < 1.0 else data
    path = tmp_path / f"x{suffix}.gz"
    path.write_bytes(bytes(data))
    try:
        reader = BlfReader(path) if suffix == ".blf" else open_capture(path)
        list(reader.chunks())
    except CaptureError:
        pass


# -- the bound, line by line: the same stop whatever the blocks and paths ---------------------

_LINES = [
    "(1.000000) can0 100#0102",  # a frame of the array path
    "(2.000000) can0 20000080#0000000000000000",  # an error frame
    "(3.000000) can0 101#R",  # a remote frame
    "(4) can0 102#03",  # a frame python-can reads (no dot in the time)
    "(5.0)\tcan0\t103#04",  # and another (tabs)
    "x",  # junk judged in bulk
    "a b c d e",
    "(6.0) can0 104",
    "(x) can0 105#00",  # junk python-can raises on
    "é",
    "",  # blank: nothing
    "   ",
]


def _expected(lines: list[str], bound: int) -> tuple[int, int, int | None]:
    """python-can line by line: (frames of any kind, malformed lines, the number of the line
    where junk ends the capture or None), counting up to that line."""
    frames = junk = 0
    for number, line in enumerate(lines, start=1):
        try:
            got = list(can.CanutilsLogReader(io.StringIO(line + "\n")))
        except Exception:
            junk += 1
            if junk >= bound and junk > frames:
                return frames, junk, number
            continue
        frames += len(got)
    return frames, junk, None


@pytest.mark.timeout(300)
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(st.integers(0, len(_LINES) - 1), max_size=120),
    bound=st.integers(1, 12),
    block=st.sampled_from([16, 64, 333, 1 << 20]),
)
def test_junk_ends_a_capture_at_the_line_python_can_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, picks: list[int], bound: int, block: int
) -> None:
    """Whatever the blocks, and whichever path judged each line: the capture stops at the
    first line where the junk reaches the bound and outnumbers the frames read before it,
    with every frame before that line and no other."""
    monkeypatch.setattr(text_blocks, "MAX_JUNK_LINES", bound)
    lines = [_LINES[k] for k in picks]
    path = tmp_path / "x.log"
    path.write_text("".join(line + "\n" for line in lines))
    frames, junk, stop = _expected(lines, bound)
    reader = CanutilsReader(path, block_bytes=block)
    got: list[FrameChunk] = []
    error = None
    try:
        got.extend(reader.chunks())
    except CaptureError as exc:
        error = exc
    counts = reader.counts
    assert len(concat_chunks(got)) + counts.error_frames + counts.remote_frames == frames
    assert counts.malformed_lines == junk
    if stop is None:
        assert error is None
    else:
        assert error is not None and error.position == f"line {stop}"
        assert error.reason.startswith(f"not a candump log: {junk} malformed lines")


def test_a_truncated_trc_gz_keeps_the_frames_before_the_cut(tmp_path: Path) -> None:
    """TRC goes through python-can's reader, 65,536 messages gathered at a time: the ones
    gathered when the stream breaks are the capture's too, then the error says where."""
    plain = tmp_path / "drive.trc"
    with can.Logger(str(plain)) as writer:
        for i in range(20_000):
            writer(can.Message(timestamp=1.7e9 + i / 1000, arbitration_id=0x100, data=bytes(8)))
    packed = gzip.compress(plain.read_bytes())
    cut = tmp_path / "drive.trc.gz"
    cut.write_bytes(packed[: len(packed) * 6 // 10])
    frames: list[int] = []

    def read() -> None:
        for chunk in open_capture(cut).chunks():
            frames.append(len(chunk))

    with pytest.raises(CaptureError, match="line"):
        read()
    assert 10_000 < sum(frames) < 20_000


# -- junk in bytes: long lines and lines between frames ------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("suffix", [".log", ".csv"])
def test_a_line_longer_than_any_frame_is_malformed_without_python_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """A frame line is a few hundred bytes at most: a megabyte of odd hex cost python-can
    70 ms a line (400 of them, 28 s from a 400 KB gzip); now none reaches it."""
    calls = _Calls(monkeypatch)
    long = {
        ".log": "(1.000000) can0 123#" + "1" * 200_000 + "Z\n",
        ".csv": "1.0,0x100,0,0,0,8," + "A" * 200_000 + "!\n",
    }[suffix]
    frame = {
        ".log": "(1.000000) can0 123#0102030405060708\n",
        ".csv": "1.0,0x123,0,0,0,8,AQIDBAUGBwg=\n",
    }[suffix]
    path = _gz(tmp_path / f"long{suffix}.gz", HEAD[suffix] + (frame + long) * 50)
    frames, reader, error = _read(path)
    assert error is None and len(frames) == 50
    assert reader.counts.malformed_lines == 50
    assert "longer than any frame" in reader.counts.malformed[0]
    assert calls.python_can == 0


@pytest.mark.timeout(120)
def test_lines_python_can_reads_for_nothing_between_frames_are_bounded_in_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One frame, one junk line python-can must read (not ASCII), again and again: junk never
    outnumbers the frames, so only its bytes can bound the work."""
    monkeypatch.setattr(text_blocks, "MAX_JUNK_BYTES", 200_000)
    junk = "(1.000000) cän0 123#" + "0" * 3000 + "\n"  # python-can reads it: a channel 'cän0'
    frame = "(1.000000) can0 123#0102030405060708\n"
    path = _gz(tmp_path / "alternate.log.gz", (frame + junk) * 1000)
    frames, _, error = _read(path)
    assert error is not None and "bytes of lines without a frame" in error.reason
    assert len(frames) < 100  # about 200,000 / 3,000 junk lines, a frame before each
