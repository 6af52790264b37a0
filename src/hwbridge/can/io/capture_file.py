"""The bytes of a capture file: a regular file only, and its gzip stream inflated as far as it
goes.

A FIFO named `x.log` blocks `open()` until a writer comes (forever, for `decode`); a device
node (`/dev/zero`, `/dev/urandom`) never ends. `regular_file` refuses both before anything
opens them, and `open_regular` opens without blocking and checks what it opened.

`GzipFile.read(1 MiB)` on a stream cut short raises EOFError and drops the bytes it inflated
for that call: a capture cut at 60% gave no frame at all. `GzipStream` hands out every byte
zlib can inflate before the cut (or a corrupt block, a wrong CRC), and only then raises
`GzipDamage`, which says where.
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from pathlib import Path
from typing import BinaryIO

__all__ = ["GzipDamage", "GzipStream", "NotARegularFileError", "open_regular", "regular_file"]

_PIECE = 64 * 1024  # compressed bytes handed to zlib at a time
_GZIP = 16 + zlib.MAX_WBITS  # a gzip header and trailer (its CRC and length checked by zlib)


class NotARegularFileError(OSError):
    """A capture path that names a FIFO, a socket or a device, not a file."""


def _kind(mode: int) -> str:
    for check, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if check(mode):
            return name
    return "not a regular file"


def _refuse(mode: int, path: str | Path) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "capture is a directory", str(path))
    if not stat.S_ISREG(mode):
        raise NotARegularFileError(
            errno.EINVAL, f"capture is {_kind(mode)}, not a regular file", str(path)
        )


def regular_file(path: str | Path) -> None:
    """Nothing if `path` is a regular file (or a link to one); FileNotFoundError,
    IsADirectoryError or NotARegularFileError (all OSError) if not. Opens nothing."""
    _refuse(os.stat(path).st_mode, path)


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened to read in binary, if it is a regular file (see `regular_file`); the
    open itself never blocks, and what it opened is the file checked."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _refuse(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class GzipDamage(Exception):
    """A gzip stream that ends early or is corrupt; every byte before it was read."""

    def __init__(self, reason: str, compressed_byte: int, inflated_bytes: int) -> None:
        self.reason = reason
        self.compressed_byte = compressed_byte  # about where in the file
        self.inflated_bytes = inflated_bytes  # bytes read before it
        super().__init__(f"{reason} (file byte {compressed_byte})")


class GzipStream:
    """The inflated bytes of a gzip file: members one after another (zero padding between
    them allowed, as GzipFile allows it), as far as they go."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._zlib = zlib.decompressobj(_GZIP)
        self._pending = b""  # compressed bytes read but not given to zlib yet
        self._full = False  # the last call stopped at its output bound: more may wait
        self._damage: GzipDamage | None = None
        self._end = False
        self._fed = False  # the member has had compressed bytes (an empty file has none)
        self.inflated = 0  # bytes handed out

    def tell(self) -> int:
        """Compressed bytes read from the file (for progress)."""
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()

    def read(self, n: int) -> bytes:
        """Up to `n` bytes (fewer only at the end or before damage); b"" at the end. The
        call after the last byte before damage raises GzipDamage."""
        parts: list[bytes] = []
        have = 0
        while have < n and not self._end and self._damage is None:
            piece = self._inflate(n - have)
            if piece:
                parts.append(piece)
                have += len(piece)
        if not have and self._damage is not None:
            self._damage.inflated_bytes = self.inflated
            raise self._damage
        data = b"".join(parts)
        self.inflated += len(data)
        return data

    def _inflate(self, most: int) -> bytes:
        z = self._zlib
        try:
            if z.eof:
                self._next_member()
                return b""
            if z.unconsumed_tail or self._full:
                data = z.decompress(z.unconsumed_tail, most)
            else:
                piece = self._pending or self._raw.read(_PIECE)
                self._pending = b""
                if not piece and not self._fed:  # an empty file: an empty stream
                    self._end = True
                    return b""
                self._fed = True
                if not piece:
                    data = z.flush()  # whatever the cut leaves, then the cut
                    self._damaged("truncated gzip stream: it ends before its end marker")
                    return data
                data = z.decompress(piece, most)
        except zlib.error as exc:
            self._damaged(f"corrupt gzip stream ({exc})")
            return b""
        self._full = len(data) == most
        return data

    def _next_member(self) -> None:
        """After a member's end: another member, zero padding, or the end of the file."""
        rest = self._zlib.unused_data.lstrip(b"\0")
        while not rest:
            piece = self._raw.read(_PIECE)
            if not piece:
                self._end = True
                return
            rest = piece.lstrip(b"\0")
        self._zlib = zlib.decompressobj(_GZIP)
        self._pending = rest
        self._full = False
        self._fed = True

    def _damaged(self, reason: str) -> None:
        z = self._zlib
        at = self._raw.tell() - len(z.unconsumed_tail) - len(self._pending)
        self._damage = GzipDamage(reason, max(0, at), self.inflated)
