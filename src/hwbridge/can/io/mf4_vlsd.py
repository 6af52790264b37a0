"""Variable-length DataBytes read through asammdf: the longest entry found, and bounded,
before any record is read.

CAN_DataFrame.DataBytes may be variable-length (a VLSD channel): each record holds an offset
into signal data, where an entry is a 4-byte length and that many bytes. CANedge loggers
write them so (the shared truck and Kona logs: one entry of 1 to 8 bytes a frame, in the
records of a VLSD channel group among the unsorted records of an unfinalized file), so the
asammdf path cannot refuse them. python-can's MF4Writer writes none (64 fixed DataBytes a
record), and a sorted, finalized file with signal-data (SD) blocks is the block reader's.

asammdf reads a variable-length channel as rows as wide as the longest entry that any record
of the group names, each entry padded to it: a read of n records holds n times that length, a
few times over. One 4,096-byte entry named by 262,144 records took 1.24 GB; an entry may say
up to 2^32 bytes, and 1,000 records naming one of 64 MiB (a 64 kB DZ block) asked for 64 GB
at once (asammdf's C code does not check that allocation: the process crashed). To find that
longest entry, asammdf holds the offsets of all the group's records (8 bytes each) and the
group's whole signal data once, then keeps the length for every read.

So before a record of a CAN_DataFrame group is read, each of its variable-length channels is
checked (`longest_entries`):

- its signal data may hold at most `SIGNAL_BYTES_PER_RECORD` (68) bytes a record the group
  holds: an entry of at most 64 bytes and its length (writers store one entry a frame). So
  asammdf's pass holds at most 8 + 68 bytes a record, whatever the entries say (and so does
  a read whose first and last records name entries far apart: it loads the signal data
  between them);
- then asammdf's pass runs (a read of one record: its result is cached for every read), and
  the longest entry the records name may be at most `MAX_DATA` (64) bytes, what a CAN FD frame
  carries. A longer one makes the group corrupt: padded to the longest, the entries no longer
  say which frame's is too long, so none can be dropped alone as the block reader (which
  reads each entry's length) drops it.

The bound: a read of `MF4_CHUNK_FRAMES` (131,072) records holds at most 131,072 x 64 bytes =
8 MiB of DataBytes a copy, as a group of fixed 64-byte DataBytes does.

Why not walk the entries' length prefixes before asammdf opens the file: a record's offset may
name any byte of the signal data, not only an entry's start, and asammdf reads the length at
each offset a record holds, which only the records tell. The entries of a VLSD channel group
lie among all the file's unsorted records: stepping through them in Python takes as long as
asammdf's whole read of the truck log (18 ms), while asammdf's own pass, which its first read
made anyway, costs a read of one record more (under 1 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.can.io.frame_checks import MAX_DATA
from hwbridge.can.io.frames import CaptureError, note_text

if TYPE_CHECKING:
    from hwbridge.can.io.mf4_links import MdfLinks

__all__ = ["SIGNAL_BYTES_PER_RECORD", "check_entries", "longest_entries", "open_mdf"]

SIGNAL_BYTES_PER_RECORD = 4 + MAX_DATA
"""Bytes of signal data a record may account for: its entry's length and at most 64 bytes."""
_CN_VLSD = 1


def open_mdf(path: Path) -> Any:
    """asammdf's MDF of `path` (asammdf imported now); CaptureError if asammdf cannot open
    it."""
    try:
        from hwbridge._deferred import require_asammdf

        require_asammdf()
        from asammdf import MDF
    except ImportError:
        raise ImportError(
            "reading .mf4 captures needs asammdf: pip install 'mcs-hwbridge[captures]'"
        ) from None
    try:
        # the bus-logging index asammdf builds on opening (ids per group) is not used here
        return MDF(path, process_bus_logging=False)  # type: ignore[call-arg]
    except Exception as exc:  # asammdf raises many types for a file it cannot read
        why = note_text(f"not a readable MDF4 file: {exc}")  # asammdf quotes the file
        raise CaptureError(path, "file header", why) from None


def longest_entries(mdf: Any, links: MdfLinks, path: Path) -> dict[int, int]:
    """The longest entry (bytes) that the records of each CAN_DataFrame group with
    variable-length channels name, by group index; CaptureError (corrupt) if a channel's
    signal data holds more than 68 bytes a record, or its records name an entry longer than
    64 bytes."""
    longest: dict[int, int] = {}
    for index, group in enumerate(mdf.groups):
        channels = list(group.channels)
        if "CAN_DataFrame" not in {str(channel.name) for channel in channels}:
            continue
        cg, dg = group.channel_group.address, group.data_group.address
        if cg not in links.nodes or dg not in links.nodes:  # asammdf found it unlinked
            raise CaptureError(path, f"channel group {index}", "corrupt: a group no link names")
        records = min(int(group.channel_group.cycles_nr), links.max_records(cg, dg))
        for number, channel in enumerate(channels):
            if int(channel.channel_type) == _CN_VLSD:
                entry = _longest_entry(mdf, index, number, records, path)
                longest[index] = max(longest.get(index, 0), entry)
    return longest


def _longest_entry(mdf: Any, index: int, number: int, records: int, path: Path) -> int:
    """The longest entry the `records` records of group `index` name in the signal data of
    its channel `number`."""
    group = mdf.groups[index]
    name = note_text(str(group.channels[number].name))
    where = f"channel group {index}"
    held = sum(int(block.original_size) for block in group.get_signal_data_blocks(number))
    if held > records * SIGNAL_BYTES_PER_RECORD:
        raise CaptureError(
            path,
            where,
            f"corrupt: {name}: {held} bytes of signal data for {records} records "
            f"(at most {SIGNAL_BYTES_PER_RECORD} a record)",
        )
    if not records:
        return 0
    try:  # asammdf finds the longest entry for any read, and keeps it
        samples = mdf.get(
            group=index, index=number, record_offset=0, record_count=1, samples_only=True
        )[0]
    except Exception as exc:  # asammdf's text quotes channel names of any length
        raise CaptureError(path, where, note_text(f"unreadable records: {exc}")) from None
    entry = int(samples.shape[1] if samples.ndim == 2 else samples.dtype.itemsize)
    if entry > MAX_DATA:
        raise CaptureError(
            path,
            where,
            f"corrupt: {name} entries of {entry} bytes (a frame carries at most {MAX_DATA})",
        )
    return entry


def check_entries(path: Path, links: MdfLinks) -> None:
    """`longest_entries` of the file at `path` (whose checked links are `links`), opened by
    asammdf for the check: for a reader that opens the file itself (python-can's)."""
    mdf = open_mdf(path)
    try:
        longest_entries(mdf, links, path)
    except CaptureError:
        raise
    except Exception as exc:  # what asammdf made of a file it could open
        raise CaptureError(path, "file header", note_text(f"unreadable MDF4 file: {exc}")) from None
    finally:
        mdf.close()
