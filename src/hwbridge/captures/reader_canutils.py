"""candump `.log` captures (SocketCAN's `candump -l`) read into frame columns with numpy.

A line is `(seconds.fraction) interface frame`, sometimes followed by ` R` or ` T` (python-can
writes the direction), where the frame is `id#hexdata`, `id##<flags>hexdata` (CAN FD),
`id#R` with an optional length (remote) or an error frame (its id has the CAN_ERR_FLAG and
CAN_ERR_BUSERROR bits). The file is read a block of bytes at a time; in a block, the fields
of every line of that shape are found and parsed at once: line ends, spaces, dots and hashes
by their positions, digits and hex digits through fixed-width windows. Any line outside
that shape (other whitespace, non-ASCII bytes, odd hex, signs, exponents, very long
timestamps) goes through python-can's own `CanutilsLogReader`, one line at a time, so every
line gives what python-can gives; a line python-can cannot read is counted with its line
number and skipped, where python-can stops with an exception (so is a line whose timestamp
is not a number of seconds a microsecond column holds: nan, inf, 1e300).
"""

from __future__ import annotations

import gzip
import io
import locale
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import numpy.typing as npt

from hwbridge.captures.frames import FrameChunk, ReaderCounts, concat_chunks
from hwbridge.captures.reader_pycan import pack_messages

__all__ = ["CanutilsReader", "Parsed", "parse_lines"]

BLOCK_BYTES = 4 * 1024 * 1024
"""Bytes of text parsed at once (about 85,000 lines of classic frames)."""
MAX_LINE_BYTES = 1024 * 1024
"""A line longer than this (a binary file named .log) is reported, not buffered whole."""

_LEFT = 16  # zero bytes before the text: windows ending near its start stay inside
_RIGHT = 160  # and after it: a window of 128 hex digits starting near its end
_ERR_FLAG = 0x20000000
_ERR_BUSERROR = 0x80
_MAX_EXACT = 2**53  # decimal mantissas float64 holds exactly
MAX_SECONDS = 1e12
"""Timestamps beyond this many seconds from 1970 (31,700 years) are malformed: microseconds
since 1970 would not fit the 64-bit column."""

_HEX = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"abcdef"):
    _HEX[_c] = 10 + _i
    _HEX[_c - 32] = 10 + _i
_POW10_16 = 10 ** np.arange(15, -1, -1, dtype=np.int64)
_POW16_8 = 16 ** np.arange(7, -1, -1, dtype=np.int64)
_POW10 = 10.0 ** np.arange(10)

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]


def _window(a: U8, at: I64, width: int) -> U8:
    """`width` bytes from each offset in `at` (clipped into `a`), as a (len(at), width) array."""
    at = np.clip(at, 0, len(a) - width)
    return np.lib.stride_tricks.sliding_window_view(a, width)[at]


def _digits_right(a: U8, end: I64, count: I64, width: int) -> tuple[I64, Bools]:
    """The decimal number in the `count` bytes before each `end` (at most `width`), and
    whether they are all digits."""
    win = _window(a, end - width, width) - np.uint8(48)
    used = np.arange(width) >= (width - count)[:, None]
    good = np.all((win <= 9) | ~used, axis=1)
    digits = np.where(used, win, 0).astype(np.int64)
    value: I64 = digits @ _POW10_16[16 - width :]
    return value, good


def _first_after(positions: I64, at: I64, beyond: int) -> I64:
    """The first of `positions` (sorted) at or after each `at`; `beyond` where none is."""
    k = np.searchsorted(positions, at)
    return np.append(positions, beyond)[k]


def _ok(mask: Bools, *conditions: Bools) -> Bools:
    for c in conditions:
        mask &= c
    return mask


class Parsed(NamedTuple):
    """What `parse_lines` found in a block of lines (line indices count from its first)."""

    frames: FrameChunk  # the data frames of the regular lines
    lines: I64  # the line index of each of them
    errors: int  # error frames among the regular lines
    remotes: int  # remote frames among the regular lines
    slow: list[tuple[int, bytes]]  # the other non-empty lines: (line number, bytes)


class _Text:
    """A block of whole lines as bytes between zero padding; positions count the padding."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.a = np.frombuffer(bytes(_LEFT) + text + bytes(_RIGHT), np.uint8)
        self.body = self.a[_LEFT : _LEFT + len(text)]
        self.last = len(self.a) - 1

    def find(self, byte: int) -> I64:
        """Positions of `byte` in the text, in order."""
        return np.flatnonzero(self.body == byte) + _LEFT

    def at(self, positions: I64) -> U8:
        return self.a[np.minimum(positions, self.last)]


class _Layout(NamedTuple):
    starts: I64
    stops: I64  # where each line's text ends (before \r\n, \n or \r)
    filled: Bools  # not empty
    regular: Bools  # printable ASCII in three or four fields split by single spaces
    space1: I64
    space2: I64
    frame_end: I64


def _layout(t: _Text) -> _Layout:
    """Lines as text mode reads them (\n, \r\n or a lone \r end one), and their fields."""
    a, body = t.a, t.body
    newline = body == 10
    if b"\r" in t.text:
        lone_cr = (body == 13) & ~np.append(newline[1:], False)
        ends = np.flatnonzero(newline | lone_cr) + _LEFT
    else:
        ends = np.flatnonzero(newline) + _LEFT
    starts = np.empty(len(ends), np.int64)
    starts[:1] = _LEFT
    starts[1:] = ends[:-1] + 1
    crlf = (a[ends] == 10) & (a[ends - 1] == 13) & (ends > starts)
    stops = ends - crlf
    filled = stops > starts
    # bytes other than printable ASCII and the space send their line to python-can
    odd = np.flatnonzero((body - np.uint8(0x20)) > np.uint8(0x5E)) + _LEFT
    odd_line = np.searchsorted(ends, odd)
    plain = filled.copy()
    plain[odd_line[odd < stops[odd_line]]] = False
    # three fields split by single spaces, or four when the fourth is R or T
    spaces = t.find(32)
    k0 = np.searchsorted(spaces, starts)
    count = np.searchsorted(spaces, stops) - k0
    padded = np.append(spaces, np.full(3, t.last, np.int64))
    s1, s2, s3 = padded[k0], padded[k0 + 1], padded[k0 + 2]
    four = count == 3
    frame_end = np.where(four, s3, stops)
    direction = t.at(s3 + 1) | np.uint8(0x20)
    regular = _ok(
        plain & ((count == 2) | four),
        s1 > starts,
        s2 > s1 + 1,
        frame_end > s2 + 1,
        ~four | ((stops == s3 + 2) & ((direction == ord("r")) | (direction == ord("t")))),
    )
    return _Layout(starts, stops, filled, regular, s1, s2, frame_end)


def _timestamps(t: _Text, starts: I64, s1: I64) -> tuple[I64, Bools]:
    """`(integer.fraction)` in microseconds, as python-can's float() and rounding give."""
    a = t.a
    dot = _first_after(t.find(46), starts, t.last)
    int_digits = dot - starts - 1
    frac_digits = s1 - 2 - dot
    good = _ok(
        (a[starts] == ord("(")) & (a[s1 - 1] == ord(")")),
        int_digits >= 1,
        int_digits <= 12,
        frac_digits >= 1,
        frac_digits <= 9,
        int_digits + frac_digits <= 16,  # no overflow below
    )
    whole, good_i = _digits_right(a, dot, np.clip(int_digits, 0, 16), 16)
    frac = np.clip(frac_digits, 0, 9)
    part, good_f = _digits_right(a, s1 - 1, frac, 9)
    mantissa = whole * (10 ** frac.astype(np.int64)) + part
    good = _ok(good, good_i, good_f, mantissa < _MAX_EXACT)
    # float64 holds the mantissa and 10**frac exactly, so one division rounds as float()
    seconds = mantissa.astype(np.float64) / _POW10[frac]
    good &= seconds < MAX_SECONDS
    with np.errstate(invalid="ignore"):  # lines already sent to python-can
        stamps = np.rint(np.where(good, seconds, 0.0) * 1e6).astype(np.int64)
    return stamps, good


def _channels(t: _Text, s1: I64, s2: I64) -> tuple[I64, Bools]:
    """The interface as python-can's channel: a number when all digits (clipped), else -1."""
    iface = s2 - s1 - 1
    channel = np.full(len(s1), -1, np.int64)
    good = np.ones(len(s1), np.bool_)
    maybe = np.flatnonzero((t.at(s1 + 1) - np.uint8(48)) <= 9)  # starts with a digit
    if not len(maybe):
        return channel, good
    head = _window(t.a, s1[maybe] + 1, 9) - np.uint8(48)
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


def _frame_fields(t: _Text, s2: I64, frame_end: I64) -> _Fields:
    """`id#data`, `id##<flags>data` and `id#R<length>`."""
    a = t.a
    mark = _first_after(t.find(35), s2, t.last)
    id_digits = mark - s2 - 1
    good = _ok(mark < frame_end, id_digits >= 1, id_digits <= 8)
    nibbles = _HEX[_window(a, mark - 8, 8)]
    used = np.arange(8) >= (8 - np.clip(id_digits, 0, 8))[:, None]
    good &= np.all((nibbles < 16) | ~used, axis=1)
    can_id = np.where(used, nibbles, 0).astype(np.int64) @ _POW16_8
    fd = t.at(mark + 1) == ord("#")
    good &= ~fd | ((mark + 2 < frame_end) & ((t.at(mark + 2) - np.uint8(48)) <= 9))
    data_at = np.where(fd, mark + 3, mark + 1)
    remote = (data_at < frame_end) & ((t.at(data_at) | np.uint8(0x20)) == ord("r"))
    chars = frame_end - data_at
    if bool(np.any(remote)):  # R, then an optional decimal length
        _, digits_ok = _digits_right(a, frame_end, np.clip(chars - 1, 0, 9), 9)
        good &= ~remote | (digits_ok & (chars <= 10))
    good &= remote | ((chars % 2 == 0) & (chars <= 128))
    width = 64 if bool(np.any(good & ~remote & (chars > 16))) else 8
    nib = _HEX[_window(a, data_at, 2 * width)]
    used = np.arange(2 * width) < np.where(remote, 0, chars)[:, None]
    good &= np.all((nib < 16) | ~used, axis=1)
    nib = np.where(used, nib, 0)
    data = ((nib[:, 0::2] << 4) | nib[:, 1::2]).astype(np.uint8)
    return _Fields(can_id, id_digits > 3, remote, chars // 2, data, good)


def parse_lines(text: bytes, first_line: int) -> Parsed:
    """The lines of `text` (whole lines: the last ends with its line break)."""
    t = _Text(text)
    lay = _layout(t)
    rows = np.flatnonzero(lay.regular)
    s1, s2 = lay.space1[rows], lay.space2[rows]
    stamps, good = _timestamps(t, lay.starts[rows], s1)
    channel, good_channel = _channels(t, s1, s2)
    f = _frame_fields(t, s2, lay.frame_end[rows])
    good = _ok(good, good_channel, f.good)
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
    slow_rows = np.flatnonzero(lay.filled & ~lay.regular)
    slow_rows = np.union1d(slow_rows, rows[~good])
    slow = [
        (first_line + int(i), text[lay.starts[i] - _LEFT : lay.stops[i] - _LEFT]) for i in slow_rows
    ]
    errors = int(np.count_nonzero(error))
    remotes = int(np.count_nonzero(good & f.remote & ~error))
    return Parsed(chunk, rows[frames], errors, remotes, slow)


class CanutilsReader:
    """Frame chunks from a candump .log (or .log.gz); malformed lines are counted in
    `counts.malformed_lines` (the first few in `counts.malformed`) and skipped."""

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._block = block_bytes
        self._size = max(1, self.path.stat().st_size)
        self._raw: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        self._file: BinaryIO = (
            gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
            if self.path.suffix.lower() == ".gz"
            else self._raw
        )
        self._line = 1  # number of the next line to parse
        self._encoding = locale.getpreferredencoding(False)  # python-can's text mode

    @property
    def progress(self) -> float:
        try:
            return min(1.0, self._raw.tell() / self._size)
        except (OSError, ValueError):
            return 1.0

    @property
    def position(self) -> str:
        return f"line {self._line}"

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()

    def chunks(self) -> Iterator[FrameChunk]:
        tail = b""
        skipping = False  # inside a line too long to keep
        try:
            while True:
                block = self._file.read(self._block)
                if not block:
                    break
                text = tail + block
                if skipping:  # drop the rest of the long line
                    end = _first_break(text)
                    if not end:
                        tail = b""
                        continue
                    text, skipping = text[end:], False
                    self._line += 1
                cut = _last_break(text)
                if cut:
                    chunk = self._parse(text[:cut])
                    if len(chunk):
                        yield chunk
                tail = text[cut:]
                if len(tail) > MAX_LINE_BYTES:
                    self._malformed(self._line, f"longer than {MAX_LINE_BYTES} bytes")
                    tail, skipping = b"", True
            if tail:
                chunk = self._parse(tail + b"\n")
                if len(chunk):
                    yield chunk
        finally:
            self.close()

    def _parse(self, text: bytes) -> FrameChunk:
        first = self._line
        chunk, index, errors, remotes, slow = parse_lines(text, first)
        self._line += text.count(b"\n") + _lone_cr(text)
        self.counts.error_frames += errors
        self.counts.remote_frames += remotes
        if not slow:
            return chunk
        extra: list[FrameChunk] = []
        at: list[int] = []
        for number, raw in slow:
            messages = self._python_can(number, raw)
            kept = [m for m in messages if not m.is_error_frame and not m.is_remote_frame]
            self.counts.error_frames += sum(1 for m in messages if m.is_error_frame)
            self.counts.remote_frames += sum(
                1 for m in messages if m.is_remote_frame and not m.is_error_frame
            )
            if kept:
                extra.append(pack_messages(kept))
                at.extend([number - first] * len(kept))
        if not extra:
            return chunk
        merged = concat_chunks([chunk, *extra])
        lines = np.concatenate([index, np.asarray(at, np.int64)])
        return merged.take(np.argsort(lines, kind="stable"))

    def _python_can(self, number: int, raw: bytes) -> list[Any]:
        from can.io.canutils import CanutilsLogReader

        try:
            line = raw.decode(self._encoding)
        except UnicodeDecodeError as exc:
            self._malformed(number, f"not {self._encoding} text ({exc.reason})")
            return []
        try:
            messages = list(CanutilsLogReader(io.StringIO(line + "\n")))
        except Exception as exc:  # what python-can raises on a line it cannot read
            self._malformed(number, f"{type(exc).__name__}: {exc}")
            return []
        for m in messages:
            if not abs(m.timestamp) < MAX_SECONDS:  # nan, inf, or beyond the column
                self._malformed(number, f"timestamp {m.timestamp} out of range")
                return []
        return messages

    def _malformed(self, number: int, reason: str) -> None:
        self.counts.malformed_line(number, reason)


def _last_break(text: bytes) -> int:
    """Where the text after the last whole line starts (0: no line ends in `text`); a \r as
    the last byte may be half of a \r\n, so it waits for the next block."""
    return max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1)) + 1


def _first_break(text: bytes) -> int:
    """Where the text after the first line break starts (0: none in `text`)."""
    newline, cr = text.find(b"\n"), text.find(b"\r")
    if cr >= 0 and (newline < 0 or cr < newline):
        return cr + 1 if text[cr + 1 : cr + 2] != b"\n" else cr + 2
    return newline + 1


def _lone_cr(text: bytes) -> int:
    """Line breaks that are a \r without a \n after it."""
    if b"\r" not in text:
        return 0
    return text.count(b"\r") - text.count(b"\r\n")
