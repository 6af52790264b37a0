"""Vector BLF captures read into frame columns, without a python-can `Message` per frame.

The file is a header, then log containers of zlib-compressed objects (python-can's
`can/io/blf.py` documents the layout). Containers are inflated in C by zlib; the objects in
them are found with numpy: every `LOBJ` signature is a candidate, and the chain of object
sizes from the first object tells the real ones from the bytes of a payload that happen to
spell `LOBJ`. The fields of all CAN objects of a buffer are then read as arrays at once.
Objects python-can ignores (markers, other buses) are skipped here too.
"""

from __future__ import annotations

import datetime as dt
import gzip
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from hwbridge.captures.frames import CaptureError, FrameChunk, ReaderCounts, concat_chunks

__all__ = ["BlfReader"]

_FILE_HEADER = struct.Struct("<4sLBBBBBBBBQQLL8H8H")
_BASE = struct.Struct("<4sHHLL")  # signature, header size, header version, object size, type
_CONTAINER = struct.Struct("<H6xL4x")  # compression method, uncompressed size

LOG_CONTAINER = 10
CAN_MESSAGE = 1
CAN_MESSAGE2 = 86
CAN_ERROR_EXT = 73
CAN_FD_MESSAGE = 100
CAN_FD_MESSAGE_64 = 101
NO_COMPRESSION = 0
ZLIB_DEFLATE = 2
_CAN_MSG_EXT = 0x80000000
_REMOTE = 0x80
_SIGNATURE = np.frombuffer(b"LOBJ", np.uint8)
_DLC2LEN = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64], np.uint8)

BUFFER_BYTES = 2 * 1024 * 1024
"""Inflated bytes parsed at once (about 43,000 classic CAN objects)."""
_PAD = 256


def _systemtime_us(fields: tuple[int, ...]) -> int:
    """A SYSTEMTIME (year, month, weekday, day, h, m, s, ms) in microseconds since 1970."""
    try:
        t = dt.datetime(
            fields[0],
            fields[1],
            fields[3],
            fields[4],
            fields[5],
            fields[6],
            fields[7] * 1000,
            tzinfo=dt.UTC,
        )
    except ValueError:
        return 0  # as python-can: no valid start time means timestamps from 0
    return round(t.timestamp() * 1_000_000)


def _gather(
    buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], size: int
) -> npt.NDArray[np.uint8]:
    """`size` bytes at each offset in `at`, as a (len(at), size) array."""
    return np.lib.stride_tricks.sliding_window_view(buf, size)[at]


def _u32(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(_gather(buf, at, 4)).view("<u4").ravel()


def _u16(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.uint16]:
    return np.ascontiguousarray(_gather(buf, at, 2)).view("<u2").ravel()


def _u64(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    return np.ascontiguousarray(_gather(buf, at, 8)).view("<u8").ravel()


class BlfReader:
    """Frame chunks from a .blf (or .blf.gz) file; `progress` is the share of the file read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._size = max(1, self.path.stat().st_size)
        self._raw: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        self._file: BinaryIO = (
            gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
            if self.path.suffix.lower() == ".gz"
            else self._raw
        )
        self._offset = 0  # bytes consumed from the (uncompressed) file
        self._objects_read = 0
        header = self._read(_FILE_HEADER.size)
        if len(header) < _FILE_HEADER.size or header[:4] != b"LOGG":
            self.close()
            raise CaptureError(self.path, "byte 0", "not a BLF file (no LOGG header)")
        fields = _FILE_HEADER.unpack(header)
        self._start_us = _systemtime_us(fields[14:22])
        rest = fields[1] - _FILE_HEADER.size
        if rest > 0 and len(self._read(rest)) < rest:
            self.close()
            raise CaptureError(self.path, f"byte {self._offset}", "truncated in the file header")

    @property
    def progress(self) -> float:
        try:
            return min(1.0, self._raw.tell() / self._size)
        except (OSError, ValueError):
            return 1.0

    @property
    def position(self) -> str:
        return f"byte {self._offset}"

    def _read(self, n: int) -> bytes:
        data = self._file.read(n)
        self._offset += len(data)
        return data

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()

    # -- containers ----------------------------------------------------------------------

    def _containers(self) -> Iterator[bytes]:
        """The inflated content of each log container, in file order."""
        while True:
            at = self._offset
            try:
                head = self._read(_BASE.size)
            except (OSError, EOFError, zlib.error) as exc:
                raise CaptureError(self.path, f"byte {at}", f"unreadable: {exc}") from None
            if not head:
                return
            if len(head) < _BASE.size:
                raise CaptureError(self.path, f"byte {at}", "truncated inside an object header")
            signature, _, _, obj_size, obj_type = _BASE.unpack(head)
            if signature != b"LOBJ":
                raise CaptureError(self.path, f"byte {at}", "corrupt: no BLF object starts here")
            if obj_size < _BASE.size:
                raise CaptureError(self.path, f"byte {at}", f"corrupt: object size {obj_size}")
            body_size = obj_size - _BASE.size
            try:
                body = self._read(body_size)
                self._read(obj_size % 4)
            except (OSError, EOFError, zlib.error) as exc:
                raise CaptureError(self.path, f"byte {at}", f"unreadable: {exc}") from None
            if len(body) < body_size:
                raise CaptureError(
                    self.path,
                    f"byte {at}",
                    f"truncated: an object of {obj_size} bytes ends after {len(body) + 16}",
                )
            if obj_type != LOG_CONTAINER:
                continue
            method, _ = _CONTAINER.unpack_from(body)
            payload = body[_CONTAINER.size :]
            if method == NO_COMPRESSION:
                yield payload
            elif method == ZLIB_DEFLATE:
                try:
                    yield zlib.decompress(payload)
                except zlib.error as exc:
                    raise CaptureError(
                        self.path, f"byte {at}", f"corrupt compressed container: {exc}"
                    ) from None
            # other compression methods are skipped, as python-can does

    # -- objects -------------------------------------------------------------------------

    def chunks(self) -> Iterator[FrameChunk]:
        tail = b""
        pending: list[bytes] = []
        size = 0
        broken: CaptureError | None = None
        try:
            containers = self._containers()
            while True:
                try:
                    inflated = next(containers)
                except StopIteration:
                    break
                except CaptureError as exc:  # decode what came before the break first
                    broken = exc
                    break
                pending.append(inflated)
                size += len(inflated)
                if size >= BUFFER_BYTES:
                    chunk, tail = self._parse(b"".join([tail, *pending]))
                    pending, size = [], 0
                    if len(chunk):
                        yield chunk
            chunk, tail = self._parse(b"".join([tail, *pending]))
            if len(chunk):
                yield chunk
            if broken is not None:
                raise broken
            if tail.strip(b"\0"):
                raise CaptureError(
                    self.path,
                    f"byte {self._offset}, after {self._objects_read} objects",
                    "truncated: the last object is incomplete",
                )
        finally:
            self.close()

    def _chain(self, buf: npt.NDArray[np.uint8], n: int) -> tuple[npt.NDArray[np.int64], int]:
        """Offsets of the complete objects in the first `n` bytes of `buf`, and where the
        rest (an incomplete object, to be completed by the next container) starts."""
        if n < _BASE.size:
            return np.zeros(0, np.int64), 0
        hits = buf[: n - 3] == _SIGNATURE[0]
        for k in (1, 2, 3):
            hits &= buf[k : n - 3 + k] == _SIGNATURE[k]
        cand = np.flatnonzero(hits).astype(np.int64)
        cand = cand[cand + _BASE.size <= n]
        if not len(cand) or cand[0] > 4:
            if n < _BASE.size + 4:
                return np.zeros(0, np.int64), 0
            raise self._corrupt(0)
        sizes = _u32(buf, cand + 8).astype(np.int64)
        ends = cand + sizes
        # python-can looks for the next object within the few padding bytes after the end
        nxt = np.searchsorted(cand, ends)
        following = np.append(cand, np.iinfo(np.int64).max)[nxt]
        linked = (sizes >= _BASE.size) & (following - ends <= 4)
        count = len(cand)
        # Runs of regular objects (each followed by the next candidate) are taken whole; only
        # where a payload happens to spell LOBJ does the chain jump over a candidate.
        irregular = np.flatnonzero(~linked | (nxt != np.arange(1, count + 1)))
        parts: list[npt.NDArray[np.int64]] = []
        i = 0
        while True:
            j = int(irregular[np.searchsorted(irregular, i)])
            parts.append(np.arange(i, j + 1, dtype=np.int64))
            if not linked[j] or nxt[j] >= count:
                break
            i = int(nxt[j])
        order = parts[0] if len(parts) == 1 else np.concatenate(parts)
        last = int(order[-1])
        if ends[last] <= n and not linked[last] and ends[last] + 4 + _BASE.size <= n:
            raise self._corrupt(int(cand[last]))  # room for another object, but none there
        complete = ends[order] <= n
        if bool(np.all(complete)):
            return cand[order], int(min(ends[last], n))
        cut = int(np.argmin(complete))
        return cand[order[:cut]], int(cand[order[cut]])

    def _corrupt(self, offset: int) -> CaptureError:
        return CaptureError(
            self.path,
            f"byte {self._offset}, after {self._objects_read} objects",
            f"corrupt: no BLF object where one should start (inflated offset {offset})",
        )

    def _parse(self, data: bytes) -> tuple[FrameChunk, bytes]:
        """The CAN frames of the complete objects in `data`, and the bytes left over."""
        n = len(data)
        if not n:
            return concat_chunks([]), b""
        # zero padding: fixed-size reads near the end never leave the buffer
        buf = np.frombuffer(data + bytes(_PAD), np.uint8)
        objects, rest = self._chain(buf, n)
        self._objects_read += len(objects)
        leftover = data[rest:]
        if not len(objects):
            return concat_chunks([]), leftover
        types = _u32(buf, objects + 12)
        parts: list[tuple[FrameChunk, npt.NDArray[np.int64]]] = []
        classic = objects[(types == CAN_MESSAGE) | (types == CAN_MESSAGE2)]
        if len(classic):
            parts.append(self._classic(buf, classic))
        fd = objects[types == CAN_FD_MESSAGE]
        if len(fd):
            parts.append(self._fd(buf, fd))
        fd64 = objects[types == CAN_FD_MESSAGE_64]
        if len(fd64):
            parts.append(self._fd64(buf, fd64))
        self.counts.error_frames += int(np.count_nonzero(types == CAN_ERROR_EXT))
        if not parts:
            return concat_chunks([]), leftover
        chunk = concat_chunks([c for c, _ in parts])
        if len(parts) > 1:  # file order across object types
            chunk = chunk.take(np.argsort(np.concatenate([a for _, a in parts]), kind="stable"))
        return chunk, leftover

    # -- fields of each object type --------------------------------------------------------

    def _header(
        self, buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """(timestamps in us, offsets of the object bodies, which objects python-can reads)."""
        version = _u16(buf, at + 6)
        known = (version == 1) | (version == 2)  # python-can skips other header versions
        flags = _u32(buf, at + 16)
        stamp = _u64(buf, at + 24)
        micros = np.where(
            flags == 1, stamp * np.uint64(10), (stamp + np.uint64(500)) // np.uint64(1000)
        )
        body = at + np.where(version == 2, 40, 32)
        return micros.astype(np.int64) + self._start_us, body, known

    def _frames(  # noqa: PLR0917 - the columns of one object type
        self,
        at: npt.NDArray[np.int64],
        stamps: npt.NDArray[np.int64],
        can_id: npt.NDArray[np.uint32],
        remote: npt.NDArray[np.bool_],
        length: npt.NDArray[np.uint8],
        data: npt.NDArray[np.uint8],
        channel: npt.NDArray[np.int64],
        keep: npt.NDArray[np.bool_],
    ) -> tuple[FrameChunk, npt.NDArray[np.int64]]:
        self.counts.remote_frames += int(np.count_nonzero(remote & keep))
        keep = keep & ~remote
        if bool(np.any(length < data.shape[1])):  # bytes past the length are not the frame's
            cols = np.arange(data.shape[1], dtype=np.int64)
            data = np.where(cols[None, :] < length[:, None], data, 0).astype(np.uint8)
        chunk = FrameChunk(
            stamps[keep],
            (can_id & np.uint32(0x1FFFFFFF))[keep],
            ((can_id & np.uint32(_CAN_MSG_EXT)) != 0)[keep],
            length[keep],
            data[keep],
            (channel - 1).astype(np.int16)[keep],
        )
        return chunk, at[keep]

    def _classic(
        self, buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]
    ) -> tuple[FrameChunk, npt.NDArray[np.int64]]:
        stamps, body, known = self._header(buf, at)
        fixed = _gather(buf, body, 16)
        channel = fixed[:, 0].astype(np.int64) | (fixed[:, 1].astype(np.int64) << 8)
        can_id = np.ascontiguousarray(fixed[:, 4:8]).view("<u4").ravel()
        length = np.minimum(fixed[:, 3], 8).astype(np.uint8)  # python-can: data[:dlc]
        remote = (fixed[:, 2] & _REMOTE) != 0
        return self._frames(at, stamps, can_id, remote, length, fixed[:, 8:16], channel, known)

    def _fd(
        self, buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]
    ) -> tuple[FrameChunk, npt.NDArray[np.int64]]:
        stamps, body, known = self._header(buf, at)
        fixed = _gather(buf, body, 84)
        channel = fixed[:, 0].astype(np.int64) | (fixed[:, 1].astype(np.int64) << 8)
        can_id = np.ascontiguousarray(fixed[:, 4:8]).view("<u4").ravel()
        remote = (fixed[:, 2] & _REMOTE) != 0
        length = np.minimum(fixed[:, 14], 64).astype(np.uint8)
        return self._frames(at, stamps, can_id, remote, length, fixed[:, 20:84], channel, known)

    def _fd64(
        self, buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]
    ) -> tuple[FrameChunk, npt.NDArray[np.int64]]:
        stamps, body, known = self._header(buf, at)
        fixed = _gather(buf, body, 40)
        channel = fixed[:, 0].astype(np.int64)
        valid = np.minimum(fixed[:, 2], 64).astype(np.int64)
        can_id = np.ascontiguousarray(fixed[:, 4:8]).view("<u4").ravel()
        fd_flags = np.ascontiguousarray(fixed[:, 12:16]).view("<u4").ravel()
        remote = (fd_flags & np.uint32(0x0010)) != 0
        obj_size = _u32(buf, at + 8).astype(np.int64)
        header_size = _u16(buf, at + 4).astype(np.int64)
        ext = fixed[:, 35].astype(np.int64)
        # python-can (its issue 1905): bytes declared beyond the object read as zeros
        present = np.minimum(valid, np.where(ext > 0, ext, obj_size) - header_size - 40)
        present = np.clip(present, 0, 64)
        raw = _gather(buf, body + 40, 64)
        cols = np.arange(64, dtype=np.int64)
        data = np.where(cols[None, :] < present[:, None], raw, 0).astype(np.uint8)
        length = valid.astype(np.uint8)
        return self._frames(at, stamps, can_id, remote, length, data, channel, known)
