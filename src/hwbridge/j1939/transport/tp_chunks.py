"""The J1939 transport protocol (J1939-21) put back together over capture chunks, with numpy.

A capture holds a multi-packet message (a DM1 with two trouble codes or more, the engine
configuration, an identification) as a TP.CM announcement followed by TP.DT packets of 7
bytes. `J1939TpAssembler` reassembles them as the J1939 driver's `TpReceiver` does when it only
listens (the same completed messages: tested on the real truck log and on generated frame
streams), but a chunk of frames at a time instead of a frame at a time:

- the TP.CM and TP.DT frames of a chunk are picked out by masks on their ids and sorted by
  session, (channel, originator, receiver), then by file order; a clear-to-send or an
  end-of-message acknowledgement goes with the session it answers, an abort with both
  directions;
- broadcast sessions (BAM), nearly all of a capture's, are checked all at once: every
  announcement starts a segment, a packet is accepted while its sequence number is its place in
  the segment and it comes within T1 (750 ms) of the frame before, and the first packet that
  is not ends the session; the payloads of the complete sessions are gathered with one index;
- sessions with flow control (RTS/CTS between two nodes) and aborts, rare and paced by their
  receiver, are followed frame by frame with TpReceiver's rules for a listener.

A session still open at the end of a chunk is carried into the next one (its bytes so far and
its deadline), so a message split across chunks completes like any other. A message's time is
when its last packet arrived (for RTS/CTS, the acknowledgement), as `CanDriver` sees it live.

Bounds, whatever the capture holds: at most 1,785 bytes a session; the work on a chunk is
linear in its frames plus a sort of its transport-protocol frames; between chunks at most
`max_open` sessions are kept (sessions whose deadline has passed are dropped first, then the
ones closest to their deadline), so a flood of announcements that never finish costs nothing
that lasts. TpReceiver also refuses a new session while `max_sessions` (64) are open; here a
chunk's sessions are bounded by its frames instead. A session whose next frame comes late times
out at that frame (TpReceiver: at any later frame); with timestamps in order both agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.frames import FrameChunk
from hwbridge.j1939.transport.tp import (
    ABORT,
    BAM,
    CTS,
    EOMA,
    MAX_SIZE,
    RTS,
    T1,
    T2,
    T4,
    Announcement,
)

__all__ = ["MAX_OPEN", "J1939TpAssembler", "TpMessages", "TpStats"]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
MAX_OPEN: Final = 4096
"""Sessions carried from one chunk to the next, at most."""
CHUNK_BYTES: Final = 4 * 1024 * 1024
"""Messages become frames in runs of at most this many padded payload bytes."""
MAX_PGN: Final = 0x3FFFF
_T1: Final = round(T1 * 1e6)
_T2: Final = round(T2 * 1e6)
_T4_T2: Final = round((T4 + T2) * 1e6)
_CM: Final = 0xEC
_DT: Final = 0xEB
_GLOBAL: Final = 0xFF
_PRIORITY: Final = 6  # the id a reassembled message gets (routing matches J1939 by PGN)
# kinds of the rows of the broadcast path
_RESUME, _ANNOUNCE, _PACKET = 0, 1, 2
# kinds of the rows of the frame-by-frame path
_F_BAM, _F_RTS, _F_CTS, _F_EOMA, _F_ABORT, _F_DT = range(6)


@dataclass(slots=True)
class TpStats:
    """What the reassembly saw: transport-protocol frames, completed and aborted sessions.

    `aborted` counts every session that ended without its message: aborted by a node, timed
    out, replaced by a new announcement, broken by a packet out of sequence, refused (a size
    over 1,785 bytes, a packet count that does not match), or still open when the capture
    ended."""

    frames: int = 0
    completed: int = 0
    aborted: int = 0


@dataclass(slots=True)
class _Open:
    """A session between chunks (or followed frame by frame)."""

    kind: int  # BAM or RTS
    pgn: int
    size: int
    count: int
    started: int  # microseconds
    deadline: int
    parts: bytearray  # 7 bytes per packet received, in sequence

    @property
    def received(self) -> int:
        return len(self.parts) // 7


@dataclass(frozen=True, slots=True)
class TpMessages:
    """The messages completed in one chunk, in the order they completed.

    Message i is `blob[offset[i] : offset[i] + size[i]]`."""

    channel: npt.NDArray[np.int16]
    source: I64
    destination: I64
    pgn: I64
    started_us: I64
    ended_us: I64
    size: I64
    offset: I64
    blob: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return len(self.pgn)

    def payload(self, i: int) -> bytes:
        start = int(self.offset[i])
        return self.blob[start : start + int(self.size[i])].tobytes()

    def frames(self, max_bytes: int = CHUNK_BYTES) -> list[FrameChunk]:
        """The messages as frames for the decoders: id (priority 6, the PGN, the source, the
        destination of a PDU1 PGN), payload and completion time; in runs of at most
        `max_bytes` padded bytes, in completion order. A PGN over 18 bits (an announcement no
        database can describe) is left out."""
        keep = np.flatnonzero(self.pgn <= MAX_PGN)
        if not len(keep):
            return []
        sizes = self.size[keep]
        runs: list[npt.NDArray[np.intp]] = []
        if len(keep) * int(sizes.max()) <= max_bytes:
            runs.append(keep)
        else:
            start, widest = 0, 0
            for i, size in enumerate(sizes.tolist()):
                if i > start and (i - start + 1) * max(widest, size) > max_bytes:
                    runs.append(keep[start:i])
                    start, widest = i, 0
                widest = max(widest, size)
            runs.append(keep[start:])
        return [self._frames(rows) for rows in runs]

    def _frames(self, rows: npt.NDArray[np.intp]) -> FrameChunk:
        sizes = self.size[rows]
        width = int(sizes.max())
        cols = np.arange(width, dtype=np.int64)
        index = self.offset[rows][:, None] + cols[None, :]
        inside = cols[None, :] < sizes[:, None]
        data = np.where(inside, self.blob[np.minimum(index, len(self.blob) - 1)], 0).astype(
            np.uint8
        )
        pgn = self.pgn[rows]
        pdu1 = ((pgn >> 8) & 0xFF) < 240
        field_ = np.where(pdu1, (pgn & 0x3FF00) | self.destination[rows], pgn)
        ids = (_PRIORITY << 26) | (field_ << 8) | self.source[rows]
        return FrameChunk(
            self.ended_us[rows].astype(np.int64),
            ids.astype(np.uint32),
            np.ones(len(rows), np.bool_),
            sizes.astype(np.uint16),
            data,
            self.channel[rows],
        )


def _empty_messages() -> TpMessages:
    none = np.zeros(0, np.int64)
    return TpMessages(
        np.zeros(0, np.int16), none, none, none, none, none, none, none, np.zeros(0, np.uint8)
    )


def tp_mask(chunk: FrameChunk) -> npt.NDArray[np.bool_]:
    """The chunk's TP.CM and TP.DT frames (29-bit ids, PDU format 0xEC or 0xEB, data page 0)."""
    # (id & PF and data page bits) - TP.DT's < 2 << 16: PF 0xEB or 0xEC (unsigned wrap-around)
    pf = (chunk.arbitration_id & np.uint32(0x3FF0000)) - np.uint32(_DT << 16)
    mask: npt.NDArray[np.bool_] = (pf < np.uint32(2 << 16)) & chunk.extended
    return mask


def _eight(data: npt.NDArray[np.uint8], rows: npt.NDArray[np.intp]) -> npt.NDArray[np.uint8]:
    """The first 8 bytes of the frames at `rows` (zero padded when the chunk is narrower)."""
    picked = data[rows, :8]
    if picked.shape[1] == 8:
        return picked
    out = np.zeros((len(rows), 8), np.uint8)
    out[:, : picked.shape[1]] = picked
    return out


@dataclass(frozen=True, slots=True)
class _Finished:
    """Messages one path completed: message i is `blob[offset[i] : offset[i] + size[i]]`,
    completed by the frame at `pos[i]` of the chunk."""

    pos: I64
    key: I64
    pgn: I64
    started: I64
    ended: I64
    size: I64
    offset: I64
    blob: U8


@dataclass(slots=True)
class _Done:
    """The messages of both paths, merged in completion order."""

    parts: list[_Finished] = field(default_factory=list)
    blob_bytes: int = 0

    def add(self, part: _Finished) -> None:
        self.parts.append(replace(part, offset=part.offset + self.blob_bytes))
        self.blob_bytes += len(part.blob)

    def messages(self) -> TpMessages:
        if not self.parts:
            return _empty_messages()
        one = self.parts[0] if len(self.parts) == 1 else None
        pos = one.pos if one is not None else np.concatenate([p.pos for p in self.parts])
        order = np.argsort(pos, kind="stable")

        def cat(name: str) -> I64:
            if one is not None:
                column: I64 = getattr(one, name)[order]
            else:
                column = np.concatenate([getattr(p, name) for p in self.parts])[order]
            return column

        key = cat("key")
        return TpMessages(
            channel=((key >> 16) - 32768).astype(np.int16),
            source=(key >> 8) & 0xFF,
            destination=key & 0xFF,
            pgn=cat("pgn"),
            started_us=cat("started"),
            ended_us=cat("ended"),
            size=cat("size"),
            offset=cat("offset"),
            blob=one.blob if one is not None else np.concatenate([p.blob for p in self.parts]),
        )


def _one_message(session: _Open, t: int, key: int, pos: int) -> _Finished:
    def one(value: int) -> I64:
        return np.array([value], np.int64)

    return _Finished(
        one(pos),
        one(key),
        one(session.pgn),
        one(session.started),
        one(t),
        one(session.size),
        one(0),
        np.frombuffer(bytes(session.parts[: session.size]), np.uint8),
    )


@dataclass(frozen=True, slots=True)
class _Rows:
    """The transport-protocol frames of a chunk, as columns (index: TP row)."""

    rows: npt.NDArray[np.intp]  # position in the chunk
    t: I64
    data: U8  # (n, 8)
    payload: U8  # (n, 7): a packet's bytes, 0xFF past its length
    bam: npt.NDArray[np.bool_]
    rts: npt.NDArray[np.bool_]
    answer: npt.NDArray[np.bool_]
    control: U8
    packet: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Broadcast:
    """The rows of broadcast sessions, sorted by session key then file order: announcements
    (BAM, and RTS that no packet follows in this chunk), packets, and a row for each session
    resumed from the last chunk (first of its key)."""

    key: I64
    pos: I64  # -1 for a resumed session
    t: I64
    kind: I64  # _RESUME, _ANNOUNCE, _PACKET
    rts: npt.NDArray[np.bool_]  # an RTS announcement (no packet follows it in this path)
    valid: npt.NDArray[np.bool_]  # an announcement of a size and packet count that agree
    size: I64
    count: I64
    pgn: I64
    deadline: I64  # when the session times out if nothing comes after this row
    received: I64  # packets a resumed session had
    started: I64
    seq: I64
    payload: U8

    @classmethod
    def of(cls, f: _Rows, entry: I64, key: I64, resumed: dict[int, _Open]) -> _Broadcast:
        head = f.data[entry].astype(np.int64)
        size = head[:, 1] | head[:, 2] << 8
        count = head[:, 3]
        announce = f.bam[entry] | f.rts[entry]
        t = f.t[entry]
        rows = cls(
            key=key,
            pos=f.rows[entry].astype(np.int64),
            t=t,
            kind=np.where(announce, _ANNOUNCE, _PACKET),
            rts=f.rts[entry],
            valid=announce & (size > 0) & (size <= MAX_SIZE) & (count == (size + 6) // 7),
            size=size,
            count=count,
            pgn=head[:, 5] | head[:, 6] << 8 | head[:, 7] << 16,
            deadline=t + _T1,
            received=np.zeros(len(entry), np.int64),
            started=t,
            seq=head[:, 0],
            payload=f.payload[entry],
        )
        if resumed:
            rows = rows._with(resumed)
        return rows.take(np.lexsort((rows.pos, rows.key)))

    def _with(self, resumed: dict[int, _Open]) -> _Broadcast:
        sessions = list(resumed.values())
        n = len(sessions)

        def column(values: list[int]) -> I64:
            return np.array(values, np.int64)

        extra = _Broadcast(
            key=np.fromiter(resumed, np.int64, n),
            pos=np.full(n, -1, np.int64),
            t=column([s.deadline - _T1 for s in sessions]),
            kind=np.full(n, _RESUME, np.int64),
            rts=np.zeros(n, np.bool_),
            valid=np.ones(n, np.bool_),
            size=column([s.size for s in sessions]),
            count=column([s.count for s in sessions]),
            pgn=column([s.pgn for s in sessions]),
            deadline=column([s.deadline for s in sessions]),
            received=column([s.received for s in sessions]),
            started=column([s.started for s in sessions]),
            seq=np.zeros(n, np.int64),
            payload=np.zeros((n, 7), np.uint8),
        )
        return _Broadcast(
            *(np.concatenate([getattr(self, name), getattr(extra, name)]) for name in _COLUMNS)
        )

    def take(self, order: npt.NDArray[np.intp]) -> _Broadcast:
        return _Broadcast(*(getattr(self, name)[order] for name in _COLUMNS))


_COLUMNS = tuple(f.name for f in fields(_Broadcast))


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What became of each row and segment (a segment: an announcement or a resumed session
    and the packets after it, up to the next announcement of the same key)."""

    accepted: npt.NDArray[np.bool_]  # a packet its session took
    completes: npt.NDArray[np.bool_]  # the packet that completed its session
    first: I64  # each segment's first row
    end: I64  # one past its last row
    has_session: npt.NDArray[np.bool_]  # it begins with a valid announcement or a resumed one
    ended: npt.NDArray[np.bool_]  # its session completed
    broken: npt.NDArray[np.bool_]  # a packet out of sequence or late ended it
    last: npt.NDArray[np.bool_]  # the last segment of its key in the chunk
    refused: int  # announcements of a bad size or packet count

    @classmethod
    def of(cls, b: _Broadcast) -> _Verdict:
        m = len(b.key)
        new_key = np.ones(m, np.bool_)
        new_key[1:] = b.key[1:] != b.key[:-1]
        starts = new_key | (b.kind != _PACKET)
        segment = np.cumsum(starts) - 1
        first = np.flatnonzero(starts)
        end = np.append(first[1:], m)
        kind = b.kind[first]
        has_session = (kind == _RESUME) | ((kind == _ANNOUNCE) & b.valid[first])
        count = b.count[first][segment]
        # a packet's place in its session, and whether it is the one due, in time
        place = b.received[first][segment] + np.arange(m) - first[segment]
        due = np.empty(m, np.int64)
        due[0] = 0
        due[1:] = b.deadline[:-1]
        live = ~starts & has_session[segment] & (place <= count)
        bad = live & ((b.seq != place) | (b.t > due))
        bad_so_far = np.cumsum(bad)
        accepted = live & (bad_so_far == bad_so_far[first][segment])
        completes = accepted & (place == count)
        ended = np.zeros(len(first), np.bool_)
        ended[segment[completes]] = True
        broken = np.zeros(len(first), np.bool_)
        broken[segment[bad]] = True
        last = np.append(new_key[first[1:]], True)
        refused = int(np.count_nonzero((kind == _ANNOUNCE) & ~b.valid[first]))
        return cls(accepted, completes, first, end, has_session, ended, broken, last, refused)

    @property
    def lost(self) -> npt.NDArray[np.bool_]:
        """Sessions that ended without their message: broken, or replaced by an announcement."""
        return self.has_session & ~self.ended & (self.broken | ~self.last)

    @property
    def still_open(self) -> npt.NDArray[np.bool_]:
        return self.has_session & ~self.ended & ~self.broken & self.last


def _completed(b: _Broadcast, v: _Verdict, resumed: dict[int, _Open]) -> _Finished | None:
    """The complete sessions' messages: each one's packets are the rows after its first."""
    whole = np.flatnonzero(v.ended)
    if not len(whole):
        return None
    first = v.first[whole]
    earlier = b.received[first]
    taken = b.count[first] - earlier
    before = np.cumsum(taken) - taken
    index = np.repeat(first + 1 - before, taken) + np.arange(int(taken.sum()))
    blob = b.payload[index].reshape(-1)
    offset = before * 7
    keys = b.key[first]
    if bool((earlier > 0).any()):  # a resumed session: its earlier bytes first
        blob, offset = _with_earlier(blob, offset, taken, np.where(earlier > 0, keys, -1), resumed)
    last = np.flatnonzero(v.completes)
    return _Finished(
        b.pos[last], keys, b.pgn[first], b.started[first], b.t[last], b.size[first], offset, blob
    )


def _with_earlier(
    blob: U8, offset: I64, taken: I64, keys: I64, resumed: dict[int, _Open]
) -> tuple[U8, I64]:
    """The blob with each resumed session's earlier bytes put before its new ones (`keys`:
    the resumed session's key, -1 for a session that began in this chunk)."""
    pieces: list[bytes] = []
    offsets: list[int] = []
    at = 0
    for i, key in enumerate(keys.tolist()):
        start = int(offset[i])
        new = blob[start : start + 7 * int(taken[i])].tobytes()
        session = resumed.get(key)
        earlier = bytes(session.parts) if session is not None else b""
        offsets.append(at)
        pieces.append(earlier + new)
        at += len(earlier) + len(new)
    return np.frombuffer(b"".join(pieces), np.uint8), np.array(offsets, np.int64)


class J1939TpAssembler:
    """Feed it every chunk of a capture in order; it returns the messages each completes."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self.max_open = max(1, max_open)
        self.stats = TpStats()
        self._open: dict[int, _Open] = {}  # session key -> the session carried between chunks

    @property
    def open_sessions(self) -> int:
        return len(self._open)

    def feed(self, chunk: FrameChunk) -> TpMessages:
        """The messages the frames of `chunk` complete (frames of other ids are ignored)."""
        if not len(chunk):
            return _empty_messages()
        rows = np.flatnonzero(tp_mask(chunk))
        if not len(rows):
            self._settle(chunk)
            return _empty_messages()
        self.stats.frames += len(rows)
        done = _Done()
        self._sessions(chunk, rows, done)
        self._settle(chunk)
        messages = done.messages()
        self.stats.completed += len(messages)
        return messages

    def finish(self) -> None:
        """End of the capture: sessions still open are incomplete."""
        self.stats.aborted += len(self._open)
        self._open.clear()

    # -- sorting frames into sessions ------------------------------------------------------

    def _sessions(self, chunk: FrameChunk, rows: npt.NDArray[np.intp], done: _Done) -> None:
        ids = chunk.arbitration_id[rows].astype(np.int64)
        t = chunk.timestamp_us[rows].astype(np.int64)
        length = chunk.length[rows].astype(np.int64)
        data = _eight(chunk.data, rows)
        source, dest = ids & 0xFF, (ids >> 8) & 0xFF
        cm = ((ids >> 16) & 0x3FF) == _CM
        control = data[:, 0]
        cm_ok = cm & (length >= 8)
        bam = cm_ok & (control == BAM) & (dest == _GLOBAL)
        rts = cm_ok & (control == RTS)
        answer = cm_ok & ((control == CTS) | (control == EOMA))
        abort = cm_ok & (control == ABORT)
        packet = ~cm & (length >= 2)
        base = (chunk.channel[rows].astype(np.int64) + 32768) << 16
        forward = base | (source << 8) | dest
        backward = base | (dest << 8) | source
        key = np.where(answer, backward, forward)
        # the rows that matter, and an abort's second copy for the other direction
        entry = np.flatnonzero(bam | rts | answer | abort | packet)
        entry_key = key[entry]
        second = np.flatnonzero(abort & (backward != forward))
        if len(second):
            entry = np.concatenate([entry, second])
            entry_key = np.concatenate([entry_key, backward[second]])
        payload = np.where(
            np.arange(1, 8)[None, :] < length[:, None], data[:, 1:8], np.uint8(0xFF)
        ).astype(np.uint8)
        frames = _Rows(rows, t, data, payload, bam, rts, answer, control, packet)
        by_step = self._by_step(entry, entry_key, frames, answer | abort)
        # flow control where no session can be (no announcement, none carried) changes nothing
        simple = ~by_step & ~(answer | abort)[entry]
        if bool(simple.any()):
            self._broadcast(frames, entry[simple], entry_key[simple], done)
        if bool(by_step.any()):
            self._stepwise(frames, entry[by_step], entry_key[by_step], done)

    def _by_step(
        self, entry: I64, key: I64, f: _Rows, flow: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        """The entries of sessions to follow frame by frame: flow control (CTS, EoMA, abort)
        that meets an announcement or a carried session, an RTS session that gets packets, or
        an RTS session carried from the last chunk. Everything else is broadcast-like: BAM
        sessions, RTS announcements alone, packets."""
        carried_rts = [k for k, s in self._open.items() if s.kind == RTS]
        if not carried_rts and not f.rts.any() and not flow.any():
            return np.zeros(len(entry), np.bool_)  # broadcast only (nearly every chunk)
        parts = [np.array(carried_rts, np.int64)]
        if flow.any():
            carried = np.fromiter(self._open, np.int64, len(self._open))
            announced = np.union1d(key[(f.bam | f.rts)[entry]], carried)
            parts.append(np.intersect1d(key[flow[entry]], announced))
        if f.rts.any() and f.packet.any():
            parts.append(np.intersect1d(key[f.rts[entry]], key[f.packet[entry]]))
        stepwise = np.unique(np.concatenate(parts))
        if not len(stepwise):
            return np.zeros(len(entry), np.bool_)
        return np.isin(key, stepwise)

    # -- broadcast sessions, all at once -----------------------------------------------------

    def _broadcast(self, f: _Rows, entry: I64, key: I64, done: _Done) -> None:
        """BAM announcements and packets (no flow control in these sessions), vectorised."""
        resumed: dict[int, _Open] = {}
        if self._open:  # sessions carried from the last chunk resume where their key is
            for k in np.unique(key).tolist():
                session = self._open.pop(k, None)
                if session is not None:
                    resumed[k] = session
        b = _Broadcast.of(f, entry, key, resumed)
        v = _Verdict.of(b)
        self.stats.aborted += v.refused + int(np.count_nonzero(v.lost))
        finished = _completed(b, v, resumed)
        if finished is not None:
            done.add(finished)
        self._carry(b, v, resumed)

    def _carry(self, b: _Broadcast, v: _Verdict, resumed: dict[int, _Open]) -> None:
        """Sessions still open at the end of the chunk: kept for the next one, at most
        `max_open` of them (those with the latest deadlines, as `_settle` keeps), so a flood
        of announcements that never finish builds nothing it will drop."""
        still = np.flatnonzero(v.still_open)
        if not len(still):
            return
        got = np.add.reduceat(v.accepted.astype(np.int64), v.first)[still]
        due = b.deadline[v.first[still] + got]
        if len(still) > self.max_open:
            kept = np.argpartition(-due, self.max_open)[: self.max_open]
            self.stats.aborted += len(still) - self.max_open
            still, got, due = still[kept], got[kept], due[kept]
        for s, n, deadline in zip(still.tolist(), got.tolist(), due.tolist(), strict=True):
            first = int(v.first[s])
            k = int(b.key[first])
            earlier = resumed[k].parts if b.kind[first] == _RESUME else bytearray()
            self._open[k] = _Open(
                RTS if b.rts[first] else BAM,
                int(b.pgn[first]),
                int(b.size[first]),
                int(b.count[first]),
                int(b.started[first]),
                deadline,
                earlier + bytearray(b.payload[first + 1 : first + 1 + n].tobytes()),
            )

    # -- sessions with flow control, frame by frame ----------------------------------------

    def _stepwise(self, f: _Rows, entry: I64, key: I64, done: _Done) -> None:
        """RTS/CTS sessions and aborts: TpReceiver's rules for a listener, per session key."""
        order = np.lexsort((f.rows[entry], key))
        entry, key = entry[order], key[order]
        kinds = np.select(
            [f.bam[entry], f.rts[entry], f.answer[entry], f.packet[entry]],
            [
                _F_BAM,
                _F_RTS,
                np.where(f.control[entry] == CTS, _F_CTS, _F_EOMA),
                _F_DT,
            ],
            _F_ABORT,
        ).tolist()
        times = f.t[entry].tolist()
        positions = f.rows[entry].tolist()
        heads = f.data[entry].tobytes()  # 8 bytes an entry: plain bytes index fastest
        payloads = f.payload[entry].tobytes()  # 7 bytes an entry
        keys = key.tolist()
        session: _Open | None = None
        current = -1
        for i, k in enumerate(keys):
            if k != current:
                if current >= 0:
                    self._keep(current, session)
                current, session = k, self._open.pop(k, None)
            t = times[i]
            if session is not None and t > session.deadline:
                self.stats.aborted += 1  # timed out
                session = None
            kind = kinds[i]
            head = heads[8 * i : 8 * i + 8]
            if kind in (_F_BAM, _F_RTS):
                if session is not None:
                    self.stats.aborted += 1  # replaced by a new announcement
                session = self._announced(kind, head, t)
            elif kind == _F_DT:
                if session is None:
                    continue
                session = self._packet(session, head[0], payloads[7 * i : 7 * i + 7], t)
                # a broadcast completes with its last packet; RTS/CTS when it is acknowledged
                if (
                    session is not None
                    and session.kind == BAM
                    and session.received == session.count
                ):
                    done.add(_one_message(session, t, k, positions[i]))
                    session = None
            elif session is None:
                continue
            elif kind == _F_CTS:
                if session.kind == RTS:
                    session.deadline = t + (_T2 if head[1] else _T4_T2)
            elif kind == _F_EOMA:
                if session.received == session.count:
                    done.add(_one_message(session, t, k, positions[i]))
                    session = None
            elif int.from_bytes(head[5:8], "little") == session.pgn:
                self.stats.aborted += 1  # aborted by one of the two nodes
                session = None
        if current >= 0:
            self._keep(current, session)

    def _announced(self, kind: int, head: bytes, t: int) -> _Open | None:
        announced = Announcement.of(head)  # as TpReceiver reads it
        if announced.problem() is not None:
            self.stats.aborted += 1  # refused
            return None
        pgn, size, count = announced.pgn, announced.size, announced.packets
        return _Open(BAM if kind == _F_BAM else RTS, pgn, size, count, t, t + _T1, bytearray())

    def _packet(self, session: _Open, seq: int, payload: bytes, t: int) -> _Open | None:
        if 1 <= seq <= session.received:
            if session.kind == RTS:  # a retransmission the receiver asked for
                session.parts[(seq - 1) * 7 : seq * 7] = payload
                return session
            self.stats.aborted += 1  # a packet sent twice
            return None
        if seq != session.received + 1 or seq > session.count:
            self.stats.aborted += 1  # out of sequence
            return None
        session.parts += payload
        session.deadline = t + _T1
        return session

    def _keep(self, key: int, session: _Open | None) -> None:
        if session is not None:
            self._open[key] = session

    # -- between chunks --------------------------------------------------------------------

    def _settle(self, chunk: FrameChunk) -> None:
        """Drop carried sessions whose deadline the chunk's frames have passed, then keep at
        most `max_open`."""
        if not self._open:
            return
        latest = int(chunk.timestamp_us.max())
        late = [k for k, s in self._open.items() if s.deadline < latest]
        for k in late:
            del self._open[k]
        self.stats.aborted += len(late)
        excess = len(self._open) - self.max_open
        if excess > 0:
            by_deadline = sorted(self._open, key=lambda k: self._open[k].deadline)
            for k in by_deadline[:excess]:
                del self._open[k]
            self.stats.aborted += excess
