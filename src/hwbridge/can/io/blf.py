"""Vector BLF captures read into frame columns, without a python-can `Message` per frame.

The file is a header, then log containers of zlib-compressed objects (python-can's
`can/io/blf.py` documents the layout). Containers are inflated in C by zlib; the objects in
them are found with numpy: every `LOBJ` signature is a candidate, and the chain of object
sizes from the first object tells the real ones from the bytes of a payload that happen to
spell `LOBJ`. The fields of all CAN objects of a buffer are then read as arrays at once.
Objects python-can ignores (markers, other buses) are skipped here too.

Every size the file gives is checked before it is used, so that no file costs more than
bounded memory, and work in proportion to what its containers inflate to: a container
inflates to exactly the size it declares, at most MAX_BLOCK_BYTES; no object or file header
is longer than that (nor, outside the containers of a plain .blf, than the file has left);
objects are looked for BUFFER_BYTES at a time, each byte at most twice, and an object longer
than that is taken whole once it is complete, its bytes never looked through. A frame is an
object of at least 16 inflated bytes: a file yields at most a frame per 16 bytes its
containers inflate to.
"""

from __future__ import annotations

import bisect
import datetime as dt
import gzip
import os
import struct
import zlib
from array import array
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.capture_file import open_regular
from hwbridge.can.io.frame_checks import OVERFLOW_US
from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts, concat_chunks

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
MAX_BLOCK_BYTES = 16 * 1024 * 1024
"""The most a log container may inflate to, and the longest object or file header read.
Writers cut containers at 128 KiB (python-can's BLFWriter, Vector's tools alike) and the
longest objects are a few KB (an Ethernet frame's length is 16 bits), so this refuses nothing
a writer makes, while a size field that lies costs at most this much memory."""
_MAX_STORED = MAX_BLOCK_BYTES + (MAX_BLOCK_BYTES >> 10) + 64
"""The longest object of the file itself: a container of MAX_BLOCK_BYTES that deflate could
not shrink (zlib's deflateBound: 0.03% more), with its headers."""
_PAD = 256  # bytes past a buffer's end that fixed-size reads of its last object may touch
_WALK_WINDOW = 4096  # irregular candidates made a list at once when walking a chain
_CROWDED = 4096
"""Containers whose bytes may wait to be parsed (tiny containers would else pile up)."""
_NO_OBJECT = "no BLF object where one should start"
_WRAPS_TEN_US = np.uint64(2**59)
"""Object times of this many 10 us units or more are out of range (5.8e12 s): their
microseconds, plus any start time of the file, would not fit 64 bits."""


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


def _candidates(buf: npt.NDArray[np.uint8], n: int) -> npt.NDArray[np.int64]:
    """Offsets of every `LOBJ` with room for an object header in the first `n` bytes."""
    hits = buf[: n - 3] == _SIGNATURE[0]
    for k in (1, 2, 3):
        hits &= buf[k : n - 3 + k] == _SIGNATURE[k]
    found = np.flatnonzero(hits).astype(np.int64)
    return found[found + _BASE.size <= n]


def _walk(linked: npt.NDArray[np.bool_], nxt: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """Indices of the chain of objects from the first candidate: from each object to the
    next candidate after it (`nxt`) while it is `linked` there. Runs of regular objects (each
    followed by the next candidate) are taken whole; only where a payload happens to spell
    LOBJ does the chain jump over a candidate. The jumps are followed over lists of at most
    _WALK_WINDOW irregular candidates at a time, so that each costs a few list operations and
    no more memory than a buffer of LOBJ after LOBJ can make."""
    count = len(linked)
    irregular = np.flatnonzero(~linked | (nxt != np.arange(1, count + 1)))
    firsts = array("q")
    lasts = array("q")
    stops: list[int] = []  # a window of the irregular candidates, where runs stop
    jumps: list[int] = []  # where the chain goes on from each
    onward: list[bool] = []  # whether it goes on
    i = k = 0
    while True:
        k = bisect.bisect_left(stops, i, k)
        if k == len(stops):  # the last candidate is never linked: there is a stop from i on
            window = irregular[np.searchsorted(irregular, i) :][:_WALK_WINDOW]
            stops, jumps, onward = window.tolist(), nxt[window].tolist(), linked[window].tolist()
            k = 0
        firsts.append(i)
        lasts.append(stops[k])
        if not onward[k] or jumps[k] >= count:
            break
        i = jumps[k]
    if len(firsts) == 1:
        return np.arange(firsts[0], lasts[0] + 1, dtype=np.int64)
    first = np.frombuffer(firsts, np.int64)
    runs = np.frombuffer(lasts, np.int64) - first + 1
    before = np.cumsum(runs) - runs
    shift: npt.NDArray[np.int64] = np.repeat(first - before, runs)
    return np.arange(int(runs.sum()), dtype=np.int64) + shift


class _Inflated:
    """Inflated bytes of the containers read so far that are not objects yet, and where each
    container's bytes start (for an error's position). Of an object longer than a buffer only
    the first bytes are kept (its fields); the rest is counted as it passes."""

    def __init__(self) -> None:
        self.blocks: deque[memoryview] = deque()  # the bytes, as the containers gave them
        self.have = 0  # bytes in blocks
        self.base = 0  # inflated offset (from the first container on) of the first of them
        self.need = 0  # bytes from the first on that make the object starting there whole
        self.skip = 0  # bytes of a long object still to pass over
        self.head = bytearray()  # its first bytes (its fields), its frame read once it is whole
        self.head_short = 0  # bytes the head still lacks
        self.starts = array("q")  # inflated offset of each container's first byte
        self.ats = array("q")  # the file byte where that container starts

    def add(self, at: int, inflated: bytes) -> None:
        start = self.base + self.have
        view = memoryview(inflated)
        if self.skip:
            passed = min(self.skip, len(view))
            kept = min(passed, self.head_short)
            self.head += view[:kept]
            self.head_short -= kept
            self.skip -= passed
            self.base += passed
            view = view[passed:]
        if len(view):
            self.starts.append(start)
            self.ats.append(at)
            self.blocks.append(view)
            self.have += len(view)

    def due(self) -> bool:
        """Whether to make objects now: a buffer's worth (or many containers) came, and the
        object split off before, if any, is whole."""
        return (
            not self.skip
            and self.have >= self.need
            and (self.have >= BUFFER_BYTES or len(self.starts) >= _CROWDED)
        )

    def window(self, n: int) -> npt.NDArray[np.uint8]:
        """The first `n` bytes and a few after (zeros past the end): reads of fixed size near
        the end never leave the buffer."""
        parts: list[memoryview | bytes] = []
        want = n + _PAD
        for block in self.blocks:
            parts.append(block[:want])
            want -= len(parts[-1])
            if not want:
                break
        parts.append(bytes(want))
        return np.frombuffer(b"".join(parts), np.uint8)

    def drop(self, n: int, need: int = 0) -> None:
        """Forget the first `n` bytes (objects now); the next object is `need` bytes long
        (0: unknown). One longer than a buffer is passed over, but for its first bytes."""
        self._forget(n)
        self.need = need
        if need > BUFFER_BYTES:
            self.head = bytearray(self.window(0)[: min(_PAD, self.have)])
            self.head_short = _PAD - len(self.head)
            passed = min(need, self.have)
            self._forget(passed)
            self.skip = need - passed
            self.need = 0

    def _forget(self, n: int) -> None:
        self.have -= n
        self.base += n
        while n:
            block = self.blocks[0]
            if len(block) > n:
                self.blocks[0] = block[n:]
                break
            n -= len(block)
            self.blocks.popleft()
        first = bisect.bisect_right(self.starts, self.base) - 1
        if first > 0:
            del self.starts[:first]
            del self.ats[:first]

    def rest(self) -> bytes:
        return b"".join(self.blocks)

    def where(self, offset: int) -> str:
        """The `offset`th byte's container (its file byte) and its byte in that container."""
        at = self.base + offset
        k = bisect.bisect_right(self.starts, at) - 1
        return f"byte {self.ats[k]}, inflated byte {at - self.starts[k]}"


class _Chain(NamedTuple):
    """What the chain of objects in a buffer came to."""

    objects: npt.NDArray[np.int64]  # offsets of its complete objects, in order
    rest: int  # where the bytes left over (the start of an object split off) begin
    need: int  # bytes from `rest` on that make that object whole (0: a few at most)
    fault: tuple[int, str] | None  # (offset, reason) where the chain breaks, if it does


class BlfReader:
    """Frame chunks from a .blf (or .blf.gz) file; `progress` is the share of the file read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._raw: BinaryIO = open_regular(self.path)  # closed in close()
        self._bytes = os.fstat(self._raw.fileno()).st_size
        self._size = max(1, self._bytes)
        self._file: BinaryIO = (
            gzip.GzipFile(fileobj=self._raw, mode="rb")  # type: ignore[assignment]
            if self.path.suffix.lower() == ".gz"
            else self._raw
        )
        self._offset = 0  # bytes consumed from the (uncompressed) file
        self._objects_read = 0
        try:
            self._read_header()
        except BaseException:
            self.close()
            raise

    def _read_header(self) -> None:
        header = self._read_at(0, _FILE_HEADER.size)
        if len(header) < _FILE_HEADER.size or header[:4] != b"LOGG":
            raise CaptureError(self.path, "byte 0", "not a BLF file (no LOGG header)")
        fields = _FILE_HEADER.unpack(header)
        self._start_us = _systemtime_us(fields[14:22])
        if fields[1] > MAX_BLOCK_BYTES:
            raise CaptureError(self.path, "byte 4", f"corrupt: a file header of {fields[1]} bytes")
        rest = fields[1] - _FILE_HEADER.size
        if rest > 0 and len(self._read_at(0, rest)) < rest:
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

    def _read_at(self, at: int, n: int) -> bytes:
        """`n` bytes (fewer at the end), or a CaptureError at byte `at` where gzip fails."""
        try:
            return self._read(n)
        except (OSError, EOFError, zlib.error) as exc:
            raise CaptureError(self.path, f"byte {at}", f"unreadable: {exc}") from None

    def _left(self, n: int) -> int:
        """Bytes a plain file holds after those read, if fewer than `n` (its size looked up
        again then: it may have grown since it was opened); `n` else."""
        if self._bytes - self._offset < n:
            self._bytes = os.fstat(self._raw.fileno()).st_size
        return min(n, self._bytes - self._offset)

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()

    # -- containers ----------------------------------------------------------------------

    def _containers(self) -> Iterator[tuple[int, bytes]]:
        """(file byte, inflated content) of each log container, in file order."""
        while True:
            at = self._offset
            head = self._read_at(at, _BASE.size)
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
            if self._file is self._raw and self._left(body_size) < body_size:
                raise CaptureError(
                    self.path,
                    f"byte {at}",
                    f"truncated: an object of {obj_size} bytes ends after "
                    f"{self._left(body_size) + _BASE.size}",
                )
            if obj_size > _MAX_STORED:
                raise CaptureError(
                    self.path,
                    f"byte {at}",
                    f"corrupt: an object of {obj_size} bytes, more than any BLF writer makes",
                )
            body = self._read_at(at, body_size)
            self._read_at(at, obj_size % 4)
            if len(body) < body_size:
                raise CaptureError(
                    self.path,
                    f"byte {at}",
                    f"truncated: an object of {obj_size} bytes ends after {len(body) + 16}",
                )
            if obj_type != LOG_CONTAINER:
                continue
            if len(body) < _CONTAINER.size:
                raise CaptureError(
                    self.path, f"byte {at}", f"corrupt: a log container of {obj_size} bytes"
                )
            method, declared = _CONTAINER.unpack_from(body)
            payload = memoryview(body)[_CONTAINER.size :]
            if method == NO_COMPRESSION:
                if len(payload) > MAX_BLOCK_BYTES:
                    raise CaptureError(
                        self.path,
                        f"byte {at}",
                        f"corrupt: a log container of {len(payload)} bytes, "
                        f"more than any BLF writer makes",
                    )
                yield at, bytes(payload)
            elif method == ZLIB_DEFLATE:
                yield at, self._inflate(at, payload, declared)
            # other compression methods are skipped, as python-can does

    def _inflate(self, at: int, payload: memoryview, declared: int) -> bytes:
        """A container's zlib stream inflated to the size it declares and no further: a
        stream that inflates to more (a deflate bomb) or less is corrupt."""

        def corrupt(why: str) -> CaptureError:
            return CaptureError(self.path, f"byte {at}", f"corrupt compressed container: {why}")

        if declared > MAX_BLOCK_BYTES:
            raise corrupt(f"declares {declared} bytes, more than any BLF writer makes")
        stream = zlib.decompressobj()
        try:
            data = stream.decompress(payload, declared + 1)
        except zlib.error as exc:
            raise corrupt(str(exc)) from None
        if len(data) > declared:
            raise corrupt(f"inflates to more than the {declared} bytes it declares")
        if len(data) < declared or not stream.eof:
            ends = "" if stream.eof else ", its zlib stream incomplete"
            raise corrupt(f"inflates to {len(data)} bytes, not the {declared} it declares{ends}")
        return data

    # -- objects -------------------------------------------------------------------------

    def chunks(self) -> Iterator[FrameChunk]:
        pending = _Inflated()
        broken: CaptureError | None = None
        try:
            containers = self._containers()
            while True:
                try:
                    at, inflated = next(containers)
                except StopIteration:
                    break
                except CaptureError as exc:  # decode what came before the break first
                    broken = exc
                    break
                pending.add(at, inflated)
                if pending.due():
                    yield from self._objects(pending, final=False)
            yield from self._objects(pending, final=True)
            if broken is not None:
                raise broken
            if pending.skip or pending.rest().strip(b"\0"):
                raise CaptureError(
                    self.path,
                    f"byte {self._offset}, after {self._objects_read} objects",
                    "truncated: the last object is incomplete",
                )
        finally:
            self.close()

    def _objects(self, pending: _Inflated, *, final: bool) -> Iterator[FrameChunk]:
        """The frames of the whole objects in `pending`, BUFFER_BYTES at a time (all there is
        at the end of the file). An object split off at a buffer's end is looked through
        again with the next buffer; one longer than a buffer is passed over and its frame
        read from its first bytes once it is whole. Raises where the objects break, after the
        frames before."""
        while not pending.skip:
            if pending.head:
                head = np.frombuffer(bytes(pending.head) + bytes(2 * _PAD), np.uint8)
                pending.head = bytearray()
                self._objects_read += 1
                chunk = self._frames_of(head, np.zeros(1, np.int64))
                if len(chunk):
                    yield chunk
                continue
            have = pending.have
            if have < pending.need:
                return  # the object split off is not whole yet
            if not have or (have < BUFFER_BYTES and not final and not pending.due()):
                return
            n = min(have, BUFFER_BYTES)
            buf = pending.window(n)
            chain = self._chain(buf, n)
            self._objects_read += len(chain.objects)
            chunk = self._frames_of(buf, chain.objects)
            if len(chunk):
                yield chunk
            if chain.fault is not None:
                raise CaptureError(
                    self.path,
                    f"{pending.where(chain.fault[0])}, after {self._objects_read} objects",
                    f"corrupt: {chain.fault[1]}",
                )
            if not chain.rest and not chain.need:
                return  # a few bytes short of an object header: more must come
            pending.drop(chain.rest, chain.need)

    def _chain(self, buf: npt.NDArray[np.uint8], n: int) -> _Chain:
        """The complete objects in the first `n` bytes of `buf`, and what is left: an
        incomplete object to be completed by the next containers, or where the chain breaks.
        No object of the chain may be shorter than its header or longer than
        MAX_BLOCK_BYTES."""
        none = np.zeros(0, np.int64)
        if n < _BASE.size:
            return _Chain(none, 0, 0, None)
        cand = _candidates(buf, n)
        if not len(cand) or cand[0] > 4:
            if n < _BASE.size + 4:
                return _Chain(none, 0, 0, None)
            return _Chain(none, 0, 0, (0, _NO_OBJECT))
        sizes = _u32(buf, cand + 8).astype(np.int64)
        ends = cand + sizes
        # python-can looks for the next object within the few padding bytes after the end
        nxt = np.searchsorted(cand, ends)
        following = np.append(cand, np.iinfo(np.int64).max)[nxt]
        linked = (sizes >= _BASE.size) & (following - ends <= 4)
        order = _walk(linked, nxt)
        # the chain goes on only from an object that ends where the next starts, so each but
        # the last is at least a header long and no longer than the buffer
        last = int(order[-1])
        size = int(sizes[last])
        if size < _BASE.size or size > MAX_BLOCK_BYTES:
            why = "less than its header" if size < _BASE.size else "more than any BLF writer makes"
            return _Chain(cand[order[:-1]], 0, 0, (int(cand[last]), f"object size {size}, {why}"))
        if ends[last] <= n:
            if ends[last] + 4 + _BASE.size <= n:  # room for another object, but none there
                return _Chain(cand[order], 0, 0, (int(ends[last]), _NO_OBJECT))
            return _Chain(cand[order], int(ends[last]), 0, None)
        # only the last object can be incomplete: each other ends where one starts
        return _Chain(cand[order[:-1]], int(cand[last]), size, None)

    def _frames_of(self, buf: npt.NDArray[np.uint8], objects: npt.NDArray[np.int64]) -> FrameChunk:
        """The CAN frames of the objects at `objects`, in file order."""
        if not len(objects):
            return concat_chunks([])
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
            return concat_chunks([])
        chunk = concat_chunks([c for c, _ in parts])
        if len(parts) > 1:  # file order across object types
            chunk = chunk.take(np.argsort(np.concatenate([a for _, a in parts]), kind="stable"))
        return chunk

    # -- fields of each object type --------------------------------------------------------

    def _header(
        self, buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """(timestamps in us, offsets of the object bodies, which objects python-can reads)."""
        version = _u16(buf, at + 6)
        known = (version == 1) | (version == 2)  # python-can skips other header versions
        ten_us = _u32(buf, at + 16) == 1  # else nanoseconds, as python-can reads them
        stamp = _u64(buf, at + 24)
        # computed without wrapping: a count of 10 us units that 64 bits cannot hold once
        # multiplied is out of range; nanoseconds are rounded without adding to them
        wraps = ten_us & (stamp >= _WRAPS_TEN_US)
        micros = np.where(
            ten_us,
            np.where(wraps, np.uint64(0), stamp) * np.uint64(10),
            stamp // np.uint64(1000) + (stamp % np.uint64(1000) >= 500),
        ).astype(np.int64)
        micros[wraps] = OVERFLOW_US
        body = at + np.where(version == 2, 40, 32)
        return micros + self._start_us, body, known

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
