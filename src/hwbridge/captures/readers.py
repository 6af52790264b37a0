"""Pick the reader for a capture: the array readers where the format allows, python-can else.

Every reader has the same small surface: `chunks()` yields `FrameChunk`s in file order,
`counts` holds the error and remote frames it skipped, `progress` (0..1) and `position`
(where it is, for an error message) describe how far it got, `close()` releases the file.
`open_capture` hands it out inside a `CheckedReader`: every frame of every format passes the
same frame checks.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from hwbridge.captures.frame_checks import CheckedReader
from hwbridge.captures.frames import FrameChunk, ReaderCounts
from hwbridge.captures.reader_pycan import PythonCanReader, reader_suffix

__all__ = ["CaptureReader", "CheckedReader", "capture_formats", "check_capture", "open_capture"]


class CaptureReader(Protocol):
    path: Path
    counts: ReaderCounts

    @property
    def progress(self) -> float: ...

    @property
    def position(self) -> str: ...

    def chunks(self) -> Iterator[FrameChunk]: ...

    def close(self) -> None: ...


def capture_formats() -> list[str]:
    """Suffixes of the captures that can be decoded (each may also end in .gz)."""
    from can.io.player import MESSAGE_READERS

    return sorted(MESSAGE_READERS)


def check_capture(path: str | Path) -> Path:
    """The path, if it names a readable file of a known format; OSError/ValueError if not."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "capture not found", str(p))
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "capture is a directory", str(p))
    if not os.access(p, os.R_OK):
        raise PermissionError(errno.EACCES, "capture is not readable", str(p))
    if reader_suffix(p) not in capture_formats():
        shown = "".join(p.suffixes) or "no suffix"
        raise ValueError(
            f"{p.name}: unknown capture format ({shown}); supported: "
            + ", ".join(capture_formats())
            + " (any of them gzip-compressed, e.g. .asc.gz)"
        )
    return p


def open_capture(path: str | Path, *, fast: bool = True) -> CheckedReader:
    """A reader for `path`: BLF, MF4, candump .log, ASC and CSV as arrays (when `fast`),
    SQLite by its own reader, anything else via python-can; whichever it is, its frames pass
    the frame checks (`CheckedReader`, the reader itself is its `reader`)."""
    return CheckedReader(_reader(check_capture(path), fast))


def _reader(p: Path, fast: bool) -> CaptureReader:
    suffix = reader_suffix(p)
    compressed = p.suffix.lower() == ".gz"
    if fast and suffix == ".blf":
        from hwbridge.captures.reader_blf import BlfReader

        return BlfReader(p)
    if fast and suffix == ".log":
        from hwbridge.captures.reader_canutils import CanutilsReader

        return CanutilsReader(p)
    if fast and suffix == ".asc":
        from hwbridge.captures.reader_asc import AscReader

        return AscReader(p)
    if fast and suffix == ".csv":
        from hwbridge.captures.reader_csv import CsvReader

        return CsvReader(p)
    if fast and suffix == ".mf4" and not compressed:
        from hwbridge.captures.reader_mdf import MdfReader, Unsupported

        try:
            return MdfReader(p)  # sorted, finalized files: no asammdf needed
        except Unsupported:
            from hwbridge.captures.reader_mf4 import Mf4Reader

            return Mf4Reader(p)
    if suffix == ".db":  # python-can's reader writes to the file and reads views
        from hwbridge.captures.reader_sqlite import SqliteReader

        return SqliteReader(p)
    if suffix == ".mf4":
        from hwbridge._deferred import require_asammdf
        from hwbridge.captures.mdf_guard import check_for_asammdf

        check_for_asammdf(p)  # python-can's reader is asammdf's: its loops refused first
        require_asammdf()
    return PythonCanReader(p)
