"""ISO-TP (ISO 15765-2) transfers put back together before decoding, as CANedge decoders do.

UDS and OBD-II answers longer than one frame arrive as a first frame and consecutive frames.
Databases written for such payloads (CSS Electronics' `*-uds.dbc`, `tp_uds.dbc`) describe the
reassembled payload laid out the way CSS Electronics' decoders build it: a single frame as it
is (its PCI byte first), a multi-frame transfer as the first frame from its second byte on
(the low byte of the length, then the service id...) followed by each consecutive frame
without its PCI byte. A transfer becomes one row, stamped with its first frame's time.

Frames are reassembled per channel and id in file order; a consecutive frame out of sequence
drops the transfer it belongs to (counted), as a receiver would.

Bounds, whatever the capture holds: a transfer keeps at most 4,097 bytes, and at most
`MAX_OPEN` (4,096) transfers are open at once, about 17 MB. A first frame that would open one
more drops the transfer that has waited longest for its next frame (the first a receiver
would have timed out), counted in `IsoTpStats.evicted` (and `broken`): a capture of first
frames on 65,536 channels and several ids, each left open, held 1.5 GB before.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from hwbridge.can.io.frames import FrameChunk
from hwbridge.captures.tables import frame_keys

__all__ = ["MAX_OPEN", "IsoTpAssembler", "IsoTpStats"]

_MAX_PAYLOAD = 4096 + 1
MAX_OPEN: Final = 4096
"""Transfers open at once, at most (as the J1939 chunk assembler's sessions)."""


@dataclass(slots=True)
class _Transfer:
    stamp: int
    expected: int  # bytes of the UDS payload announced by the first frame
    payload: bytearray
    sequence: int = 1


@dataclass(slots=True)
class IsoTpStats:
    frames: int = 0
    transfers: int = 0
    broken: int = 0  # transfers dropped before they were whole
    evicted: int = 0  # of those, the ones dropped to keep at most `max_open` open


@dataclass(slots=True)
class IsoTpAssembler:
    """Takes the frames of the given ids out of each chunk and returns whole transfers."""

    keys: frozenset[int]
    max_open: int = MAX_OPEN
    stats: IsoTpStats = field(default_factory=IsoTpStats)
    # by how long each has waited for its next frame, longest first
    _open: OrderedDict[tuple[int, int], _Transfer] = field(default_factory=OrderedDict)

    @property
    def open_transfers(self) -> int:
        return len(self._open)

    def feed(self, chunk: FrameChunk) -> tuple[FrameChunk, FrameChunk | None]:
        """(the chunk without ISO-TP frames, the transfers completed in it as frames)."""
        if not self.keys or not len(chunk):
            return chunk, None
        keys = frame_keys(chunk)
        mine = np.isin(keys, np.fromiter(self.keys, np.uint32, len(self.keys)))
        if not bool(mine.any()):
            return chunk, None
        rows = np.flatnonzero(mine)
        self.stats.frames += len(rows)
        done: list[tuple[int, int, int, bytes]] = []  # stamp, id, channel, payload
        stamps = chunk.timestamp_us[rows].tolist()
        ids = keys[rows].tolist()
        channels = chunk.channel[rows].tolist()
        lengths = chunk.length[rows].tolist()
        data = chunk.data[rows]
        for i, (stamp, key, channel, size) in enumerate(
            zip(stamps, ids, channels, lengths, strict=True)
        ):
            if not size:
                continue
            frame = data[i, :size].tobytes()
            self._frame(key, channel, stamp, frame, done)
        rest = chunk.take(~mine)
        if not done:
            return rest, None
        width = max(len(p) for *_, p in done)
        buf = np.zeros((len(done), width), np.uint8)
        for row, (*_, payload) in enumerate(done):
            buf[row, : len(payload)] = np.frombuffer(payload, np.uint8)
        transfers = FrameChunk(
            np.array([d[0] for d in done], np.int64),
            np.array([d[1] & 0x1FFFFFFF for d in done], np.uint32),
            np.array([bool(d[1] >> 31) for d in done], np.bool_),
            np.array([len(d[3]) for d in done], np.uint16),
            buf,
            np.array([d[2] for d in done], np.int16),
        )
        return rest, transfers

    def _frame(
        self,
        key: int,
        channel: int,
        stamp: int,
        frame: bytes,
        done: list[tuple[int, int, int, bytes]],
    ) -> None:
        kind = frame[0] >> 4
        slot = (channel, key)
        if kind == 0:  # single frame: kept whole, PCI byte first
            self._drop(slot)
            done.append((stamp, key, channel, frame))
            self.stats.transfers += 1
        elif kind == 1 and len(frame) >= 2:  # first frame
            self._drop(slot)
            expected = ((frame[0] & 0x0F) << 8) | frame[1]
            if len(self._open) >= max(1, self.max_open):
                self._open.popitem(last=False)
                self.stats.broken += 1
                self.stats.evicted += 1
            self._open[slot] = _Transfer(stamp, expected, bytearray(frame[1:]))
            self._complete(slot, done)
        elif kind == 2:  # consecutive frame
            transfer = self._open.get(slot)
            if transfer is None:
                return
            if frame[0] & 0x0F != transfer.sequence & 0x0F:
                self._drop(slot)
                return
            transfer.sequence += 1
            transfer.payload += frame[1:]
            self._open.move_to_end(slot)
            if len(transfer.payload) > _MAX_PAYLOAD:
                self._drop(slot)
                return
            self._complete(slot, done)
        # flow control (3) and anything else carry no payload

    def _complete(self, slot: tuple[int, int], done: list[tuple[int, int, int, bytes]]) -> None:
        transfer = self._open[slot]
        if len(transfer.payload) - 1 >= transfer.expected:
            del self._open[slot]
            done.append((transfer.stamp, slot[1], slot[0], bytes(transfer.payload)))
            self.stats.transfers += 1

    def _drop(self, slot: tuple[int, int]) -> None:
        if self._open.pop(slot, None) is not None:
            self.stats.broken += 1

    def finish(self) -> None:
        """End of the capture: transfers still open are incomplete."""
        self.stats.broken += len(self._open)
        self._open.clear()
