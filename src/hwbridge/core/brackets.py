"""One linear, string-aware pass over LLM text: where each bracket closes, which brace
encloses a position.

Finding calls in prose needs two questions answered many times: "does the `{` at i close,
and where?" and "which `{` is open at position p?". Answering each by rescanning the text
is quadratic on hostile input (thousands of braces, megabytes of whitespace); this module
answers all of them from a single pass, so the extractor's work stays linear in the input.

Quotes only count inside brackets: in prose at depth 0, an apostrophe ("Let's check:
{...}") is not a string. Inside brackets both `"` and `'` delimit strings (a Python dict
written instead of JSON), and a backslash escapes the next character.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["BracketMap"]

_TOKEN = re.compile(r"""\\.|["']|[{\[]+|[}\]]+""", re.DOTALL)
_STRING_END = {'"': re.compile(r'\\.|"', re.DOTALL), "'": re.compile(r"\\.|'", re.DOTALL)}
_PAIRS = {"}": "{", "]": "["}


class BracketMap:
    """Bracket structure of one text, computed in one pass.

    `end_of(i)`: the index just past the bracket that closes the one at `i` (None when it
    never closes, or closes with the wrong kind). `braces`: positions of every `{` outside
    strings, in order. `enclosing[k]`: the innermost `{` open at `queries[k]` (None when
    there is none, or when the position is inside a string). `unclosed`: the brackets
    still open at the end of the text, outermost first; `open_quote`: the quote of a string
    still open there ("" when none).
    """

    __slots__ = (
        "_closed",
        "_ends",
        "_kinds",
        "_open_braces",
        "_stack",
        "braces",
        "enclosing",
        "open_quote",
    )

    def __init__(self, text: str, queries: Sequence[int] = ()) -> None:
        self._ends: dict[int, int] = {}
        self.braces: list[int] = []
        self.enclosing: list[int | None] = []
        self.open_quote = ""
        self._stack: list[int] = []  # positions of the open brackets, innermost last
        self._kinds: list[str] = []  # their kinds, "{" or "["
        self._open_braces: list[int] = []  # the "{" among them, innermost last
        self._closed: list[int] = []  # the "{" that close with a "}", in closing order
        self._scan(text, queries)
        self._closed.sort()

    def _scan(self, text: str, queries: Sequence[int]) -> None:
        stack, open_braces = self._stack, self._open_braces
        q, nq, pos, n = 0, len(queries), 0, len(text)
        while pos < n:
            m = _TOKEN.search(text, pos)
            at = m.start() if m is not None else n
            while q < nq and queries[q] <= at:  # answer the queries before this token
                self.enclosing.append(open_braces[-1] if open_braces else None)
                q += 1
            if m is None:
                break
            tok = m.group()
            pos = m.end()
            first = tok[0]
            if first in "{[":
                self._open(tok, at)
            elif first in "}]":
                self._close(tok, at)
            elif stack and first in "\"'":
                pos = self._skip_string(text, first, pos)
                while q < nq and queries[q] < pos:  # inside a string: not a call's spot
                    self.enclosing.append(None)
                    q += 1
        while q < nq:
            self.enclosing.append(open_braces[-1] if open_braces else None)
            q += 1

    def _open(self, run: str, at: int) -> None:
        positions = range(at, at + len(run))
        self._stack.extend(positions)
        self._kinds.extend(run)
        if "[" not in run:  # the usual run: braces only
            new: Sequence[int] = positions
        elif "{" in run:
            new = [p for p, kind in zip(positions, run, strict=True) if kind == "{"]
        else:
            return
        self.braces.extend(new)
        self._open_braces.extend(new)

    def _close(self, run: str, at: int) -> None:
        stack, kinds = self._stack, self._kinds
        for offset, closer in enumerate(run):
            if not stack:
                return  # closers in prose close nothing
            opened = stack.pop()
            kind = kinds.pop()
            if kind == "{":
                self._open_braces.pop()
            if kind == _PAIRS[closer]:
                self._ends[opened] = at + offset + 1
                if kind == "{":
                    self._closed.append(opened)

    def _skip_string(self, text: str, quote: str, pos: int) -> int:
        """The index just past the string that opened before `pos`."""
        closer = _STRING_END[quote]
        while True:
            m = closer.search(text, pos)
            if m is None:
                self.open_quote = quote
                return len(text)
            pos = m.end()
            if m.group() == quote:
                return pos

    @property
    def unclosed(self) -> list[int]:
        return list(self._stack)

    def end_of(self, start: int) -> int | None:
        return self._ends.get(start)

    def braces_from(self, position: int) -> int:
        """Index into `braces` of the first `{` at or after `position`."""
        return bisect_left(self.braces, position)

    @property
    def closed_braces(self) -> list[int]:
        """Positions of the `{` that close with a `}` (the only ones JSON can start at)."""
        return self._closed

    def closed_from(self, position: int) -> int:
        """Index into `closed_braces` of the first at or after `position`."""
        return bisect_left(self._closed, position)
