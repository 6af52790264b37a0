"""A text capture as python-can's text readers iterate it, but with no line too long to hold.

python-can's TRC, ASC, candump and CSV readers read `for line in file`: a file of one 300 MB
line is a 300 MB string (and python-can's warning quotes it whole). `BoundedLines` is the
file they are given instead: the same lines (the locale's encoding, universal newlines, as
python-can opens a text file), but a line longer than the bound is skipped a piece at a time
and reported, and so is a line that is not text in that encoding (python-can would stop at
it with an exception); python-can never sees either.
"""

from __future__ import annotations

import io
import locale
from collections.abc import Callable, Iterator
from typing import BinaryIO

from hwbridge.can.io.frame_checks import MAX_LINE_BYTES

__all__ = ["BoundedLines"]

_PIECE = 64 * 1024  # characters read at a time while a long line is skipped

Report = Callable[[int, str], None]
"""Where a skipped line goes: (line number, reason)."""


class BoundedLines:
    """The lines of a binary stream as text, none longer than `limit` characters; `number`
    is the number of the line handed out last (skipped lines count)."""

    def __init__(self, binary: BinaryIO, report: Report, limit: int | None = None) -> None:
        self.encoding = locale.getpreferredencoding(False)  # python-can's text mode
        self._text = io.TextIOWrapper(
            binary,
            encoding=self.encoding,
            errors="surrogateescape",  # bytes it cannot decode make their line malformed
            newline=None,
        )
        self._report = report
        self._limit = MAX_LINE_BYTES if limit is None else limit
        self.number = 0
        self._lines = self._read()

    def __iter__(self) -> Iterator[str]:
        return self._lines  # one generator: a second `for` goes on where the first stopped

    def __next__(self) -> str:
        return next(self._lines)

    def readline(self, size: int = -1) -> str:
        """The next line ('' at the end); `size` is ignored (the bound holds)."""
        return next(self._lines, "")

    def _read(self) -> Iterator[str]:
        readline, limit = self._text.readline, self._limit
        while True:
            line = readline(limit + 1)
            if not line:
                return
            self.number += 1
            if len(line) > limit and line[-1] != "\n":
                self._skip_rest()
                self._report(self.number, f"longer than {limit} characters")
            elif line.isascii() or self._text_of_encoding(line):
                yield line
            else:
                self._report(self.number, f"not {self.encoding} text")

    def malformed(self, reason: str) -> None:
        """Report the line handed out last (its reader could not parse it)."""
        self._report(self.number, reason)

    def _skip_rest(self) -> None:
        while True:
            piece = self._text.readline(_PIECE)
            if not piece or piece[-1] == "\n":
                return

    def _text_of_encoding(self, line: str) -> bool:
        try:
            line.encode(self.encoding)  # an undecodable byte is a lone surrogate, refused
        except UnicodeEncodeError:
            return False
        return True

    def close(self) -> None:
        self._text.close()
