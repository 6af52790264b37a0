"""What an MDF4 file must pass before asammdf reads it.

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
from pathlib import Path
from typing import BinaryIO

from hwbridge.captures.frames import CaptureError
from hwbridge.captures.mdf_links import Deflated, MdfLinks, scan_links

__all__ = ["check_for_asammdf"]

PIECE = 1024 * 1024
"""Bytes read, and inflated, at once while checking."""
_FLAG_UNFIN_LAST_DT = 0x04
_FLAG_UNFIN_LAST_DL = 0x10
# the head of a DG block as asammdf's finalization finds them: anywhere in the file, aligned
_DG = b"##DG" + bytes(4) + (64).to_bytes(8, "little") + (4).to_bytes(8, "little")


def check_for_asammdf(path: Path) -> MdfLinks:
    """The checked link graph of the MDF4 file at `path` (or its .gz); CaptureError if asammdf
    could loop on it, inflate a block beyond what it says, or read a block twice."""
    with _open(path) as file:
        size = file.seek(0, 2)
        links = scan_links(file, size, path)
        if links.version >= "4.10" and links.unfinalized & (
            _FLAG_UNFIN_LAST_DT | _FLAG_UNFIN_LAST_DL
        ):
            _finalization_ends(file, path)
        for block in links.deflated():
            _inflates_as_said(file, block, path)
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
    from hwbridge.captures.reader_mdf import INFLATE_ERRORS, inflater

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
