"""A device spec's regular expressions, run on what a device says with a time limit.

A spec's patterns (`reply`, `errors.reply`, `identity.expect`, `[stream] kind`) are written
by people, but the text they run on comes from a device, and a plausible pattern such as
`^((\\d+),?)+$` backtracks for minutes on a line of thirty digits and an `x`. Python's `re`
cannot be stopped, so the patterns run in the `regex` package (the same syntax, mrab-regex),
with a timeout per line: a line that takes longer is treated as not matching and counted,
and the call goes on to its own deadline instead of hanging the port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import regex

__all__ = ["MATCH_TIMEOUT_S", "DevicePattern"]

MATCH_TIMEOUT_S: Final = 0.05
"""How long one pattern may run on one line (a sane pattern takes microseconds)."""


class DevicePattern:
    """One spec pattern, compiled once; `search` never runs longer than `timeout_s`."""

    __slots__ = ("_compiled", "source", "timed_out", "timeout_s")

    def __init__(self, source: str, *, timeout_s: float = MATCH_TIMEOUT_S) -> None:
        self.source = source
        self._compiled = regex.compile(source)
        self.timeout_s = timeout_s
        self.timed_out = 0  # lines given up on: a pattern to fix in the spec

    def search(self, text: str) -> regex.Match[str] | None:
        """The first match in `text`, or None (also when the pattern ran out of time)."""
        try:
            return self._compiled.search(text, timeout=self.timeout_s)
        except TimeoutError:
            self.timed_out += 1
            return None

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self._compiled.groupindex

    def __repr__(self) -> str:
        return f"DevicePattern({self.source!r})"
