"""The readers of recorded frames, one per format, by file suffix (`READERS`), as python-can's
`MESSAGE_READERS`: what `hwbridge decode`, `discover`, replay and plot all read through.

    reader = open_capture("drive.blf")          # every frame checked (CheckedReader)
    for chunk in reader.chunks(): ...           # FrameChunk: frames as numpy columns

BLF, MF4, candump .log, ASC and CSV are read as arrays by hwbridge's own readers (the MF4
block reader, or asammdf for files it leaves to it), SQLite by its own read-only reader, TRC
through python-can's (bounded lines); `fast=False` reads them all through python-can's. Any
of them may be gzip-compressed (`.asc.gz`); a compressed MF4 is inflated once to a temporary
file and read as a plain one (`mf4_gz`).

Every reader has the same small surface: `chunks()` yields `FrameChunk`s in file order,
`counts` holds the error and remote frames it skipped, `progress` (0..1) and `position`
(where it is, for an error message) describe how far it got, `close()` releases the file.
`open_capture` hands it out inside a `CheckedReader`: every frame of every format passes the
same frame checks.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from hwbridge.can.io.capture_file import regular_file
from hwbridge.can.io.frame_checks import CheckedReader
from hwbridge.can.io.frames import FrameChunk, ReaderCounts
from hwbridge.can.io.pycan import PythonCanReader, reader_suffix

__all__ = [
    "READERS",
    "CaptureReader",
    "CheckedReader",
    "ReaderFactory",
    "capture_formats",
    "check_capture",
    "open_capture",
]


class CaptureReader(Protocol):
    path: Path
    counts: ReaderCounts

    @property
    def progress(self) -> float: ...

    @property
    def position(self) -> str: ...

    def chunks(self) -> Iterator[FrameChunk]: ...

    def close(self) -> None: ...


ReaderFactory = Callable[[Path], CaptureReader]
"""Opens a reader on a capture (a format's own module is imported only when one is opened)."""


def _blf(path: Path) -> CaptureReader:
    from hwbridge.can.io.blf import BlfReader

    return BlfReader(path)


def _candump(path: Path) -> CaptureReader:
    from hwbridge.can.io.canutils import CanutilsReader

    return CanutilsReader(path)


def _asc(path: Path) -> CaptureReader:
    from hwbridge.can.io.asc import AscReader

    return AscReader(path)


def _csv(path: Path) -> CaptureReader:
    from hwbridge.can.io.csv import CsvReader

    return CsvReader(path)


def _mf4(path: Path) -> CaptureReader:
    from hwbridge.can.io.mf4 import mf4_reader

    return mf4_reader(path)


def _mf4_gz(path: Path) -> CaptureReader:
    """A compressed MF4: inflated once to a temporary file, read as a plain one."""
    from hwbridge.can.io.mf4_gz import Mf4GzReader

    return Mf4GzReader(path)


def _mf4_python_can(path: Path) -> CaptureReader:
    """An MF4 through python-can's reader (asammdf), the file's links checked first (a
    compressed one inflated to a temporary file first: python-can reads it into memory)."""
    from hwbridge._deferred import require_asammdf
    from hwbridge.can.io.mf4_links import check_for_asammdf

    require_asammdf()
    if path.suffix.lower() == ".gz":
        from hwbridge.can.io.mf4_gz import Mf4GzReader

        return Mf4GzReader(path, _mf4_python_can)
    check_for_asammdf(path)
    return PythonCanReader(path)


def _sqlite(path: Path) -> CaptureReader:
    from hwbridge.can.io.sqlite import SqliteReader

    return SqliteReader(path)  # python-can's reader writes to the file and reads views


READERS: dict[str, ReaderFactory] = {
    ".asc": _asc,
    ".asc.gz": _asc,
    ".blf": _blf,
    ".blf.gz": _blf,
    ".csv": _csv,
    ".csv.gz": _csv,
    ".db": _sqlite,
    ".log": _candump,
    ".log.gz": _candump,
    ".mf4": _mf4,
    ".mf4.gz": _mf4_gz,
    ".trc": PythonCanReader,
    ".trc.gz": PythonCanReader,
}
"""The reader of each capture format, by suffix (lower case; `.gz`: compressed)."""


def capture_formats() -> list[str]:
    """Suffixes of the captures that can be read (each but .db may also end in .gz)."""
    return sorted(s for s in READERS if not s.endswith(".gz"))


def _suffix(path: Path) -> str:
    """`path`'s key in READERS ('.mf4' for 'x.MF4', '.asc.gz' for 'x.asc.gz')."""
    suffix = reader_suffix(path)
    return suffix + ".gz" if path.suffix.lower() == ".gz" else suffix


def check_capture(path: str | Path) -> Path:
    """The path, if it names a readable file of a known format; OSError/ValueError if not."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "capture not found", str(p))
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "capture is a directory", str(p))
    regular_file(p)  # a FIFO or a device would block the reader for ever
    if not os.access(p, os.R_OK):
        raise PermissionError(errno.EACCES, "capture is not readable", str(p))
    if _suffix(p) not in READERS:
        shown = "".join(p.suffixes) or "no suffix"
        raise ValueError(
            f"{p.name}: unknown capture format ({shown}); supported: "
            + ", ".join(capture_formats())
            + " (any of them but .db gzip-compressed, e.g. .asc.gz)"
        )
    return p


def open_capture(path: str | Path, *, fast: bool = True) -> CheckedReader:
    """A reader for `path` (`READERS`; with `fast=False` python-can's reader of its format,
    the reference the array readers are tested against); whichever it is, its frames pass
    the frame checks (`CheckedReader`, the reader itself is its `reader`)."""
    p = check_capture(path)
    suffix = _suffix(p)
    if fast or suffix == ".db":
        return CheckedReader(READERS[suffix](p))
    if reader_suffix(p) == ".mf4":
        return CheckedReader(_mf4_python_can(p))
    return CheckedReader(PythonCanReader(p))
