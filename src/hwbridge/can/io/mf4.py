"""ASAM MDF4 bus logging read straight from the file's blocks, without asammdf.

Importing asammdf (with pandas) costs about a second and 70 MB before the first record is
read, and its reader keeps several copies of each chunk. A finalized, sorted MDF4 file (as
python-can's MF4Writer, asammdf and measurement tools save them: one channel group per data
group) needs neither: the CAN_DataFrame records are fixed-size rows of one data stream (DT
blocks, or DZ blocks of deflated, possibly transposed, data, listed by DL and HL blocks),
and the members ID, IDE, DataLength, DLC, DataBytes and BusChannel are bit fields of those
rows (DataBytes can also be variable-length data in an SD stream). Those rows are read a
chunk at a time and their fields cut out with numpy.

Anything else (unfinalized or unsorted files, as CANedge loggers write them, MDF3, column
storage, conversions on the members) raises `Unsupported` when the file is opened, before
any frame is read, and asammdf's reader (`Mf4Reader`) reads it instead.

Before its layout is read, the file's link graph is checked (`scan_links`): no list loops and
no data block is listed twice, so a group yields at most the records its data blocks hold,
each block read once: frames <= (bytes of its DT blocks + bytes its DZ blocks inflate to, at
most 1032 times their own) / record size. A record holds at least its time stamp and its id,
members that do not overlap (`MIN_RECORD_BYTES`, 6): at most 1 frame per 6 bytes of plain
records, 172 per byte of deflated ones. Memory stays a piece of a data block (`PIECE_BYTES`,
or one DZ block of at most `MAX_BLOCK_BYTES`) and a chunk of records; of variable-length
DataBytes, at most 65 bytes an entry (`MAX_SIGNAL_BYTES`, `VLSD_CHUNK_FRAMES`).

No value is cut to fit its column (`data_frames`): an id beyond 32 bits, a DataLength or an
entry of more than 64 bytes make a malformed frame, which the frame checks count and name.

The asammdf path:

ASAM MDF4 bus logging (CANedge, python-can's MF4Writer) read as arrays through asammdf.

python-can's MF4Reader asks asammdf for the same `CAN_DataFrame` channel group and then builds
a `Message` per record; here the record arrays are used as they are, a chunk of records at a
time, so memory stays bounded whatever the file's size.

asammdf trusts the file: before it opens one, `check_for_asammdf` refuses links that loop,
blocks listed twice and DZ blocks that inflate to more than they say. A group then yields at
most the records its data group's blocks can hold (`MdfLinks.max_records`), whatever count it
claims, its records hold the same at least 6 bytes of members that do not overlap, and a read
asks asammdf for at most `MF4_CHUNK_BYTES` of records. Variable-length DataBytes (CANedge
writes them) are bounded before a record is read (`mf4_vlsd.longest_entries`): asammdf pads
each entry of a read to the longest its records name, so their signal data may hold at most
68 bytes a record and that longest entry at most 64 bytes (more is corrupt), and a read of
131,072 records holds at most 8 MiB of them. asammdf's error text (which quotes channel
names of any length) reaches an error as a note (`note_text`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from hwbridge.can.io.frame_checks import MAX_DATA, MAX_ID
from hwbridge.can.io.frames import CaptureError, FrameChunk, ReaderCounts, note_text
from hwbridge.can.io.mf4_links import (
    INFLATE_ERRORS,
    MAX_BLOCK_BYTES,
    MdfLinks,
    check_for_asammdf,
    inflater,
    scan_links,
)
from hwbridge.can.io.mf4_vlsd import longest_entries, open_mdf

__all__ = [
    "FIELDS",
    "MAX_BLOCK_BYTES",
    "MIN_ID_BITS",
    "MIN_RECORD_BYTES",
    "MdfReader",
    "Mf4Reader",
    "Unsupported",
    "data_frames",
    "mf4_reader",
]

_HEAD = struct.Struct("<4s4xQQ")  # block id, length, link count
_HD_DATA = struct.Struct("<QhhBBB")  # start ns, tz offset min, dst offset min, time flags, ...
_CG_DATA = struct.Struct("<QQHH4xII")  # record id, cycles, flags, path separator, bytes, inval
_CN_DATA = struct.Struct("<BBBBIII")  # type, sync, data type, bit offset, byte offset, bits, flags
_CC_DATA = struct.Struct("<BBHHH")  # type, precision, flags, ref count, value count
_DZ_DATA = struct.Struct("<2sBxIQQ")  # original type, zip type, parameter, original size, size
_DL_DATA = struct.Struct("<B3xI")  # flags, count
_SI_DATA = struct.Struct("<BBB")  # source type, bus type, flags

_FLAG_CG_BUS_EVENT = 0x02
_FLAG_CG_VLSD = 0x01
_SOURCE_BUS = 0x02
_BUS_TYPE_CAN = 0x02
_FLAG_HD_LOCAL_TIME = 0x01
_CN_FIXED, _CN_VLSD, _CN_MASTER = 0, 1, 2
_SYNC_TIME = 1
_UINT_LE, _UINT_BE, _INT_LE, _FLOAT_LE, _BYTES = 0, 1, 2, 4, 10
_CC_IDENTITY, _CC_LINEAR = 0, 1
_ZIP_DEFLATE, _ZIP_TRANSPOSED = 0, 1
PIECE_BYTES = 2 * 1024 * 1024
"""Bytes of an uncompressed data block read at once."""
CHUNK_FRAMES = 65_536
"""Records made into a chunk at once (records of FD-capable loggers hold 64 data bytes)."""


# MAX_BLOCK_BYTES: a DZ block that says it inflates to more is corrupt (writers use a few
# MiB); one that inflates to more than it says stops there, so a deflate bomb costs nothing.
MAX_SIGNAL_BYTES = 4096
"""Variable-length DataBytes longer than this are corrupt (a CAN FD frame carries 64, CAN XL
2048); an entry of 65 to this many bytes is a malformed frame. Of each entry at most
`MAX_DATA` + 1 bytes are read (one more than a frame carries, to tell it is too long)."""
VLSD_CHUNK_FRAMES = 8192
"""Records with variable-length DataBytes made into a chunk at once: the signal data their
entries span (at most 4 + `MAX_SIGNAL_BYTES` bytes each, 33 MB) is held while they are cut
out, and the entries themselves as rows of 65 bytes."""
_ENTRY = 4 + MAX_DATA + 1  # an entry's length and the bytes of it read
MIN_ID_BITS = 11
"""A CAN id has 11 or 29 bits: a narrower CAN_DataFrame.ID member is corrupt."""
MIN_RECORD_BYTES = 6
"""A CAN_DataFrame record holds at least its time stamp (32 bits or more) and its id (11 bits
or more), members that do not overlap: so at most 1 frame per 6 bytes of records, 1032 / 6 =
172 per byte of deflated records."""


def _inflate(data: bytes, size: int) -> bytes:
    """`data` inflated, at most `size` bytes and one more (to tell a wrong size)."""
    out: bytes = inflater.decompressobj().decompress(data, size + 1)
    return out


class Unsupported(Exception):
    """A layout this reader leaves to asammdf's (`Mf4Reader`)."""


class _Corrupt(Exception):
    """A layout no reader may read (asammdf's refuses it too): a CaptureError on opening."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(reason)
        self.where = where


def _first_overlap(spans: list[tuple[str, int, int]]) -> tuple[str, str] | None:
    """The names of two of `spans` (name, first bit, bits) that share a bit, if any do."""
    ordered = sorted((start, start + bits, name) for name, start, bits in spans if bits)
    for (_, end, name), (start, _, other) in itertools.pairwise(ordered):
        if start < end:
            return name, other
    return None


def _record_fault(record: int, id_bits: int, spans: list[tuple[str, int, int]]) -> str | None:
    """Why a CAN_DataFrame record of `record` bytes whose ID has `id_bits` bits and whose
    time stamp and members lie at `spans` is corrupt (None: it is not)."""
    if record < MIN_RECORD_BYTES:
        return f"CAN_DataFrame records of {record} bytes (a time stamp and an id need 6)"
    if id_bits < MIN_ID_BITS:
        return f"a CAN_DataFrame.ID of {id_bits} bits (an id has 11 or 29)"
    if pair := _first_overlap(spans):
        return f"{pair[0]} and {pair[1]} overlap in a CAN_DataFrame record"
    return None


@dataclass(frozen=True, slots=True)
class _Block:
    kind: bytes  # b"DT", b"DZ", ...
    links: tuple[int, ...]
    at: int  # where the data section starts
    size: int  # its length
    addr: int = 0  # where the block starts


@dataclass(frozen=True, slots=True)
class _Field:
    byte_offset: int
    bit_offset: int
    bits: int
    data_type: int
    vlsd: int = 0  # the address of the signal data of a variable-length member

    @property
    def start(self) -> int:
        """Its first bit in the record."""
        return 8 * self.byte_offset + self.bit_offset

    @property
    def width(self) -> int:
        """The bits of the record it takes (a variable-length member: its 64-bit offset)."""
        return 64 if self.vlsd else self.bits


@dataclass(frozen=True, slots=True)
class _Master:
    byte_offset: int
    bits: int
    data_type: int
    factor: float = 1.0
    offset: float = 0.0


@dataclass(slots=True)
class _Group:
    index: int
    cycles: int  # as the group says
    record_size: int
    data: int  # address of the data block (tree)
    master: _Master
    fields: dict[str, _Field] = field(default_factory=dict)
    most: int = 0  # the records its data blocks can hold
    signal_bytes: int = 0  # the bytes of its variable-length DataBytes' signal data


class _File:
    """Blocks of an MDF4 file read by address."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self.file = file
        self.size = size

    def block(self, addr: int, *expected: bytes) -> _Block:
        if not 64 <= addr < self.size:
            raise CaptureError("", f"byte {addr}", "corrupt: a link points outside the file")
        self.file.seek(addr)
        head = self.file.read(_HEAD.size)
        if len(head) < _HEAD.size or head[:2] != b"##":
            raise CaptureError("", f"byte {addr}", "corrupt: no MDF block starts here")
        kind, length, count = _HEAD.unpack(head)
        if count > 1 << 20 or length < _HEAD.size + 8 * count or addr + length > self.size:
            raise CaptureError("", f"byte {addr}", f"corrupt block {kind[2:]!r}")
        links = struct.unpack(f"<{count}q", self.file.read(8 * count))
        start = addr + _HEAD.size + 8 * count
        block = _Block(kind[2:], links, start, addr + length - start, addr)
        if expected and block.kind not in expected:
            raise Unsupported(f"a {block.kind!r} block where {expected} was expected")
        return block

    def data(self, block: _Block, limit: int = 1 << 20) -> bytes:
        """The data section of a small block (at most `limit` bytes of it)."""
        self.file.seek(block.at)
        return self.file.read(min(block.size, limit))

    def text(self, addr: int) -> str:
        if not addr:
            return ""
        block = self.block(addr, b"TX", b"MD")
        return self.data(block, 4096).split(b"\0", 1)[0].decode("utf-8", "replace")

    def chain(self, addr: int, *expected: bytes) -> Iterator[_Block]:
        """A block and the ones its first link leads to (DG, CG and CN lists)."""
        seen: set[int] = set()
        while addr:
            if addr in seen:
                raise CaptureError("", f"byte {addr}", "corrupt: a block list loops")
            seen.add(addr)
            block = self.block(addr, *expected)
            yield block
            addr = block.links[0]


def _start_seconds(hd: bytes) -> float:
    """The measurement start as asammdf's `header.start_time.timestamp()` gives it."""
    ns, tz_offset, dst_offset, flags, _, _ = _HD_DATA.unpack_from(hd)
    seconds = ns / 10**9
    if flags & _FLAG_HD_LOCAL_TIME:  # a wall clock without a zone: read as local time
        return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None).timestamp()
    zone = dt.timezone(dt.timedelta(minutes=tz_offset + dst_offset))
    return dt.datetime.fromtimestamp(seconds, zone).timestamp()


def _finalized_mdf4(f: _File) -> None:
    f.file.seek(0)
    ident = f.file.read(64)
    if len(ident) < 64 or ident[:8] != b"MDF     ":
        raise Unsupported("not a finalized MDF file")
    if struct.unpack_from("<H", ident, 28)[0] < 400:
        raise Unsupported("MDF version 3")


_RECORD_BLOCKS = frozenset({"DT", "DZ", "DL", "HL"})
_SIGNAL_BLOCKS = frozenset({"SD", "DZ", "DL", "HL"})


class _Layout:
    """The CAN groups of a sorted, finalized MDF4 file whose links have been checked."""

    def __init__(self, f: _File, links: MdfLinks) -> None:
        self.links = links
        hd = f.block(64, b"HD")
        self.start_us = round(_start_seconds(f.data(hd)) * 1_000_000)
        self.groups: list[_Group] = []
        self.error_frames = self.remote_frames = 0
        index = 0
        for dg in f.chain(hd.links[0], b"DG"):
            record_id_size = f.data(dg, 1)[0]
            groups = list(f.chain(dg.links[1], b"CG"))
            if record_id_size or len(groups) > 1:
                raise Unsupported("an unsorted data group")
            for cg in groups:
                self._group(f, index, cg, dg)
                index += 1

    def _group(self, f: _File, index: int, cg: _Block, dg: _Block) -> None:
        _, cycles, flags, _, data_bytes, inval_bytes = _CG_DATA.unpack_from(f.data(cg))
        if flags & _FLAG_CG_VLSD:
            raise Unsupported("a variable-length-data channel group")
        most = min(cycles, self.links.max_records(cg.addr, dg.addr))
        if not flags & _FLAG_CG_BUS_EVENT or not cycles or not cg.links[3]:
            return
        source_type, bus_type, _ = _SI_DATA.unpack_from(f.data(f.block(cg.links[3], b"SI")))
        if not source_type & _SOURCE_BUS or bus_type != _BUS_TYPE_CAN:
            return
        channels = list(f.chain(cg.links[1], b"CN"))
        names = [f.text(cn.links[2]) for cn in channels]
        if "CAN_DataFrame" in names:
            frame = channels[names.index("CAN_DataFrame")]
            record = data_bytes + inval_bytes
            if record > MAX_RECORD_BYTES:
                raise Unsupported(f"CAN_DataFrame records of {record} bytes")
            data = dg.links[2]
            self._blocks(data, _RECORD_BLOCKS, "records")
            group = _Group(index, cycles, record, data, self._master(f, channels, data_bytes))
            group.most = most
            for member in f.chain(frame.links[1], b"CN"):
                name = f.text(member.links[2]).removeprefix("CAN_DataFrame.")
                if name in FIELDS:
                    group.fields[name] = _member(f, member, name, data_bytes)
            if "ID" not in group.fields:
                raise Unsupported("no CAN_DataFrame.ID member")
            spans = [("time", 8 * group.master.byte_offset, group.master.bits)]
            spans += [(f"CAN_DataFrame.{n}", f.start, f.width) for n, f in group.fields.items()]
            if fault := _record_fault(record, group.fields["ID"].bits, spans):
                raise _Corrupt(f"channel group {index}", fault)
            vlsd = group.fields["DataBytes"].vlsd if "DataBytes" in group.fields else 0
            if vlsd:
                self._blocks(vlsd, _SIGNAL_BLOCKS, "signal data")
                group.signal_bytes = self.links.data_bytes(vlsd)
            self.groups.append(group)
        elif "CAN_ErrorFrame" in names:
            self.error_frames += most
        elif "CAN_RemoteFrame" in names:
            self.remote_frames += most

    def _blocks(self, at: int, kinds: frozenset[str], what: str) -> None:
        """Unsupported unless the data tree at `at` is of `kinds` of block."""
        found = {node.kind for node in self.links.tree(at)}
        if not found <= kinds:
            raise Unsupported(f"{what} in {'/'.join(sorted(found - kinds))} blocks")

    @staticmethod
    def _master(f: _File, channels: list[_Block], data_bytes: int) -> _Master:
        for cn in channels:
            kind, sync, data_type, bit_offset, byte_offset, bits, _ = _CN_DATA.unpack_from(
                f.data(cn, 64)
            )
            if kind != _CN_MASTER:
                continue
            if sync != _SYNC_TIME or bit_offset or bits not in (32, 64):
                raise Unsupported("a master channel other than time")
            if data_type not in (_UINT_LE, _INT_LE, _FLOAT_LE):
                raise Unsupported(f"time of data type {data_type}")
            if byte_offset + bits // 8 > data_bytes:
                raise Unsupported("a time stamp outside its record")
            factor, offset = _linear(f, cn.links[4])
            return _Master(byte_offset, bits, data_type, factor, offset)
        raise Unsupported("no time channel")


def _linear(f: _File, addr: int) -> tuple[float, float]:
    """(factor, offset) of an identity or linear conversion; Unsupported for any other."""
    if not addr:
        return 1.0, 0.0
    cc = f.block(addr, b"CC")
    raw = f.data(cc, 4096)
    kind, _, _, _, count = _CC_DATA.unpack_from(raw)
    if kind == _CC_IDENTITY:
        return 1.0, 0.0
    if kind != _CC_LINEAR or count < 2:
        raise Unsupported(f"a conversion of type {kind}")
    offset, factor = struct.unpack_from("<2d", raw, _CC_DATA.size + 16)
    return factor, offset


def _member(f: _File, cn: _Block, name: str, data_bytes: int) -> _Field:
    """A member of CAN_DataFrame, which must lie within the `data_bytes` of its record."""
    kind, _, data_type, bit_offset, byte_offset, bits, _ = _CN_DATA.unpack_from(f.data(cn, 64))
    width = 8 if kind == _CN_VLSD else (bit_offset + bits + 7) // 8
    if byte_offset + width > data_bytes:
        raise Unsupported(f"CAN_DataFrame.{name} outside its record")
    if cn.links[4]:
        factor, offset = _linear(f, cn.links[4])
        if (factor, offset) != (1.0, 0.0):
            raise Unsupported(f"a conversion on CAN_DataFrame.{name}")
    if name == "DataBytes":
        if data_type != _BYTES or bit_offset:
            raise Unsupported("DataBytes that are not whole bytes")
        if kind == _CN_VLSD:
            if bits != 64 or not cn.links[5]:
                raise Unsupported("variable-length DataBytes without signal data")
            return _Field(byte_offset, 0, 64, _UINT_LE, vlsd=cn.links[5])
        if kind != _CN_FIXED or bits % 8 or not bits:
            raise Unsupported("DataBytes of an unknown kind")
        return _Field(byte_offset, 0, bits, _BYTES)
    if kind != _CN_FIXED or data_type not in (_UINT_LE, _UINT_BE) or bit_offset + bits > 64:
        raise Unsupported(f"CAN_DataFrame.{name} of an unknown kind")
    return _Field(byte_offset, bit_offset, bits, data_type)


class _Stream:
    """The bytes of a data block tree (DT, SD, DZ, DL, HL), in order, a piece at a time;
    each piece comes as an array that starts with the bytes the previous one left over."""

    def __init__(self, f: _File, addr: int, path: Path, size: int = 0) -> None:
        self.f = f
        self.path = path
        self.size = size  # the bytes its blocks hold, as the scan found them
        self.leaves = self._leaves(addr)
        self.buffer = np.zeros(0, np.uint8)  # for `fill`: the stream from `start` on
        self.start = 0
        self.ended = False

    def _leaves(self, addr: int, depth: int = 0) -> Iterator[tuple[_Block, int, int]]:
        """(block, offset, size) of the pieces of data blocks, in order."""
        if not addr:
            return
        if depth > 3:  # HL, DL, data: a deeper tree (or one that loops) is corrupt
            raise CaptureError(self.path, f"byte {addr}", "corrupt: data lists nest too deep")
        block = self.f.block(addr, b"DT", b"SD", b"DZ", b"DL", b"HL")
        if block.kind == b"HL":
            yield from self._leaves(block.links[0], depth + 1)
        elif block.kind == b"DL":
            for dl in self.f.chain(addr, b"DL"):
                for link in dl.links[1:]:
                    yield from self._leaves(link, depth + 1)
        elif block.kind == b"DZ":
            yield block, 0, block.size
        else:  # plain data can be the whole file: a few MiB at a time
            for at in range(0, block.size, PIECE_BYTES):
                yield block, at, min(PIECE_BYTES, block.size - at)

    def next(self, prefix: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8] | None:
        """`prefix` followed by the next piece of the stream (None at its end)."""
        leaf = next(self.leaves, None)
        if leaf is None:
            return None
        block, at, size = leaf
        if block.kind == b"DZ":
            return self._inflate(block, prefix)
        out = np.empty(len(prefix) + size, np.uint8)
        out[: len(prefix)] = prefix
        self.f.file.seek(block.at + at)
        got = self.f.file.readinto(out[len(prefix) :].data)  # type: ignore[attr-defined]
        return out[: len(prefix) + (got or 0)]

    def _inflate(self, block: _Block, prefix: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        self.f.file.seek(block.at)
        head = self.f.file.read(_DZ_DATA.size)
        _, zip_type, parameter, original, size = _DZ_DATA.unpack(head)
        if zip_type not in (_ZIP_DEFLATE, _ZIP_TRANSPOSED):
            raise CaptureError(self.path, f"byte {block.at}", f"unknown zip type {zip_type}")
        if original > MAX_BLOCK_BYTES:
            raise CaptureError(
                self.path, f"byte {block.at}", f"corrupt DZ block of {original} bytes"
            )
        try:
            data = _inflate(self.f.file.read(size), original)
        except INFLATE_ERRORS as exc:
            raise CaptureError(self.path, f"byte {block.at}", f"corrupt DZ block: {exc}") from None
        if len(data) != original:
            raise CaptureError(self.path, f"byte {block.at}", "corrupt DZ block: wrong size")
        raw = np.frombuffer(data, np.uint8)
        out = np.empty(len(prefix) + original, np.uint8)
        out[: len(prefix)] = prefix
        body = out[len(prefix) :]
        if zip_type == _ZIP_TRANSPOSED and parameter > 1:  # stored column by column
            rows = original // parameter
            cut = rows * parameter
            body[:cut].reshape(rows, parameter)[:] = raw[:cut].reshape(parameter, rows).T
            body[cut:] = raw[cut:]
        else:
            body[:] = raw
        return out

    def fill(self, end: int) -> None:
        """Read on until the buffer holds the stream up to `end` (or the stream ends)."""
        while self.start + len(self.buffer) < end and not self.ended:
            grown = self.next(self.buffer)
            if grown is None:
                self.ended = True
            else:
                self.buffer = grown

    def drop(self, before: int) -> None:
        """Forget the bytes before stream offset `before`."""
        cut = before - self.start
        if cut > 0:
            self.buffer = self.buffer[cut:].copy()
            self.start = before


def _uint(rows: npt.NDArray[np.uint8], f: _Field) -> npt.NDArray[np.uint64]:
    """A bit field of each row as unsigned integers."""
    width = (f.bit_offset + f.bits + 7) // 8
    raw = np.zeros((len(rows), 8), np.uint8)
    cells = rows[:, f.byte_offset : f.byte_offset + width]
    if f.data_type == _UINT_BE:
        raw[:, 8 - width :] = cells
        value = raw.view(">u8")[:, 0].astype(np.uint64)
    else:
        raw[:, :width] = cells
        value = raw.view("<u8")[:, 0].astype(np.uint64)
    value >>= np.uint64(f.bit_offset)
    if f.bits < 64:
        value &= np.uint64((1 << f.bits) - 1)
    return value


class MdfReader:
    """Frame chunks from the CAN bus logging of a sorted, finalized MDF4 file; `Unsupported`
    on opening any other (asammdf's reader then reads it)."""

    def __init__(self, path: str | Path, chunk_frames: int = CHUNK_FRAMES) -> None:
        self.path = Path(path)
        self.counts = ReaderCounts()
        self._chunk = chunk_frames
        self._raw: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        self._file = _File(self._raw, self.path.stat().st_size)
        try:
            _finalized_mdf4(self._file)
            links = scan_links(self._raw, self._file.size, self.path)  # corrupt for any reader
        except (CaptureError, Unsupported):
            self.close()
            raise
        try:
            self._layout = _Layout(self._file, links)
        except _Corrupt as exc:
            self.close()
            raise CaptureError(self.path, exc.where, f"corrupt: {exc}") from None
        except (CaptureError, Unsupported, struct.error, ValueError, OverflowError) as exc:
            self.close()  # a file this reader cannot lay out is asammdf's to judge
            raise Unsupported(str(exc)) from None
        self.counts.error_frames = self._layout.error_frames
        self.counts.remote_frames = self._layout.remote_frames
        self._total = sum(g.most for g in self._layout.groups)
        self._done = 0
        self._where = "file header"

    @property
    def progress(self) -> float:
        return 1.0 if not self._total else min(1.0, self._done / self._total)

    @property
    def position(self) -> str:
        return self._where

    def close(self) -> None:
        self._raw.close()

    def chunks(self) -> Iterator[FrameChunk]:
        try:
            for group in self._layout.groups:
                yield from self._group(group)
        except CaptureError as exc:
            raise CaptureError(self.path, exc.position or self._where, exc.reason) from None
        except Unsupported as exc:  # the file changed since it was opened: too late for asammdf
            raise CaptureError(self.path, self._where, note_text(f"corrupt: {exc}")) from None
        finally:
            self.close()

    def _group(self, group: _Group) -> Iterator[FrameChunk]:
        records = _Stream(self._file, group.data, self.path)
        vlsd = group.fields["DataBytes"].vlsd if "DataBytes" in group.fields else 0
        signal = _Stream(self._file, vlsd, self.path, group.signal_bytes) if vlsd else None
        size = group.record_size
        step = min(self._chunk, VLSD_CHUNK_FRAMES) if signal is not None else self._chunk
        done = 0
        tail = np.zeros(0, np.uint8)
        while done < group.cycles:
            self._where = f"record {done} of channel group {group.index}"
            data = records.next(tail)
            if data is None:
                raise CaptureError(self.path, self._where, "truncated: records missing")
            count = min(group.cycles - done, len(data) // size)
            rows = data[: count * size].reshape(count, size)
            for first in range(0, count, step):  # a piece may hold several chunks
                chunk = self._frames(group, rows[first : first + step], signal)
                self._done += len(chunk)
                yield chunk
            done += count
            tail = data[count * size :].copy()

    def _frames(
        self, group: _Group, rows: npt.NDArray[np.uint8], signal: _Stream | None
    ) -> FrameChunk:
        n = len(rows)
        columns: dict[str, npt.NDArray[Any] | None] = dict.fromkeys(FIELDS)
        sizes = None
        for name, f in group.fields.items():
            if name == "DataBytes" and not f.vlsd:
                columns[name] = rows[:, f.byte_offset : f.byte_offset + f.bits // 8]
            elif name == "DataBytes":
                assert signal is not None
                columns[name], sizes = self._signal_data(signal, _uint(rows, f))
            else:
                columns[name] = _uint(rows, f)
        return data_frames(n, columns, self._stamps(group.master, rows), sizes)

    def _stamps(self, m: _Master, rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
        cells = np.ascontiguousarray(rows[:, m.byte_offset : m.byte_offset + m.bits // 8])
        kind = {_UINT_LE: "u", _INT_LE: "i", _FLOAT_LE: "f"}[m.data_type]
        values = cells.view(f"<{kind}{m.bits // 8}")[:, 0]
        if (m.factor, m.offset) != (1.0, 0.0):  # as asammdf converts: * factor, then + offset
            seconds = values * m.factor
            if m.offset:
                seconds = seconds + m.offset
        else:
            seconds = values
        with np.errstate(invalid="ignore", over="ignore"):  # nan or huge: the frame checks'
            micros = np.rint(np.asarray(seconds, np.float64) * 1e6).astype(np.int64)
        return micros + self._layout.start_us

    def _signal_data(
        self, signal: _Stream, offsets: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """The variable-length DataBytes at `offsets` of the signal data (SD) stream, at most
        `MAX_DATA` + 1 bytes of each, zero padded (python-can's rows hold them so), and the
        bytes each entry says it holds."""
        n = len(offsets)
        if not n:
            return np.zeros((0, 8), np.uint8), np.zeros(0, np.int64)
        where = offsets.astype(np.int64)  # an offset past 2^63 is negative: out of order
        low, high = int(where.min()), int(where.max())
        if low < signal.start:
            raise CaptureError(self.path, self._where, "unsupported: signal data out of order")
        # entries follow each other: the offsets of n records span at most n entries, so a
        # chunk holds at most that much of the stream, and none lies past its blocks' bytes
        if high + 4 > signal.size or high - low > n * (4 + MAX_SIGNAL_BYTES):
            raise CaptureError(self.path, self._where, "corrupt: signal data offsets")
        signal.fill(high + _ENTRY)
        at = where - signal.start
        buf = signal.buffer
        held = len(buf)
        if high - signal.start + 4 > held:
            raise CaptureError(self.path, self._where, "truncated: signal data missing")
        if held < high - signal.start + _ENTRY:  # the stream's last entry may be short
            buf = np.concatenate([buf, np.zeros(high - signal.start + _ENTRY - held, np.uint8)])
        entries = sliding_window_view(buf, _ENTRY)[at]  # n rows of _ENTRY bytes, copied
        sizes = entries[:, :4].copy().view("<u4")[:, 0].astype(np.int64)
        if int(sizes.max()) > MAX_SIGNAL_BYTES:
            raise CaptureError(
                self.path, self._where, f"corrupt: DataBytes of {int(sizes.max())} bytes"
            )
        read = np.minimum(sizes, MAX_DATA + 1)
        if int((at + 4 + read).max()) > held or int((where + 4 + sizes).max()) > signal.size:
            raise CaptureError(self.path, self._where, "truncated: signal data missing")
        width = max(8, int(read.max()))
        data = entries[:, 4 : 4 + width]
        if bool(np.any(read < width)):
            data = np.where(np.arange(width)[None, :] < read[:, None], data, 0).astype(np.uint8)
        signal.drop(high)  # entries come in record order
        return np.ascontiguousarray(data), sizes


# -- through asammdf (files the block reader leaves to it) ---------------------------

_DLC2LEN = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64], np.uint8)
MF4_CHUNK_FRAMES = 131_072
"""Records read at once: FD-capable loggers store 64 data bytes a record, and asammdf keeps a
few copies of them while reading, so MF4 chunks are half the size of the others."""
MF4_CHUNK_BYTES = 32 * 1024 * 1024
"""Bytes of records read at once, with the variable-length DataBytes they name (at most 64
bytes a record, `mf4_vlsd`): fewer records a read when they are large."""
MAX_RECORD_BYTES = 65_536
"""A CAN_DataFrame record holds a time stamp, an id, flags and at most 64 data bytes (or an
offset into signal data): a group of larger records is refused."""


def _open(path: Path) -> tuple[Any, MdfLinks]:
    # loops, blocks listed twice, deflate bombs: refused here; variable-length DataBytes are
    # checked on this reader's own MDF (`longest_entries`), not on one opened for the check
    links = check_for_asammdf(path, entries=False)
    return open_mdf(path), links


_NO_BITS = (3, 6)  # virtual master, virtual data: channels that take no bits of a record


def _asammdf_record_fault(record: int, channels: list[Any]) -> str | None:
    """`_record_fault` of a channel group as asammdf describes it."""
    spans: list[tuple[str, int, int]] = []
    id_bits = MIN_ID_BITS
    for channel in channels:
        name, kind = str(channel.name), int(channel.channel_type)
        member = name.removeprefix("CAN_DataFrame.")
        if kind in _NO_BITS or (kind != _CN_MASTER and member not in FIELDS):
            continue
        bits = 64 if kind == _CN_VLSD else int(channel.bit_count)
        spans.append((name, 8 * int(channel.byte_offset) + int(channel.bit_offset), bits))
        if member == "ID":
            id_bits = bits
    return _record_fault(record, id_bits, spans)


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
            longest = longest_entries(self._mdf, links, self.path)  # before any record is read
            for index, group in enumerate(self._mdf.groups):
                self._group(index, group, links, longest.get(index, 0))
        except CaptureError:
            self.close()
            raise
        except Exception as exc:  # what asammdf made of a file it could open
            self.close()
            why = note_text(f"unreadable MDF4 file: {exc}")
            raise CaptureError(self.path, "file header", why) from None

    def _group(self, index: int, group: Any, links: MdfLinks, entry: int) -> None:
        """Group `index` read if it holds CAN_DataFrame records (`entry`: the longest
        variable-length entry they name), counted if error or remote frames."""
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
            if fault := _asammdf_record_fault(size, group.channels):
                raise CaptureError(self.path, f"channel group {index}", f"corrupt: {fault}")
            per_read = max(1, min(self._chunk, MF4_CHUNK_BYTES // (size + entry)))
            self._groups.append((index, records, per_read))
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
        except Exception as exc:  # asammdf's text quotes channel names of any length
            why = note_text(f"unreadable records: {exc}")
            raise CaptureError(self.path, self._where, why) from None
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
    n: int,
    fields: dict[str, npt.NDArray[Any] | None],
    stamps_us: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64] | None = None,
) -> FrameChunk:
    """`n` CAN_DataFrame records (their members by name, as python-can's MF4Reader reads
    them; `sizes`: the bytes each variable-length DataBytes entry holds) as a chunk.

    No value is cut to fit its column: a frame whose id does not fit 32 bits keeps it (the
    column is widened, the frame checks drop it), one whose DataLength, or DataBytes entry,
    says more than `MAX_DATA` bytes keeps that length (and at most `MAX_DATA` + 1 of its
    bytes): each is a malformed frame, counted and named as what it is."""
    raw_id = fields["ID"]
    assert raw_id is not None
    ids, extended = _ids(raw_id, fields["IDE"])
    payload = fields["DataBytes"]
    if payload is None:
        payload = np.zeros((n, 8), np.uint8)
    elif payload.dtype == object:  # variable-length bytes (asammdf): rare, so a loop is fine
        payload, sizes = _entries(n, payload)
    payload = payload.reshape(n, -1).astype(np.uint8, copy=False)
    stored: npt.NDArray[np.int64] | int = payload.shape[1] if sizes is None else sizes
    said = _said(fields["DataLength"], fields["DLC"])
    if said is None:
        length = np.broadcast_to(np.asarray(stored, np.int64), (n,))
    else:
        length = np.minimum(said, stored)
        if int(said.max(initial=0)) > MAX_DATA:  # says more than a frame carries: malformed
            length = np.where(said > MAX_DATA, said, length)
    if sizes is not None and int(sizes.max(initial=0)) > MAX_DATA:
        length = np.where(sizes > MAX_DATA, sizes, length)
    # FD-capable loggers store 64 bytes a record: keep the bytes the frames carry
    width = max(1, min(int(length.max(initial=0)), payload.shape[1], MAX_DATA + 1))
    data = payload[:, :width]
    if bool(np.any(length < width)):  # bytes past a frame's length are not its data
        cols = np.arange(width, dtype=np.int64)
        data = np.where(cols[None, :] < length[:, None], data, 0).astype(np.uint8)
    else:
        data = np.ascontiguousarray(data)
    channel = fields["BusChannel"]
    return FrameChunk(
        stamps_us,
        ids,
        extended,
        _narrow(length),
        data,
        _channels(channel) if channel is not None else np.full(n, -1, np.int16),
    )


_MASK = np.uint64(0x1FFFFFFF)
_INT64_MAX = np.iinfo(np.int64).max


def _as_uint64(values: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    """Integers as uint64: a negative or not finite value (asammdf may convert a member to
    one) becomes one no column holds."""
    if values.dtype.kind == "u":
        return values.astype(np.uint64, copy=False)
    if values.dtype.kind in "ib":
        wide = values.astype(np.int64)
        return np.where(wide < 0, np.uint64(2**64 - 1), wide.astype(np.uint64))
    real = values.astype(np.float64)
    fits = np.isfinite(real) & (real >= 0) & (real < 2.0**64)
    return np.where(fits, real, 0).astype(np.uint64) | np.where(fits, 0, np.uint64(2**64 - 1))


def _ids(
    raw: npt.NDArray[Any], ide: npt.NDArray[Any] | None
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """The ids (29 bits kept; uint32, or uint64 with an id beyond 32 bits kept whole for the
    frame checks) and whether each is extended."""
    wide = _as_uint64(raw)
    if ide is not None:
        extended = ide.astype(bool)
    else:  # no IDE channel: the id's flag bit, else its size, tells
        extended = ((wide & np.uint64(0x80000000)) != 0) | ((wide & _MASK) > 0x7FF)
    if not len(wide) or int(wide.max()) < MAX_ID:
        return wide.astype(np.uint32) & np.uint32(0x1FFFFFFF), extended
    return np.where(wide < MAX_ID, wide & _MASK, wide), extended


def _said(
    data_length: npt.NDArray[Any] | None, dlc: npt.NDArray[Any] | None
) -> npt.NDArray[np.int64] | None:
    """The bytes each frame says it carries: DataLength, else what its DLC stands for."""
    if data_length is not None:
        return np.minimum(_as_uint64(data_length), np.uint64(_INT64_MAX)).astype(np.int64)
    if dlc is not None:
        return _DLC2LEN[np.minimum(_as_uint64(dlc), np.uint64(15))].astype(np.int64)
    return None


def _entries(
    n: int, payload: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Variable-length DataBytes (as asammdf reads them) as rows of at most `MAX_DATA` + 1
    bytes, and the bytes each entry holds."""
    rows = [bytes(p) for p in payload]
    sizes = np.fromiter(map(len, rows), np.int64, n)
    width = max(8, min(int(sizes.max(initial=0)), MAX_DATA + 1))
    buf = np.zeros((n, width), np.uint8)
    for i, r in enumerate(rows):
        buf[i, : min(len(r), width)] = np.frombuffer(r[:width], np.uint8)
    return buf, sizes


def _narrow(length: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """Lengths as uint8, the column's type, unless one needs more (a malformed frame's)."""
    most = int(length.max(initial=0))
    return length.astype(np.uint8 if most <= 0xFF else np.uint16 if most <= 0xFFFF else np.uint64)


_MAX_CHANNEL = 32767


def _channels(channel: npt.NDArray[Any]) -> npt.NDArray[np.int16]:
    """Bus channels as the column holds them: clipped to -1..32767 (as python-can's
    reader's), not wrapped."""
    if channel.dtype.kind == "u" and int(channel.max(initial=0)) <= _MAX_CHANNEL:
        return channel.astype(np.int16)
    wide = np.clip(_as_uint64(channel), 0, _MAX_CHANNEL).astype(np.int16)
    if channel.dtype.kind in "ib":
        wide[channel.astype(np.int64) < 0] = -1
    return wide


def mf4_reader(path: Path) -> MdfReader | Mf4Reader:
    """The reader for an .mf4 file: the block reader for sorted, finalized files (no asammdf
    needed), asammdf's for any other (after `check_for_asammdf`)."""
    try:
        return MdfReader(path)
    except Unsupported:
        return Mf4Reader(path)
