"""Vector ASC captures (CANoe, CANalyzer and python-can's `ASCWriter`) read into frame
columns with numpy.

An ASC file starts with a header (`date ...`, `base hex|dec  timestamps absolute|relative`,
comments, `internal events logged`), read here line by line as python-can's `ASCReader`
reads it, the line that ends it included. The body is read a block of bytes at a time; in
a block the whitespace-separated tokens of every line are found at once, and the lines of
the two shapes nearly every frame has are parsed from those token positions:

    <seconds> <channel> <id>[x] Rx|Tx d <dlc> <byte> ...            (classic CAN)
    <seconds> CANFD <channel> <dir> <id>[x] [<name>] <brs> <esi> <dlc> <length> <byte> ...

in the file's base (ids, DLCs and bytes hex or decimal), times relative to the latest
`Begin Triggerblock <date>` (or the header's date), as python-can's absolute timestamps are.
Any other line that may mean something (error and remote frames, trigger blocks, events,
lines with other characters or number spellings) goes through python-can's own reader, one
line at a time, so every line gives what python-can gives; a line python-can cannot read is
counted with its line number and skipped, where python-can stops with an exception (so is a
frame no column holds: a timestamp beyond `MAX_SECONDS`, an id outside 32 bits, more than
64 data bytes). Lines that cannot be a frame (comments, `End TriggerBlock`) are skipped as
python-can skips them.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.frames import FrameChunk, concat_chunks
from hwbridge.can.io.text_blocks import (
    BLOCK_BYTES,
    HEX,
    I64,
    LEFT,
    MAX_DATA,
    MAX_SECONDS,
    U8,
    Bools,
    Text,
    TextCaptureReader,
    all_of,
    in_line_order,
    microseconds,
    next_line,
    number_right,
)

__all__ = ["AscReader", "Block", "parse_block"]

# python-can's own patterns (can.io.asc), so a line means here what it means there
_DATE = re.compile(r"date\s+\w+\s+(?P<datetime_string>.+)", re.IGNORECASE)
_BASE = re.compile(
    r"base\s+(?P<base>hex|dec)(?:\s+timestamps\s+(?P<timestamp_format>absolute|relative))?",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"//.*")
_TRIGGER = re.compile(r"begin\s+triggerblock\s+\w+\s+(?P<datetime_string>.+)", re.IGNORECASE)
_MESSAGE = re.compile(
    r"\d+\.\d+\s+(\d+\s+(\w+\s+(Tx|Rx)|ErrorFrame)|CANFD)", re.ASCII | re.IGNORECASE
)

_DLC2LEN = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64, 64], np.int64)
F64 = npt.NDArray[np.float64]


class Block(NamedTuple):
    """What `parse_block` found in a block of lines (line indices count from its first)."""

    lines: I64  # the line index of each regular data frame
    seconds: F64  # its time relative to the trigger block, as float() reads it
    arbitration_id: I64
    extended: Bools
    length: I64
    data: U8
    channel: I64
    slow: list[tuple[int, bytes]]  # lines python-can reads: (line index, bytes)


class _ByteTokens(NamedTuple):
    """Every token of a block read as a data byte (2 hex or 3 decimal digits at most)."""

    value: U8
    bad_before: npt.NDArray[np.int32]  # tokens before each that are no byte (a prefix sum)


def _token_bytes(t: Text, start: I64, length: I64, base: int) -> tuple[U8, Bools]:
    """Tokens of 1-2 hex digits (or 1-3 decimal ones, at most 255) as bytes; small integer
    arithmetic, as a block holds hundreds of thousands of tokens."""
    digits = [HEX.take(t.at(start + i)) for i in range(2 if base == 16 else 3)]
    one, two = length == 1, length == 2
    high = digits[0].astype(np.uint16)
    good = (digits[0] < base) & (one | ((digits[1] < base) & (length >= 2)))
    if base == 16:
        good &= one | two
        value = np.where(two, (high << 4) | digits[1], high)
    else:
        three = length == 3
        good &= one | two | (three & (digits[2] < 10))
        tens = high * 10 + digits[1]
        value = np.where(one, high, np.where(two, tens, tens * 10 + digits[2]))
        good &= value < 256
    return value.astype(np.uint8), good


class _Tokens:
    """The tokens of the candidate lines: token `j` of each is `self.of(j)`."""

    def __init__(
        self,
        t: Text,
        first: I64,
        count: I64,
        starts: I64,
        ends: I64,
        *,
        as_bytes: dict[int, _ByteTokens] | None = None,
    ) -> None:
        self.t, self.first, self.count = t, first, count
        self.starts, self.ends = starts, ends
        self.last = max(len(starts) - 1, 0)
        self._as_bytes = {} if as_bytes is None else as_bytes  # by base, shared by subsets

    def subset(self, rows: I64) -> _Tokens:
        return _Tokens(
            self.t,
            self.first[rows],
            self.count[rows],
            self.starts,
            self.ends,
            as_bytes=self._as_bytes,
        )

    def of(self, j: I64 | int) -> tuple[I64, I64]:
        k = np.minimum(self.first + j, self.last)
        return self.starts[k], self.ends[k]

    def equals(self, j: int, word: bytes) -> Bools:
        s, e = self.of(j)
        t = self.t
        same: Bools = e - s == len(word)
        for i, c in enumerate(word):
            same &= t.at(s + i) == c
        return same

    def number(self, j: I64 | int, width: int, base: int) -> tuple[I64, Bools]:
        s, e = self.of(j)
        return number_right(self.t.a, e, e - s, width, base)

    def _bytes(self, base: int) -> _ByteTokens:
        """All tokens as data bytes at once: the data of a line is a run of them."""
        found = self._as_bytes.get(base)
        if found is None:
            s = self.starts
            value, good = _token_bytes(self.t, s, self.ends - s, base)
            bad = np.zeros(len(s) + 1, np.int32)
            np.cumsum(~good, out=bad[1:])
            found = self._as_bytes[base] = _ByteTokens(value.astype(np.uint8), bad)
        return found

    def data(self, j: I64, count: I64, base: int) -> tuple[U8, Bools]:
        """`count` bytes from token `j` on, each a number of the base below 256."""
        tokens = self._bytes(base)
        k = self.first + j
        count = np.maximum(count, 0)
        good = (
            tokens.bad_before[np.minimum(k + count, self.last + 1)]
            == tokens.bad_before[np.minimum(k, self.last + 1)]
        )
        width = max(1, int(count.max(initial=0)))
        data = np.zeros((len(count), width), np.uint8)
        for i in range(width):
            data[:, i] = np.where(i < count, tokens.value.take(np.minimum(k + i, self.last)), 0)
        return data, good


class _Frames(NamedTuple):
    rows: I64
    arbitration_id: I64
    extended: Bools
    length: I64
    data: U8
    channel: I64


def _id(tok: _Tokens, j: I64 | int, base: int) -> tuple[I64, Bools, Bools]:
    """(id, extended, good): hex or decimal digits, `x` after them for a 29-bit id."""
    s, e = tok.of(j)
    extended = (tok.t.at(e - 1) | np.uint8(0x20)) == ord("x")
    digits = e - s - extended
    value, good = number_right(tok.t.a, e - extended, digits, 8 if base == 16 else 10, base)
    return value, extended, good & (value < 2**32)


def _classic(tok: _Tokens, rows: I64, base: int) -> tuple[_Frames, Bools]:
    """`<seconds> <channel> <id> Rx|Tx d <dlc> <bytes>` (anything after the bytes ignored)."""
    t = tok.t
    s3, e3 = tok.of(3)
    first, second = t.at(s3) | np.uint8(0x20), t.at(s3 + 1) | np.uint8(0x20)
    s4, e4 = tok.of(4)
    channel, good_channel = tok.number(1, 5, 10)
    can_id, extended, good_id = _id(tok, 2, base)
    dlc, good_dlc = tok.number(5, 2, base)
    count = np.minimum(_DLC2LEN[np.minimum(dlc, 16)], 8)
    count = np.minimum(count, tok.count - 6)
    data, good_data = tok.data(np.full(len(rows), 6), count, base)
    good = all_of(
        tok.count >= 6,
        e3 - s3 == 2,  # Rx or Tx, in any case (python-can's pattern ignores case)
        (first == ord("r")) | (first == ord("t")),
        second == ord("x"),
        (e4 - s4 == 1) & ((t.at(s4) | np.uint8(0x20)) == ord("d")),
        good_channel,
        good_id,
        good_dlc,
        good_data,
    )
    return _Frames(rows, can_id, extended, count, data, channel - 1), good


def _fd(tok: _Tokens, rows: I64, base: int) -> tuple[_Frames, Bools]:
    """`<seconds> CANFD <channel> <dir> <id> [<name>] <brs> <esi> <dlc> <length> <bytes> ...`"""
    t = tok.t
    channel, good_channel = tok.number(2, 5, 10)
    can_id, extended, good_id = _id(tok, 4, base)
    s5, _ = tok.of(5)
    named = (t.at(s5) - np.uint8(48)) > 9  # python-can: not str.isdigit(), so a name
    _, brs_digits = tok.number(5, 8, 10)
    o = named.astype(np.int64)
    _, good_dlc = tok.number(7 + o, 2, base)
    length, good_length = tok.number(8 + o, 2, 10)
    first_byte = 9 + o
    count = np.minimum(length, tok.count - first_byte)
    data, good_data = tok.data(first_byte, count, base)
    good = all_of(
        named | brs_digits,
        tok.count > first_byte,  # python-can wants a token after the length
        good_channel,
        good_id,
        good_dlc,
        good_length,
        length >= 1,  # 0: a remote frame
        length <= MAX_DATA,
        good_data,
    )
    return _Frames(rows, can_id, extended, count, data, channel - 1), good


def parse_block(text: bytes, base: int) -> Block:
    """The lines of `text` (whole lines: the last ends with its line break) in `base`."""
    t = Text(text)
    starts, stops, ends = t.lines()
    plain = t.plain(starts, stops, ends, tabs=True)
    tok_starts, tok_ends = t.tokens()
    first = np.searchsorted(tok_starts, starts)
    count = np.searchsorted(tok_starts, stops) - first
    head = t.at(np.append(tok_starts, t.last)[first])
    digit = (count > 0) & ((head - np.uint8(48)) <= 9)
    maybe_trigger = (count > 0) & ((head | np.uint8(0x20)) == ord("b"))
    # a plain line that starts with neither a digit nor b/B is no frame nor trigger block
    quiet = plain & ~digit & ~maybe_trigger
    rows = np.flatnonzero(plain & digit & (count >= 6))
    tok = _Tokens(t, first[rows], count[rows], tok_starts, tok_ends)
    fd = tok.equals(1, b"CANFD")
    seconds, good_time = t.decimal_seconds(*tok.of(0))
    parts = []
    for kind, which in ((_fd, fd), (_classic, ~fd)):
        picked = np.flatnonzero(which)
        sub = tok.subset(picked)
        frames, good = kind(sub, rows[picked], base)
        good &= good_time[picked]
        parts.append((frames, good, picked))
    regular = np.zeros(len(starts), np.bool_)
    for frames, good, _ in parts:
        regular[frames.rows[good]] = True
    slow_rows = np.flatnonzero(~quiet & ~regular & (stops > starts))
    slow = [(int(i), text[starts[i] - LEFT : stops[i] - LEFT]) for i in slow_rows]
    order = [(f, g, p) for f, g, p in parts if len(f.rows)]
    width = max([8] + [f.data.shape[1] for f, _, _ in order])
    keep = [np.flatnonzero(g) for _, g, _ in order]
    data = np.zeros((sum(len(k) for k in keep), width), np.uint8)
    row = 0
    for (f, _, _), k in zip(order, keep, strict=True):
        data[row : row + len(k), : f.data.shape[1]] = f.data[k]
        row += len(k)

    def joined(name: str) -> Any:
        arrays = [getattr(f, name)[k] for (f, _, _), k in zip(order, keep, strict=True)]
        return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)

    picked_seconds = [seconds[p[k]] for (_, _, p), k in zip(order, keep, strict=True)]
    lines = joined("rows")
    in_file_order = np.argsort(lines, kind="stable")  # FD and classic lines interleave
    return Block(
        lines[in_file_order],
        (np.concatenate(picked_seconds) if picked_seconds else np.zeros(0))[in_file_order],
        joined("arbitration_id")[in_file_order],
        joined("extended").astype(np.bool_)[in_file_order],
        joined("length")[in_file_order],
        data[in_file_order],
        joined("channel")[in_file_order],
        slow,
    )


class AscReader(TextCaptureReader):
    """Frame chunks from a Vector ASC log (or .asc.gz); malformed lines are counted in
    `counts.malformed_lines` (the first few in `counts.malformed`) and skipped."""

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        super().__init__(path, block_bytes)
        self._in_header = True
        self._base = "hex"
        self._start = 0.0  # seconds of the latest trigger block (or the header's date)

    def _parse(self, text: bytes, first_line: int) -> FrameChunk:
        notes: list[tuple[int, str]] = []
        at = 0
        while self._in_header and at < len(text):
            raw, at = next_line(text, at)
            self._header_line(first_line, raw, notes)
            first_line += 1
        text = text[at:]
        frames = self._body(text, first_line, notes) if text else None
        for number, reason in sorted(notes):
            self._malformed(number, reason)
        return frames if frames is not None else concat_chunks([])

    def _header_line(self, number: int, raw: bytes, notes: list[tuple[int, str]]) -> None:
        """One line of the header, as python-can's `ASCReader._extract_header` takes it."""
        line = self._decode(number, raw, _noting(notes))
        if line is None:
            return  # counted; the header goes on as after a comment
        line = line.strip()
        if date := _DATE.match(line):
            self._start_at(number, date.group("datetime_string"), notes)
            return
        if base := _BASE.match(line):
            value = base.group("base")
            if value in ("hex", "dec"):
                self._base = value
            else:  # python-can's check is case-sensitive
                notes.append((number, 'ValueError: base should be either "hex" or "dec"'))
            return
        if _COMMENT.match(line):
            return
        self._in_header = False  # `internal events logged` or any other line: consumed

    def _start_at(self, number: int, date: str, notes: list[tuple[int, str]]) -> None:
        """Times from now on count from `date` (of the header or a trigger block); a date
        python-can cannot read stops it, and is counted here, the start left as it was."""
        try:
            self._start = _date_seconds(date)
        except Exception as exc:
            notes.append((number, f"{type(exc).__name__}: {exc}"))

    def _body(self, text: bytes, first: int, notes: list[tuple[int, str]]) -> FrameChunk:
        base = 16 if self._base == "hex" else 10
        block = parse_block(text, base)
        start_at_block = self._start
        change_lines: list[int] = []
        change_starts: list[float] = []
        extra: list[Any] = []
        extra_lines: list[int] = []
        note = _noting(notes)
        for index, raw in block.slow:
            number = first + index
            line = self._decode(number, raw, note)
            if line is None:
                continue
            stripped = line.strip()
            if trigger := _TRIGGER.match(stripped):
                self._start_at(number, trigger.group("datetime_string"), notes)
                change_lines.append(index)
                change_starts.append(self._start)
                continue
            if not _MESSAGE.match(stripped):
                continue  # comments, statistics, events: python-can skips them too
            kept = self._read_line(number, line, self._python_can, report=note)
            extra += kept
            extra_lines += [index] * len(kept)
        # the trigger block in force on each regular line
        k = np.searchsorted(np.asarray(change_lines, np.int64), block.lines, side="right")
        starts = np.append(start_at_block, np.asarray(change_starts, np.float64))[k]
        seconds = block.seconds + starts
        fits = np.abs(seconds) < MAX_SECONDS
        for i in np.flatnonzero(~fits):
            notes.append((first + int(block.lines[i]), f"timestamp {seconds[i]} out of range"))
        chunk = FrameChunk(
            microseconds(np.where(fits, seconds, 0.0))[fits],
            (block.arbitration_id[fits] & 0x1FFFFFFF).astype(np.uint32),
            block.extended[fits],
            block.length[fits].astype(np.uint8),
            _trimmed(block.data[fits], block.length[fits]),
            np.clip(block.channel[fits], -1, 32767).astype(np.int16),
        )
        return in_line_order(chunk, block.lines[fits], extra, extra_lines)

    def _python_can(self, line: str) -> Iterator[Any]:
        """The messages python-can reads from one body line, at the trigger block's time."""
        from can.io.asc import ASCReader

        # relative times (0 + seconds), moved by our start: what float(s) + start gives
        file = io.StringIO("internal events logged\n" + line + "\n")
        for m in ASCReader(file, base=self._base, relative_timestamp=True):
            m.timestamp += self._start
            yield m


def _noting(notes: list[tuple[int, str]]) -> Callable[[int, str], None]:
    """A report that keeps each malformed line in `notes`, to be counted in line order."""
    return lambda number, reason: notes.append((number, reason))


def _trimmed(data: U8, length: I64) -> U8:
    """The data as python-can's rows hold it: as wide as the longest frame, at least 8."""
    keep = max(8, int(length.max(initial=0)))
    return np.ascontiguousarray(data[:, :keep])


def _date_seconds(text: str) -> float:
    from can.io.asc import ASCReader

    return float(ASCReader._datetime_to_timestamp(text))
