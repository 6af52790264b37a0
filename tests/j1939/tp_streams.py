"""J1939 transport-protocol frame streams for the tests: sessions as a node sends them, and
the reference (the J1939 driver's TpReceiver, one per channel) to compare with.

Times are whole multiples of 1/64 s (15,625 us): exact both as integer microseconds and as
float seconds, so a packet exactly T1 (750 ms) after the one before is judged the same way by
both reassemblers, and the boundaries themselves can be generated."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from hwbridge.can.io.frames import FrameChunk
from hwbridge.j1939.database.ids import TP_CM_PGN, TP_DT_PGN, make_id
from hwbridge.j1939.transport.tp import (
    Aborted,
    Completed,
    TpReceiver,
    abort_frame,
    bam_frame,
    cts_frame,
    eoma_frame,
    rts_frame,
)
from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler

TICK_US = 15_625
BASE_US = 1_700_000_000 * 1_000_000

Message = tuple[int, int, int, int, bytes, int, int]
"""channel, pgn, source, destination, payload, started (us), ended (us)"""


@dataclass(frozen=True)
class Frame:
    tick: int
    channel: int
    frame_id: int
    data: bytes
    extended: bool = True
    at_us: int | None = None  # a real capture's own time, instead of the tick's

    @property
    def us(self) -> int:
        return self.at_us if self.at_us is not None else BASE_US + self.tick * TICK_US


def cm(source: int, dest: int, data: bytes) -> tuple[int, bytes]:
    return make_id(TP_CM_PGN, source, dest, 7), data


def dt(source: int, dest: int, seq: int, payload: bytes, length: int = 8) -> tuple[int, bytes]:
    chunk = payload[(seq - 1) * 7 : seq * 7].ljust(7, b"\xff")
    return make_id(TP_DT_PGN, source, dest, 7), (bytes([seq & 0xFF]) + chunk)[:length]


def bam(source: int, pgn: int, payload: bytes) -> list[tuple[int, bytes]]:
    """A whole BAM: the announcement and every packet."""
    count = (len(payload) + 6) // 7
    out = [cm(source, 0xFF, bam_frame(pgn, len(payload)))]
    out += [dt(source, 0xFF, i, payload) for i in range(1, count + 1)]
    return out


def rts_session(source: int, dest: int, pgn: int, payload: bytes) -> list[tuple[int, bytes]]:
    """A whole RTS/CTS transfer between two other nodes, one CTS for every packet."""
    count = (len(payload) + 6) // 7
    out = [cm(source, dest, rts_frame(pgn, len(payload)))]
    out.append(cm(dest, source, cts_frame(pgn, count, 1)))
    out += [dt(source, dest, i, payload) for i in range(1, count + 1)]
    out.append(cm(dest, source, eoma_frame(pgn, len(payload))))
    return out


def abort(source: int, dest: int, pgn: int, reason: int = 3) -> tuple[int, bytes]:
    return cm(source, dest, abort_frame(pgn, reason))


def chunk_of(frames: Sequence[Frame]) -> FrameChunk:
    data = np.zeros((len(frames), 8), np.uint8)
    for i, f in enumerate(frames):
        data[i, : len(f.data)] = np.frombuffer(f.data, np.uint8)
    return FrameChunk(
        np.array([f.us for f in frames], np.int64),
        np.array([f.frame_id for f in frames], np.uint32),
        np.array([f.extended for f in frames], np.bool_),
        np.array([len(f.data) for f in frames], np.uint8),
        data,
        np.array([f.channel for f in frames], np.int16),
    )


def reference(frames: Iterable[Frame]) -> tuple[list[Message], int]:
    """What TpReceivers (one per channel, no session cap) complete, and how many sessions
    end without their message (aborted, or still open at the end)."""
    receivers: dict[int, TpReceiver] = {}
    done: list[Message] = []
    lost = 0
    for f in frames:
        if not f.extended or (f.frame_id >> 16) & 0x3FF not in (0xEC, 0xEB):
            continue
        receiver = receivers.setdefault(f.channel, TpReceiver(max_sessions=1 << 30))
        for event in receiver.feed(f.frame_id, f.data, f.us / 1e6):
            if isinstance(event, Completed):
                started, ended = round(event.started * 1e6), round(event.ended * 1e6)
                done.append(
                    (
                        f.channel,
                        event.pgn,
                        event.source,
                        event.destination,
                        event.data,
                        started,
                        ended,
                    )
                )
            elif isinstance(event, Aborted):
                lost += 1
    return done, lost + sum(r.sessions for r in receivers.values())


def reassembled(
    frames: Sequence[Frame], cuts: Iterable[int] = (), assembler: J1939TpAssembler | None = None
) -> tuple[list[Message], J1939TpAssembler]:
    """What J1939TpAssembler completes with the stream cut into chunks at `cuts`."""
    assembler = assembler or J1939TpAssembler()
    chunk = chunk_of(frames)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(frames)}), len(frames)]
    done: list[Message] = []
    for start, end in itertools.pairwise(bounds):
        found = assembler.feed(chunk.take(np.arange(start, end)))
        for i in range(len(found)):
            done.append(
                (
                    int(found.channel[i]),
                    int(found.pgn[i]),
                    int(found.source[i]),
                    int(found.destination[i]),
                    found.payload(i),
                    int(found.started_us[i]),
                    int(found.ended_us[i]),
                )
            )
    assembler.finish()
    return done, assembler
