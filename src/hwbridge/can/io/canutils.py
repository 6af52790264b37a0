"""candump `.log` captures (SocketCAN's `candump -l`) read into frame columns with numpy.

A line is `(seconds.fraction) interface frame`, sometimes followed by ` R` or ` T` (python-can
writes the direction), where the frame is `id#hexdata`, `id##<flags>hexdata` (CAN FD),
`id#R` with an optional length (remote) or an error frame (its id has the CAN_ERR_FLAG and
CAN_ERR_BUSERROR bits). The file is read a block of bytes at a time; in a block, the fields
of every line of that shape are found and parsed at once: line ends, spaces, dots and hashes
by their positions, digits and hex digits through fixed-width windows. An ASCII line that
cannot be a frame (python-can wants three fields, four when the line ends in a space and R
or T, and a `#` in the third: it raises on any other) is malformed there and then, without
python-can; a blank one is skipped. Any other line outside the shape (other whitespace,
non-ASCII bytes, odd hex, signs, exponents, very long timestamps) goes through python-can's
own `CanutilsLogReader`, one line at a time, so every
line gives what python-can gives; a line python-can cannot read is counted with its line
number and skipped, where python-can stops with an exception (so is a line whose frame no
column holds: a timestamp that is nan, inf or 1e300, more than 64 data bytes, which
python-can keeps and which would widen every row of its chunk).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from hwbridge.can.io.frames import MAX_MALFORMED, FrameChunk
from hwbridge.can.io.text_blocks import (
    HEX,
    I64,
    LEFT,
    MAX_SECONDS,
    STRIPPED,
    U8,
    Bools,
    Parsed,
    Text,
    TextCaptureReader,
    all_of,
    first_after,
    microseconds,
    number_right,
    window,
)

__all__ = ["MAX_SECONDS", "CanutilsReader", "Parsed", "parse_lines"]

_ERR_FLAG = 0x20000000
_ERR_BUSERROR = 0x80


class _Layout(NamedTuple):
    starts: I64
    stops: I64  # where each line's text ends (before \r\n, \n or \r)
    ends: I64  # each line's last byte
    filled: Bools  # not empty
    regular: Bools  # printable ASCII in three or four fields split by single spaces
    space1: I64
    space2: I64
    frame_end: I64


def _layout(t: Text) -> _Layout:
    """Lines as text mode reads them (\n, \r\n or a lone \r end one), and their fields."""
    starts, stops, ends = t.lines()
    filled = stops > starts
    # bytes other than printable ASCII and the space send their line to python-can
    plain = t.plain(starts, stops, ends, tabs=False)
    # three fields split by single spaces, or four when the fourth is R or T
    spaces = t.find(32)
    k0 = np.searchsorted(spaces, starts)
    count = np.searchsorted(spaces, stops) - k0
    padded = np.append(spaces, np.full(3, t.last, np.int64))
    s1, s2, s3 = padded[k0], padded[k0 + 1], padded[k0 + 2]
    four = count == 3
    frame_end = np.where(four, s3, stops)
    direction = t.at(s3 + 1) | np.uint8(0x20)
    regular = all_of(
        plain & ((count == 2) | four),
        s1 > starts,
        s2 > s1 + 1,
        frame_end > s2 + 1,
        ~four | ((stops == s3 + 2) & ((direction == ord("r")) | (direction == ord("t")))),
    )
    return _Layout(starts, stops, ends, filled, regular, s1, s2, frame_end)


def _timestamps(t: Text, starts: I64, s1: I64) -> tuple[I64, Bools]:
    """`(integer.fraction)` in microseconds, as python-can's float() and rounding give."""
    a = t.a
    seconds, good = t.decimal_seconds(starts + 1, s1 - 1)
    good = all_of(good, a[starts] == ord("("), a[s1 - 1] == ord(")"), seconds < MAX_SECONDS)
    return microseconds(np.where(good, seconds, 0.0)), good


def _channels(t: Text, s1: I64, s2: I64) -> tuple[I64, Bools]:
    """The interface as python-can's channel: a number when all digits (clipped), else -1."""
    iface = s2 - s1 - 1
    channel = np.full(len(s1), -1, np.int64)
    good = np.ones(len(s1), np.bool_)
    maybe = np.flatnonzero((t.at(s1 + 1) - np.uint8(48)) <= 9)  # starts with a digit
    if not len(maybe):
        return channel, good
    head = window(t.a, s1[maybe] + 1, 9) - np.uint8(48)
    count = iface[maybe]
    used = np.arange(9) < np.minimum(count, 9)[:, None]
    numeric = np.all((head <= 9) | ~used, axis=1)
    good[maybe] = ~numeric | (count <= 9)  # longer numbers: python-can's int()
    value = np.zeros(len(maybe), np.int64)
    for j in range(9):
        value = np.where(j < count, value * 10 + head[:, j], value)
    channel[maybe] = np.where(numeric, np.minimum(value, 32767), -1)
    return channel, good


class _Fields(NamedTuple):
    can_id: I64  # with the flag bits above the 29 of the id
    extended: Bools
    remote: Bools
    length: I64
    data: U8
    good: Bools


def _frame_fields(t: Text, s2: I64, frame_end: I64) -> _Fields:
    """`id#data`, `id##<flags>data` and `id#R<length>`."""
    a = t.a
    mark = first_after(t.find(35), s2, t.last)
    id_digits = mark - s2 - 1
    can_id, good_id = number_right(a, mark, id_digits, 8, 16)
    good = good_id & (mark < frame_end)
    fd = t.at(mark + 1) == ord("#")
    good &= ~fd | ((mark + 2 < frame_end) & ((t.at(mark + 2) - np.uint8(48)) <= 9))
    data_at = np.where(fd, mark + 3, mark + 1)
    remote = (data_at < frame_end) & ((t.at(data_at) | np.uint8(0x20)) == ord("r"))
    chars = frame_end - data_at
    if bool(np.any(remote)):  # R, then an optional decimal length
        _, digits_ok = number_right(a, frame_end, chars - 1, 9, 10)
        good &= ~remote | digits_ok | (chars == 1)
    good &= remote | ((chars % 2 == 0) & (chars <= 128))
    width = 64 if bool(np.any(good & ~remote & (chars > 16))) else 8
    nib = HEX[window(a, data_at, 2 * width)]
    used = np.arange(2 * width) < np.where(remote, 0, chars)[:, None]
    good &= np.all((nib < 16) | ~used, axis=1)
    nib = np.where(used, nib, 0)
    data = ((nib[:, 0::2] << 4) | nib[:, 1::2]).astype(np.uint8)
    return _Fields(can_id, id_digits > 3, remote, chars // 2, data, good)


def _no_frame(t: Text, starts: I64, stops: I64, rows: I64) -> tuple[Bools, Bools]:
    """Of the ASCII lines `rows`: (blank ones, which python-can skips; ones that cannot be a
    frame, on which python-can raises). python-can splits the stripped line into three
    fields, or four when it ends in a space and R or T, and the third must hold a `#`."""
    tok_starts, tok_ends = t.tokens(STRIPPED)
    first = np.searchsorted(tok_starts, starts[rows])
    count = np.searchsorted(tok_starts, stops[rows]) - first
    padded_starts = np.append(tok_starts, t.last)
    padded_ends = np.append(tok_ends, t.last)
    last = np.maximum(first + count - 1, 0)
    last_start, last_end = padded_starts[last], padded_ends[last]
    direction = t.at(last_start) | np.uint8(0x20)
    four = all_of(
        count >= 2,
        last_end - last_start == 1,
        (direction == ord("r")) | (direction == ord("t")),
        t.at(last_start - 1) == ord(" "),
    )
    third = np.minimum(first + 2, len(tok_starts))  # (with fewer fields the count decides)
    frame_start, frame_end = padded_starts[third], padded_ends[third]
    has_mark = first_after(t.find(35), frame_start, t.last) < frame_end
    blank = count == 0
    return blank, ~blank & ((count != np.where(four, 4, 3)) | ~has_mark)


def parse_lines(text: bytes) -> Parsed:
    """The lines of `text` (whole lines: the last ends with its line break)."""
    t = Text(text)
    lay = _layout(t)
    rows = np.flatnonzero(lay.regular)
    s1, s2 = lay.space1[rows], lay.space2[rows]
    stamps, good = _timestamps(t, lay.starts[rows], s1)
    channel, good_channel = _channels(t, s1, s2)
    f = _frame_fields(t, s2, lay.frame_end[rows])
    good = all_of(good, good_channel, f.good)
    error = good & ((f.can_id & _ERR_FLAG) != 0) & ((f.can_id & _ERR_BUSERROR) != 0)
    frames = good & ~error & ~f.remote
    length = f.length[frames].astype(np.uint8)
    keep = max(8, int(length.max(initial=0)))  # as python-can's rows: the longest, at least 8
    chunk = FrameChunk(
        stamps[frames],
        (f.can_id[frames] & 0x1FFFFFFF).astype(np.uint32),
        f.extended[frames],
        length,
        np.ascontiguousarray(f.data[frames, :keep]).astype(np.uint8, copy=False),
        channel[frames].astype(np.int16),
    )
    other = np.flatnonzero(lay.filled & ~lay.regular)
    other = np.union1d(other, rows[~good])
    bad = other[:0]
    if len(other):  # lines outside the fast path's shape: judged here when they cannot be frames
        ascii_rows = other[~t.beyond_ascii(lay.starts, lay.ends)[other]]
        blank, no_frame = _no_frame(t, lay.starts, lay.stops, ascii_rows)
        bad = ascii_rows[no_frame]
        other = np.setdiff1d(other, ascii_rows[blank | no_frame], assume_unique=True)
    slow = [(int(i), text[lay.starts[i] - LEFT : lay.stops[i] - LEFT]) for i in other]
    named = [text[lay.starts[i] - LEFT : lay.stops[i] - LEFT] for i in bad[:MAX_MALFORMED]]
    return Parsed(
        chunk,
        rows[frames],
        rows[error],
        rows[good & f.remote & ~error],
        bad,
        named,
        slow,
    )


class CanutilsReader(TextCaptureReader):
    """Frame chunks from a candump .log (or .log.gz); malformed lines are counted in
    `counts.malformed_lines` (the first few in `counts.malformed`) and skipped."""

    NAME = "a candump log"

    def _parse(self, text: bytes, first_line: int) -> FrameChunk:
        return self._with_slow_lines(parse_lines(text), first_line, _candump)


def _candump(line: str) -> Iterable[Any]:
    """python-can's `CanutilsLogReader` over one line."""
    from can.io.canutils import CanutilsLogReader

    return CanutilsLogReader(io.StringIO(line + "\n"))
