"""BLF files built by hand for the hostile-input tests: python-can's BLFWriter makes the clean
objects and the file header; the containers around them (and what is wrong with them) are
packed here with struct, so a test says exactly which field lies."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import can

HEADER_BYTES = 144  # python-can's (and Vector's) file header
BASE = struct.Struct("<4sHHLL")  # signature, header size, header version, object size, type
CONTAINER = struct.Struct("<H6xL4x")  # compression method, uncompressed size
OBJ_V1 = struct.Struct("<LHHQ")  # flags, client index, object version, timestamp
CAN_MSG = struct.Struct("<HBBL8s")  # channel, flags, dlc, arbitration id, data
LOG_CONTAINER = 10
CAN_MESSAGE = 1
FRAME_TYPES = (1, 86, 100, 101)  # the object types the reader makes frames of
CONTAINER_BYTES = 128 * 1024  # python-can's BLFWriter.max_container_size


def written(path: Path, messages: Iterable[can.Message]) -> tuple[bytes, bytes]:
    """(file header, inflated object stream) of `messages` as python-can's BLFWriter writes
    them (one uncompressed container, unpacked again)."""
    with can.BLFWriter(path, compression_level=0, max_container_size=1 << 30) as writer:
        for msg in messages:
            writer.on_message_received(msg)
    data = path.read_bytes()
    stream = []
    at = HEADER_BYTES
    while at < len(data):
        _, _, _, size, _ = BASE.unpack_from(data, at)
        stream.append(data[at + 32 : at + size])
        at += size + size % 4
    return data[:HEADER_BYTES], b"".join(stream)


def can_object(can_id: int = 0x100, *, stamp_ns: int = 0, size: int | None = None) -> bytes:
    """One classic CAN object (48 bytes) as python-can writes it; `size` overrides the size
    field (the bytes stay 48)."""
    body = CAN_MSG.pack(1, 0, 8, can_id, bytes(range(8)))
    head = BASE.pack(b"LOBJ", 32, 1, 48 if size is None else size, CAN_MESSAGE)
    return head + OBJ_V1.pack(2, 0, 0, stamp_ns) + body


def container(
    payload: bytes,
    *,
    compress: bool = True,
    declared: int | None = None,
    stored: bytes | None = None,
) -> bytes:
    """A log container of `payload`; `declared` overrides its uncompressed size, `stored`
    the bytes it holds (a zlib bomb, say)."""
    if stored is None:
        stored = zlib.compress(payload, 6) if compress else payload
    size = BASE.size + CONTAINER.size + len(stored)
    return (
        BASE.pack(b"LOBJ", BASE.size, 1, size, LOG_CONTAINER)
        + CONTAINER.pack(2 if compress else 0, len(payload) if declared is None else declared)
        + stored
        + bytes(size % 4)
    )


def containers(stream: bytes, *, compress: bool = True, size: int = CONTAINER_BYTES) -> bytes:
    """`stream` cut into log containers of `size` inflated bytes, as BLFWriter cuts it."""
    return b"".join(
        container(stream[i : i + size], compress=compress) for i in range(0, len(stream), size)
    )


def zlib_bomb(inflated: int) -> bytes:
    """A zlib stream of `inflated` zero bytes (about a thousandth of that), made a MiB at a
    time so the test never holds the bomb inflated."""
    zeros = bytes(1 << 20)
    packer = zlib.compressobj(9)
    parts = [packer.compress(zeros) for _ in range(inflated >> 20)]
    parts.append(packer.compress(bytes(inflated & ((1 << 20) - 1))))
    return b"".join([*parts, packer.flush()])


def frame_ends(stream: bytes) -> list[int]:
    """Where (inflated offset) the object of each frame of a clean stream ends, in order."""
    ends: list[int] = []
    at = 0
    while at + BASE.size <= len(stream):
        at = stream.index(b"LOBJ", at, at + 8)
        _, _, _, size, obj_type = BASE.unpack_from(stream, at)
        at += size
        if obj_type in FRAME_TYPES:
            ends.append(at)
    return ends


class Span(NamedTuple):
    """Where one log container of a built file lies, in the file and in the inflated stream."""

    start: int  # file byte of its object header
    payload: int  # file byte where its (compressed or stored) data starts
    end: int  # file byte after it and its padding
    inflated: int  # inflated offset of its first byte
    length: int  # inflated bytes it holds
    stored: bool  # not compressed


def laid_out(
    header: bytes, stream: bytes, *, compress: bool, size: int
) -> tuple[bytes, list[Span]]:
    """header + `stream` in containers of `size` inflated bytes, and where each lies."""
    parts = [header]
    spans: list[Span] = []
    at = len(header)
    for i in range(0, len(stream), size):
        packed = container(stream[i : i + size], compress=compress)
        spans.append(
            Span(at, at + 32, at + len(packed), i, len(stream[i : i + size]), not compress)
        )
        parts.append(packed)
        at += len(packed)
    return b"".join(parts), spans


def inflated_offset(spans: list[Span], pos: int, *, exact: bool = True) -> int:
    """The inflated offset from which a change at file byte `pos` can change what is read:
    the byte itself in a stored container's data (if `exact`: a container cut short is
    lost whole), else the start of its container; 0 in the file header (the start time and
    header size change every frame)."""
    if pos < HEADER_BYTES:
        return 0
    for span in spans:
        if pos < span.end:
            if exact and span.stored and pos >= span.payload:
                return span.inflated + min(pos - span.payload, span.length)
            return span.inflated
    return spans[-1].inflated + spans[-1].length if spans else 0


def object_starts(stream: bytes) -> list[int]:
    """Inflated offsets of the objects of a clean stream."""
    starts: list[int] = []
    at = 0
    while at + BASE.size <= len(stream):
        at = stream.index(b"LOBJ", at, at + 8)
        starts.append(at)
        at += BASE.unpack_from(stream, at)[3]
    return starts
