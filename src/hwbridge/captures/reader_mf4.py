"""ASAM MDF4 bus logging (CANedge, python-can's MF4Writer) read as arrays through asammdf.

python-can's MF4Reader asks asammdf for the same `CAN_DataFrame` channel group and then builds
a `Message` per record; here the record arrays are used as they are, a chunk of records at a
time, so memory stays bounded whatever the file's size.

asammdf trusts the file: before it opens one, `check_for_asammdf` refuses links that loop,
blocks listed twice and DZ blocks that inflate to more than they say. A group then yields at
most the records its data group's blocks can hold (`MdfLinks.max_records`), whatever count it
claims, and a read asks asammdf for at most `MF4_CHUNK_BYTES` of records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hwbridge.captures.frames import CaptureError, FrameChunk, ReaderCounts

if TYPE_CHECKING:
    from hwbridge.captures.mdf_links import MdfLinks

__all__ = ["FIELDS", "MAX_RECORD_BYTES", "Mf4Reader", "data_frames"]

_FLAG_CG_BUS_EVENT = 0x02
_SOURCE_BUS = 0x02
_BUS_TYPE_CAN = 0x02
_DLC2LEN = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64], np.uint8)
MF4_CHUNK_FRAMES = 131_072
"""Records read at once: FD-capable loggers store 64 data bytes a record, and asammdf keeps a
few copies of them while reading, so MF4 chunks are half the size of the others."""
MF4_CHUNK_BYTES = 32 * 1024 * 1024
"""Bytes of records read at once: fewer records a read when they are large."""
MAX_RECORD_BYTES = 65_536
"""A CAN_DataFrame record holds a time stamp, an id, flags and at most 64 data bytes (or an
offset into signal data): a group of larger records is refused."""


def _open(path: Path) -> tuple[Any, MdfLinks]:
    from hwbridge.captures.mdf_guard import check_for_asammdf

    links = check_for_asammdf(path)  # loops, blocks listed twice, deflate bombs: refused here
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
        return MDF(path, process_bus_logging=False), links  # type: ignore[call-arg]
    except Exception as exc:  # asammdf raises many types for a file it cannot read
        raise CaptureError(path, "file header", f"not a readable MDF4 file: {exc}") from None


class Mf4Reader:
    """Frame chunks from the CAN bus-logging groups of an MDF4 file."""

    def __init__(self, path: str | Path, chunk_frames: int = MF4_CHUNK_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._mdf, links = _open(self.path)
        self._groups: list[tuple[int, int, int]] = []  # (index, records to read, per read)
        self._total = 0
        self._done = 0
        self._where = "file header"
        try:
            self._start_us = round(self._mdf.header.start_time.timestamp() * 1_000_000)
            for index, group in enumerate(self._mdf.groups):
                self._group(index, group, links)
        except CaptureError:
            self.close()
            raise
        except Exception as exc:  # what asammdf made of a file it could open
            self.close()
            raise CaptureError(self.path, "file header", f"unreadable MDF4 file: {exc}") from None

    def _group(self, index: int, group: Any, links: MdfLinks) -> None:
        channel_group = group.channel_group
        source = channel_group.acq_source
        if not channel_group.flags & _FLAG_CG_BUS_EVENT or not channel_group.cycles_nr:
            return
        if source is None or not source.source_type & _SOURCE_BUS:
            return
        if source.bus_type != _BUS_TYPE_CAN:
            return
        # never more records than the group's data blocks hold, whatever count it claims
        most = links.max_records(channel_group.address, group.data_group.address)
        records = min(int(channel_group.cycles_nr), most)
        names = {c.name for c in group.channels}
        if "CAN_DataFrame" in names:
            size = channel_group.samples_byte_nr + channel_group.invalidation_bytes_nr
            if size > MAX_RECORD_BYTES:
                raise CaptureError(
                    self.path, f"channel group {index}", f"corrupt: records of {size} bytes"
                )
            self._groups.append((index, records, max(1, min(self._chunk, MF4_CHUNK_BYTES // size))))
            self._total += records
        elif "CAN_ErrorFrame" in names:
            self.counts.error_frames += records
        elif "CAN_RemoteFrame" in names:
            self.counts.remote_frames += records

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
            for group, records, step in self._groups:
                cycles = int(self._mdf.groups[group].channel_group.cycles_nr)
                for offset in range(0, records, step):
                    self._where = f"record {offset} of channel group {group}"
                    count = min(step, records - offset)
                    chunk = self._read(group, offset, count)
                    self._done += count
                    if len(chunk):
                        yield chunk
                if cycles > records:
                    self._where = f"record {records} of channel group {group}"
                    raise CaptureError(self.path, self._where, "truncated: records missing")
        finally:
            self.close()

    def _read(self, group: int, offset: int, count: int) -> FrameChunk:
        try:
            signal = self._mdf.get("CAN_DataFrame", group, record_offset=offset, record_count=count)
        except Exception as exc:
            raise CaptureError(self.path, self._where, f"unreadable records: {exc}") from None
        samples = signal.samples[:count]
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
        stamps = np.rint(np.asarray(signal.timestamps[:n], np.float64) * 1e6).astype(np.int64)
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
