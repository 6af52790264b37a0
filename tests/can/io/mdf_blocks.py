"""MDF4 files taken apart and put together again with struct, for the hostile-file tests: a
python-can file's blocks found by following its links, a link rewritten, a block appended."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import can
from tests.captures.conftest import REPO, drive

HEAD = struct.Struct("<4s4xQQ")  # block id, length, link count


@dataclass(frozen=True)
class Block:
    at: int
    kind: str
    length: int
    links: tuple[int, ...]

    @property
    def data_at(self) -> int:
        return self.at + HEAD.size + 8 * len(self.links)

    def link_at(self, index: int) -> int:
        """The file offset of link `index`."""
        return self.at + HEAD.size + 8 * index


def block(data: bytes | bytearray, at: int) -> Block:
    kind, length, count = HEAD.unpack_from(data, at)
    return Block(at, kind[2:].decode(), length, struct.unpack_from(f"<{count}Q", data, at + 24))


def blocks(data: bytes | bytearray) -> dict[int, Block]:
    """Every block the links of a (well-formed) file reach from its header."""
    found: dict[int, Block] = {}
    todo = [64]
    while todo:
        at = todo.pop()
        if at in found:
            continue
        found[at] = b = block(data, at)
        todo += [link for link in b.links if link]
    return found


def text(data: bytes | bytearray, at: int) -> str:
    b = block(data, at)
    return bytes(data[b.data_at : b.at + b.length]).split(b"\0", 1)[0].decode()


def named(data: bytes | bytearray, kind: str, name: str) -> Block:
    """The CN or CG block whose name (CN link 2, CG link 2) is `name`."""
    for b in blocks(data).values():
        if b.kind == kind and b.links[2] and text(data, b.links[2]) == name:
            return b
    raise LookupError(name)


def can_data_group(data: bytes | bytearray) -> Block:
    """The data group whose channel group holds CAN_DataFrame."""
    frame = named(data, "CN", "CAN_DataFrame")
    for b in blocks(data).values():
        if b.kind == "DG" and b.links[1]:
            channel = block(data, b.links[1]).links[1]
            while channel:
                if channel == frame.at:
                    return b
                channel = block(data, channel).links[0]
    raise LookupError("CAN_DataFrame")


def set_link(data: bytearray, b: Block, index: int, value: int) -> None:
    struct.pack_into("<Q", data, b.link_at(index), value)


def append(data: bytearray, kind: str, links: Sequence[int], body: bytes = b"") -> int:
    """Add a block at the end (8-byte aligned); its address."""
    data += bytes(-len(data) % 8)
    at = len(data)
    length = HEAD.size + 8 * len(links) + len(body)
    data += HEAD.pack(b"##" + kind.encode(), length, len(links))
    data += struct.pack(f"<{len(links)}Q", *links) + body
    return at


def data_list(data: bytearray, children: Sequence[int], each: int) -> int:
    """A DL block listing `children`, each `each` bytes long (the equal-length form)."""
    return append(data, "DL", [0, *children], struct.pack("<B3xIQ", 1, len(children), each))


def mf4_file(
    path: Path, seconds: float = 10.0, compression: int = 0, messages: Iterable[can.Message] = ()
) -> Path:
    """A capture as python-can's MF4Writer saves it (compression 0 plain, 1 deflate, 2
    transposed)."""
    with can.MF4Writer(path, compression_level=compression) as writer:
        for msg in messages or drive(seconds):
            writer.on_message_received(msg)
    return path


DECODE = """
import json, sys
from hwbridge.can.io.frames import CaptureError
from hwbridge.can.io.readers import open_capture
frames, cap = 0, int(sys.argv[2])
try:
    reader = open_capture(sys.argv[1], fast=sys.argv[3] == "fast")
    for chunk in reader.chunks():
        frames += len(chunk)
        if frames > cap:
            break
    print(json.dumps({"frames": frames, "reader": type(reader).__name__}))
except CaptureError as exc:
    print(json.dumps({"frames": frames, "error": exc.reason}))
"""


def decode_in_subprocess(
    path: Path, max_frames: int, timeout: float = 60.0, fast: bool = True
) -> dict[str, Any]:
    """What `open_capture(path)` reads, counted in a process of its own (asammdf can loop
    for ever in C): {"frames": n, "error": reason} or {"frames": n, "reader": name}; reading
    stops past `max_frames`. A hang fails the calling test instead of hanging the suite."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", DECODE, str(path), str(max_frames), "fast" if fast else "slow"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"decoding {path.name} ran past {timeout} s") from None
    if out.returncode:
        raise AssertionError(f"decoding {path.name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


Mutation = tuple[str, int, int, int]
"""(what, which block, which link or field, value): see `mutate`."""

_FIELDS = {"CG": (8, 24, 28), "DZ": (8, 16), "DG": (0,), "DL": (4,)}  # offsets into the data


def mutate(clean: bytes, mutations: Sequence[Mutation]) -> bytes:
    """`clean` (a well-formed file) with its blocks broken as a hostile file would: a link
    pointed at itself, at another block, past the end or into a block's middle; a field of a
    CG, DZ, DG or DL block set; a block copied to the end and linked in place of another;
    a byte flipped; the file cut short."""
    data = bytearray(clean)
    found = sorted(blocks(clean).values(), key=lambda b: b.at)
    for what, which, where, value in mutations:
        b = found[which % len(found)]
        other = found[value % len(found)]
        if b.at + b.length > len(data) or other.at + other.length > len(data):
            continue  # cut off by an earlier mutation
        if what == "link" and b.links:
            index = where % len(b.links)
            past = (len(data) + value) % (1 << 64)
            target = [b.at, other.at, 0, past, other.at + 8 * (value % 5)][where % 5]
            struct.pack_into("<Q", data, b.link_at(index), target)
        elif what == "field" and b.kind in _FIELDS:
            offsets = _FIELDS[b.kind]
            at = b.data_at + offsets[where % len(offsets)]
            width = 1 if b.kind == "DG" else 8 if at - b.data_at in (8, 16) else 4
            data[at : at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        elif what == "copy":
            copy = bytes(data[b.at : b.at + b.length])
            data += bytes(-len(data) % 8)
            at = len(data)
            data += copy
            if other.links:
                struct.pack_into("<Q", data, other.link_at(where % len(other.links)), at)
        elif what == "byte":
            at = (b.at + where) % len(data)
            data[at] ^= value % 255 + 1
        elif what == "cut":
            del data[max(64, b.at + where % max(1, b.length)) :]
    return bytes(data)


FUZZ = """
import json, sys
from hwbridge.can.io.frames import CaptureError
from hwbridge.can.io.readers import open_capture
cap = int(sys.argv[1])
for name in sys.argv[2:]:
    print(json.dumps({"start": name}), flush=True)
    frames, outcome = 0, "read"
    try:
        for chunk in open_capture(name).chunks():
            frames += len(chunk)
            if frames > cap:
                break
    except CaptureError as exc:
        outcome = "refused: " + exc.reason
    except Exception as exc:
        outcome = f"crash: {type(exc).__name__}: {exc}"
    print(json.dumps({"file": name, "frames": frames, "outcome": outcome}), flush=True)
"""


def decode_many_in_subprocess(
    paths: Sequence[Path], max_frames: int, timeout: float
) -> list[dict[str, Any]]:
    """{"file", "frames", "outcome"} of decoding each of `paths` with `open_capture` in one
    process of their own; AssertionError naming the file being read if it runs past
    `timeout` seconds."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    args = [sys.executable, "-c", FUZZ, str(max_frames), *map(str, paths)]
    try:
        out = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        lines = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
        last = (lines or "").strip().splitlines()[-1:] or ["nothing"]
        raise AssertionError(f"decoding ran past {timeout} s; last: {last[0]}") from None
    if out.returncode:
        raise AssertionError(f"decoding failed:\n{out.stderr[-3000:]}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [row for row in rows if "file" in row]


# -- records of a chosen layout, in a python-can file --------------------------------

CN_DATA = struct.Struct("<BBBBIII")  # type, sync, data type, bit offset, byte offset, bits, flags
CG_DATA = struct.Struct("<QQHH4xII")  # record id, cycles, flags, separator, bytes, invalidation
Layout = dict[str, tuple[int, int, int, int]]
"""Channel name ("time", "ID", "DataBytes", ...) -> (byte offset, bits, data type, channel
type); a CAN_DataFrame member not named is unlinked from the frame."""

UINT, FLOAT, BYTES, VLSD = 0, 4, 10, 1


def relaid(clean: bytes, record_size: int, records: bytes, layout: Layout) -> bytearray:
    """A python-can file whose CAN_DataFrame group holds `records` (of `record_size` bytes,
    deflated in one DZ block) laid out as `layout` says."""
    data = bytearray(clean)
    group = can_data_group(data)
    cg = block(data, group.links[1])
    fields = list(CG_DATA.unpack_from(data, cg.data_at))
    fields[1], fields[4], fields[5] = len(records) // record_size, record_size, 0
    CG_DATA.pack_into(data, cg.data_at, *fields)
    for name, (byte_offset, bits, data_type, kind) in layout.items():
        cn = named(data, "CN", name if name == "time" else f"CAN_DataFrame.{name}")
        _, sync, _, _, _, _, flags = CN_DATA.unpack_from(data, cn.data_at)
        CN_DATA.pack_into(data, cn.data_at, kind, sync, data_type, 0, byte_offset, bits, flags)
    frame = named(data, "CN", "CAN_DataFrame")
    spans = [(v[0], v[0] + (v[1] + 7) // 8) for k, v in layout.items() if k != "time"]
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    kind, sync, data_type, _, _, _, flags = CN_DATA.unpack_from(data, frame.data_at)
    CN_DATA.pack_into(
        data, frame.data_at, kind, sync, data_type, 0, start, 8 * (end - start), flags
    )
    members, at = [], frame.links[1]
    while at:
        member = block(data, at)
        if text(data, member.links[2]).removeprefix("CAN_DataFrame.") in layout:
            members.append(member)
        at = member.links[0]
    set_link(data, frame, 1, members[0].at)
    for member, after in zip(members, [*members[1:], None], strict=True):
        set_link(data, member, 0, after.at if after else 0)
    deflated = zlib.compress(records, 9)
    body = struct.pack("<2sBxIQQ", b"DT", 0, 0, len(records), len(deflated)) + deflated
    set_link(data, group, 2, append(data, "DZ", [], body))
    return data


def signal_data(data: bytearray, entries: Sequence[bytes]) -> list[int]:
    """An SD block of `entries` (each with its 4-byte length) made the signal data of
    CAN_DataFrame.DataBytes; the offset of each entry."""
    offsets, body = [], b""
    for entry in entries:
        offsets.append(len(body))
        body += struct.pack("<I", len(entry)) + entry
    set_link(data, named(data, "CN", "CAN_DataFrame.DataBytes"), 5, append(data, "SD", [], body))
    return offsets


def long_entry(data: bytearray, length: int) -> None:
    """The signal data of CAN_DataFrame.DataBytes made one entry of `length` zero bytes, in a
    DZ block (deflated a MiB at a time: 64 MiB take 64 kB)."""
    deflate = zlib.compressobj(9)
    packed = deflate.compress(struct.pack("<I", length))
    for at in range(0, length, 1 << 20):
        packed += deflate.compress(bytes(min(1 << 20, length - at)))
    packed += deflate.flush()
    body = struct.pack("<2sBxIQQ", b"SD", 0, 0, 4 + length, len(packed)) + packed
    set_link(data, named(data, "CN", "CAN_DataFrame.DataBytes"), 5, append(data, "DZ", [], body))
