"""Every other capture format through python-can's own readers, gathered into chunks.

ASC, candump .log, TRC, CSV and SQLite captures are text or rows; python-can parses them
into `Message` objects and this module only packs those into frame columns, so the rest
of the pipeline (decoding by message, writing Parquet) is the same for every format.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwbridge.captures.frames import CHUNK_FRAMES, CaptureError, FrameChunk, ReaderCounts

__all__ = ["PythonCanReader", "pack_messages", "reader_suffix"]

_GZIP = ".gz"


def reader_suffix(path: Path) -> str:
    """The python-can reader suffix of `path` ('.mf4' for 'x.MF4', '.asc' for 'x.asc.gz')."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == _GZIP:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _reader(path: Path) -> Any:
    from can.io.generic import TextIOMessageReader
    from can.io.player import MESSAGE_READERS

    suffix = reader_suffix(path)
    reader_type = MESSAGE_READERS.get(suffix)
    if reader_type is None:
        known = ", ".join(sorted(MESSAGE_READERS))
        raise ValueError(f"{path.name}: unknown capture format; supported: {known} (or .gz)")
    options: dict[str, Any] = {}
    if suffix == ".asc":
        options["relative_timestamp"] = False  # absolute times from the file's date line
    if path.suffix.lower() == _GZIP:
        mode = "rt" if issubclass(reader_type, TextIOMessageReader) else "rb"
        return reader_type(gzip.open(path, mode), **options)  # type: ignore[arg-type]
    return reader_type(path, **options)


class PythonCanReader:
    """Frame chunks from any capture python-can reads."""

    def __init__(self, path: str | Path, chunk_frames: int = CHUNK_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._frames = 0
        self._size = max(1, self.path.stat().st_size)
        try:
            self._reader = _reader(self.path)
        except (ValueError, ImportError, NotImplementedError):
            raise
        except Exception as exc:
            raise CaptureError(self.path, "start of file", f"unreadable: {exc}") from None

    @property
    def progress(self) -> float:
        file = getattr(self._reader, "file", None)
        raw = getattr(file, "fileobj", None) or getattr(file, "buffer", None) or file
        try:
            return min(1.0, raw.tell() / self._size) if raw is not None else 0.0
        except (OSError, ValueError, AttributeError):
            return 0.0

    @property
    def position(self) -> str:
        return f"after frame {self._frames}"

    def close(self) -> None:
        self._reader.stop()

    def chunks(self) -> Iterator[FrameChunk]:
        stamps: list[float] = []
        ids: list[int] = []
        extended: list[bool] = []
        payloads: list[bytes] = []
        channels: list[int] = []
        counts = self.counts
        frames = iter(self._reader)
        try:
            while True:
                try:
                    msg = next(frames)
                except StopIteration:
                    break
                except Exception as exc:
                    raise CaptureError(self.path, self.position, f"corrupt: {exc}") from None
                self._frames += 1
                if msg.is_error_frame:
                    counts.error_frames += 1
                    continue
                if msg.is_remote_frame:
                    counts.remote_frames += 1
                    continue
                stamps.append(msg.timestamp)
                ids.append(msg.arbitration_id)
                extended.append(msg.is_extended_id)
                payloads.append(bytes(msg.data))
                channel = msg.channel
                channels.append(channel if isinstance(channel, int) else -1)
                if len(stamps) >= self._chunk:
                    yield _pack(stamps, ids, extended, payloads, channels)
                    stamps, ids, extended, payloads, channels = [], [], [], [], []
            if stamps:
                yield _pack(stamps, ids, extended, payloads, channels)
        finally:
            self.close()


def pack_messages(messages: Sequence[Any]) -> FrameChunk:
    """python-can data frames as a chunk, as this reader packs them."""
    return _pack(
        [m.timestamp for m in messages],
        [m.arbitration_id for m in messages],
        [m.is_extended_id for m in messages],
        [bytes(m.data) for m in messages],
        [m.channel if isinstance(m.channel, int) else -1 for m in messages],
    )


def _pack(
    stamps: list[float],
    ids: list[int],
    extended: list[bool],
    payloads: list[bytes],
    channels: list[int],
) -> FrameChunk:
    n = len(stamps)
    lengths = np.fromiter((len(p) for p in payloads), np.int64, n)
    width = max(8, int(lengths.max(initial=0)))
    data = np.zeros((n, width), np.uint8)
    if n and bool(np.all(lengths == width)):
        data[:] = np.frombuffer(b"".join(payloads), np.uint8).reshape(n, width)
    else:
        for row, payload in enumerate(payloads):
            data[row, : len(payload)] = np.frombuffer(payload, np.uint8)
    return FrameChunk(
        np.rint(np.asarray(stamps, np.float64) * 1e6).astype(np.int64),
        np.asarray(ids, np.uint32) & np.uint32(0x1FFFFFFF),
        np.asarray(extended, np.bool_),
        lengths.astype(np.uint8),
        data,
        np.clip(np.asarray(channels, np.int64), -1, 32767).astype(np.int16),
    )
