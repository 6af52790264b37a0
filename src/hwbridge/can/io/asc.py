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

import codecs
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from hwbridge.can.io.text_blocks import (
    BLOCK_BYTES,
    HEX,
    I64,
    LEFT,
    MAX_DATA,
    MAX_JUNK_LINES,
    MAX_SECONDS,
    U8,
    Bools,
    Text,
    TextCaptureReader,
    all_of,
    first_after,
    in_line_order,
    microseconds,
    number_right,
    undecodable,
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

    def equals_any_case(self, j: int, word: bytes) -> Bools:
        """Whether token `j` is `word` (lower case ASCII), in any case."""
        s, e = self.of(j)
        t = self.t
        same: Bools = e - s == len(word)
        for i, c in enumerate(word):
            same &= (t.at(s + i) | np.uint8(0x20)) == c
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


def _non_digits(t: Text) -> npt.NDArray[np.int32]:
    """Bytes other than 0-9 before each position of the padded text (a prefix sum)."""
    counts = np.zeros(len(t.a) + 1, np.int32)
    np.cumsum((t.a - np.uint8(48)) > 9, out=counts[1:])
    return counts


def _starts_with(t: Text, start: I64, end: I64, word: bytes) -> Bools:
    """Whether each token from `start` to `end` starts with `word`, in any case (ASCII)."""
    found: Bools = end - start >= len(word)
    for i, c in enumerate(word):
        found &= (t.at(start + i) | np.uint8(0x20)) == c
    return found


def _message_like(tok: _Tokens) -> Bools:
    """python-can's ASC_MESSAGE_REGEX on each (plain) line of `tok`, its stripped text:
    `\\d+\\.\\d+\\s+(\\d+\\s+(\\w+\\s+(Tx|Rx)|ErrorFrame)|CANFD)`, ASCII, any case."""
    t = tok.t
    other = _non_digits(t)
    word = np.zeros(len(t.a) + 1, np.int32)
    np.cumsum(~_WORD[t.a], out=word[1:])
    s0, e0 = tok.of(0)
    dot = np.minimum(first_after(t.find(46), s0, t.last), e0)
    seconds = (dot > s0) & (dot < e0 - 1) & (other[e0] - other[s0] == 1) & (t.at(dot) == 46)
    s1, e1 = tok.of(1)
    s2, e2 = tok.of(2)
    s3, e3 = tok.of(3)
    channel = other[e1] - other[s1] == 0
    named = (
        (word[e2] - word[s2] == 0)
        & (tok.count >= 4)
        & (_starts_with(t, s3, e3, b"tx") | _starts_with(t, s3, e3, b"rx"))
    )
    error = (tok.count >= 3) & _starts_with(t, s2, e2, b"errorframe")
    fd = _starts_with(t, s1, e1, b"canfd")
    found: Bools = seconds & (tok.count >= 2) & ((channel & (named | error)) | fd)
    return found


_WORD = np.zeros(256, np.bool_)
for _c in b"0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _WORD[_c] = True
_UTF8_SPACE_LEADS = np.zeros(256, np.bool_)
_UTF8_SPACE_LEADS[[0xC2, 0xE1, 0xE2, 0xE3]] = True
"""The first bytes of the UTF-8 of every whitespace character beyond ASCII (U+0085, U+00A0,
U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000)."""


def _may_mean_something(
    lines: _Tokens,
    starts: I64,
    stops: I64,
    ends: I64,
    *,
    plain: Bools,
    digit: Bools,
    regular: Bools,
    encoding: str,
) -> I64:
    """The lines besides the regular frames python-can may read something from: a frame
    (its message pattern matches the stripped line) or a trigger block (`begin triggerblock
    ...`), and any line that is not text in `encoding` (python-can stops at it). Every other
    line python-can skips, so it is skipped here without being read one at a time."""
    t = lines.t
    left = ~regular & (stops > starts)
    maybe = np.zeros(len(starts), np.bool_)
    # plain lines (the lines of `lines`, `lines.count` tokens each): the patterns, on tokens
    rows = np.flatnonzero(left & plain & digit)
    if len(rows):
        maybe[rows] = _message_like(lines.subset(rows))
    rows = np.flatnonzero(left & plain & ~digit & (lines.count >= 4))
    if len(rows):
        tok = lines.subset(rows)
        maybe[rows] = tok.equals_any_case(0, b"begin") & tok.equals_any_case(1, b"triggerblock")
    # other lines: by the first byte str.strip() leaves, when it cannot start either
    rows = np.flatnonzero(left & ~plain)
    if len(rows):
        lead = t.lead(starts[rows], stops[rows])
        c = t.at(lead)
        text_lead = ((c - np.uint8(48)) <= 9) | ((c | np.uint8(0x20)) == ord("b"))
        if codecs.lookup(encoding).name == "utf-8":
            text_lead |= _UTF8_SPACE_LEADS[c]
        else:  # which bytes start a space in this encoding is not known here
            text_lead |= c >= 0x80
        maybe[rows] = text_lead & (lead < stops[rows])
        skipped = rows[~maybe[rows]]
        maybe[undecodable(t, starts, ends, skipped, encoding)] = True
    return np.flatnonzero(maybe)


def parse_block(text: bytes, base: int, encoding: str = "utf-8") -> Block:
    """The lines of `text` (whole lines: the last ends with its line break) in `base`; the
    lines python-can may read a frame or a trigger block from are left in `slow` (text in
    `encoding`, as python-can's text mode reads it)."""
    t = Text(text)
    starts, stops, ends = t.lines()
    plain = t.plain(starts, stops, ends, tabs=True)
    tok_starts, tok_ends = t.tokens()
    first = np.searchsorted(tok_starts, starts)
    count = np.searchsorted(tok_starts, stops) - first
    head = t.at(np.append(tok_starts, t.last)[first])
    digit = (count > 0) & ((head - np.uint8(48)) <= 9)
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
    lines = _Tokens(t, first, count, tok_starts, tok_ends)
    slow_rows = _may_mean_something(
        lines, starts, stops, ends, plain=plain, digit=digit, regular=regular, encoding=encoding
    )
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
    `counts.malformed_lines` (the first few in `counts.malformed`) and skipped. A header of
    more than MAX_JUNK_LINES lines that are not comments is refused, as junk."""

    NAME = "an ASC log"

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        super().__init__(path, block_bytes)
        self._in_header = True
        self._header_lines = 0  # lines of the header read one at a time
        self._base = "hex"
        self._start = 0.0  # seconds of the latest trigger block (or the header's date)

    def _parse(self, text: bytes, first_line: int) -> FrameChunk:
        notes: list[tuple[int, str]] = []
        try:
            if self._in_header:
                at, lines = self._header(text, first_line, notes)
                text, first_line = text[at:], first_line + lines
            if not text or self._refused is not None:
                return concat_chunks([])
            return self._body(text, first_line, notes)
        finally:
            for number, reason in sorted(notes):
                self._malformed(number, reason)

    def _header(self, text: bytes, first: int, notes: list[tuple[int, str]]) -> tuple[int, int]:
        """The header's lines of `text` (whole lines, the first numbered `first`): comments
        skipped at once, the others read as python-can reads them, until one ends the header.
        (where the body starts in `text`, the lines before it)"""
        t = Text(text)
        starts, stops, ends = t.lines()
        lead = t.lead(starts, stops)
        comment = (lead + 1 < stops) & (t.at(lead) == ord("/")) & (t.at(lead + 1) == ord("/"))
        beyond = np.flatnonzero(comment & t.beyond_ascii(starts, ends))
        comment[undecodable(t, starts, ends, beyond, self._encoding)] = False  # reported
        for k in np.flatnonzero(~comment).tolist():
            self._header_lines += 1
            if self._header_lines > MAX_JUNK_LINES:
                self._refused = CaptureError(
                    self.path,
                    f"line {first + k}",
                    f"not {self.NAME}: a header of more than {MAX_JUNK_LINES} lines",
                )
                return len(text), len(starts)
            self._header_line(first + k, text[starts[k] - LEFT : stops[k] - LEFT], notes)
            if not self._in_header:
                return int(ends[k]) + 1 - LEFT, k + 1
        return len(text), len(starts)

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

    def _start_at(self, number: int, date: str, notes: list[tuple[int, str]]) -> bool:
        """Times from now on count from `date` (of the header or a trigger block); a date
        python-can cannot read stops it, and is counted here, the start left as it was."""
        try:
            self._start = _date_seconds(date)
        except Exception as exc:
            notes.append((number, f"{type(exc).__name__}: {exc}"))
            return False
        return True

    def _body(self, text: bytes, first: int, notes: list[tuple[int, str]]) -> FrameChunk:
        base = 16 if self._base == "hex" else 10
        block = parse_block(text, base, self._encoding)
        start_at_block = self._start
        change_lines: list[int] = []
        change_starts: list[float] = []
        note = _noting(notes)

        def read_one(number: int, raw: bytes) -> list[Any] | None:
            line = self._decode(number, raw, note)
            if line is None:
                return None
            stripped = line.strip()
            if trigger := _TRIGGER.match(stripped):
                if not self._start_at(number, trigger.group("datetime_string"), notes):
                    return None
                change_lines.append(number - first)
                change_starts.append(self._start)
                return []
            if not _MESSAGE.match(stripped):
                return []  # comments, statistics, events: python-can skips them too
            return self._read_line(number, line, self._python_can, report=note)

        stop, extra, extra_lines = self._in_order(
            first, block.slow, read_one, frame_lines=block.lines, bad=block.lines[:0], name=str
        )
        lines = block.lines if stop is None else block.lines[block.lines < stop]
        # the trigger block in force on each regular line
        k = np.searchsorted(np.asarray(change_lines, np.int64), lines, side="right")
        starts = np.append(start_at_block, np.asarray(change_starts, np.float64))[k]
        seconds = block.seconds[: len(lines)] + starts
        fits = np.abs(seconds) < MAX_SECONDS
        unfit = np.flatnonzero(~fits)
        for i in unfit:
            notes.append((first + int(lines[i]), f"timestamp {seconds[i]} out of range"))
        if len(unfit):  # counted as frames above: junk after all
            self._frames -= len(unfit)
            self._junk += len(unfit)
            if stop is None and self._over():
                self._refuse(first + int(lines[unfit[-1]]))
        keep = np.flatnonzero(fits)
        chunk = FrameChunk(
            microseconds(seconds[keep]),
            (block.arbitration_id[keep] & 0x1FFFFFFF).astype(np.uint32),
            block.extended[keep],
            block.length[keep].astype(np.uint8),
            _trimmed(block.data[keep], block.length[keep]),
            np.clip(block.channel[keep], -1, 32767).astype(np.int16),
        )
        return in_line_order(chunk, lines[keep], extra, extra_lines)

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
