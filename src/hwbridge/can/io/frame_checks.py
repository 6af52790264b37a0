"""The one set of checks every frame of every capture reader passes, and the reader that
applies them to any other.

A frame no column holds - a timestamp that is nan, inf or beyond `MAX_SECONDS`, an id
outside 32 bits, more than `MAX_DATA` data bytes - is never decoded: a nan time became a row
of year -290308, an id beyond 32 bits ended the capture with an OverflowError, a 40,000-byte
frame widened its whole chunk. Readers that parse messages one at a time ask
`message_fault`; `CheckedReader`, which `open_capture` puts around every reader, asks
`chunk_faults` of each chunk at once (a few numpy reductions when nothing is wrong), so the
readers hardened elsewhere (BLF, MF4) are held to the same checks. What is dropped is counted
(`ReaderCounts.malformed_frames`) and the first few are named ("frame 12: timestamp nan out
of range").
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.frames import MAX_MALFORMED, CaptureError, FrameChunk, ReaderCounts

if TYPE_CHECKING:
    from hwbridge.can.io.readers import CaptureReader

__all__ = [
    "MAX_DATA",
    "MAX_ID",
    "MAX_LINE_BYTES",
    "MAX_SECONDS",
    "OVERFLOW_US",
    "CheckedReader",
    "checked",
    "chunk_faults",
    "frame_fault",
    "message_fault",
]

MAX_SECONDS = 9e9
"""Timestamps this many seconds or more from 1970 (before 1684, from 2255 on) are malformed:
every later stage must hold the time, and nanoseconds since 1970 (DuckDB's epoch_ns, pandas,
Arrow's ns timestamps) fit 64 bits only up to 9.22e9 s (the year 2262)."""
MAX_MICROSECONDS = 9 * 10**15
"""`MAX_SECONDS` in the column's unit. nan and inf become INT64_MIN there, out of range."""
OVERFLOW_US = 2**62
"""What a reader puts in the microsecond column for a time it could not compute in 64 bits
(a BLF count of 10 us units near 2^64): out of range, and still so after any start time of
a file is added."""
MAX_ID = 2**32
"""Ids a reader may give (python-can's, before the flag bits above the 29 of the id are
masked off); the column holds the 29 bits."""
ID_MASK = 0x1FFFFFFF
MAX_DATA = 64
"""Data bytes a frame may carry (CAN FD's most)."""
MAX_LINE_BYTES = 1024 * 1024
"""A line of a text capture longer than this is reported and skipped, never held whole."""

Bools = npt.NDArray[np.bool_]


def frame_fault(timestamp: Any, arbitration_id: Any, data_bytes: int) -> str | None:
    """Why a frame of these values has no place in the frame columns (None: it has one)."""
    # a number, not a str that numpy would read as one; float first: isinstance of an ABC is slow
    real = type(timestamp) is float or isinstance(timestamp, numbers.Real)
    if not (real and -MAX_SECONDS < timestamp < MAX_SECONDS):
        return f"timestamp {_short(timestamp)} out of range"
    try:
        frame_id = operator.index(arbitration_id)
    except TypeError:
        return f"id {_short(arbitration_id)} is not an integer"
    if not 0 <= frame_id < MAX_ID:
        return f"id {_short(frame_id)} out of range"
    if data_bytes > MAX_DATA:
        return f"{data_bytes} data bytes (at most {MAX_DATA})"
    return None


def message_fault(message: Any) -> str | None:
    """Why a python-can message has no place in the frame columns (None: it has one)."""
    t, frame_id, size = message.timestamp, message.arbitration_id, len(message.data)
    if (  # the usual message, in one expression: this runs once a frame
        type(t) is float
        and -MAX_SECONDS < t < MAX_SECONDS
        and type(frame_id) is int
        and 0 <= frame_id < MAX_ID
        and size <= MAX_DATA
    ):
        return None
    return frame_fault(t, frame_id, size)


def _short(value: Any) -> str:
    text = str(value) if isinstance(value, numbers.Number) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def chunk_faults(chunk: FrameChunk) -> Bools:
    """Which frames of `chunk` no column holds: the vectorised twin of `frame_fault`, plus a
    length beyond the chunk's data."""
    t = chunk.timestamp_us
    # two comparisons: abs(INT64_MIN), what nan becomes, is INT64_MIN again
    bad: Bools = (t <= -MAX_MICROSECONDS) | (t >= MAX_MICROSECONDS)
    bad |= chunk.arbitration_id > ID_MASK
    bad |= chunk.length > min(MAX_DATA, chunk.data.shape[1])
    return bad


def _fits(chunk: FrameChunk) -> bool:
    """Whether every frame passes `chunk_faults`, by reductions (no array is made)."""
    if not len(chunk):
        return True
    t = chunk.timestamp_us
    return bool(
        int(t.min()) > -MAX_MICROSECONDS
        and int(t.max()) < MAX_MICROSECONDS
        and int(chunk.arbitration_id.max()) <= ID_MASK
        and int(chunk.length.max()) <= min(MAX_DATA, chunk.data.shape[1])
    )


def _row_fault(chunk: FrameChunk, row: int) -> str:
    t = int(chunk.timestamp_us[row])
    if not -MAX_MICROSECONDS < t < MAX_MICROSECONDS:
        if t == np.iinfo(np.int64).min:
            shown = "nan or inf"
        elif abs(t) >= OVERFLOW_US // 2:
            shown = "beyond 64 bits of microseconds"
        else:
            shown = f"{t / 1e6:g} s"
        return f"timestamp {shown} out of range"
    if int(chunk.arbitration_id[row]) > ID_MASK:
        return f"id {int(chunk.arbitration_id[row]):#x} beyond 29 bits"
    length = int(chunk.length[row])
    if length > MAX_DATA:
        return f"{length} data bytes (at most {MAX_DATA})"
    return f"{length} data bytes in a chunk {chunk.data.shape[1]} bytes wide"


def checked(chunk: FrameChunk, counts: ReaderCounts, first: int) -> FrameChunk:
    """`chunk` without the frames no column holds (counted in `counts`; `first` is the
    number of its first frame in the capture, from 1), its data no wider than `MAX_DATA`."""
    if not _fits(chunk):
        bad = chunk_faults(chunk)
        rows = np.flatnonzero(bad)
        named = max(0, MAX_MALFORMED - len(counts.frame_notes))
        for row in rows[:named]:
            counts.malformed_frame(first + int(row), _row_fault(chunk, int(row)))
        counts.malformed_frames += len(rows) - min(named, len(rows))
        chunk = chunk.take(~bad)
    if chunk.data.shape[1] > MAX_DATA:  # every length fits now: the rest is zero padding
        width = max(8, int(chunk.length.max(initial=0)))
        chunk = FrameChunk(
            chunk.timestamp_us,
            chunk.arbitration_id,
            chunk.extended,
            chunk.length,
            np.ascontiguousarray(chunk.data[:, :width]),
            chunk.channel,
        )
    return chunk


class CheckedReader:
    """Any capture reader, its chunks checked: frames no column holds are dropped and counted
    in its `counts`. A capture that gives no frame at all, only malformed lines or frames,
    ends with a CaptureError: it is not the format it claims, and "0 frames" would hide it."""

    def __init__(self, reader: CaptureReader) -> None:
        self.reader = reader
        self.path: Path = reader.path
        self.counts: ReaderCounts = reader.counts
        self._frames = 0  # data frames the reader gave, checked or not

    @property
    def progress(self) -> float:
        return self.reader.progress

    @property
    def position(self) -> str:
        return self.reader.position

    def chunks(self) -> Iterator[FrameChunk]:
        kept = 0
        for chunk in self.reader.chunks():
            first = self._frames + 1
            self._frames += len(chunk)
            good = checked(chunk, self.counts, first)
            kept += len(good)
            if len(good):
                yield good
        counts = self.counts
        other = counts.error_frames + counts.remote_frames
        if not kept and not other and (counts.malformed_lines or counts.malformed_frames):
            first_note = (counts.malformed or counts.frame_notes)[0]
            raise CaptureError(
                self.path,
                "end of file",
                f"no frame could be read: {counts.malformed_lines} malformed line(s), "
                f"{counts.malformed_frames} malformed frame(s) (first: {first_note})",
            )

    def close(self) -> None:
        self.reader.close()
