"""Text captures read a block of whole lines at a time and parsed as numpy arrays of bytes.

The candump, ASC and CSV readers share this: the loop that cuts a file (or its gzip stream)
into blocks of whole lines, counts line numbers across blocks and bounds the length of a line,
the array helpers that find lines, fields and numbers in a block at once, and the slow path:
a line outside the fast path's shape read by python-can's own reader, its data frames put
back among the fast path's in line order; and the bound on junk (MAX_JUNK_LINES), counted
line by line in file order across both paths. What a line means is each reader's own
business (`TextCaptureReader._parse`). A `.gz` is inflated by `GzipStream`: a cut or corrupt
stream gives every whole line before the damage, then a CaptureError naming it.
"""

from __future__ import annotations

import locale
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.capture_file import GzipDamage, GzipStream, open_regular
from hwbridge.can.io.frame_checks import (
    MAX_DATA,
    MAX_LINE_BYTES,
    MAX_SECONDS,
    frame_fault,
    message_fault,
)
from hwbridge.can.io.frames import (
    MAX_MALFORMED,
    CaptureError,
    FrameChunk,
    ReaderCounts,
    concat_chunks,
)
from hwbridge.can.io.pycan import pack_messages

__all__ = [
    "BLOCK_BYTES",
    "MAX_DATA",
    "MAX_FRAME_LINE_BYTES",
    "MAX_JUNK_BYTES",
    "MAX_JUNK_LINES",
    "MAX_LINE_BYTES",
    "MAX_SECONDS",
    "Parsed",
    "Text",
    "TextCaptureReader",
    "in_line_order",
    "out_of_range",
    "unfit",
]

BLOCK_BYTES = 1024 * 1024
"""Bytes of text parsed at once (about 21,000 candump lines, 16,000 ASC lines): the arrays
of a block are tens of times its size, and larger blocks gain little speed."""
MAX_JUNK_LINES = 10_000
"""Lines that gave no frame (malformed ones, and ones read one at a time for nothing) a text
capture may have before it is refused, once they also outnumber its frames: a file of junk
costs the work of at most this many such lines more than its frames, whatever its size (a
gzip bomb of 32 KB inflates to 32 MiB of lines). A real capture has a few, if any."""
MAX_FRAME_LINE_BYTES = 4096
"""The longest line that can be a frame in any of these formats (a CAN FD frame in ASC, its
name and every field included, is a few hundred bytes): a longer one is malformed without
python-can reading it (a line of a megabyte cost python-can 70 ms)."""
MAX_JUNK_BYTES = 16 * 1024 * 1024
"""Bytes of lines python-can read one at a time for no frame a text capture may have: past
them it is refused, however many frames it has (junk lines between frames cost python-can's
reading, about 15 MB/s: this bounds that work to about a second)."""
# MAX_LINE_BYTES (a longer line, e.g. of a binary file named .log, is reported, not buffered
# whole), MAX_SECONDS and MAX_DATA are frame_checks' bounds, the same for every reader.

LEFT = 16  # zero bytes before the text: windows ending near its start stay inside
RIGHT = 192  # and after it: a window of 128 hex digits starting near its end
MAX_EXACT = 2**53  # decimal mantissas float64 holds exactly

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]

HEX = np.full(256, 255, np.uint8)
"""The value of each byte as a digit (0-9, a-f, A-F), 255 for any other byte."""
for _i, _c in enumerate(b"0123456789"):
    HEX[_c] = _i
for _i, _c in enumerate(b"abcdef"):
    HEX[_c] = 10 + _i
    HEX[_c - 32] = 10 + _i
_POW10 = 10.0 ** np.arange(10)


def window(a: U8, at: npt.NDArray[np.integer], width: int) -> U8:
    """`width` bytes from each offset in `at` (clipped into `a`), as an (*at.shape, width) array."""
    at = np.clip(at, 0, len(a) - width)
    # one gather per column: numpy gathers rows of a sliding window view several times slower
    return np.stack([a.take(at + j) for j in range(width)], axis=-1)


def number_right(
    a: U8, end: npt.NDArray[np.integer], count: npt.NDArray[np.integer], width: int, base: int
) -> tuple[I64, Bools]:
    """The number in base `base` written in the `count` bytes before each `end`, and whether
    there are 1 to `width` of them and all are digits of that base."""
    if np.size(count):  # no wider than the longest: most numbers are short
        width = max(1, min(width, int(np.max(count))))
    at = np.clip(end - width, 0, len(a) - width)
    skip = width - count  # leading bytes of the window that are not the number's
    bad = (count < 1) | (count > width)
    value = np.zeros(np.shape(end), np.int64)
    for j in range(width):
        digit = HEX.take(a.take(at + j))
        used = skip <= j
        bad |= used & (digit >= base)
        value = np.where(used, value * base + digit, value)
    return value, ~bad


def first_after(positions: I64, at: I64, beyond: int) -> I64:
    """The first of `positions` (sorted) at or after each `at`; `beyond` where none is."""
    k = np.searchsorted(positions, at)
    return np.append(positions, beyond)[k]


def all_of(mask: Bools, *conditions: Bools) -> Bools:
    for c in conditions:
        mask &= c
    return mask


class Text:
    """A block of whole lines as bytes between zero padding; positions count the padding."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.a = np.frombuffer(bytes(LEFT) + text + bytes(RIGHT), np.uint8)
        self.body = self.a[LEFT : LEFT + len(text)]
        self.last = len(self.a) - 1

    def find(self, byte: int) -> I64:
        """Positions of `byte` in the text, in order."""
        return np.flatnonzero(self.body == byte) + LEFT

    def at(self, positions: npt.NDArray[np.integer]) -> U8:
        found: U8 = self.a[np.minimum(positions, self.last)]
        return found

    def lines(self) -> tuple[I64, I64, I64]:
        """(starts, stops, ends) of the lines as text mode reads them (\\n, \\r\\n or a lone
        \\r ends one): `stops` is where the text of each ends, `ends` its last byte."""
        a, body = self.a, self.body
        newline = body == 10
        if b"\r" in self.text:
            lone_cr = (body == 13) & ~np.append(newline[1:], False)
            ends = np.flatnonzero(newline | lone_cr) + LEFT
        else:
            ends = np.flatnonzero(newline) + LEFT
        starts = np.empty(len(ends), np.int64)
        starts[:1] = LEFT
        starts[1:] = ends[:-1] + 1
        crlf = (a[ends] == 10) & (a[ends - 1] == 13) & (ends > starts)
        return starts, ends - crlf, ends

    def plain(self, starts: I64, stops: I64, ends: I64, tabs: bool) -> Bools:
        """Non-empty lines of printable ASCII and spaces only (and tabs, if `tabs`)."""
        body = self.body
        odd_bytes = (body - np.uint8(0x20)) > np.uint8(0x5E)
        if tabs:
            odd_bytes &= body != 9
        odd = np.flatnonzero(odd_bytes) + LEFT
        odd_line = np.searchsorted(ends, odd)
        plain = stops > starts
        plain[odd_line[odd < stops[odd_line]]] = False
        return plain

    def decimal_seconds(self, start: I64, stop: I64) -> tuple[npt.NDArray[np.float64], Bools]:
        """`digits.digits` between each `start` and `stop` as float() reads it, and whether it
        is that shape with at most 12 + 9 digits (others are left to the slow path)."""
        a = self.a
        dot = first_after(self.find(46), start, self.last)
        int_digits = dot - start
        frac_digits = stop - dot - 1
        good = all_of(
            dot < stop,
            int_digits >= 1,
            int_digits <= 12,
            frac_digits >= 1,
            frac_digits <= 9,
            int_digits + frac_digits <= 16,  # no overflow below
        )
        whole, good_i = number_right(a, dot, np.clip(int_digits, 0, 12), 12, 10)
        frac = np.clip(frac_digits, 1, 9)
        part, good_f = number_right(a, stop, frac, 9, 10)
        mantissa = whole * (10 ** frac.astype(np.int64)) + part
        good = all_of(good, good_i, good_f, mantissa < MAX_EXACT)
        # float64 holds the mantissa and 10**frac exactly, so one division rounds as float()
        seconds = np.where(good, mantissa, 0).astype(np.float64) / _POW10[frac]
        return seconds, good

    def tokens(self, space: bytes = b" \t\r\n") -> tuple[I64, I64]:
        """(starts, ends) of the runs of bytes other than those of `space`."""
        body = self.body
        if space == b" \t\r\n":
            word = ~((body == 32) | (body == 9) | (body == 10) | (body == 13))
        else:
            word = ~_table(space)[body]
        edge = np.diff(word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        return np.flatnonzero(edge == 1) + LEFT, np.flatnonzero(edge == -1) + LEFT

    def beyond_ascii(self, starts: I64, ends: I64) -> Bools:
        """Lines with a byte above 0x7F (text beyond ASCII, or no text at all)."""
        high = np.flatnonzero(self.body >= 0x80) + LEFT
        found = np.zeros(len(starts), np.bool_)
        if len(high):
            found[np.unique(np.searchsorted(ends, high))] = True
        return found

    def lead(self, starts: I64, stops: I64) -> I64:
        """Where each line's text starts once str.strip() took its leading ASCII whitespace
        (at or past its stop: a blank line)."""
        kept = np.flatnonzero(~_table(STRIPPED)[self.body]) + LEFT
        return np.minimum(first_after(kept, starts, self.last), stops)


STRIPPED = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
"""The ASCII bytes str.strip() and str.split() take for whitespace."""


def _table(chars: bytes) -> Bools:
    table = np.zeros(256, np.bool_)
    table[list(chars)] = True
    return table


def undecodable(t: Text, starts: I64, ends: I64, rows: I64, encoding: str) -> I64:
    """Those of the lines `rows` that are not text in `encoding` (python-can's text mode stops
    at them): one decode of them all, and one per line only when that fails."""
    if not len(rows):
        return rows
    edges = np.zeros(len(t.a) + 1, np.int8)
    edges[starts[rows]] += 1
    edges[ends[rows] + 1] -= 1
    try:  # each with its line break: no multi-byte sequence runs from one into the next
        t.a[np.cumsum(edges[:-1]) > 0].tobytes().decode(encoding)
        return rows[:0]
    except UnicodeDecodeError:
        pass
    text = t.text
    bad = []
    for row, start, stop in zip(
        rows.tolist(), starts[rows].tolist(), ends[rows].tolist(), strict=True
    ):
        try:
            text[start - LEFT : stop + 1 - LEFT].decode(encoding)
        except UnicodeDecodeError:
            bad.append(row)
    return np.asarray(bad, np.int64)


class Parsed(NamedTuple):
    """What a reader's fast path found in a block of lines (line indices count from its
    first)."""

    frames: FrameChunk  # the data frames of the regular lines
    lines: I64  # the line index of each of them
    error_lines: I64  # the lines of error frames among the regular lines
    remote_lines: I64  # the lines of remote frames among the regular lines
    bad: I64  # lines that cannot be a frame of the format: python-can raises on them
    named: list[bytes]  # the bytes of the first MAX_MALFORMED of `bad` (to name them)
    slow: list[tuple[int, bytes]]  # the other non-empty lines: (line index, bytes)


Report = Callable[[int, str], None]
"""Where a malformed line goes: (line number, reason)."""
Read = Callable[[str], Iterable[Any]]
"""python-can's reader over one line of text: the messages it reads."""
ReadOne = Callable[[int, bytes], list[Any] | None]
"""A line read one at a time, (its number, its bytes): its data frames (its error and remote
frames counted), or None when it is malformed (and reported)."""


def out_of_range(message: Any) -> str | None:
    """Why a python-can message's timestamp has no place in the microsecond column (nan,
    inf, beyond MAX_SECONDS), or None."""
    return frame_fault(message.timestamp, 0, 0)


unfit = message_fault
"""Why a python-can message read from a line has no place in the frame columns (None: it
has one); such a line is malformed. The check every reader applies (frame_checks)."""


def in_line_order(
    chunk: FrameChunk, lines: I64, messages: Sequence[Any], message_lines: Sequence[int]
) -> FrameChunk:
    """The fast path's `chunk` (its frames from the line indices `lines`) and python-can's
    data frames `messages` (from `message_lines`) as one chunk, in the order of the lines."""
    if not messages:
        return chunk
    merged = concat_chunks([chunk, pack_messages(messages)])
    order = np.concatenate([lines, np.asarray(message_lines, np.int64)])
    return merged.take(np.argsort(order, kind="stable"))


def microseconds(seconds: npt.NDArray[np.float64]) -> I64:
    """Seconds as the microsecond column holds them (python-can's float, times 1e6, rounded)."""
    with np.errstate(invalid="ignore"):
        return np.rint(seconds * 1e6).astype(np.int64)


def python_cans_reason(line: str, read: Read) -> str:
    """What python-can's `read` raises on `line` (a line judged malformed without it)."""
    try:
        list(read(line))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "not a frame"  # never: the lines judged so make python-can raise


class TextCaptureReader:
    """Frame chunks from a text capture (or its .gz), a block of whole lines at a time;
    malformed lines are counted in `counts.malformed_lines` (the first few in
    `counts.malformed`) and skipped. Subclasses parse a block in `_parse`.

    Junk is bounded: once MAX_JUNK_LINES lines gave no frame (malformed lines, and lines read
    one at a time for nothing) and they outnumber the frames read, or python-can read more
    than MAX_JUNK_BYTES of lines for no frame, the capture is refused at that line with a
    CaptureError (`NAME`: "not a candump log"), its frames before read. A line longer than
    MAX_FRAME_LINE_BYTES is malformed without python-can reading it."""

    NAME = "a text capture"

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._block = block_bytes
        self._raw: BinaryIO = open_regular(self.path)  # closed in close()
        self._size = max(1, os.fstat(self._raw.fileno()).st_size)
        self._file: BinaryIO | GzipStream = (
            GzipStream(self._raw) if self.path.suffix.lower() == ".gz" else self._raw
        )
        self._line = 1  # number of the next line to parse
        self._encoding = locale.getpreferredencoding(False)  # python-can's text mode
        self._frames = 0  # frames read: data, error and remote
        self._junk = 0  # lines that gave no frame: malformed, or read one at a time for nothing
        self._idle = 0  # of those, the ones read for nothing
        self._junk_bytes = 0  # bytes of the lines python-can read for no frame
        self._refused: CaptureError | None = None
        self._damage: GzipDamage | None = None

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
            while self._refused is None:
                block = self._read_block()
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
                    chunk = self._lines(text[:cut])
                    if len(chunk):
                        yield chunk
                tail = text[cut:]
                if len(tail) > MAX_LINE_BYTES:
                    self._malformed(self._line, f"longer than {MAX_LINE_BYTES} bytes")
                    self._junk += 1
                    tail, skipping = b"", True
            if tail and self._refused is None and self._damage is None:
                chunk = self._lines(tail + b"\n")
                if len(chunk):
                    yield chunk
            if self._refused is not None:
                raise self._refused
            if self._damage is not None:
                raise self._cut(self._damage, len(tail) or skipping)
        finally:
            self.close()

    def _read_block(self) -> bytes:
        """The next block of the file (or of its gzip stream, as far as it goes)."""
        try:
            return self._file.read(self._block)
        except GzipDamage as exc:
            self._damage = exc
            return b""

    def _cut(self, damage: GzipDamage, partial: int) -> CaptureError:
        """The error for a gzip stream cut short or corrupt: where, and what was dropped."""
        dropped = f"; the start of line {self._line} before it was dropped" if partial else ""
        return CaptureError(
            self.path,
            f"line {self._line}, text byte {damage.inflated_bytes}, "
            f"file byte {damage.compressed_byte}",
            f"{damage.reason}{dropped}",
        )

    def _lines(self, text: bytes) -> FrameChunk:
        chunk = self._parse(text, self._line)
        self._line += text.count(b"\n") + _lone_cr(text)
        return chunk

    def _parse(self, text: bytes, first_line: int) -> FrameChunk:
        """The data frames of `text` (whole lines, the first numbered `first_line`)."""
        raise NotImplementedError

    def _malformed(self, number: int, reason: str) -> None:
        self.counts.malformed_line(number, reason)

    def _decode(self, number: int, raw: bytes, report: Report | None = None) -> str | None:
        """A line as python-can's text mode reads it; None (and reported: counted, unless
        `report` says otherwise) if it cannot."""
        try:
            return raw.decode(self._encoding)
        except UnicodeDecodeError as exc:
            (report or self._malformed)(number, f"not {self._encoding} text ({exc.reason})")
            return None

    def _read_line(
        self,
        number: int,
        line: str,
        read: Read,
        *,
        check: Callable[[Any], str | None] = unfit,
        report: Report | None = None,
    ) -> list[Any] | None:
        """The data frames python-can's `read` finds in one line, its error and remote
        frames counted; None, and the line reported (counted, unless `report` says
        otherwise), when python-can raises on it or `check` finds a frame no column holds."""
        report = report or self._malformed
        try:
            messages = list(read(line))
        except Exception as exc:  # what python-can raises on a line it cannot read
            report(number, f"{type(exc).__name__}: {exc}")
            return None
        for m in messages:
            if reason := check(m):
                report(number, reason)
                return None
        kept = []
        for m in messages:
            if m.is_error_frame:
                self.counts.error_frames += 1
            elif m.is_remote_frame:
                self.counts.remote_frames += 1
            else:
                kept.append(m)
        return kept

    def _with_slow_lines(
        self,
        parsed: Parsed,
        first_line: int,
        read: Read,
        *,
        check: Callable[[Any], str | None] = unfit,
    ) -> FrameChunk:
        """The fast path's frames of a block whose first line is `first_line`, its error
        and remote frames counted, with the data frames python-can's `read` finds in the
        block's other lines, in line order (up to the line where junk ends the capture)."""

        def read_one(number: int, raw: bytes) -> list[Any] | None:
            line = self._decode(number, raw)
            return None if line is None else self._read_line(number, line, read, check=check)

        def name(k: int) -> str:
            line = parsed.named[k].decode("ascii", "replace")
            return python_cans_reason(line, read)

        frame_lines = np.sort(
            np.concatenate([parsed.lines, parsed.error_lines, parsed.remote_lines])
        )
        stop, messages, at = self._in_order(
            first_line, parsed.slow, read_one, frame_lines=frame_lines, bad=parsed.bad, name=name
        )
        chunk, lines = parsed.frames, parsed.lines
        errors, remotes = parsed.error_lines, parsed.remote_lines
        if stop is not None:
            keep = lines < stop
            chunk, lines = chunk.take(keep), lines[keep]
            errors, remotes = errors[errors < stop], remotes[remotes < stop]
        self.counts.error_frames += len(errors)
        self.counts.remote_frames += len(remotes)
        return in_line_order(chunk, lines, messages, at)

    # -- the lines of a block in order, junk bounded ----------------------------------------

    def _in_order(
        self,
        first_line: int,
        slow: Sequence[tuple[int, bytes]],
        read_one: ReadOne,
        *,
        frame_lines: I64,
        bad: I64,
        name: Callable[[int], str],
    ) -> tuple[int | None, list[Any], list[int]]:
        """The lines of a block in order: the fast path's frames (`frame_lines`, sorted) and
        malformed lines (`bad`, sorted; `name(k)` the reason of the k-th of them) counted
        between the `slow` lines, each read by `read_one`. Returns (the index of the first
        line not read, when junk ends the capture there, else None; the data frames of the
        slow lines; their line indices)."""
        messages: list[Any] = []
        at: list[int] = []
        where = np.asarray([index for index, _ in slow], np.int64)
        f_cut = np.searchsorted(frame_lines, where).tolist()
        b_cut = np.searchsorted(bad, where).tolist()
        f0 = b0 = 0
        for j, (index, raw) in enumerate(slow):
            stop = self._span(
                frame_lines[f0 : f_cut[j]], bad, b0, b_cut[j], first_line=first_line, name=name
            )
            if stop is not None:
                return stop, messages, at
            f0, b0 = f_cut[j], b_cut[j]
            others = self.counts.error_frames + self.counts.remote_frames
            if len(raw) > MAX_FRAME_LINE_BYTES:  # no frame is this long: python-can not asked
                self._malformed(first_line + index, f"{len(raw)} bytes, longer than any frame")
                kept = None
            else:
                kept = read_one(first_line + index, raw)
                if not kept:
                    self._junk_bytes += len(raw)
            others = self.counts.error_frames + self.counts.remote_frames - others
            if kept is None:
                self._junk += 1
            elif kept or others:
                self._frames += len(kept) + others
                messages += kept
                at += [index] * len(kept)
            else:  # read one at a time for nothing
                self._junk += 1
                self._idle += 1
            if self._over():
                self._refuse(first_line + index)
                return index + 1, messages, at
        stop = self._span(frame_lines[f0:], bad, b0, len(bad), first_line=first_line, name=name)
        return stop, messages, at

    def _span(
        self,
        frame_lines: I64,
        bad: I64,
        b0: int,
        b1: int,
        *,
        first_line: int,
        name: Callable[[int], str],
    ) -> int | None:
        """Counts the fast path's lines between two slow ones: the frames at `frame_lines`,
        the malformed lines `bad[b0:b1]`. The index of the line after the one where junk ends
        the capture, if it does in this span (only what comes before is counted)."""
        count = b1 - b0
        stop = None
        if count and self._junk + count >= MAX_JUNK_LINES and self._junk + count > self._frames:
            span = bad[b0:b1]
            junk = self._junk + np.arange(1, count + 1)
            frames = self._frames + np.searchsorted(frame_lines, span)
            over = np.flatnonzero((junk >= MAX_JUNK_LINES) & (junk > frames))
            if len(over):
                count = int(over[0]) + 1
                stop = int(span[count - 1]) + 1
                frame_lines = frame_lines[frame_lines < stop]
        # the first few of a capture are named (while notes are left, these are among the
        # block's first MAX_MALFORMED, whose bytes `name` has)
        named = max(0, min(count, MAX_MALFORMED - len(self.counts.malformed)))
        for k in range(b0, b0 + named):
            self._malformed(first_line + int(bad[k]), name(k))
        self.counts.malformed_lines += count - named
        self._junk += count
        self._frames += len(frame_lines)
        if stop is not None:
            self._refuse(first_line + stop - 1)
        return stop

    def _over(self) -> bool:
        lines = self._junk >= MAX_JUNK_LINES and self._junk > self._frames
        return lines or self._junk_bytes > MAX_JUNK_BYTES

    def _refuse(self, number: int) -> None:
        """Junk ends the capture at line `number`."""
        junk, idle, frames = self._junk, self._idle, self._frames
        what = (
            f"{junk} malformed lines"
            if not idle
            else f"{junk} lines without a frame ({junk - idle} malformed)"
        )
        against = "and no frame" if not frames else f"more than the {frames} frames before them"
        if self._junk_bytes > MAX_JUNK_BYTES:
            what, against = f"{self._junk_bytes} bytes of lines without a frame", "in between"
        self._refused = CaptureError(
            self.path, f"line {number}", f"not {self.NAME}: {what} {against}"
        )


def _last_break(text: bytes) -> int:
    """Where the text after the last whole line starts (0: no line ends in `text`); a \\r as
    the last byte may be half of a \\r\\n, so it waits for the next block."""
    return max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1)) + 1


def _first_break(text: bytes) -> int:
    """Where the text after the first line break starts (0: none in `text`)."""
    newline, cr = text.find(b"\n"), text.find(b"\r")
    if cr >= 0 and (newline < 0 or cr < newline):
        return cr + 1 if text[cr + 1 : cr + 2] != b"\n" else cr + 2
    return newline + 1


def next_line(text: bytes, at: int) -> tuple[bytes, int]:
    """The line starting at `at` of whole lines `text` (without its break), and where the
    next one starts. Linear: a \\r is looked for only up to the next \\n."""
    newline = text.find(b"\n", at)
    cr = text.find(b"\r", at, newline if newline >= 0 else len(text))
    if cr >= 0:
        return text[at:cr], cr + (2 if text[cr + 1 : cr + 2] == b"\n" else 1)
    if newline < 0:
        return text[at:], len(text)
    return text[at:newline], newline + 1


def _lone_cr(text: bytes) -> int:
    """Line breaks that are a \\r without a \\n after it."""
    if b"\r" not in text:
        return 0
    return text.count(b"\r") - text.count(b"\r\n")
