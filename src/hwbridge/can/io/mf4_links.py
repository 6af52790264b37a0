"""The link graph of an MDF4 file, walked once and checked before any reader follows it.

MDF4 blocks name each other by file offset: the header its data groups, a data group its
channel groups and its data, a channel its name, conversion, members and signal data, a data
list its data blocks. Links that loop (a data group that is its own next, a channel list that
comes back to its start) make a reader that follows them run for ever, and a data list that
names one block a thousand times (three lists deep: a billion times) makes it read the same
bytes again and again; asammdf guards against neither. `scan_links` follows every link of the
file once and refuses such a file as corrupt before the block reader or asammdf sees it. It
reads the blocks' heads and links, never their data, so it costs milliseconds whatever the
file's size.

What a file that passes guarantees:

- every list (data groups, channel groups, channels, data lists, file history, ...) ends, and
  no block is owned twice: listed in two lists, twice in one, or by two data groups;
- members, conversions and data lists nest without loops; names, units, sources and
  conversions may be shared (writers share them), and every walk of the graph visits a
  block once however many links name it;
- a channel's signal-data link names data (or a VLSD channel group, ...), never a
  conversion or a text, so a data tree holds data blocks only;
- blocks do not overlap, so the blocks together hold at most the file's bytes and the links
  followed are at most the file's size / 8;
- a DZ block inflates to at most `MAX_BLOCK_BYTES` and to at most 1032 times its deflated
  bytes (deflate's limit), so the data blocks of a group hold at most 1032 times the file.

`check_for_asammdf` is what a file must pass before asammdf reads it (and, for a file with
variable-length channels, `mf4_vlsd` what asammdf may read of them).

asammdf follows a file's links without a guard against loops, inflates every DZ block whole
whatever size it says, and, finalizing an unfinalized file, walks a data list that goes on by
reading its first block for ever. The block reader bounds all three itself; a file on its way
to asammdf (unsorted, unfinalized, MDF 4.2 column storage, ... or through python-can's reader)
is checked here first: its link graph (`scan_links`), its DZ blocks inflated once, output
dropped, each to exactly the size it says (so asammdf inflates at most 1032 times the file,
at most `MAX_BLOCK_BYTES` a block), and, unfinalized, the data lists asammdf's finalization
would walk.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from hwbridge.can.io.frames import CaptureError, note_text

__all__ = [
    "DEFLATE_RATIO",
    "INFLATE_ERRORS",
    "MAX_BLOCK_BYTES",
    "MDF4_VERSIONS",
    "Deflated",
    "MdfLinks",
    "check_for_asammdf",
    "inflater",
    "read_version",
    "scan_links",
]

INFLATE_ERRORS: tuple[type[Exception], ...]
try:  # the inflater asammdf installs, twice as fast as zlib's
    from isal import isal_zlib

    inflater: Any = isal_zlib
    INFLATE_ERRORS = (zlib.error, cast(type[Exception], isal_zlib.error))
except ImportError:
    inflater = zlib
    INFLATE_ERRORS = (zlib.error,)

MAX_BLOCK_BYTES = 256 * 1024 * 1024
"""A DZ block that says it inflates to more is corrupt (writers use a few MiB)."""
DEFLATE_RATIO = 1032
"""Deflate's most: 258 bytes from a 2-bit match, so a DZ block that says it inflates to more
than this many times its deflated bytes is corrupt."""
MDF4_VERSIONS = ("4.00", "4.10", "4.11", "4.20", "4.30")
"""The versions asammdf reads as MDF4 (3.x it reads as MDF3, whose blocks are not these)."""

_HEAD = struct.Struct("<4s4xQQ")  # block id, length, link count
_CG_DATA = struct.Struct("<QQHH4xII")  # record id, cycles, flags, path separator, bytes, inval
_DZ_DATA = struct.Struct("<2sBxIQQ")  # original type, zip type, parameter, original, size
_PEEK = 32  # bytes of a block's data section read with its head (CG and DZ need them)
_READ = _HEAD.size + 8 * 8 + _PEEK  # a CN block's head, links and peek
_FLAG_CG_VLSD = 0x01
_FLAG_UNFIN_LAST_DT = 0x04
_ZIP_TYPES = range(6)  # deflate, transposed deflate, zstd, transposed zstd, lz4, transposed lz4
_DEFLATE_TYPES = (0, 1)
_RECORD_ID_SIZES = (0, 1, 2, 4, 8)

_TEXT = frozenset({"TX", "MD"})
_RAW = frozenset({"DT", "SD", "RD", "DV", "DI", "RV", "RI"})
_LEAF = _RAW | {"DZ"}
_DATA = _LEAF | {"DL", "HL", "LD"}
_SHARED = _TEXT | {"CC", "SI"}
_LISTED = frozenset({"DL", "HL", "LD"})
_SIGNAL = _DATA | {"CG", "CN", "AT", "EV"}
"""What a channel's data link may name: signal data (a data tree), a VLSD channel group, the
channel of a maximum-length signal, a synchronization attachment or an event. A conversion or
a text is no data: a signal-data link to a chain of shared conversions made a walk of its
"data" take 4^30 paths."""

# How a link relates its block to the one it names. An owner's links (a list's next, a
# child list, data) must form a tree: each block owned once, none its own ancestor. A
# reference (a name, a source, a conversion) may be shared, but references do not loop
# either. A cross-reference (a channel's attachment, an event's scope) may point anywhere,
# back up the tree too; what it names is checked all the same.
_OWN, _REF, _XREF, _ANY = "own", "ref", "xref", "any"
_Role = tuple[str, frozenset[str]]
_ROLES: dict[str, tuple[_Role, ...]] = {
    "HD": (
        (_OWN, frozenset({"DG"})),
        (_OWN, frozenset({"FH"})),
        (_OWN, frozenset({"CH"})),
        (_OWN, frozenset({"AT"})),
        (_OWN, frozenset({"EV"})),
        (_REF, _TEXT),
    ),
    "DG": ((_OWN, frozenset({"DG"})), (_OWN, frozenset({"CG"})), (_OWN, _DATA), (_REF, _TEXT)),
    "CG": (
        (_OWN, frozenset({"CG"})),
        (_OWN, frozenset({"CN"})),
        (_REF, _TEXT),
        (_REF, frozenset({"SI"})),
        (_OWN, frozenset({"SR"})),
        (_REF, _TEXT),
    ),
    "CN": (
        (_OWN, frozenset({"CN"})),
        (_OWN, frozenset({"CN", "CA"})),
        (_REF, _TEXT),
        (_REF, frozenset({"SI"})),
        (_REF, frozenset({"CC"})),
        (_ANY, _SIGNAL),  # signal data, or a VLSD channel group, an attachment, ...
        (_REF, _TEXT),
        (_REF, _TEXT),
    ),
    "CC": ((_REF, _TEXT), (_REF, _TEXT), (_REF, _TEXT), (_REF, frozenset({"CC"}))),
    "SI": ((_REF, _TEXT), (_REF, _TEXT), (_REF, _TEXT)),
    "CA": ((_OWN, frozenset({"CA", "CN"})),),
    "CH": ((_OWN, frozenset({"CH"})), (_OWN, frozenset({"CH"})), (_REF, _TEXT), (_REF, _TEXT)),
    "AT": ((_OWN, frozenset({"AT"})), (_REF, _TEXT), (_REF, _TEXT), (_REF, _TEXT)),
    "EV": (
        (_OWN, frozenset({"EV"})),
        (_XREF, frozenset()),
        (_XREF, frozenset()),
        (_REF, _TEXT),
        (_REF, _TEXT),
    ),
    "FH": ((_OWN, frozenset({"FH"})), (_REF, _TEXT)),
    "SR": ((_OWN, frozenset({"SR"})), (_OWN, _DATA)),
    "DL": ((_OWN, frozenset({"DL"})),),
    "LD": ((_OWN, frozenset({"LD"})),),
    "HL": ((_OWN, frozenset({"DL", "LD"})),),
}
_MORE: dict[str, _Role] = {  # the links past those named above
    "CC": (_REF, _TEXT | {"CC"}),  # the texts or conversions of each value
    "DL": (_OWN, _LEAF),
    "LD": (_OWN, _LEAF),
}
_LISTS = frozenset({"DG", "CG", "CN", "CH", "AT", "EV", "FH", "SR", "DL", "LD"})  # link 0: next


def read_version(file: BinaryIO, path: str | Path) -> tuple[str, int]:
    """The version ("4.10") and unfinalized flags of an MDF file; CaptureError if it is not
    MDF 4 (asammdf reads 3.x with other blocks, and python-can's reader takes only MDF 4)."""
    file.seek(0)
    ident = file.read(64)
    if len(ident) < 64 or ident[:8] not in (b"MDF     ", b"UnFinMF "):
        raise CaptureError(path, "file header", "not an MDF file")
    version = ident[8:16].decode("latin-1").strip(" \0")
    if version not in MDF4_VERSIONS:
        raise CaptureError(path, "file header", f"unsupported: MDF version {version!r}")
    unfinalized = struct.unpack_from("<H", ident, 60)[0] if ident[:8] == b"UnFinMF " else 0
    return version, unfinalized


@dataclass(frozen=True, slots=True)
class _Node:
    at: int
    kind: str
    length: int  # as the block says
    span: int  # the bytes of it in the file
    links: tuple[int, ...]
    peek: bytes  # the first bytes of its data section

    @property
    def data_at(self) -> int:
        return self.at + _HEAD.size + 8 * len(self.links)


@dataclass(frozen=True, slots=True)
class Deflated:
    """A DZ block: where its deflated bytes start, how many, what they inflate to."""

    at: int
    zip_type: int
    original: int
    size: int


@dataclass(slots=True)
class MdfLinks:
    """What the scan of a file found: its blocks by address, and the bounds a reader keeps."""

    version: str
    unfinalized: int  # the file's unfinalized flags (0 for a finalized file)
    nodes: dict[int, _Node] = field(default_factory=dict)
    links: int = 0  # links followed
    room: dict[int, int] = field(default_factory=dict)  # data block -> bytes it may hold
    held: dict[int, int] = field(default_factory=dict)  # data tree -> bytes, once asked

    def tree(self, at: int) -> Iterator[_Node]:
        """The blocks of the data tree at `at` (DT, DZ, DL, HL, ...), each once, whatever
        links to them: only the links of data lists are followed (a tree that holds another
        kind of block yields it, and the reader refuses it)."""
        todo = [at] if at else []
        seen: set[int] = set()
        while todo:
            addr = todo.pop()
            if addr in seen:
                continue
            seen.add(addr)
            node = self.nodes[addr]
            yield node
            if node.kind in _LISTED:
                todo += [link for link in node.links if link and link not in seen]

    def data_bytes(self, at: int) -> int:
        """The bytes the data blocks of the tree at `at` hold (DZ blocks: inflated)."""
        if at not in self.held:  # each tree summed once, however many groups share it
            self.held[at] = sum(self.room.get(node.at, 0) for node in self.tree(at))
        return self.held[at]

    def max_records(self, cg: int, dg: int) -> int:
        """The most records channel group `cg` of data group `dg` can have: its data group's
        data bytes by the bytes of a record (at least 1, and 4 for variable-length data)."""
        record_id = self.nodes[dg].peek[0] if self.nodes[dg].peek else 0
        _, _, flags, _, data_bytes, inval_bytes = _CG_DATA.unpack_from(self.nodes[cg].peek)
        record = 4 if flags & _FLAG_CG_VLSD else data_bytes + inval_bytes
        return self.data_bytes(self.nodes[dg].links[2]) // max(1, record_id + record)

    @property
    def variable_length(self) -> bool:
        """Whether a channel of the file is variable-length (VLSD: its records hold offsets
        into signal data)."""
        return any(node.kind == "CN" and node.peek[:1] == b"\x01" for node in self.nodes.values())

    def deflated(self) -> Iterator[Deflated]:
        """The DZ blocks of the file."""
        for node in self.nodes.values():
            if node.kind == "DZ":
                _, zip_type, _, original, size = _DZ_DATA.unpack_from(node.peek)
                yield Deflated(node.data_at + _DZ_DATA.size, zip_type, original, size)


class _Scan:
    def __init__(self, file: BinaryIO, size: int, path: str | Path) -> None:
        self.file = file
        self.size = size
        self.path = path
        self.spans = 0

    def corrupt(self, at: int, reason: str) -> CaptureError:
        return CaptureError(self.path, f"byte {at}", note_text(f"corrupt: {reason}"))

    def node(self, at: int) -> _Node:
        """The block at `at`, its head and links read and checked."""
        if not 64 <= at < self.size:
            raise self.corrupt(at, "a link points outside the file")
        self.file.seek(at)
        head = self.file.read(_READ)  # most blocks: head, links and peek at once
        if len(head) < _HEAD.size or head[:2] != b"##":
            raise self.corrupt(at, "no MDF block starts here")
        raw_kind, length, count = _HEAD.unpack_from(head)
        kind = raw_kind[2:].decode("latin-1")
        end = at + length
        if length < _HEAD.size + 8 * count or at + _HEAD.size + 8 * count > self.size:
            raise self.corrupt(at, f"a {kind} block of {length} bytes with {count} links")
        if count < len(_ROLES.get(kind, ())):  # readers take the links they know by position
            raise self.corrupt(at, f"a {kind} block with {count} links")
        if end > self.size and kind not in _LEAF:  # data cut short is read as far as it goes
            raise self.corrupt(at, f"the {kind} block runs past the end of the file")
        span = min(length, self.size - at)
        self.spans += span
        if self.spans > self.size:  # a bound on the work, whatever the links say
            raise self.corrupt(at, "blocks overlap")
        body = head[_HEAD.size :]
        if len(body) < 8 * count + _PEEK:
            body += self.file.read(8 * count + _PEEK - len(body))
        links = struct.unpack_from(f"<{count}Q", body)
        peek = body[8 * count : 8 * count + min(_PEEK, length - _HEAD.size - 8 * count)]
        node = _Node(at, kind, length, span, links, peek)
        self.check(node)
        return node

    def check(self, node: _Node) -> None:
        """What a reader would take on trust in the block's own data."""
        if node.kind == "DG" and (not node.peek or node.peek[0] not in _RECORD_ID_SIZES):
            raise self.corrupt(node.at, "a data group with a record id of an unknown size")
        if node.kind == "CG" and len(node.peek) < _CG_DATA.size:
            raise self.corrupt(node.at, "a short CG block")
        if node.kind == "DZ":
            if len(node.peek) < _DZ_DATA.size:
                raise self.corrupt(node.at, "a short DZ block")
            _, zip_type, _, original, size = _DZ_DATA.unpack_from(node.peek)
            if zip_type not in _ZIP_TYPES:
                raise self.corrupt(node.at, f"a DZ block of zip type {zip_type}")
            if size > node.length - _HEAD.size - _DZ_DATA.size:
                raise self.corrupt(node.at, "a DZ block whose data runs past its end")
            if original > MAX_BLOCK_BYTES or (
                zip_type in _DEFLATE_TYPES and original > DEFLATE_RATIO * size
            ):
                raise self.corrupt(node.at, f"a DZ block of {size} bytes said to hold {original}")

    @staticmethod
    def role(parent: _Node, index: int, child: _Node) -> _Role:
        """How `parent`'s link `index` relates it to `child`, and the kinds of block it may
        name (any when empty)."""
        named = _ROLES.get(parent.kind, ())
        role, kinds = named[index] if index < len(named) else _MORE.get(parent.kind, (_ANY, _TEXT))
        if role == _ANY:  # decided by what is named: data is owned, the rest referred to
            if child.kind in _DATA:
                return _OWN, _DATA
            if kinds and child.kind not in kinds:
                return _XREF, kinds  # refused by its kind
            return (_REF if child.kind in _SHARED else _XREF), frozenset()
        return role, kinds

    def loops(self, parent: _Node, index: int, child: _Node) -> CaptureError:
        if index == 0 and parent.kind in _LISTS and child.kind == parent.kind:
            return self.corrupt(child.at, f"a list of {child.kind} blocks loops")
        if parent.kind in _LISTED and child.kind in _LISTED:
            return self.corrupt(child.at, "data lists nest in a loop: one loops back to another")
        return self.corrupt(
            child.at, f"a link loops back to the {child.kind} block at byte {child.at}"
        )

    def walk(self, links: MdfLinks) -> None:
        """Every block reached from the header, once, depth first: an owning or referring link
        to a block still being walked closes a loop; a block owned twice is listed twice."""
        nodes = links.nodes
        root = nodes[64] = self.node(64)
        if root.kind != "HD":
            raise self.corrupt(64, "no HD block at byte 64")
        walking: set[int] = {64}  # on the path from the header
        owned: set[int] = set()
        stack: list[tuple[_Node, int]] = [(root, 0)]
        while stack:
            parent, index = stack[-1]
            if index == len(parent.links):
                walking.discard(parent.at)
                stack.pop()
                continue
            stack[-1] = (parent, index + 1)
            at = parent.links[index]
            if not at:
                continue
            links.links += 1
            child = nodes.get(at)
            if child is None:
                child = nodes[at] = self.node(at)
                fresh = True
            else:
                fresh = False
            role, kinds = self.role(parent, index, child)
            if role != _XREF and at in walking:
                raise self.loops(parent, index, child)
            if kinds and child.kind not in kinds:
                want = "/".join(sorted(kinds))
                raise self.corrupt(
                    at, f"a {child.kind} block where {parent.kind} link {index} wants {want}"
                )
            if role == _OWN:
                if at in owned:
                    raise self.corrupt(at, f"the {child.kind} block at byte {at} is listed twice")
                owned.add(at)
            if fresh:
                walking.add(at)
                stack.append((child, 0))

    def overlaps(self, links: MdfLinks) -> None:
        end = 0
        for node in sorted(links.nodes.values(), key=lambda n: n.at):
            if node.at < end:
                raise self.corrupt(node.at, "blocks overlap")
            end = node.at + node.span

    def room(self, links: MdfLinks) -> None:
        """The bytes each data block holds: a DZ block what it inflates to, the others what
        the file holds of them, up to the next block when an unfinalized file has not yet
        written the length of its last one."""
        ordered = sorted(links.nodes)
        for i, at in enumerate(ordered):
            node = links.nodes[at]
            if node.kind == "DZ":
                links.room[at] = _DZ_DATA.unpack_from(node.peek)[3]
            elif node.kind in _RAW:
                end = at + node.span
                if links.unfinalized & _FLAG_UNFIN_LAST_DT:
                    end = ordered[i + 1] if i + 1 < len(ordered) else self.size
                links.room[at] = max(0, end - node.data_at)


def scan_links(file: BinaryIO, size: int, path: str | Path) -> MdfLinks:
    """The link graph of the MDF4 file `file` (`size` bytes), checked; CaptureError (corrupt:
    ... loops, ... listed twice, ...) if a reader following it could loop or read a block
    twice."""
    version, unfinalized = read_version(file, path)
    scan = _Scan(file, size, path)
    links = MdfLinks(version, unfinalized)
    scan.walk(links)
    scan.overlaps(links)
    scan.room(links)
    return links


# -- before asammdf ------------------------------------------------------------------

PIECE = 1024 * 1024
"""Bytes read, and inflated, at once while checking."""
_FLAG_UNFIN_LAST_DL = 0x10
# the head of a DG block as asammdf's finalization finds them: anywhere in the file, aligned
_DG = b"##DG" + bytes(4) + (64).to_bytes(8, "little") + (4).to_bytes(8, "little")


def check_for_asammdf(path: Path, *, entries: bool = True) -> MdfLinks:
    """The checked link graph of the MDF4 file at `path`; CaptureError if asammdf could loop
    on it, inflate a block beyond what it says, or read a block twice, or (`entries`, a file
    with variable-length channels) read variable-length DataBytes beyond what a frame carries
    (`mf4_vlsd.check_entries`: asammdf opens the file for it; a reader that opens it with
    asammdf anyway checks them there, `entries=False`). (A .gz is read as a stream, each
    backward seek inflating it again from its start: the readers check the inflated copy of a
    compressed MF4 instead, see `mf4_gz`.)"""
    with _open(path) as file:
        size = file.seek(0, 2)
        links = scan_links(file, size, path)
        if links.version >= "4.10" and links.unfinalized & (
            _FLAG_UNFIN_LAST_DT | _FLAG_UNFIN_LAST_DL
        ):
            _finalization_ends(file, path)
        for block in links.deflated():
            _inflates_as_said(file, block, path)
    if entries and links.variable_length and path.suffix.lower() != ".gz":
        from hwbridge.can.io.mf4_vlsd import check_entries  # imports asammdf

        check_entries(path, links)
    return links


def _open(path: Path) -> BinaryIO:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # the caller's with closes it


def _finalization_ends(file: BinaryIO, path: Path) -> None:
    """asammdf finalizes an unfinalized file by taking every DG block it finds in the file
    (whether linked or not) and reading its data list from the first DL block on until one
    has no next, but without moving on: a DL with a next loops it for ever."""
    for at in _aligned(file, _DG):
        file.seek(at + 24 + 16)  # dg_data
        data = int.from_bytes(file.read(8), "little")
        kind, first = _head(file, data)
        if kind == b"##HL":
            kind, first = _head(file, first)
        if kind == b"##DL" and first:
            raise CaptureError(
                path,
                f"byte {at}",
                "unsupported: an unfinalized file whose data list goes on to a next one "
                "(asammdf's finalization loops on it)",
            )


def _head(file: BinaryIO, at: int) -> tuple[bytes, int]:
    """The id of the block at `at` and its first link (0 if it has none)."""
    file.seek(at)
    head = file.read(32)
    if len(head) < 24:
        return b"", 0
    links = int.from_bytes(head[16:24], "little")
    first = int.from_bytes(head[24:32], "little") if links and len(head) == 32 else 0
    return head[:4], first


def _aligned(file: BinaryIO, pattern: bytes) -> list[int]:
    """The 8-byte aligned offsets where `pattern` is, the file read a piece at a time."""
    found: list[int] = []
    file.seek(0)
    start, carry = 0, b""
    while piece := file.read(PIECE):
        text = carry + piece
        at = text.find(pattern)
        while at >= 0:
            if (start + at) % 8 == 0:
                found.append(start + at)
            at = text.find(pattern, at + 1)
        carry = text[-(len(pattern) - 1) :]
        start += len(text) - len(carry)
    return found


def _inflates_as_said(file: BinaryIO, block: Deflated, path: Path) -> None:
    """The DZ block inflates to exactly the bytes it says (which the scan bounds), checked a
    piece at a time with the output dropped."""
    where = f"byte {block.at}"
    if block.zip_type not in (0, 1):
        raise CaptureError(path, where, f"unsupported: a DZ block of zip type {block.zip_type}")
    inflate = inflater.decompressobj()
    out, left = 0, block.size
    file.seek(block.at)
    try:
        while out <= block.original and not inflate.eof:
            piece = inflate.unconsumed_tail
            if not piece and left > 0:
                piece = file.read(min(left, PIECE))
                left -= len(piece) or left  # a file cut short ends the input
            chunk = inflate.decompress(piece, PIECE)
            out += len(chunk)
            if not chunk and not piece:
                break
    except INFLATE_ERRORS as exc:
        raise CaptureError(path, where, f"corrupt DZ block: {exc}") from None
    if out != block.original or not inflate.eof:
        said = f"it says {block.original} bytes"
        got = "more than that" if out > block.original else f"{out}"
        raise CaptureError(path, where, f"corrupt DZ block: {said}, inflates to {got}")
