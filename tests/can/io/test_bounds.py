"""Every reader family holds its bounds on hostile input, whatever open_capture picks.

Random bytes, valid lines with mutated fields (nan, inf, huge and subnormal timestamps, -0.0,
huge and negative ids, over-long data, NUL bytes), lines over the line bound, \\r-only line
ends, gzip and gzip of gzip: no exception but CaptureError, at most one frame per 8 bytes of
text, every frame passing the frame checks, no note longer than a few hundred characters.
The line bound is lowered to 256 so that over-long lines stay small.
"""

from __future__ import annotations

import base64
import gzip
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.can.io import bounded_lines, text_blocks
from hwbridge.can.io.frame_checks import CheckedReader
from hwbridge.can.io.frames import MAX_NOTE, CaptureError, FrameChunk, concat_chunks
from hwbridge.can.io.readers import open_capture
from hwbridge.captures.summary import MAX_MALFORMED
from tests.captures.checks import assert_bounded

LINE_BOUND = 256

_ASC_HEADER = (
    "date Tue Nov 14 10:13:20.000 pm 2023\nbase {base}  timestamps absolute\n"
    "internal events logged\n"
)
_TRC_V2 = ";$FILEVERSION={version}\n;$STARTTIME={start}\n;$COLUMNS={columns}\n"

# a line of each format with its fields as slots: {t} time, {id}, {n} data length (or DLC),
# {data} the bytes in the format's spelling
_FORMATS: dict[str, list[tuple[str, list[str]]]] = {
    ".log": [("", ["({t}) can0 {id}#{data}", "({t}) 1 {id}##1{data}", "({t}) can0 {id}#R"])],
    ".asc": [
        (_ASC_HEADER.format(base=base) + trigger, [
            "{t} 1  {id}             Rx   d {n} {data}",
            "{t} 2  {id}x       Tx   d {n} {data}",
            "{t} CANFD   1 Rx {id}  1 0 {n} {n} {data} 0 0 0 0 0",
            "{t} 1  {id}             Rx   r",
            "{t} 1  ErrorFrame",
        ])
        for base in ("hex", "dec")
        for trigger in ("", "Begin Triggerblock Tue Nov 14 10:13:20.000 pm 2023\n")
    ],
    ".csv": [
        ("timestamp,arbitration_id,extended,remote,error,dlc,data\n",
         ["{t},0x{id},0,0,0,{n},{data}", "{t},0x{id},1,0,0,{n},{data}", "{t},0x{id},0,1,0,0,"]),
    ],
    ".trc": [
        ("", ["   1)  {t}  {id}  {n}  {data}"]),
        (";$FILEVERSION=1.1\n;$STARTTIME=45244.9\n", ["      1)  {t}  Rx  {id}  {n}  {data}"]),
        (";$FILEVERSION=1.3\n;$STARTTIME=45244.9\n", ["  1)  {t}  1  Rx  {id} -  {n}  {data}"]),
        (_TRC_V2.format(version="2.0", start="45244.9", columns="N,O,T,I,d,l,D"),
         ["      1  {t} DT  {id} Rx {n}  {data}", "      2  {t} FD  {id} Rx {n}  {data}"]),
    ]
    + [
        (_TRC_V2.format(version="2.1", start=start, columns="N,O,T,B,I,d,R,L,D"),
         ["      1  {t} DT  1 {id} Rx -  {n}    {data}", "      2  {t} FD  1 {id} Rx -  {n}  {data}",
          "      3  {t} RR  1 {id} Rx -  {n}"])
        for start in ("45244.9", "nan", "1e300", "-0.0", "5e-324", "")
    ],
}  # fmt: skip

_TIMES = ["1700000000.000100", "0.100", "100", "12.5"]
_HOSTILE_TIMES = [
    "nan", "-nan", "NaN", "inf", "-inf", "1e300", "-1e300", "-0.0", "0.0", "5e-324", "4e-320",
    "2.2250738585072014e-308", "1e13", "1e15", "999999999999.999", "-999999999999.999", "1e12",
    "1_0", "", "x", "0x10", "\x00", "１.５", "9" * 30,
]  # fmt: skip
_IDS = ["100", "7FF", "18F00400", "1FFFFFFF", "0"]
_HOSTILE_IDS = [
    "FFFFFFFF", "100000000", "FFFFFFFFFF", "123456789", "-1", "-7FF", "0" * 40 + "1", "F" * 40,
    "", "x", "\x00", "20000080", "+1F",
]  # fmt: skip
_LENGTHS = [0, 1, 2, 8, 8, 12, 64, 65, 70, 300]
_HOSTILE_TOKENS = [
    "\x00", "\x00" * 5, "é", "R", "#", "##", ";", "//", "CANFD", "Rx", "d", "x" * 300, "\t", "\x0c",
]  # fmt: skip
_ENDS = ["\n", "\n", "\r\n", "\r"]


def _spelled(suffix: str, data: bytes) -> str:
    if suffix == ".log":
        return data.hex()
    if suffix == ".csv":
        return base64.b64encode(data).decode()
    return " ".join(f"{b:02X}" for b in data)


@st.composite
def _line(draw: st.DrawFn, suffix: str, lines: list[str]) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:  # random text
        return draw(st.text(max_size=60))
    hostile = kind >= 5
    t = draw(st.sampled_from(_TIMES + _HOSTILE_TIMES if hostile else _TIMES))
    frame_id = draw(st.sampled_from(_IDS + _HOSTILE_IDS if hostile else _IDS))
    n = draw(st.sampled_from(_LENGTHS))
    data = _spelled(suffix, draw(st.binary(min_size=n, max_size=n)))
    count = str(n) if draw(st.booleans()) else draw(st.sampled_from(["F", "15", "255", "-1"]))
    line = draw(st.sampled_from(lines)).format(t=t, id=frame_id, n=count, data=data)
    if kind == 1:  # over the line bound
        line += "0" * draw(st.integers(LINE_BOUND, 3 * LINE_BOUND))
    elif kind == 2:  # a token replaced
        tokens = line.split(" ")
        tokens[draw(st.integers(0, len(tokens) - 1))] = draw(st.sampled_from(_HOSTILE_TOKENS))
        line = " ".join(tokens)
    return line


@st.composite
def _capture(draw: st.DrawFn, suffix: str) -> bytes:
    if draw(st.integers(0, 9)) == 0:  # random bytes
        return draw(st.binary(max_size=400))
    text, lines = draw(st.sampled_from(_FORMATS[suffix]))
    for line in draw(st.lists(_line(suffix, lines), max_size=30)):
        text += line + draw(st.sampled_from(_ENDS))
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # bytes that are not UTF-8
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe\x80" + data[at:]
    return data


def _read(path: Path, fast: bool) -> tuple[FrameChunk, CheckedReader | None]:
    """Everything the reader gives before its end or its CaptureError."""
    try:
        reader = open_capture(path, fast=fast)
    except CaptureError:
        return concat_chunks([]), None
    chunks: list[FrameChunk] = []
    reason = ""
    try:
        for chunk in reader.chunks():
            assert chunk.data.shape[1] <= 64
            chunks.append(chunk)
    except CaptureError as exc:
        reason = exc.reason
    finally:
        reader.close()
    assert len(reason) < 2 * MAX_NOTE + 200, reason
    return concat_chunks(chunks), reader


def _assert_notes_bounded(reader: CheckedReader | None) -> None:
    if reader is None:
        return
    counts = reader.counts
    assert len(counts.malformed) <= MAX_MALFORMED and len(counts.frame_notes) <= MAX_MALFORMED
    for note in counts.malformed + counts.frame_notes:
        assert len(note) <= MAX_NOTE + 20 and note.isprintable(), note


def _check(tmp_path: Path, suffix: str, text: bytes, packing: int, fast: bool) -> None:
    name = "x" + suffix + ".gz" * min(packing, 1)
    file = text
    for _ in range(packing):  # 2: gzip of gzip, read as gzip of binary text
        file = gzip.compress(file, compresslevel=1)
    path = tmp_path / name
    path.write_bytes(file)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(text_blocks, "MAX_LINE_BYTES", LINE_BOUND)
        patch.setattr(bounded_lines, "MAX_LINE_BYTES", LINE_BOUND)
        frames, reader = _read(path, fast)
    read_text = gzip.decompress(file) if packing else file  # what the reader parses
    assert_bounded(frames, read_text)
    _assert_notes_bounded(reader)


@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    suffix=st.sampled_from(sorted(_FORMATS)),
    data=st.data(),
    packing=st.sampled_from([0, 0, 1, 2]),
    fast=st.sampled_from([True, True, False]),
)
def test_hostile_text_captures_stay_bounded(
    tmp_path: Path, suffix: str, data: st.DataObject, packing: int, fast: bool
) -> None:
    _check(tmp_path, suffix, data.draw(_capture(suffix)), packing, fast)


_TRC = _TRC_V2.format(version="2.1", start="45244.9", columns="N,O,T,B,I,d,R,L,D")
_ASC = _ASC_HEADER.format(base="hex")


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".trc", _TRC + "  1  nan DT  1 0100 Rx -  8  00 00 00 00 00 00 00 00\n"),
        (".trc", _TRC + "  1  1.0 DT  1 FFFFFFFFFF Rx -  8  00 00 00 00 00 00 00 00\n"),
        (".trc", _TRC + "  1  1.0 FD  1 0100 Rx -  15  " + "00 " * 70 + "\n"),
        (".trc", _TRC + "  1  1e300 DT  1 0100 Rx -  0\n"),
        (".log", "(1.0) can0 100#" + "00" * 70 + "\n"),
        (".log", "(1.0) 123456789012345678901234 100#00\n"),
        (".asc", _ASC + "1.0 CANFD 1 Rx 100 1 0 f 70 " + "00 " * 70 + "\n"),
        (".trc", "\r".join(["0" * 999] * 3)),
        (".trc", _TRC + "\x00" * 400 + "\n"),
    ],
    ids=["trc nan", "trc id", "trc 70 bytes", "trc 1e300", "log 70 bytes", "log channel",
         "asc 70 bytes", "cr only long", "nul"],
)  # fmt: skip
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python-can"])
def test_known_hostile_lines(tmp_path: Path, suffix: str, text: str, fast: bool) -> None:
    _check(tmp_path, suffix, text.encode(), 0, fast)


# -- SQLite: at most one frame per stored row ------------------------------------------------

_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e12, -1e12, 999999999999.9, 1.7e9]),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**29, 2**32 - 1, 2**32, 2**40]),
    st.none(),
    st.text(max_size=8),
    st.binary(max_size=80),
)
_ROW = st.tuples(
    _VALUES, _VALUES, st.sampled_from([0, 1, "x", None]), st.sampled_from([0, 1, None]),
    st.sampled_from([0, 0, 1]), _VALUES, _VALUES,
)  # fmt: skip
_SCHEMAS = [
    "CREATE TABLE messages (ts REAL, arbitration_id INTEGER, extended INTEGER, remote INTEGER,"
    " error INTEGER, dlc INTEGER, data BLOB)",
    "CREATE TABLE messages (a, b, c, d, e, f, g)",
    "CREATE TABLE messages (a, b, c, d, e, f, g, PRIMARY KEY (a, b, c, d, e, f, g)) WITHOUT ROWID",
    "CREATE TABLE messages (a, b, c, d, e, f)",
    "CREATE TABLE stored (a, b, c, d, e, f, g); CREATE VIEW messages AS SELECT * FROM stored,"
    " stored AS s2",
    "CREATE TABLE messages (a, b, c, d, e, f, g AS (zeroblob(100000000)))",
    "CREATE TABLE other (a)",
]


@pytest.mark.timeout(300)
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(schema=st.sampled_from(_SCHEMAS), rows=st.lists(_ROW, max_size=30), junk=st.integers(0, 9))
def test_hostile_sqlite_captures_stay_bounded(
    tmp_path: Path, schema: str, rows: list[tuple[Any, ...]], junk: int
) -> None:
    path = tmp_path / "x.db"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(schema)
        table = "stored" if "stored" in schema else "messages"
        if "other" not in schema:
            width = 6 if "f)" in schema else 7
            values = ", ".join("?" * width)
            for row in rows:
                try:
                    db.execute(f"INSERT INTO {table} VALUES ({values})", row[:width])
                except sqlite3.Error:  # a duplicate key of WITHOUT ROWID, a generated column
                    pass
    db.close()
    if junk == 0:  # a damaged file
        data = bytearray(path.read_bytes())
        data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
        path.write_bytes(bytes(data))
    frames, reader = _read(path, True)
    assert len(frames) <= len(rows)
    assert_bounded(frames, path.read_bytes())
    _assert_notes_bounded(reader)
