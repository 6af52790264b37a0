"""SQLite captures as python-can's `SqliteWriter` writes them, read without its reader.

python-can's `SqliteReader` opens the file to write (a journal beside it is rolled back into
it), reads `SELECT * FROM messages` whatever `messages` is (a recursive view makes endless
rows of an 8 KB file), and loads every blob whole. Here the file is opened read-only and
immutable (SQLite then takes no lock and makes no `-shm` or `-wal` file beside a WAL-mode
database; what a `-wal` file left by a writer holds is not read),
`messages` must be a stored table of python-can's seven columns (`ts, arbitration_id,
extended, remote, error, dlc, data`, by position, as python-can reads them) with none
computed, and a blob longer than a frame is measured, never loaded. Each row is what
python-can's reader makes of it; a row no column holds (a timestamp that is not a number of
seconds below 9·10^9, an id outside 32 bits, data that is not a blob of at most 64 bytes) is a
malformed frame. So a capture gives at most one frame per stored row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hwbridge.can.io.capture_file import regular_file
from hwbridge.can.io.frame_checks import MAX_DATA, frame_fault
from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts
from hwbridge.can.io.pycan import MESSAGE_FRAMES, pack_frames

__all__ = ["SqliteReader"]

_TABLE = "messages"  # python-can's default table name
_COLUMNS = 7


class SqliteReader:
    """Frame chunks from a python-can SQLite capture (`.db`)."""

    def __init__(self, path: str | Path, chunk_frames: int = MESSAGE_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._rows = 0
        if self.path.suffix.lower() == ".gz":
            raise CaptureError(
                self.path, "start of file", "a SQLite capture cannot be read gzipped"
            )
        regular_file(self.path)
        try:
            self._db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro&immutable=1",
                uri=True,
                check_same_thread=False,  # read on a prefetch thread, one thread at a time
            )
        except sqlite3.Error as exc:
            raise CaptureError(self.path, "start of file", f"unreadable: {exc}") from None
        try:
            self._select = self._query()
            self._total = self._row_count()
        except sqlite3.Error as exc:
            self._db.close()
            raise CaptureError(self.path, "start of file", f"not a SQLite capture: {exc}") from None
        except CaptureError:
            self._db.close()
            raise

    def _query(self) -> str:
        """python-can's columns, by position; the data only when it is a blob a frame holds."""
        self._db.execute("PRAGMA query_only = ON")
        found = self._db.execute(
            "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE", (_TABLE,)
        ).fetchone()
        if found is None:
            raise CaptureError(self.path, "start of file", f"no {_TABLE} table")
        kind = "virtual table" if str(found[1]).upper().startswith("CREATE VIRTUAL") else found[0]
        if kind != "table":  # a view or a virtual table makes rows the file does not hold
            raise CaptureError(self.path, "start of file", f"{_TABLE} is a {kind}, not a table")
        columns = self._db.execute(f"PRAGMA table_xinfo({_TABLE})").fetchall()
        if any(c[6] for c in columns):  # hidden: computed on every read
            raise CaptureError(self.path, "start of file", f"{_TABLE} has generated columns")
        if len(columns) != _COLUMNS:
            raise CaptureError(
                self.path, "start of file", f"{_TABLE} has {len(columns)} columns, not {_COLUMNS}"
            )
        ts, can_id, extended, remote, error, _, data = ('"' + c[1].replace('"', '""') + '"'
                                                        for c in columns)  # fmt: skip
        return (
            f"SELECT {ts}, {can_id}, {extended}, {remote}, {error}, typeof({data}), "
            f"length({data}), CASE WHEN typeof({data}) = 'blob' AND length({data}) <= {MAX_DATA} "
            f"THEN {data} END FROM {_TABLE}"
        )

    def _row_count(self) -> int:
        """About how many rows there are, for `progress` (the largest rowid: no scan)."""
        try:
            last = self._db.execute(f"SELECT max(rowid) FROM {_TABLE}").fetchone()[0]
        except sqlite3.Error:  # a table WITHOUT ROWID
            return 0
        return last if isinstance(last, int) else 0

    @property
    def progress(self) -> float:
        return min(1.0, self._rows / self._total) if self._total > 0 else 0.0

    @property
    def position(self) -> str:
        return f"row {self._rows}"

    def close(self) -> None:
        self._db.close()

    def chunks(self) -> Iterator[FrameChunk]:
        try:
            cursor = self._db.execute(self._select)
            while True:
                try:
                    rows = cursor.fetchmany(self._chunk)
                except sqlite3.Error as exc:
                    raise CaptureError(self.path, self.position, f"corrupt: {exc}") from None
                if not rows:
                    return
                chunk = self._frames(rows)
                if len(chunk):
                    yield chunk
        except sqlite3.Error as exc:
            raise CaptureError(self.path, self.position, f"unreadable: {exc}") from None
        finally:
            self.close()

    def _frames(self, rows: list[tuple[Any, ...]]) -> FrameChunk:
        stamps: list[float] = []
        ids: list[int] = []
        extended: list[bool] = []
        payloads: list[bytes] = []
        counts = self.counts
        for ts, can_id, ext, remote, error, kind, size, data in rows:
            self._rows += 1
            reason = frame_fault(ts, can_id, size if kind == "blob" else 0)
            if reason is None and kind not in ("blob", "null"):
                reason = f"data is {kind}, not a blob"
            if reason is not None:
                counts.malformed_frame(self._rows, reason)
            elif error:
                counts.error_frames += 1
            elif remote:
                counts.remote_frames += 1
            else:
                stamps.append(ts)
                ids.append(can_id)
                extended.append(bool(ext))
                payloads.append(data or b"")
        return pack_frames(stamps, ids, extended, payloads, [-1] * len(stamps))
