"""Frames as columns: what every capture reader yields and every decoder consumes.

A python-can `Message` per frame costs more than decoding the frame; a chunk holds the same
frames as a few numpy arrays, so the readers fill them in bulk and the decoders work on them
by message with numpy instead of frame by frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_MALFORMED",
    "CaptureError",
    "FrameChunk",
    "ReaderCounts",
    "coalesced",
    "concat_chunks",
    "empty_chunk",
    "note_text",
]

MAX_MALFORMED = 20
"""Malformed lines of a text capture listed by number, and malformed frames of any capture
(all of them are counted)."""

CHUNK_FRAMES = 262_144
"""Frames per chunk: enough for numpy to amortise its per-call cost, small enough that a
chunk and its decoded columns stay a few tens of megabytes."""

U8 = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True, eq=False)
class FrameChunk:
    """Data frames of a capture, in file order (error and remote frames are only counted).

    `data` is zero padded to the longest frame of the chunk; `length` says how many of its
    bytes each frame really carried.
    """

    timestamp_us: npt.NDArray[np.int64]  # microseconds since 1970-01-01 UTC
    arbitration_id: npt.NDArray[np.uint32]  # 11 or 29 bits, without flags
    extended: npt.NDArray[np.bool_]
    length: npt.NDArray[Any]  # bytes carried (uint8; uint16 for reassembled transfers)
    data: U8  # shape (frames, width)
    channel: npt.NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, np.int16))

    def __post_init__(self) -> None:
        n = len(self.timestamp_us)
        if len(self.channel) != n:
            object.__setattr__(self, "channel", np.full(n, -1, np.int16))
        for name in ("arbitration_id", "extended", "length", "data"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"FrameChunk.{name} has {len(getattr(self, name))} rows, not {n}")

    def __len__(self) -> int:
        return len(self.timestamp_us)

    def take(self, rows: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> FrameChunk:
        """The frames at `rows` (indices or a mask), in that order."""
        return FrameChunk(
            self.timestamp_us[rows],
            self.arbitration_id[rows],
            self.extended[rows],
            self.length[rows],
            self.data[rows],
            self.channel[rows],
        )


def empty_chunk() -> FrameChunk:
    return FrameChunk(
        np.zeros(0, np.int64),
        np.zeros(0, np.uint32),
        np.zeros(0, np.bool_),
        np.zeros(0, np.uint8),
        np.zeros((0, 8), np.uint8),
        np.zeros(0, np.int16),
    )


def concat_chunks(chunks: Sequence[FrameChunk]) -> FrameChunk:
    """One chunk from several (data padded to the widest)."""
    if not chunks:
        return empty_chunk()
    if len(chunks) == 1:
        return chunks[0]
    width = max(c.data.shape[1] for c in chunks)
    data = np.zeros((sum(len(c) for c in chunks), width), np.uint8)
    row = 0
    for c in chunks:
        data[row : row + len(c), : c.data.shape[1]] = c.data
        row += len(c)
    return FrameChunk(
        np.concatenate([c.timestamp_us for c in chunks]),
        np.concatenate([c.arbitration_id for c in chunks]),
        np.concatenate([c.extended for c in chunks]),
        np.concatenate([c.length for c in chunks]),
        data,
        np.concatenate([c.channel for c in chunks]),
    )


DECODE_FRAMES = 65_536
"""Frames decoded at once: each chunk costs every message's table a fixed share of work,
so readers' small blocks are joined up to this many first."""


def coalesced(chunks: Iterable[FrameChunk], frames: int = DECODE_FRAMES) -> Iterator[FrameChunk]:
    """`chunks` joined into chunks of at least `frames` frames (the last may be smaller); the
    frames read before a reader's error come out before the error is raised."""
    pending: list[FrameChunk] = []
    count = 0
    source = iter(chunks)
    while True:
        try:
            chunk = next(source)
        except StopIteration:
            break
        except BaseException:
            if pending:
                yield concat_chunks(pending)
            raise
        pending.append(chunk)
        count += len(chunk)
        if count >= frames:
            yield concat_chunks(pending)
            pending, count = [], 0
    if pending:
        yield concat_chunks(pending)


MAX_NOTE = 200
"""Characters of a reason kept in a note: a reason may quote the file (python-can's errors
quote the field they could not read), and a note is shown, not the file."""


@dataclass(slots=True)
class ReaderCounts:
    """What a reader saw besides data frames."""

    error_frames: int = 0
    remote_frames: int = 0
    malformed_lines: int = 0  # lines of a text capture that could not be read, skipped
    malformed: list[str] = field(default_factory=list)  # the first few: "line 12: reason"
    malformed_frames: int = 0  # frames no column holds (see frame_checks), dropped
    frame_notes: list[str] = field(default_factory=list)  # the first few: "frame 9: reason"

    def malformed_line(self, number: int, reason: str) -> None:
        self.malformed_lines += 1
        if len(self.malformed) < MAX_MALFORMED:
            self.malformed.append(f"line {number}: {note_text(reason)}")

    def malformed_frame(self, number: int, reason: str) -> None:
        """The `number`th frame of the capture (from 1) was dropped for `reason`."""
        self.malformed_frames += 1
        if len(self.frame_notes) < MAX_MALFORMED:
            self.frame_notes.append(f"frame {number}: {note_text(reason)}")


def note_text(reason: str) -> str:
    """`reason` as a note shows it: at most MAX_NOTE characters, control characters escaped
    (a note is printed to a terminal)."""
    if len(reason) > MAX_NOTE:
        reason = reason[: MAX_NOTE - 3] + "..."
    if reason.isprintable():
        return reason
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in reason)


class CaptureError(Exception):
    """A capture that cannot be read on: truncated, corrupt, or not the format it claims.

    `position` says where (a byte offset, a record number); frames before it were read.
    """

    def __init__(self, path: str | Path, position: str, reason: str) -> None:
        self.path = str(path)
        self.position = position
        self.reason = reason
        super().__init__(f"{Path(path).name}: {reason} ({position})")
