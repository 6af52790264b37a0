"""BlfReader on random and structured garbage, by hypothesis: it returns or raises a
CaptureError, within bounded memory and work, yields at most a frame per 16 inflated bytes,
keeps the frames read before the corrupt spot, and reads chains of random objects (payloads
spelling LOBJ, objects split between containers, buffers of any size) as python-can does."""

from __future__ import annotations

import gzip
import struct
import tempfile
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io import blf as reader_blf
from hwbridge.can.io.blf import BlfReader
from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from tests.can.io.blf_build import (
    BASE,
    HEADER_BYTES,
    OBJ_V1,
    Span,
    frame_ends,
    inflated_offset,
    laid_out,
    object_starts,
    written,
)
from tests.captures.conftest import drive

DEFLATE_RATIO = 1032  # the most deflate inflates a byte to
MIN_OBJECT = 16  # a frame is an object of at least its 16-byte base header
PEAK_BYTES = 48_000_000  # a 16 MiB read at most, and small buffers: files here are a few kB
SPLITS = st.sampled_from([97, 512, 2048, 131_072])  # inflated bytes per container
BUFFERS = st.sampled_from([64, 1000, 4096, reader_blf.BUFFER_BYTES])


@dataclass
class Watched:
    """What one read came to, and what it cost."""

    frames: FrameChunk
    error: CaptureError | None
    inflated: list[int] = field(default_factory=list)  # bytes per container
    scanned: list[int] = field(default_factory=list)  # bytes per look for objects
    peak: int = 0


def watched_read(path: Path, buffer_bytes: int) -> Watched:
    """Read `path` whole, counting the inflated bytes, the bytes looked through, and memory."""
    inflated: list[int] = []
    scanned: list[int] = []
    containers = BlfReader._containers
    chain = BlfReader._chain

    def counted_containers(self: BlfReader) -> Iterator[tuple[int, bytes]]:
        for at, data in containers(self):
            inflated.append(len(data))
            yield at, data

    def counted_chain(self: BlfReader, buf: Any, n: int) -> Any:
        scanned.append(n)
        return chain(self, buf, n)

    out: list[FrameChunk] = []
    error: CaptureError | None = None
    tracemalloc.start()
    try:
        with (
            patch.object(BlfReader, "_containers", counted_containers),
            patch.object(BlfReader, "_chain", counted_chain),
            patch.object(reader_blf, "BUFFER_BYTES", buffer_bytes),
        ):
            try:
                out.extend(BlfReader(path).chunks())
            except CaptureError as exc:
                error = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return Watched(concat_chunks(out), error, inflated, scanned, peak)


def assert_bounded(seen: Watched, file_bytes: int) -> None:
    """The bounds the reader states, whatever the file."""
    assert all(n <= reader_blf.MAX_BLOCK_BYTES for n in seen.inflated)
    inflated = sum(seen.inflated)
    assert inflated <= DEFLATE_RATIO * file_bytes
    assert len(seen.frames) <= inflated // MIN_OBJECT
    # each inflated byte is looked through at most twice: as it comes, and again if its
    # object is split off at a buffer's end (and is no longer than a buffer); the few bytes
    # short of an object header at a buffer's end may be looked through a third time
    assert sum(seen.scanned) <= 2 * inflated + 20 * len(seen.scanned)
    assert seen.peak < PEAK_BYTES
    if seen.error is not None:
        assert seen.error.position.startswith("byte ")


def same_rows(a: FrameChunk, b: FrameChunk, rows: int) -> bool:
    if min(len(a), len(b)) < rows:
        return False
    x, y = a.take(np.arange(rows)), b.take(np.arange(rows))
    width = min(x.data.shape[1], y.data.shape[1])
    return (
        np.array_equal(x.timestamp_us, y.timestamp_us)
        and np.array_equal(x.arbitration_id, y.arbitration_id)
        and np.array_equal(x.extended, y.extended)
        and np.array_equal(x.length, y.length)
        and np.array_equal(x.channel, y.channel)
        and np.array_equal(x.data[:, :width], y.data[:, :width])
        and not x.data[:, width:].any()
        and not y.data[:, width:].any()
    )


# -- mutated files -----------------------------------------------------------------------


class Clean:
    """A clean drive: its file header, inflated objects and frames (a class of its own, so
    hypothesis shows it by name, not byte by byte)."""

    def __init__(self, header: bytes, stream: bytes, frames: FrameChunk) -> None:
        self.header = header
        self.stream = stream
        self.ends = frame_ends(stream)  # inflated offset where each frame's object ends
        self.objects = object_starts(stream)  # inflated offset of each object
        self.frames = frames

    def __repr__(self) -> str:
        return f"Clean({len(self.stream)} inflated bytes, {len(self.frames)} frames)"


@pytest.fixture(scope="module")
def clean() -> Iterator[Clean]:
    with tempfile.TemporaryDirectory() as tmp:
        header, stream = written(Path(tmp) / "clean.blf", drive(8.0))
        path = Path(tmp) / "whole.blf"
        path.write_bytes(laid_out(header, stream, compress=True, size=2048)[0])
        frames = concat_chunks(list(BlfReader(path).chunks()))
        assert len(frames) == len(frame_ends(stream)) > 200
        yield Clean(header, stream, frames)


WORDS = st.sampled_from(
    [0, 1, 15, 16, 17, 31, 32, 47, 48, 49, 2**16, 2**24, 2**24 + 1, 2**31, 2**32 - 1]
) | st.integers(0, 2**32 - 1)


@st.composite
def mutations(draw: st.DrawFn, clean: Clean) -> tuple[bytes, int, bool]:
    """(file bytes, inflated offset before which nothing changed, gzip it): a clean file
    with one thing wrong."""
    compress = draw(st.booleans())
    split = draw(SPLITS)
    data, spans = laid_out(clean.header, clean.stream, compress=compress, size=split)
    kind = draw(
        st.sampled_from(
            ["byte", "word", "field", "cut", "repeat", "tail", "inner_word", "inner_byte"]
        )
    )
    gz = draw(st.integers(0, 4)) == 0
    if kind in ("inner_word", "inner_byte"):
        stream = bytearray(clean.stream)
        if kind == "inner_word":
            at = draw(st.sampled_from(clean.objects)) + draw(st.sampled_from([4, 6, 8, 12, 16]))
            struct.pack_into("<L", stream, at, draw(WORDS))
        else:
            at = draw(st.integers(0, len(stream) - 1))
            stream[at] = draw(st.integers(0, 255))
        return laid_out(clean.header, bytes(stream), compress=compress, size=split)[0], at, gz
    raw = bytearray(data)
    if kind == "byte":
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] = draw(st.integers(0, 255))
    elif kind in ("word", "field"):
        if kind == "word":
            at = draw(st.integers(0, len(raw) - 4))
        else:  # header size, or a container's size, compression method or declared size
            span = draw(st.sampled_from(spans))
            at = draw(st.sampled_from([4, span.start + 8, span.start + 16, span.start + 24]))
        struct.pack_into("<L", raw, at, draw(WORDS))
    elif kind == "cut":
        at = draw(st.integers(0, len(raw)))
        del raw[at:]
        return bytes(raw), inflated_offset(spans, at, exact=False), gz
    elif kind == "repeat":
        span = draw(st.sampled_from(spans))
        raw[span.end : span.end] = raw[span.start : span.end]
        return bytes(raw), span.inflated + span.length, gz
    else:  # random bytes after the first containers
        kept: list[Span] = spans[: draw(st.integers(0, len(spans)))]
        at = kept[-1].end if kept else HEADER_BYTES
        raw[at:] = draw(st.binary(min_size=1, max_size=3000))
    return bytes(raw), inflated_offset(spans, at), gz


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), buffer_bytes=BUFFERS)
@pytest.mark.timeout(600)
def test_a_mutated_blf_is_read_within_bounds_and_keeps_what_came_before(
    clean: Clean, tmp_path: Path, data: st.DataObject, buffer_bytes: int
) -> None:
    raw, unchanged_until, gz = data.draw(mutations(clean))
    path = tmp_path / ("m.blf.gz" if gz else "m.blf")
    path.write_bytes(gzip.compress(raw, 1) if gz else raw)
    seen = watched_read(path, buffer_bytes)
    assert_bounded(seen, len(raw))
    kept = sum(1 for end in clean.ends if end <= unchanged_until)
    assert same_rows(seen.frames, clean.frames, kept)


@settings(max_examples=150, deadline=None)
@given(
    garbage=st.binary(min_size=0, max_size=4000),
    split=SPLITS,
    compress=st.booleans(),
    buffer_bytes=BUFFERS,
)
@pytest.mark.timeout(300)
def test_random_bytes_in_containers_after_a_valid_header(
    garbage: bytes, split: int, compress: bool, buffer_bytes: int
) -> None:
    """Random inflated bytes, salted with object headers of random sizes, in valid
    containers: garbage the zlib layer cannot refuse."""
    salted = bytearray(garbage)
    for at in range(0, len(salted) - 16, 61):
        salted[at : at + 4] = b"LOBJ"
    with tempfile.TemporaryDirectory() as tmp:
        header, _ = written(Path(tmp) / "h.blf", drive(0.1))
        path = Path(tmp) / "g.blf"
        raw = laid_out(header, bytes(salted), compress=compress, size=split)[0]
        path.write_bytes(raw)
        assert_bounded(watched_read(path, buffer_bytes), len(raw))


# -- chains of random objects, against python-can ------------------------------------------

CAN_MSG = struct.Struct("<HBBL8s")
CAN_FD = struct.Struct("<HBBLLBBB5x64s")
CAN_FD64 = struct.Struct("<BBBBLLLLLLLHBBL")
CAN_ERROR_EXT = struct.Struct("<HHLBBBxLLH2x8s")
OBJ_V2 = struct.Struct("<LBxHQ8x")


def _payload(draw: st.DrawFn, size: int) -> bytes:
    """Random bytes that now and then spell an object header with a plausible size."""
    out = bytearray(draw(st.binary(min_size=size, max_size=size)))
    for _ in range(draw(st.integers(0, 2))):
        if size >= 12:
            at = draw(st.integers(0, size - 12))
            fake = draw(st.sampled_from([16, 48, 64, 100, size]))
            out[at : at + 12] = b"LOBJ" + struct.pack("<HHL", 32, 1, fake)
    return bytes(out)


@st.composite
def blf_object(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from([1, 86, 100, 101, 73, 65, 96]))
    version = draw(st.sampled_from([1, 1, 2, 3]))
    if kind in (1, 86):
        body = CAN_MSG.pack(
            draw(st.integers(1, 4)),
            draw(st.integers(0, 255)),
            draw(st.integers(0, 15)),
            draw(st.integers(0, 2**32 - 1)),
            _payload(draw, 8),
        )
    elif kind == 100:
        body = CAN_FD.pack(
            draw(st.integers(1, 4)),
            draw(st.integers(0, 255)),
            draw(st.integers(0, 15)),
            draw(st.integers(0, 2**32 - 1)),
            0,
            0,
            draw(st.integers(0, 7)),
            draw(st.integers(0, 255)),
            _payload(draw, 64),
        )
    elif kind == 101:
        valid = draw(st.integers(0, 64))
        body = CAN_FD64.pack(
            draw(st.integers(1, 4)),
            draw(st.integers(0, 15)),
            valid,
            0,
            draw(st.integers(0, 2**32 - 1)),
            0,
            draw(st.sampled_from([0, 0x10, 0x1000, 0x3000])),
            0, 0, 0, 0, 0, 0, 0, 0,
        ) + _payload(draw, valid)  # fmt: skip
    elif kind == 73:
        body = CAN_ERROR_EXT.pack(1, 0, 0, 0, 0, 8, 0, 0x100, 0, bytes(8))
    else:  # app text, global marker: skipped, may be long
        body = _payload(draw, draw(st.sampled_from([0, 5, 40, 700, 9000])))
    body += _payload(draw, draw(st.integers(0, 9)))  # objects may be longer than their fields
    stamp = draw(st.integers(0, 2**40))
    flags = draw(st.sampled_from([1, 2]))
    head = OBJ_V2.pack(flags, 0, 0, stamp) if version == 2 else OBJ_V1.pack(flags, 0, 0, stamp)
    size = BASE.size + len(head) + len(body)
    base = BASE.pack(b"LOBJ", BASE.size + len(head), version, size, kind)
    return base + head + body + bytes(draw(st.integers(0, 4)))


def python_can_frames(path: Path) -> list[can.Message]:
    with can.BLFReader(path) as reader:
        return [m for m in reader if not m.is_error_frame and not m.is_remote_frame]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    objects=st.lists(blf_object(), min_size=1, max_size=60),
    split=SPLITS,
    compress=st.booleans(),
    buffer_bytes=BUFFERS,
)
@pytest.mark.timeout(300)
def test_a_chain_of_random_objects_reads_as_python_can_reads_it(
    objects: list[bytes], split: int, compress: bool, buffer_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        header, _ = written(Path(tmp) / "h.blf", drive(0.1))
        path = Path(tmp) / "chain.blf"
        raw = laid_out(header, b"".join(objects), compress=compress, size=split)[0]
        path.write_bytes(raw)
        seen = watched_read(path, buffer_bytes)
        expected = python_can_frames(path)
    assert seen.error is None
    assert_bounded(seen, len(raw))
    chunk = seen.frames
    assert len(chunk) == len(expected)
    stamps = np.array([round(m.timestamp * 1e6) for m in expected], np.int64)
    assert int(np.max(np.abs(stamps - chunk.timestamp_us), initial=0)) <= 1
    assert chunk.arbitration_id.tolist() == [m.arbitration_id for m in expected]
    assert chunk.extended.tolist() == [m.is_extended_id for m in expected]
    assert chunk.channel.tolist() == [m.channel for m in expected]
    for i, m in enumerate(expected):
        want = bytes(m.data)
        assert chunk.length[i] == len(m.data)
        assert chunk.data[i, : chunk.length[i]].tobytes() == want
