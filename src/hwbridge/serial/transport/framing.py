"""How a byte stream from a serial device is cut into frames.

Three ways, as devices use them: lines ending in a terminator (`b"\\n"`, `b"\\r\\n"`, an
ELM327's `b">"`), bytes up to and including a regular expression (a checksum trailer, a
prompt), or a fixed number of bytes. A `Framing` only finds the end of the first frame in a
buffer; the adapter owns the buffer and bounds its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Framing", "as_bytes"]


def as_bytes(value: str | bytes) -> bytes:
    """Text as the device sees it: str through latin-1 (one byte per character)."""
    return value if isinstance(value, bytes) else value.encode("latin-1")


@dataclass(frozen=True, slots=True)
class Framing:
    """Exactly one of `terminator`, `pattern` or `length`.

    A terminator frame excludes the terminator; a pattern frame runs up to the end of the
    first match and includes it; a length frame is exactly `length` bytes.
    """

    terminator: bytes | None = b"\n"
    pattern: re.Pattern[bytes] | None = None
    length: int | None = None

    def __post_init__(self) -> None:
        given = sum(x is not None for x in (self.terminator, self.pattern, self.length))
        if given != 1:
            raise ValueError("a Framing takes exactly one of terminator, pattern or length")
        if self.terminator is not None and not self.terminator:
            raise ValueError("a terminator must be at least one byte")
        if self.length is not None and self.length < 1:
            raise ValueError("a frame length must be at least 1")

    @classmethod
    def line(cls, terminator: str | bytes = b"\n") -> Framing:
        """Lines that end in `terminator` (excluded from the frame)."""
        return cls(terminator=as_bytes(terminator))

    @classmethod
    def regex(cls, pattern: str | bytes | re.Pattern[bytes]) -> Framing:
        """Frames that end where `pattern` first matches (the match included)."""
        if isinstance(pattern, re.Pattern):
            return cls(terminator=None, pattern=pattern)
        try:
            compiled = re.compile(as_bytes(pattern))
        except re.error as exc:
            raise ValueError(f"framing pattern {pattern!r} does not compile: {exc}") from exc
        return cls(terminator=None, pattern=compiled)

    @classmethod
    def fixed(cls, length: int) -> Framing:
        """Frames of exactly `length` bytes."""
        return cls(terminator=None, length=length)

    def find(self, buffer: bytes | bytearray, start: int = 0) -> tuple[int, int] | None:
        """(end of the frame, end of what it consumes) for the first frame in `buffer`, or
        None. `start` is where a terminator may begin at the earliest (bytes before it were
        searched already)."""
        if self.terminator is not None:
            at = buffer.find(self.terminator, start)
            return None if at < 0 else (at, at + len(self.terminator))
        if self.pattern is not None:
            match = self.pattern.search(buffer)
            return None if match is None else (match.end(), match.end())
        assert self.length is not None
        return (self.length, self.length) if len(buffer) >= self.length else None

    @property
    def resyncs(self) -> bool:
        """Whether an overlong frame can be skipped to its end (terminator framing only)."""
        return self.terminator is not None

    def describe(self) -> str:
        if self.terminator is not None:
            return f"lines ending in {self.terminator!r}"
        if self.pattern is not None:
            return f"frames up to {self.pattern.pattern!r}"
        return f"frames of {self.length} bytes"
