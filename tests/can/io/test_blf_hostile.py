"""Hostile BLF files cost the reader bounded memory and work: a container inflates to at most
the size it declares, an object may not claim more than MAX_BLOCK_BYTES (or, outside the
containers of a plain .blf, more than the file has left), an object split between containers
is looked through again only once it can be whole (one longer than a buffer is passed over),
and the frames before the bad spot are read."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwbridge.can.io.blf import BlfReader
from hwbridge.can.io.frames import CaptureError, FrameChunk, concat_chunks
from tests.can.io.blf_build import (
    BASE,
    CONTAINER_BYTES,
    HEADER_BYTES,
    OBJ_V1,
    can_object,
    container,
    containers,
    written,
    zlib_bomb,
)
from tests.captures.conftest import drive

APP_TEXT = 65
MAX_BLOCK_BYTES = 16 * 1024 * 1024  # the bound the captures docs state


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """(file header, inflated objects) of a short drive: 548 frames, classic and FD."""
    return written(tmp_path_factory.mktemp("blf") / "clean.blf", drive(20.0))


def read_all(path: Path) -> tuple[FrameChunk, CaptureError | None]:
    """The frames a BlfReader yields, and the error it ends with (if any)."""
    out: list[FrameChunk] = []
    try:
        out.extend(BlfReader(path).chunks())
    except CaptureError as exc:
        return concat_chunks(out), exc
    return concat_chunks(out), None


def peak_bytes(work: Callable[[], Any]) -> tuple[Any, int]:
    """What `work` returns, and the most memory it held at once (numpy's too)."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Inflated bytes the reader looked for objects in, one entry per look."""
    looks: list[int] = []
    chain = BlfReader._chain

    def counted(self: BlfReader, buf: Any, n: int) -> Any:
        looks.append(n)
        return chain(self, buf, n)

    monkeypatch.setattr(BlfReader, "_chain", counted)
    return looks


def same_frames(a: FrameChunk, b: FrameChunk) -> bool:
    return (
        len(a) == len(b)
        and np.array_equal(a.timestamp_us, b.timestamp_us)
        and np.array_equal(a.arbitration_id, b.arbitration_id)
        and np.array_equal(a.length, b.length)
        and all(
            a.data[i, : a.length[i]].tobytes() == b.data[i, : b.length[i]].tobytes()
            for i in range(len(a))
        )
    )


def reference(tmp_path: Path, clean: tuple[bytes, bytes]) -> FrameChunk:
    header, stream = clean
    path = tmp_path / "reference.blf"
    path.write_bytes(header + containers(stream))
    chunk, error = read_all(path)
    assert error is None
    assert len(chunk) == 548
    return chunk


def test_the_bound_is_the_one_the_docs_state() -> None:
    from hwbridge.can.io import blf as reader_blf

    assert getattr(reader_blf, "MAX_BLOCK_BYTES", None) == MAX_BLOCK_BYTES


# -- item 9: a container inflates to at most what it declares ----------------------------


@pytest.mark.timeout(60)
def test_a_zlib_bomb_stops_at_the_size_its_container_declares(
    tmp_path: Path, clean: tuple[bytes, bytes]
) -> None:
    """100 MB of zeros in 100 kB, in a container that declares 128 KiB: corrupt once the
    129th KiB comes out, and the frames of the containers before it are read."""
    header, stream = clean
    good = containers(stream)
    path = tmp_path / "bomb.blf"
    bomb = container(b"", declared=CONTAINER_BYTES, stored=zlib_bomb(100 << 20))
    path.write_bytes(header + good + bomb)
    (chunk, error), peak = peak_bytes(lambda: read_all(path))
    assert error is not None
    assert "corrupt" in error.reason
    assert "inflates to more than" in error.reason
    assert error.position == f"byte {HEADER_BYTES + len(good)}"
    assert same_frames(chunk, reference(tmp_path, clean))
    assert peak < 16_000_000  # the declared 128 KiB and the reader's buffers, not 100 MB


@pytest.mark.parametrize(
    ("declared", "inflated", "reason"),
    [
        (2**32 - 1, 1000, "declares 4294967295 bytes"),
        (MAX_BLOCK_BYTES + 1, 1000, f"declares {MAX_BLOCK_BYTES + 1} bytes"),
        (CONTAINER_BYTES, 1000, "inflates to 1000 bytes"),
        (1000, 1001, "inflates to more than"),
    ],
    ids=["4GB", "over-the-bound", "less-than-declared", "one-more"],
)
@pytest.mark.timeout(60)
def test_a_container_that_inflates_to_other_than_it_declares_is_corrupt(
    tmp_path: Path, clean: tuple[bytes, bytes], declared: int, inflated: int, reason: str
) -> None:
    header, stream = clean
    good = containers(stream)
    path = tmp_path / "liar.blf"
    path.write_bytes(header + good + container(bytes(inflated), declared=declared))
    chunk, error = read_all(path)
    assert error is not None
    assert reason in error.reason
    assert error.position == f"byte {HEADER_BYTES + len(good)}"
    assert same_frames(chunk, reference(tmp_path, clean))


# -- item 10: an object that never ends ----------------------------------------------------


def _filler(containers_of_filler: int) -> bytes:
    """`containers_of_filler` log containers of 2,730 CAN objects each (131,040 bytes, so
    every container is the same and is compressed once)."""
    return container(can_object(0x123) * 2730) * containers_of_filler


@pytest.mark.timeout(60)
def test_an_object_of_4_gb_is_corrupt_at_once(
    tmp_path: Path, clean: tuple[bytes, bytes], scanned: list[int]
) -> None:
    """An object that claims 4 GB inside the inflated stream, then 20 MB of objects in 82 kB
    of file: the unbounded reader kept all of it and looked through it again at every 2 MB
    (110 MB looked through, quadratic in the file)."""
    header, stream = clean
    path = tmp_path / "endless.blf"
    path.write_bytes(header + containers(stream + can_object(size=2**32 - 1)) + _filler(160))
    assert path.stat().st_size < 100_000
    (chunk, error), peak = peak_bytes(lambda: read_all(path))
    assert error is not None
    assert f"object size {2**32 - 1}" in error.reason
    assert error.position.startswith(f"byte {HEADER_BYTES}, ")  # the container it starts in
    assert same_frames(chunk, reference(tmp_path, clean))
    assert sum(scanned) < 8 << 20  # the first buffer, not the 20 MB that follow
    assert peak < 40_000_000


@pytest.mark.timeout(60)
def test_an_object_that_ends_15_mib_later_is_passed_over(
    tmp_path: Path, clean: tuple[bytes, bytes], scanned: list[int]
) -> None:
    """An app text object of 15 MiB (within the bound) is read over as python-can reads over
    it, but neither held whole nor looked through (again at every buffer, as it was)."""
    header, stream = clean
    big = 48 * 327_680  # 15 MiB: ends on an object of the filler
    text = BASE.pack(b"LOBJ", 32, 1, big, APP_TEXT) + OBJ_V1.pack(2, 0, 0, 0) + bytes(16)
    path = tmp_path / "long.blf"
    path.write_bytes(header + containers(stream + text) + _filler(160))
    (chunk, error), peak = peak_bytes(lambda: read_all(path))
    assert error is None
    inflated = len(stream) + 48 + 160 * 131_040
    after = (inflated - (len(stream) + big)) // 48
    assert len(chunk) == 548 + after
    assert same_frames(chunk.take(np.arange(548)), reference(tmp_path, clean))
    assert set(chunk.arbitration_id[548:].tolist()) == {0x123}
    assert sum(scanned) < 1.5 * inflated  # was 88 MB for 21 MB: every 2 MB, all again
    assert peak < 30_000_000  # passed over, not held: the buffers and a 128 KiB container


@pytest.mark.parametrize("size", [15, 0])
def test_an_object_smaller_than_its_header_is_corrupt(
    tmp_path: Path, clean: tuple[bytes, bytes], size: int
) -> None:
    header, stream = clean
    path = tmp_path / "small.blf"
    path.write_bytes(header + containers(stream + can_object(size=size)))
    chunk, error = read_all(path)
    assert error is not None
    assert f"object size {size}" in error.reason
    assert same_frames(chunk, reference(tmp_path, clean))


# -- the objects and header of the file itself ---------------------------------------------


@pytest.mark.parametrize("gz", [False, True], ids=["blf", "blf.gz"])
@pytest.mark.timeout(60)
def test_a_container_of_4_gb_is_refused_before_it_is_read(
    tmp_path: Path, clean: tuple[bytes, bytes], gz: bool
) -> None:
    header, stream = clean
    good = containers(stream)
    liar = bytearray(container(b"x" * 1000, compress=False))
    struct.pack_into("<L", liar, 8, 2**32 - 1)
    data = header + good + bytes(liar) + good
    path = tmp_path / ("big.blf.gz" if gz else "big.blf")
    path.write_bytes(gzip.compress(data) if gz else data)
    (chunk, error), peak = peak_bytes(lambda: read_all(path))
    assert error is not None
    assert (
        "truncated: an object of 4294967295 bytes" if not gz else "more than any"
    ) in error.reason
    assert error.position == f"byte {HEADER_BYTES + len(good)}"
    assert same_frames(chunk, reference(tmp_path, clean))
    assert peak < 40_000_000  # not the 4 GB it claims


@pytest.mark.parametrize("gz", [False, True], ids=["blf", "blf.gz"])
def test_a_file_header_of_4_gb_is_refused(
    tmp_path: Path, clean: tuple[bytes, bytes], gz: bool
) -> None:
    header, stream = clean
    data = bytearray(header + containers(stream))
    struct.pack_into("<L", data, 4, 2**32 - 1)
    path = tmp_path / ("head.blf.gz" if gz else "head.blf")
    path.write_bytes(gzip.compress(bytes(data)) if gz else bytes(data))

    def open_it() -> CaptureError | None:
        try:
            BlfReader(path).close()
        except CaptureError as exc:
            return exc
        return None

    error, peak = peak_bytes(open_it)
    assert error is not None
    assert "file header of 4294967295 bytes" in error.reason
    assert error.position == "byte 4"
    assert peak < 40_000_000


def test_a_container_too_short_for_its_own_header_is_corrupt(
    tmp_path: Path, clean: tuple[bytes, bytes]
) -> None:
    header, stream = clean
    good = containers(stream)
    short = BASE.pack(b"LOBJ", 16, 1, 24, 10) + bytes(8)
    path = tmp_path / "short.blf"
    path.write_bytes(header + good + short)
    chunk, error = read_all(path)
    assert error is not None
    assert "log container of 24 bytes" in error.reason
    assert same_frames(chunk, reference(tmp_path, clean))
