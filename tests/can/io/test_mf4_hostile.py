"""No MF4 file can hang or flood a decode: links that loop and blocks listed twice are refused
before the block reader or asammdf follows them, and a file yields at most the frames its data
blocks hold. Each hostile file is a few kB, built with struct from a python-can capture; what
could reach asammdf is decoded in a subprocess with a timeout, so a regression fails the test
instead of hanging the suite."""

from __future__ import annotations

import contextlib
import gzip
import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.can.io.frames import CaptureError
from hwbridge.can.io.mf4 import MIN_RECORD_BYTES, MdfReader, Unsupported
from hwbridge.can.io.mf4_links import DEFLATE_RATIO, check_for_asammdf
from tests.can.io.mdf_blocks import (
    Mutation,
    append,
    block,
    can_data_group,
    data_list,
    decode_in_subprocess,
    decode_many_in_subprocess,
    mf4_file,
    mutate,
    named,
    set_link,
)
from tests.captures.conftest import KONA
from tests.shared_data import require_shared

_CG_CYCLES = 8  # offset of cg_cycle_count in a CG block's data


def _records(data: bytes | bytearray) -> int:
    """The CAN_DataFrame records the clean file holds."""
    cg = block(data, can_data_group(data).links[1])
    return int(struct.unpack_from("<Q", data, cg.data_at + _CG_CYCLES)[0])


def _claim_records(data: bytearray, records: int) -> None:
    cg = block(data, can_data_group(data).links[1])
    struct.pack_into("<Q", data, cg.data_at + _CG_CYCLES, records)


def _leaf_bytes(data: bytes | bytearray, at: int) -> int:
    b = block(data, at)
    if b.kind == "DZ":
        return int(struct.unpack_from("<Q", data, b.data_at + 8)[0])
    return b.length - 24


# item 7: data lists that name one block again and again


@pytest.mark.timeout(180)
@pytest.mark.parametrize("compression", [0, 1], ids=["DT", "DZ"])
@pytest.mark.parametrize("nested", [False, True], ids=["DL", "HL-DL-DL"])
def test_a_data_list_that_names_one_block_again_and_again_is_corrupt(
    tmp_path: Path, compression: int, nested: bool
) -> None:
    """A DL naming the records' one block 1,000 times (and, nested, an HL over a DL naming
    that DL 1,000 times: a million copies) in a file of a few kB, whose channel group claims
    10^12 records: the decode ends at once with a CaptureError, not after 10^10 frames."""
    path = mf4_file(tmp_path / "fan.mf4", 5.0, compression)
    data = bytearray(path.read_bytes())
    whole = _records(data)
    group = can_data_group(data)
    leaf = group.links[2]
    size = _leaf_bytes(data, leaf)
    top = data_list(data, [leaf] * 1000, size)
    if nested:
        top = data_list(data, [top] * 1000, size * 1000)
        top = append(data, "HL", [top], struct.pack("<HB5x", 1, 0))
    set_link(data, group, 2, top)
    _claim_records(data, 10**12)
    path.write_bytes(bytes(data))
    assert len(data) < 48_000
    result = decode_in_subprocess(path, max_frames=whole)
    assert result["frames"] <= whole
    assert "corrupt" in result.get("error", "")


# item 8: links that loop


def _dg_loops(data: bytearray) -> None:
    first = block(data, block(data, 64).links[0])
    set_link(data, first, 0, first.at)  # a data group whose next is itself


def _cg_loops(data: bytearray) -> None:
    cg = block(data, can_data_group(data).links[1])
    set_link(data, cg, 0, cg.at)


def _cn_loops(data: bytearray) -> None:
    """The last member of CAN_DataFrame leads back to its first."""
    first = block(data, named(data, "CN", "CAN_DataFrame").links[1])
    last = first
    while last.links[0]:
        last = block(data, last.links[0])
    set_link(data, last, 0, first.at)


def _composition_loops(data: bytearray) -> None:
    frame = named(data, "CN", "CAN_DataFrame")
    set_link(data, frame, 1, frame.at)  # CAN_DataFrame is its own member


def _fh_loops(data: bytearray) -> None:
    fh = block(data, block(data, 64).links[1])
    set_link(data, fh, 0, fh.at)


def _dl_loops(data: bytearray) -> None:
    group = can_data_group(data)
    dl = data_list(data, [group.links[2]], _leaf_bytes(data, group.links[2]))
    set_link(data, block(data, dl), 0, dl)  # the list's next is itself
    set_link(data, group, 2, dl)


def _conversion_loops(data: bytearray) -> None:
    """The time channel gets a linear conversion (seconds * 1 + 0) whose inverse is itself."""
    time = named(data, "CN", "time")
    cc = append(data, "CC", [0, 0, 0, 0], struct.pack("<BBHHHdd2d", 1, 0, 0, 0, 2, 0, 0, 0, 1))
    set_link(data, block(data, cc), 3, cc)
    set_link(data, time, 4, cc)


LOOPS = {
    "data group": _dg_loops,
    "channel group": _cg_loops,
    "channel list": _cn_loops,
    "composition": _composition_loops,
    "file history": _fh_loops,
    "data list": _dl_loops,
    "conversion": _conversion_loops,
}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fast", [True, False], ids=["open_capture", "python-can"])
@pytest.mark.parametrize("loop", list(LOOPS))
def test_links_that_loop_are_corrupt(tmp_path: Path, loop: str, fast: bool) -> None:
    """A data group that is its own next (asammdf's count_channel_groups then loops for
    ever), a channel group or channel list that comes back to its start, a structure that is
    its own member, ...: refused as corrupt before any reader follows the loop, through the
    block reader and asammdf (`open_capture`) and through python-can's reader alike."""
    path = mf4_file(tmp_path / "loop.mf4", 2.0, 1)
    data = bytearray(path.read_bytes())
    LOOPS[loop](data)
    path.write_bytes(bytes(data))
    result = decode_in_subprocess(path, max_frames=_records(data), fast=fast)
    assert "loops" in result.get("error", ""), result


@pytest.mark.timeout(180)
def test_a_gzipped_mf4_whose_data_groups_loop_is_corrupt(tmp_path: Path) -> None:
    """A compressed MF4 goes to python-can's reader (asammdf): checked through gzip first."""
    data = bytearray(mf4_file(tmp_path / "loop.mf4", 2.0, 1).read_bytes())
    _dg_loops(data)
    path = tmp_path / "loop.mf4.gz"
    path.write_bytes(gzip.compress(bytes(data)))
    result = decode_in_subprocess(path, max_frames=_records(data))
    assert "loops" in result.get("error", ""), result


@pytest.mark.timeout(180)
def test_data_blocks_that_overlap_are_corrupt(tmp_path: Path) -> None:
    """No block is listed twice, but a DL lists DT blocks forged every 64 bytes inside the
    records' one DT, each running to its end: the same bytes read again and again (a
    quadratic fan-out). Blocks may not overlap."""
    path = mf4_file(tmp_path / "overlap.mf4", 5.0, 0)
    data = bytearray(path.read_bytes())
    whole = _records(data)
    group = can_data_group(data)
    dt = block(data, group.links[2])
    forged = []
    for at in range(dt.data_at + 64, dt.at + dt.length - 24, 64):
        data[at : at + 24] = struct.pack("<4s4xQQ", b"##DT", dt.at + dt.length - at, 0)
        forged.append(at)
    set_link(data, group, 2, data_list(data, [dt.at, *forged], 0))
    _claim_records(data, 10**12)
    path.write_bytes(bytes(data))
    result = decode_in_subprocess(path, max_frames=whole)
    assert result["frames"] <= whole
    assert "overlap" in result.get("error", ""), result


# what asammdf does on its own: finalizing, inflating, reading MDF 3


def _unfinalized(data: bytearray, flags: int) -> None:
    """Marked as a logger leaves a file it has not closed: asammdf, not the block reader,
    reads it, and finalizes it first when `flags` say so."""
    data[0:8] = b"UnFinMF "
    struct.pack_into("<H", data, 60, flags)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hidden", [False, True], ids=["linked", "unlinked"])
def test_an_unfinalized_file_whose_data_list_goes_on_is_refused(
    tmp_path: Path, hidden: bool
) -> None:
    """asammdf finalizes an unfinalized file by reading, for every DG block it finds in the
    file (linked or not), its data list's first DL again and again until one has no next: a
    list of two loops it for ever."""
    path = mf4_file(tmp_path / "unfinalized.mf4", 2.0, 0)
    data = bytearray(path.read_bytes())
    group = can_data_group(data)
    leaf = group.links[2]
    first = data_list(data, [leaf], _leaf_bytes(data, leaf))
    set_link(data, block(data, first), 0, data_list(data, [], 0))
    if hidden:  # a DG block nothing links to, and its list: the file's own stay as they were
        append(data, "DG", [0, 0, first, 0], bytes(8))
    else:
        set_link(data, group, 2, first)
    _unfinalized(data, 0x04)
    path.write_bytes(bytes(data))
    result = decode_in_subprocess(path, max_frames=_records(data))
    assert "finalization loops" in result.get("error", ""), result


@pytest.mark.timeout(180)
def test_a_deflate_bomb_is_refused_before_asammdf_inflates_it(tmp_path: Path) -> None:
    """The block reader stops inflating at the size a DZ block says; asammdf inflates it
    whole. A file for asammdf whose DZ block says 69 kB and inflates to 90 MB is refused."""
    import zlib

    path = mf4_file(tmp_path / "bomb.mf4", 30.0, 1)
    data = bytearray(path.read_bytes())
    group = can_data_group(data)
    said = _leaf_bytes(data, group.links[2])
    bomb = zlib.compress(bytes(90_000_000), 9)
    dz = append(data, "DZ", [], struct.pack("<2sBxIQQ", b"DT", 0, 0, said, len(bomb)) + bomb)
    set_link(data, group, 2, dz)
    _unfinalized(data, 0)
    path.write_bytes(bytes(data))
    result = decode_in_subprocess(path, max_frames=_records(data))
    assert "inflates to more" in result.get("error", ""), result


def test_an_mdf3_file_named_mf4_is_a_capture_error(tmp_path: Path) -> None:
    """asammdf reads MDF 3 with blocks python-can's reader and `Mf4Reader` do not know (it
    ended in an AttributeError)."""
    from asammdf import MDF

    from hwbridge.can.io.readers import open_capture

    source = mf4_file(tmp_path / "drive.mf4", 2.0, 0)
    saved = MDF(source).convert("3.30").save(tmp_path / "v3.mdf")
    path = tmp_path / "v3.mf4"
    path.write_bytes(Path(saved).read_bytes())
    with pytest.raises(CaptureError, match=r"MDF version '3\.30'"):
        open_capture(path)


# mutated files: whatever the bytes, a bounded read or a CaptureError


FRAMES_PER_BYTE = DEFLATE_RATIO // MIN_RECORD_BYTES
"""The bound: a frame is a record of at least 6 bytes (its time stamp and its id, which do
not overlap) of a data block read once, and a byte of a DZ block inflates to at most 1032:
172 frames per byte."""


@pytest.fixture(scope="module")
def clean_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """python-can's files: plain, deflated, transposed."""
    folder = tmp_path_factory.mktemp("clean")
    return [mf4_file(folder / f"{c}.mf4", 3.0, c) for c in (0, 1, 2)]


def _read_bounded(path: Path, bound: int) -> int:
    """Frames the block reader yields (asserted at most `bound`); a file it leaves to
    asammdf must pass or fail asammdf's checks, here without asammdf."""
    try:
        reader = MdfReader(path)
    except CaptureError:
        return 0
    except Unsupported:
        with contextlib.suppress(CaptureError):
            check_for_asammdf(path)
        return 0
    frames = 0
    with contextlib.suppress(CaptureError):
        for chunk in reader.chunks():
            frames += len(chunk)
            assert frames <= bound
    return frames


_MUTATION = st.tuples(
    st.sampled_from(["link", "link", "field", "copy", "byte", "cut"]),
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.integers(0, 2**64 - 1) | st.integers(0, 4096),
)


@pytest.mark.timeout(900)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 2), mutations=st.lists(_MUTATION, min_size=1, max_size=4))
def test_mutated_files_read_within_the_bound_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory,
    clean_files: list[Path],
    which: int,
    mutations: list[Mutation],
) -> None:
    """Links pointed at themselves, at other blocks, past the end or into a block's middle;
    cycle counts, DZ sizes and record ids set to anything; blocks copied and linked twice;
    bytes flipped; files cut short: the block reader (and, for what it leaves to asammdf,
    the checks before asammdf) ends with frames or a CaptureError, never more frames than
    FRAMES_PER_BYTE * the file's bytes."""
    data = mutate(clean_files[which].read_bytes(), mutations)
    path = tmp_path_factory.mktemp("mutated") / "m.mf4"
    path.write_bytes(data)
    _read_bounded(path, FRAMES_PER_BYTE * len(data))


@pytest.mark.timeout(900)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(min_size=0, max_size=600), links=st.lists(st.integers(0, 700), max_size=6))
def test_garbage_after_a_header_is_refused(
    tmp_path_factory: pytest.TempPathFactory, body: bytes, links: list[int]
) -> None:
    """An MDF4 identification and an HD block whose links point anywhere into random bytes."""
    head = b"MDF     4.10    " + bytes(12) + struct.pack("<H", 410) + bytes(34)
    hd = struct.pack("<4s4xQQ", b"##HD", 24 + 8 * 6 + 32, 6)
    hd += struct.pack("<6Q", *(links + [0] * 6)[:6]) + bytes(32)
    path = tmp_path_factory.mktemp("garbage") / "g.mf4"
    path.write_bytes(head + hd + body)
    _read_bounded(path, FRAMES_PER_BYTE * (len(head + hd + body)))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed_file", ["unfinalized", "kona"])
def test_mutated_files_for_asammdf_end_within_the_bound(tmp_path: Path, seed_file: str) -> None:
    """The same mutations of files asammdf reads (an unfinalized python-can file, the Kona's
    unsorted CANedge log), decoded through `open_capture` in a subprocess: each ends with
    frames or a CaptureError (no other exception, no hang)."""
    if seed_file == "kona":
        require_shared()
        clean = KONA.read_bytes()
    else:
        data = bytearray(mf4_file(tmp_path / "u.mf4", 3.0, 1).read_bytes())
        _unfinalized(data, 0)
        clean = bytes(data)
    rng = random.Random(seed_file)
    paths = []
    for n in range(60):
        mutations = [
            (
                rng.choice(["link", "link", "field", "copy", "byte", "cut"]),
                rng.randrange(1000),
                rng.randrange(1000),
                rng.choice([rng.randrange(2**64), rng.randrange(4096)]),
            )
            for _ in range(rng.randint(1, 3))
        ]
        paths.append(tmp_path / f"m{n}.mf4")
        paths[-1].write_bytes(mutate(clean, mutations))
    bound = FRAMES_PER_BYTE * max(p.stat().st_size for p in paths)
    rows = decode_many_in_subprocess(paths, bound, timeout=500)
    assert len(rows) == len(paths)
    crashes = [row for row in rows if row["outcome"].startswith("crash")]
    assert not crashes
    assert max(row["frames"] for row in rows) <= bound
