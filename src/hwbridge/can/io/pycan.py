"""Every other capture format through python-can's own readers, gathered into chunks.

TRC captures (and, when the array readers are not wanted, ASC, candump .log and CSV) are
text, and a compressed MF4 goes through asammdf; python-can parses them into `Message`
objects and this module packs those into frame columns, so the rest of the pipeline
(decoding by message, writing Parquet) is the same for every format. A text file reaches
python-can through `BoundedLines` (no line longer than MAX_LINE_BYTES), each message passes
the frame checks before it is packed (`message_fault`: no nan time, no id beyond 32 bits,
no frame wider than 64 bytes; one that fails is a malformed frame), a TRC line python-can
cannot parse is a malformed line (python-can drops it with a warning or stops), and
python-can's log records never quote more than a few hundred characters of a line.
"""

from __future__ import annotations

import functools
import gzip
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from hwbridge.can.io.bounded_lines import BoundedLines
from hwbridge.can.io.frame_checks import message_fault
from hwbridge.can.io.frames import (
    DECODE_FRAMES,
    MAX_NOTE,
    CaptureError,
    FrameChunk,
    ReaderCounts,
    note_text,
)

__all__ = ["PythonCanReader", "pack_frames", "pack_messages", "reader_suffix"]

_GZIP = ".gz"
_READER_LOGGERS = (
    "can.io.asc",
    "can.io.blf",
    "can.io.canutils",
    "can.io.csv",
    "can.io.mf4",
    "can.io.sqlite",
    "can.io.trc",
)


class _ShortArguments(logging.Filter):
    """Cuts what a python-can reader's log record quotes (TRC's warning quotes the whole
    line it cannot parse) to MAX_NOTE characters."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_cut(a) for a in record.args)
        if isinstance(record.msg, str) and len(record.msg) > MAX_NOTE:
            record.msg = _cut(record.msg)
        return True


def _cut(value: Any) -> Any:
    if isinstance(value, str | bytes | bytearray) and len(value) > MAX_NOTE:
        return f"{value[:MAX_NOTE]!r}... ({len(value)} long)"
    return value


for _name in _READER_LOGGERS:
    _logger = logging.getLogger(_name)
    if not any(type(f).__name__ == _ShortArguments.__name__ for f in _logger.filters):
        _logger.addFilter(_ShortArguments())


@functools.cache
def _line_tolerant_trc() -> type[Any]:
    """python-can's TRC reader, but a line it cannot parse is counted as malformed (with its
    number) and skipped, as the other text formats' lines are: python-can logs a warning and
    drops it (IndexError, so 0 frames and nothing wrong), or stops the capture (ValueError)."""
    from can.io.trc import TRCReader

    class LineTolerantTrc(TRCReader):
        malformed: Callable[[str], None]

        def _parse_line(self, line: str) -> Any:  # python-can's, without its warning
            if not line or line.startswith(";"):  # the header's last line: a file of no frame
                return None
            try:
                return self._parse_cols(tuple(line.split(maxsplit=self._num_columns)))
            except Exception as exc:  # IndexError, ValueError, KeyError: a field it lacks
                self.malformed(f"{type(exc).__name__}: {exc}")
                return None

    return LineTolerantTrc


def reader_suffix(path: Path) -> str:
    """The python-can reader suffix of `path` ('.mf4' for 'x.MF4', '.asc' for 'x.asc.gz')."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == _GZIP:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _reader_type(path: Path) -> Any:
    from can.io.player import MESSAGE_READERS

    reader_type = MESSAGE_READERS.get(reader_suffix(path))
    if reader_type is None:
        known = ", ".join(sorted(MESSAGE_READERS))
        raise ValueError(f"{path.name}: unknown capture format; supported: {known} (or .gz)")
    return reader_type


def _options(path: Path) -> dict[str, Any]:
    if reader_suffix(path) == ".asc":
        return {"relative_timestamp": False}  # absolute times from the file's date line
    return {}


MESSAGE_FRAMES = DECODE_FRAMES
"""Frames gathered as python-can messages before they are packed: a message held as Python
objects costs about 150 bytes, so a chunk of them is about 12 MB (84 MB at CHUNK_FRAMES),
and the decoder joins chunks up to this many frames anyway."""


class PythonCanReader:
    """Frame chunks from any capture python-can reads."""

    def __init__(self, path: str | Path, chunk_frames: int = MESSAGE_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._frames = 0
        self._size = max(1, self.path.stat().st_size)
        self._raw: BinaryIO | None = None  # the file under a text capture's lines
        self._closed = False
        self._lines: BoundedLines | None = None
        try:
            self._reader = self._open()
        except (ValueError, ImportError, NotImplementedError):
            self._close_raw()
            raise
        except Exception as exc:
            self._close_raw()
            raise CaptureError(
                self.path, "start of file", note_text(f"unreadable: {exc}")
            ) from None

    def _open(self) -> Any:
        from can.io.generic import TextIOMessageReader

        reader_type = _reader_type(self.path)
        compressed = self.path.suffix.lower() == _GZIP
        if issubclass(reader_type, TextIOMessageReader):
            self._raw = open(self.path, "rb")  # noqa: SIM115 - closed in close()
            binary: Any = gzip.GzipFile(fileobj=self._raw, mode="rb") if compressed else self._raw
            self._lines = BoundedLines(binary, self.counts.malformed_line)
            if reader_suffix(self.path) == ".trc":
                trc = _line_tolerant_trc()(self._lines)
                trc.malformed = self._lines.malformed
                return trc
            return reader_type(self._lines, **_options(self.path))
        if compressed:
            return reader_type(gzip.open(self.path, "rb"), **_options(self.path))
        return reader_type(self.path, **_options(self.path))

    @property
    def progress(self) -> float:
        file = getattr(self._reader, "file", None)
        raw = getattr(file, "fileobj", None) or getattr(file, "buffer", None) or file
        if self._raw is not None:
            raw = self._raw
        try:
            return min(1.0, raw.tell() / self._size) if raw is not None else 0.0
        except (OSError, ValueError, AttributeError):
            return 0.0

    @property
    def position(self) -> str:
        if self._lines is not None:
            return f"line {self._lines.number}"
        return f"after frame {self._frames}"

    def close(self) -> None:
        """Releases the file; idempotent (python-can's MF4Reader.stop() is not: a second one
        raised AttributeError)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._reader.stop()
        finally:
            self._close_raw()

    def _close_raw(self) -> None:
        if self._raw is not None:
            self._raw.close()

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
                    if stamps:  # the frames before the damage are the capture's too
                        yield pack_frames(stamps, ids, extended, payloads, channels)
                    why = note_text(f"corrupt: {exc}")
                    raise CaptureError(self.path, self.position, why) from None
                self._frames += 1
                if reason := message_fault(msg):
                    counts.malformed_frame(self._frames, reason)
                    continue
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
                plain = type(channel) is int and -1 <= channel <= _MAX_CHANNEL
                channels.append(channel if plain else _channel(channel))
                if len(stamps) >= self._chunk:
                    yield pack_frames(stamps, ids, extended, payloads, channels)
                    stamps, ids, extended, payloads, channels = [], [], [], [], []
            if stamps:
                yield pack_frames(stamps, ids, extended, payloads, channels)
        finally:
            self.close()


def pack_messages(messages: Sequence[Any]) -> FrameChunk:
    """python-can data frames as a chunk, as this reader packs them (they pass
    `message_fault`)."""
    return pack_frames(
        [m.timestamp for m in messages],
        [m.arbitration_id for m in messages],
        [m.is_extended_id for m in messages],
        [bytes(m.data) for m in messages],
        [_channel(m.channel) for m in messages],
    )


_MAX_CHANNEL = 32767


def _channel(channel: Any) -> int:
    """python-can's channel as the column holds it: a number (clipped), else -1."""
    return max(-1, min(channel, _MAX_CHANNEL)) if isinstance(channel, int) else -1


def pack_frames(
    stamps: Sequence[float],
    ids: Sequence[int],
    extended: Sequence[bool],
    payloads: Sequence[bytes],
    channels: Sequence[int],
) -> FrameChunk:
    """Frames as columns; each must pass `frame_fault` (a wider one would widen every row,
    an id beyond 32 bits raise OverflowError)."""
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
        np.asarray(channels, np.int16),
    )
