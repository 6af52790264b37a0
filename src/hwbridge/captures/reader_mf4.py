"""ASAM MDF4 bus logging (CANedge, python-can's MF4Writer) read as arrays through asammdf.

python-can's MF4Reader asks asammdf for the same `CAN_DataFrame` channel group and then builds
a `Message` per record; here the record arrays are used as they are, a chunk of records at a
time, so memory stays bounded whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hwbridge.captures.frames import CaptureError, FrameChunk, ReaderCounts

__all__ = ["FIELDS", "Mf4Reader", "data_frames"]

_FLAG_CG_BUS_EVENT = 0x02
_SOURCE_BUS = 0x02
_BUS_TYPE_CAN = 0x02
_DLC2LEN = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64], np.uint8)
MF4_CHUNK_FRAMES = 131_072
"""Records read at once: FD-capable loggers store 64 data bytes a record, and asammdf keeps a
few copies of them while reading, so MF4 chunks are half the size of the others."""


def _open(path: Path) -> Any:
    try:
        from hwbridge._deferred import require_asammdf

        require_asammdf()
        from asammdf import MDF
    except ImportError:
        raise ImportError(
            "reading .mf4 captures needs asammdf: pip install 'mcs-hwbridge[captures]'"
        ) from None
    try:
        # the bus-logging index asammdf builds on opening (ids per group) is not used here
        return MDF(path, process_bus_logging=False)  # type: ignore[call-arg]
    except Exception as exc:  # asammdf raises many types for a file it cannot read
        raise CaptureError(path, "file header", f"not a readable MDF4 file: {exc}") from None


class Mf4Reader:
    """Frame chunks from the CAN bus-logging groups of an MDF4 file."""

    def __init__(self, path: str | Path, chunk_frames: int = MF4_CHUNK_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._mdf = _open(self.path)
        self._start_us = round(self._mdf.header.start_time.timestamp() * 1_000_000)
        self._groups: list[int] = []
        self._total = 0
        self._done = 0
        self._where = "file header"
        for index, group in enumerate(self._mdf.groups):
            channel_group = group.channel_group
            source = channel_group.acq_source
            if not channel_group.flags & _FLAG_CG_BUS_EVENT or not channel_group.cycles_nr:
                continue
            if source is None or not source.source_type & _SOURCE_BUS:
                continue
            if source.bus_type != _BUS_TYPE_CAN:
                continue
            names = {c.name for c in group.channels}
            if "CAN_DataFrame" in names:
                self._groups.append(index)
                self._total += int(channel_group.cycles_nr)
            elif "CAN_ErrorFrame" in names:
                self.counts.error_frames += int(channel_group.cycles_nr)
            elif "CAN_RemoteFrame" in names:
                self.counts.remote_frames += int(channel_group.cycles_nr)

    @property
    def progress(self) -> float:
        return 1.0 if not self._total else min(1.0, self._done / self._total)

    @property
    def position(self) -> str:
        return self._where

    def close(self) -> None:
        if self._mdf is not None:
            self._mdf.close()
            self._mdf = None

    def chunks(self) -> Iterator[FrameChunk]:
        try:
            for group in self._groups:
                cycles = int(self._mdf.groups[group].channel_group.cycles_nr)
                for offset in range(0, cycles, self._chunk):
                    self._where = f"record {offset} of channel group {group}"
                    chunk = self._read(group, offset)
                    self._done += min(self._chunk, cycles - offset)
                    if len(chunk):
                        yield chunk
        finally:
            self.close()

    def _read(self, group: int, offset: int) -> FrameChunk:
        try:
            signal = self._mdf.get(
                "CAN_DataFrame", group, record_offset=offset, record_count=self._chunk
            )
        except Exception as exc:
            raise CaptureError(self.path, self._where, f"unreadable records: {exc}") from None
        samples = signal.samples
        names = samples.dtype.names or ()
        n = len(samples)
        if n == 0:
            raise CaptureError(self.path, self._where, "truncated: records missing")

        def field(name: str) -> npt.NDArray[Any] | None:
            key = f"CAN_DataFrame.{name}"
            return np.asarray(samples[key]) if key in names else None

        fields = {name: field(name) for name in FIELDS}
        if fields["ID"] is None:
            raise CaptureError(self.path, self._where, "no CAN_DataFrame.ID channel")
        stamps = np.rint(np.asarray(signal.timestamps, np.float64) * 1e6).astype(np.int64)
        return data_frames(n, fields, stamps + self._start_us)


FIELDS = ("ID", "IDE", "DataLength", "DLC", "DataBytes", "BusChannel")
"""The members of a CAN_DataFrame record that make a frame (ID is required)."""


def data_frames(
    n: int, fields: dict[str, npt.NDArray[Any] | None], stamps_us: npt.NDArray[np.int64]
) -> FrameChunk:
    """`n` CAN_DataFrame records (their members by name, as python-can's MF4Reader reads
    them) as a chunk."""
    raw_id = fields["ID"]
    assert raw_id is not None
    raw_id = raw_id.astype(np.uint32)
    ide = fields["IDE"]
    if ide is not None:
        extended = ide.astype(bool)
    else:  # no IDE channel: the id's flag bit, else its size, tells
        extended = ((raw_id & np.uint32(0x80000000)) != 0) | (
            (raw_id & np.uint32(0x1FFFFFFF)) > 0x7FF
        )
    data_length = fields["DataLength"]
    if data_length is None:
        dlc = fields["DLC"]
        data_length = _DLC2LEN[np.minimum(dlc, 15)] if dlc is not None else None
    payload = fields["DataBytes"]
    if payload is None:
        payload = np.zeros((n, 8), np.uint8)
    elif payload.dtype == object:  # variable-length bytes: rare, so a loop is fine
        rows = [bytes(p) for p in payload]
        width = max(8, max((len(r) for r in rows), default=0))
        buf = np.zeros((n, width), np.uint8)
        for i, r in enumerate(rows):
            buf[i, : len(r)] = np.frombuffer(r, np.uint8)
        payload = buf
    payload = payload.reshape(n, -1).astype(np.uint8, copy=False)
    if data_length is None:
        data_length = np.full(n, payload.shape[1], np.uint8)
    length = np.minimum(data_length.astype(np.int64), payload.shape[1]).astype(np.uint8)
    # FD-capable loggers store 64 bytes a record: keep the bytes the frames carry
    width = max(1, int(length.max(initial=0)))
    data = payload[:, :width]
    if bool(np.any(length < width)):  # bytes past a frame's length are not its data
        cols = np.arange(width, dtype=np.int64)
        data = np.where(cols[None, :] < length[:, None], data, 0).astype(np.uint8)
    else:
        data = np.ascontiguousarray(data)
    channel = fields["BusChannel"]
    return FrameChunk(
        stamps_us,
        raw_id & np.uint32(0x1FFFFFFF),
        extended,
        length,
        data,
        channel.astype(np.int16) if channel is not None else np.full(n, -1, np.int16),
    )
