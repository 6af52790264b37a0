"""J1939 over captures, on the real truck log (`../shared/data/css/truck_j1939_gps.MF4`):

- DM1 reassembly: `J1939TpAssembler` on the capture's frames as hwbridge reads them (a few
  numpy arrays) against the obvious python-can loop over the same frames as `can.Message`
  objects, reassembling BAM sessions by hand in a dict (goal: at least 4x faster). Both take
  the frames already in memory; the same 152 messages (127 DM1) must come out of both. Then
  the same end to end, reading the file included (python-can's `MF4Reader` against hwbridge's
  MF4 reader), and with the DM1 rows made (parse_dm per message against `DmTable`).
- `decode_captures` of the truck log with the J1939 transport protocol and the j1939_dm table
  against without them (`j1939=False`): goal at most 1.3x.

Without ../shared the module says so and measures nothing.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import can

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "css"
TRUCK = DATA / "truck_j1939_gps.MF4"
DBCS = [DATA / "canmod-gps.dbc", DATA / "CSS-Electronics-SAE-J1939-DEMO.dbc"]
DM1_PGN = 0xFECA
REPEATS = 21  # the reassembly (about a millisecond a run)
DECODE_REPEATS = 15  # decode_captures, alternating with and without


def _times(
    ours: Callable[[], object], theirs: Callable[[], object], repeats: int
) -> tuple[list[float], list[float]]:
    """Both, alternating, each after a gc.collect(): the same (cold) caches for both."""
    out: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, times in ((ours, out[0]), (theirs, out[1])):
            gc.collect()
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    return out


def bam_by_hand(messages: Sequence[can.Message]) -> list[tuple[int, int, bytes]]:
    """The plain python-can loop: BAM announcements and packets reassembled in a dict.

    It checks less than J1939TpAssembler (no timeouts, no RTS/CTS, no aborts): it only keeps
    packets in sequence and drops a session on the first one out of it."""
    sessions: dict[tuple[Any, int], list[Any]] = {}
    done: list[tuple[int, int, bytes]] = []
    for msg in messages:
        if not msg.is_extended_id:
            continue
        aid = msg.arbitration_id
        pf = (aid >> 16) & 0x3FF
        if pf == 0xEC:
            data = msg.data
            if data[0] == 32 and len(data) >= 8:
                size = data[1] | data[2] << 8
                pgn = data[5] | data[6] << 8 | data[7] << 16
                sessions[(msg.channel, aid & 0xFF)] = [pgn, size, data[3], bytearray()]
        elif pf == 0xEB:
            key = (msg.channel, aid & 0xFF)
            session = sessions.get(key)
            if session is None:
                continue
            data = msg.data
            parts: bytearray = session[3]
            if data[0] != len(parts) // 7 + 1:
                del sessions[key]
                continue
            parts += data[1:8]
            if len(parts) // 7 == session[2]:
                del sessions[key]
                done.append((session[0], aid & 0xFF, bytes(parts[: session[1]])))
    return done


def _ours(chunks: Sequence[Any]) -> list[tuple[int, int, bytes]]:
    from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler

    assembler = J1939TpAssembler()
    done: list[tuple[int, int, bytes]] = []
    for chunk in chunks:
        found = assembler.feed(chunk)
        done += [
            (int(found.pgn[i]), int(found.source[i]), found.payload(i)) for i in range(len(found))
        ]
    assembler.finish()
    return done


def _ours_reassembly_only(chunks: Sequence[Any]) -> int:
    from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler

    assembler = J1939TpAssembler()
    completed = sum(len(assembler.feed(chunk)) for chunk in chunks)
    assembler.finish()
    return completed


def _dm_rows_by_hand(messages: Sequence[can.Message]) -> int:
    from hwbridge.j1939.database.dm import parse_dm

    rows = 0
    for pgn, _, data in bam_by_hand(messages):
        if pgn == DM1_PGN:
            rows += max(1, len(parse_dm(data).dtcs))
    return rows


def _dm_rows_ours(chunks: Sequence[Any]) -> int:
    from hwbridge.captures.j1939_dm import DmTable, dm_mask
    from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler

    assembler, table, rows = J1939TpAssembler(), DmTable(), 0
    for chunk in chunks:
        for frames in assembler.feed(chunk).frames():
            dms = frames.take(dm_mask(frames))
            if len(dms):
                rows += table.batch(dms).num_rows
    return rows


def _read_by_hand() -> list[tuple[int, int, bytes]]:
    with can.MF4Reader(TRUCK) as reader:
        return bam_by_hand(list(reader))


def _read_ours() -> list[tuple[int, int, bytes]]:
    from hwbridge.can.io.readers import open_capture

    reader = open_capture(TRUCK)
    try:
        return _ours(list(reader.chunks()))
    finally:
        reader.close()


def _line(what: str, ours: list[float], theirs: list[float], goal: str) -> None:
    best, other = min(ours), min(theirs)
    median = statistics.median(theirs) / statistics.median(ours)
    print(
        f"{what}: hwbridge {best * 1e3:.2f} ms, python-can loop {other * 1e3:.2f} ms: "
        f"{other / best:.1f}x faster (medians {median:.1f}x; {goal})"
    )


def reassembly() -> None:
    from hwbridge.can.io.readers import open_capture

    with can.MF4Reader(TRUCK) as reader:
        messages = list(reader)
    source = open_capture(TRUCK)
    chunks = list(source.chunks())
    source.close()
    frames = sum(len(c) for c in chunks)
    assert frames == len(messages) == 57_849, (frames, len(messages))
    ours, theirs = _ours(chunks), bam_by_hand(messages)
    assert ours == theirs, (len(ours), len(theirs))
    assert len(ours) == 152
    assert sum(1 for pgn, *_ in ours if pgn == DM1_PGN) == 127
    print(
        f"{frames:,} frames, 683 of them TP.CM/TP.DT; 152 messages (127 DM1, 25 EC1), "
        "the same from both"
    )
    fast, slow = _times(
        lambda: _ours_reassembly_only(chunks), lambda: bam_by_hand(messages), REPEATS
    )
    _line("reassembly, frames in memory", fast, slow, "goal >= 4x")
    assert _dm_rows_ours(chunks) == _dm_rows_by_hand(messages) == 508
    fast, slow = _times(lambda: _dm_rows_ours(chunks), lambda: _dm_rows_by_hand(messages), REPEATS)
    _line("reassembly + 508 DM1 rows (DmTable / parse_dm)", fast, slow, "reported")
    fast, slow = _times(_read_ours, _read_by_hand, 3)
    _line("end to end, reading the MF4 file", fast, slow, "reported")


def decode_cost() -> None:
    from hwbridge.captures import decode_captures

    with tempfile.TemporaryDirectory(prefix="hwbridge-bench-") as tmp:
        runs: dict[bool, list[float]] = {True: [], False: []}
        for run in range(2 * DECODE_REPEATS + 2):
            j1939 = run % 2 == 0
            gc.collect()
            started = time.perf_counter()
            summary = decode_captures([TRUCK], DBCS, Path(tmp) / f"ds{run}", j1939=j1939)
            seconds = time.perf_counter() - started
            assert summary.ok
            assert ("j1939_dm" in summary.rows) == j1939
            if run >= 2:  # the first of each warms the caches
                runs[j1939].append(seconds)
        on, off = runs[True], runs[False]
        print(
            f"decode_captures of the truck log: with J1939 (TP + j1939_dm) {min(on) * 1e3:.0f} ms, "
            f"without {min(off) * 1e3:.0f} ms: {min(on) / min(off):.2f}x the time (medians "
            f"{statistics.median(on) / statistics.median(off):.2f}x; goal <= 1.3x)"
        )


def main() -> None:
    if not TRUCK.exists():
        print(f"{TRUCK} is not here (../shared/data beside the checkout): skipped")
        return
    reassembly()
    decode_cost()


if __name__ == "__main__":
    main()
