"""A compressed MF4 read as the plain file it holds: its gzip stream inflated once, to a
temporary file, and read there by the same readers as a `.mf4` (`mf4_reader`).

An MF4 reader jumps about the file by its links, and a gzip stream can only be read forwards:
python-can's reader read the whole inflated stream into memory (a 1 MB file of 1 GiB of
zeros took 2.26 GB), and the link check on the stream rewound and inflated it again from the
start for every link that pointed back (a 523 kB file took 48 s). Here the stream is inflated
once, a MiB at a time, to a temporary file (`tempfile`'s directory, `TMPDIR`) of at most
`MAX_SPOOL_BYTES` (and deflate's 1032 times the compressed bytes), which is deleted when the
reader closes. `READERS[".mf4.gz"]` so holds the bounds of `.mf4`, plus that disk space and
the time to inflate it.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import secrets
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts, note_text
from hwbridge.can.io.mf4 import mf4_reader
from hwbridge.can.io.mf4_links import DEFLATE_RATIO

if TYPE_CHECKING:
    from hwbridge.can.io.readers import CaptureReader

__all__ = ["MAX_SPOOL_BYTES", "Mf4GzReader", "spool"]

MAX_SPOOL_BYTES = 4 * 1024**3
"""The most a compressed MF4 is inflated to (on disk): a bigger capture is refused, to be
decompressed by hand (an MF4 seeks, so it cannot be read from the stream)."""
_PIECE = 1024 * 1024


def _delete(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _new_copy(made: list[Path]) -> tuple[int, Path]:
    """A new temporary file for the copy, its name in `made` before the file exists: a signal
    that lands inside `tempfile.mkstemp`, after it made the file and before it returned the
    name, left the file behind (a stress run did). The name is 128 random bits: never one
    of another's files."""
    folder = Path(tempfile.gettempdir())
    while True:
        copy = folder / f"hwbridge-{secrets.token_hex(16)}.mf4"
        made.append(copy)
        try:
            return os.open(copy, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), copy
        except FileExistsError:  # not ours: never to be deleted
            made.remove(copy)


def spool(path: Path, made: list[Path]) -> Path:
    """The MF4 file the gzip file at `path` holds, inflated to a temporary file the caller
    deletes; CaptureError if the stream is corrupt, cut short, or inflates past the cap.
    The copy's name goes into `made` the moment it exists, so that a caller interrupted
    anywhere (SIGTERM raises where it lands) can delete it."""
    cap = min(MAX_SPOOL_BYTES, DEFLATE_RATIO * max(1, path.stat().st_size))
    inflated = 0
    try:
        fd, copy = _new_copy(made)
        with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as stream:
            while piece := stream.read(_PIECE):
                inflated += len(piece)
                if inflated > cap:
                    raise CaptureError(
                        path,
                        f"inflated byte {cap}",
                        f"too large: it inflates to more than {cap} bytes (a compressed MF4 "
                        f"is inflated to disk to be read: at most {MAX_SPOOL_BYTES} bytes, "
                        f"and {DEFLATE_RATIO} times its own); decompress it to read it",
                    )
                out.write(piece)
    except EOFError:
        _delete(made[0])
        why = "truncated: the gzip stream ends early"
        raise CaptureError(path, f"inflated byte {inflated}", why) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        _delete(made[0])
        why = note_text(f"corrupt gzip stream: {exc}")
        raise CaptureError(path, f"inflated byte {inflated}", why) from None
    except BaseException:
        for made_copy in made:
            _delete(made_copy)
        raise
    return copy


class Mf4GzReader:
    """Frame chunks of a compressed MF4, read from its inflated copy by `open_reader` (the
    block reader, or asammdf's: `mf4_reader`); the copy is deleted on close (or, if the
    reader is never closed, when it is collected). Errors name the compressed file."""

    def __init__(
        self, path: str | Path, open_reader: Callable[[Path], CaptureReader] = mf4_reader
    ) -> None:
        self.path = Path(path)
        made: list[Path] = []
        try:  # the copy is deleted however this ends, a signal's exception included
            copy = spool(self.path, made)
            self._delete = weakref.finalize(self, _delete, copy)
        except BaseException:
            for made_copy in made:
                _delete(made_copy)
            raise
        try:
            self.reader = open_reader(copy)
        except CaptureError as exc:
            self._delete()
            raise CaptureError(self.path, exc.position, exc.reason) from None
        except BaseException:
            self._delete()
            raise
        self.counts: ReaderCounts = self.reader.counts

    @property
    def progress(self) -> float:
        return self.reader.progress

    @property
    def position(self) -> str:
        return self.reader.position

    def chunks(self) -> Iterator[FrameChunk]:
        try:
            yield from self.reader.chunks()
        except CaptureError as exc:
            raise CaptureError(self.path, exc.position, exc.reason) from None
        finally:
            self.close()

    def close(self) -> None:
        """Closes the reader and deletes the copy; idempotent."""
        try:
            self.reader.close()
        finally:
            self._delete()
