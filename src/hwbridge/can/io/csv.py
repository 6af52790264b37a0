"""CSV captures as python-can's CSVWriter writes them, read into frame columns with numpy.

    timestamp,arbitration_id,extended,remote,error,dlc,data
    1700000000.0002,0x18f00003,1,0,0,8,AQIDBAUGBwg=

The first line is skipped whatever it holds (python-can's CSVReader does so). The file is
read a block of bytes at a time; in a block, every line of the shape above (a decimal
timestamp, `0x` and up to eight hex digits, the three flags as 0 or 1, a decimal DLC, the
data in base64) is parsed at once: the fields by the positions of the commas, the timestamp
by numpy's conversion (which rounds as float() does), the base64 by a table. An ASCII line
without six commas is malformed there and then (python-can splits a line into seven fields,
or raises). Any other line goes through python-can's own CSVReader, one line at a time, so
every line gives what
python-can gives; a line python-can cannot read is counted with its line number and
skipped, where python-can stops with an exception (so is a frame no column holds).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from hwbridge.can.io.frames import MAX_MALFORMED, FrameChunk, concat_chunks
from hwbridge.can.io.text_blocks import (
    BLOCK_BYTES,
    I64,
    LEFT,
    MAX_DATA,
    MAX_SECONDS,
    U8,
    Bools,
    Parsed,
    Text,
    TextCaptureReader,
    all_of,
    first_after,
    microseconds,
    next_line,
    number_right,
    window,
)

__all__ = ["CsvReader", "parse_rows"]

_B64 = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _B64[_c] = _i
_PAD = ord("=")
_STAMP_WIDTH = 24  # characters of a timestamp read by numpy
_DATA_CHARS = 4 * -(-MAX_DATA // 3)  # base64 of the longest frame: 88


def _flag(t: Text, start: I64, end: I64) -> tuple[Bools, Bools]:
    """(value, good) of a field that must be a single 0 or 1."""
    c = t.at(start)
    return c == ord("1"), (end - start == 1) & ((c == ord("0")) | (c == ord("1")))


def _stamps(t: Text, start: I64, end: I64) -> tuple[Any, Bools]:
    """`digits.digits` as float() reads it (numpy's conversion rounds the same way)."""
    digits = (t.body - np.uint8(48)) <= 9
    other = np.concatenate([[0], np.cumsum(~digits, dtype=np.int32)])
    dot = first_after(t.find(46), start, t.last)
    good = all_of(
        (end - start) <= _STAMP_WIDTH,
        dot > start,
        dot < end - 1,
        other[np.clip(end - LEFT, 0, len(t.body))] - other[np.clip(start - LEFT, 0, len(t.body))]
        == 1,  # the dot is the only byte that is not a digit
    )
    seconds, exact = t.decimal_seconds(start, end)  # up to 16 digits, in integers
    rows = np.flatnonzero(good & ~exact)  # repr() writes 17 digits: numpy's conversion
    if len(rows):
        text = window(t.a, start[rows], _STAMP_WIDTH)
        text[np.arange(_STAMP_WIDTH) >= (end - start)[rows, None]] = 0
        strings = np.ascontiguousarray(text).view(f"S{_STAMP_WIDTH}")[:, 0]
        seconds[rows] = strings.astype(np.float64)
    good &= np.abs(seconds) < MAX_SECONDS
    return seconds, good


def _base64(t: Text, start: I64, end: I64) -> tuple[U8, I64, Bools]:
    """(bytes, length, good) of a field of base64 with its `=` padding."""
    chars = end - start
    good = (chars % 4 == 0) & (chars <= _DATA_CHARS)
    width = int(np.max(np.where(good, chars, 0), initial=0))
    if not width:
        return np.zeros((len(start), 8), np.uint8), np.zeros(len(start), np.int64), good
    raw = window(t.a, start, width)
    cols = np.arange(width)
    used = cols < chars[:, None]
    pad = (raw == _PAD) & used
    pads = pad.sum(axis=1)
    # padding only as the last one or two characters
    tail = cols >= (chars - pads)[:, None]
    value = _B64[raw]
    good &= np.all((value < 64) | ~used | (pad & tail), axis=1) & (pads <= 2)
    good &= np.all(~pad | tail, axis=1)
    value = np.where(used & ~pad, value, 0).astype(np.uint8).reshape(len(start), -1, 4)
    out = np.empty((len(start), width // 4, 3), np.uint8)
    out[:, :, 0] = (value[:, :, 0] << 2) | (value[:, :, 1] >> 4)
    out[:, :, 1] = (value[:, :, 1] << 4) | (value[:, :, 2] >> 2)
    out[:, :, 2] = (value[:, :, 2] << 6) | value[:, :, 3]
    length = chars // 4 * 3 - pads
    good &= length <= MAX_DATA  # python-can reads more, but no column holds them
    data = out.reshape(len(start), -1)
    data = np.where(np.arange(data.shape[1]) < length[:, None], data, 0).astype(np.uint8)
    return data, length, good


def parse_rows(text: bytes) -> Parsed:
    """The lines of `text` (whole lines: the last ends with its line break)."""
    t = Text(text)
    starts, stops, ends = t.lines()
    plain = t.plain(starts, stops, ends, tabs=False)
    commas = t.find(44)
    first = np.searchsorted(commas, starts)
    regular = plain & (np.searchsorted(commas, stops) - first == 6)
    rows = np.flatnonzero(regular)
    at = np.append(commas, np.full(6, t.last, np.int64))
    c = [at[first[rows] + k] for k in range(6)]
    start, stop = starts[rows], stops[rows]
    seconds, good = _stamps(t, start, c[0])
    zero_x = (t.at(c[0] + 1) == ord("0")) & ((t.at(c[0] + 2) | np.uint8(0x20)) == ord("x"))
    can_id, good_id = number_right(t.a, c[1], c[1] - c[0] - 3, 8, 16)
    extended, good_extended = _flag(t, c[1] + 1, c[2])
    remote, good_remote = _flag(t, c[2] + 1, c[3])
    error, good_error = _flag(t, c[3] + 1, c[4])
    _, good_dlc = number_right(t.a, c[5], c[5] - c[4] - 1, 2, 10)
    data, length, good_data = _base64(t, c[5] + 1, stop)
    good = all_of(good, zero_x, good_id, good_extended, good_remote, good_error, good_dlc)
    good &= good_data
    frames = good & ~error & ~remote
    keep = max(8, int(length[frames].max(initial=0)))
    chunk = FrameChunk(
        microseconds(seconds[frames]),
        (can_id[frames] & 0x1FFFFFFF).astype(np.uint32),
        extended[frames],
        length[frames].astype(np.uint8),
        np.ascontiguousarray(data[frames, :keep]),
        np.full(int(np.count_nonzero(frames)), -1, np.int16),
    )
    slow_rows = np.union1d(np.flatnonzero(~regular), rows[~good])
    bad = slow_rows[:0]
    if len(slow_rows):  # python-can splits a line at its commas into seven fields, or raises
        ascii_rows = slow_rows[~t.beyond_ascii(starts, ends)[slow_rows]]
        bad = ascii_rows[(np.searchsorted(commas, stops[ascii_rows]) - first[ascii_rows]) != 6]
        slow_rows = np.setdiff1d(slow_rows, bad, assume_unique=True)
    slow = [(int(i), text[starts[i] - LEFT : stops[i] - LEFT]) for i in slow_rows]
    named = [text[starts[i] - LEFT : stops[i] - LEFT] for i in bad[:MAX_MALFORMED]]
    return Parsed(
        chunk, rows[frames], rows[good & error], rows[good & remote & ~error], bad, named, slow
    )


class CsvReader(TextCaptureReader):
    """Frame chunks from a python-can CSV log (or .csv.gz); malformed lines are counted in
    `counts.malformed_lines` (the first few in `counts.malformed`) and skipped."""

    NAME = "a CSV log"

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        super().__init__(path, block_bytes)
        self._header = True

    def _parse(self, text: bytes, first_line: int) -> FrameChunk:
        if self._header:  # python-can skips the first line, whatever it says
            self._header = False
            raw, at = next_line(text, 0)
            self._decode(first_line, raw)
            text, first_line = text[at:], first_line + 1
            if not text:
                return concat_chunks([])
        return self._with_slow_lines(parse_rows(text), first_line, _csv)


def _csv(line: str) -> Iterable[Any]:
    """python-can's `CSVReader` over one line (after the header it skips)."""
    from can.io.csv import CSVReader

    return CSVReader(io.StringIO("header\n" + line + "\n"))
