"""The J1939-21 transport protocol, as pure state machines with the time passed in.

Messages of 9 to 1,785 bytes travel in up to 255 data packets (TP.DT, PGN 60160: a sequence
number, then 7 bytes), announced on TP.CM (PGN 60416) either to everyone (BAM: no answer,
packets at least 50 ms apart) or to one node (RTS/CTS: the receiver paces the sender with
clear-to-send, and acknowledges the end of the message).

`TpReceiver.feed` takes every frame a node hears and returns what happened: completed
messages, aborted sessions, and the frames the node owes as the receiver of an RTS to one
of its addresses (CTS, end-of-message acknowledgement, abort). Sessions between other nodes
are reassembled passively from what both sides send. Everything is bounded whatever the bus
sends: at most 1,785 bytes a session, one session per (source, destination) pair, at most
`max_sessions` at once (and, apart, at most `max_own_sessions` addressed to this node, so
that a flood of other nodes' announcements never crowds out an answer sent to us), and a
session that stops sending is dropped after the J1939-21
timeouts (T1 750 ms between packets, T2 1,250 ms after a CTS).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

from hwbridge.j1939.database.ids import GLOBAL, TP_CM_PGN, TP_DT_PGN, make_id, parse_id

__all__ = [
    "ABORT",
    "ABORT_REASONS",
    "BAM",
    "CTS",
    "EOMA",
    "MAX_HOLDS",
    "MAX_PACKETS",
    "MAX_RETRANSMITS",
    "MAX_SIZE",
    "RTS",
    "Aborted",
    "Announcement",
    "Completed",
    "Progress",
    "Reply",
    "SenderState",
    "TpEvent",
    "TpReceiver",
    "TpSender",
    "TxFrame",
    "abort_frame",
    "bam_frame",
    "cts_frame",
    "eoma_frame",
    "packets",
    "rts_frame",
]

RTS: Final = 16
CTS: Final = 17
EOMA: Final = 19
BAM: Final = 32
ABORT: Final = 255
MAX_SIZE: Final = 1785
MAX_PACKETS: Final = 255
T1: Final = 0.75  # receiver: time allowed between data packets
T2: Final = 1.25  # receiver: time allowed from a CTS to the first packet it clears
T3: Final = 1.25  # originator: time allowed from the last packet to a CTS or EoMA
T4: Final = 1.05  # originator: time allowed from a hold (CTS of 0 packets) to the next CTS
WINDOW: Final = 16  # packets cleared per CTS by our own receiver
MAX_RETRANSMITS: Final = 2  # CTS asking again for packets sent, before the originator aborts
MAX_HOLDS: Final = 16  # CTS of 0 packets in a row (about 8 s at Th, 500 ms) before it aborts
ABORT_REASONS: Final = {
    1: "already in a session and cannot support another",
    2: "system resources were needed for another task",
    3: "timeout",
    4: "CTS received while a data transfer was in progress",
    5: "maximum retransmit request limit reached",
    6: "unexpected data transfer packet",
    7: "bad sequence number",
    8: "duplicate sequence number",
    9: "message size greater than 1785 bytes",
}


def _pgn_bytes(pgn: int) -> bytes:
    return pgn.to_bytes(3, "little")


def packets(data: bytes) -> list[bytes]:
    """`data` as TP.DT payloads: sequence number 1.., 7 bytes each, the last padded 0xFF."""
    out = []
    for i in range(0, len(data), 7):
        chunk = data[i : i + 7]
        out.append(bytes([i // 7 + 1]) + chunk + b"\xff" * (7 - len(chunk)))
    return out


def _count(size: int) -> int:
    return (size + 6) // 7


class Announcement(NamedTuple):
    """A TP.CM BAM or RTS: the parameter group, its size in bytes and in packets, and (RTS)
    how many packets a CTS may clear at most (0xFF: no limit)."""

    pgn: int
    size: int
    packets: int
    max_per_cts: int

    @classmethod
    def of(cls, data: bytes) -> Announcement:
        return cls(int.from_bytes(data[5:8], "little"), data[1] | data[2] << 8, data[3], data[4])

    def problem(self) -> tuple[str, int] | None:
        """Why a receiver refuses it, with the abort reason it answers (None: it is sound)."""
        if not 0 < self.size <= MAX_SIZE:
            return f"announced {self.size} bytes (at most {MAX_SIZE})", 9
        if self.packets != _count(self.size):
            return f"announced {self.packets} packets for {self.size} bytes", 7
        return None


def bam_frame(pgn: int, size: int) -> bytes:
    n = _count(size)
    return bytes([BAM, size & 0xFF, size >> 8, n, 0xFF]) + _pgn_bytes(pgn)


def rts_frame(pgn: int, size: int, max_per_cts: int = 0xFF) -> bytes:
    n = _count(size)
    return bytes([RTS, size & 0xFF, size >> 8, n, max_per_cts]) + _pgn_bytes(pgn)


def cts_frame(pgn: int, count: int, next_packet: int) -> bytes:
    return bytes([CTS, count, next_packet, 0xFF, 0xFF]) + _pgn_bytes(pgn)


def eoma_frame(pgn: int, size: int) -> bytes:
    return bytes([EOMA, size & 0xFF, size >> 8, _count(size), 0xFF]) + _pgn_bytes(pgn)


def abort_frame(pgn: int, reason: int) -> bytes:
    return bytes([ABORT, reason, 0xFF, 0xFF, 0xFF]) + _pgn_bytes(pgn)


@dataclass(frozen=True, slots=True)
class Completed:
    """A whole multi-packet message."""

    pgn: int
    source: int
    destination: int  # GLOBAL for a BAM
    data: bytes
    started: float
    ended: float
    kind: Literal["bam", "rts"]


@dataclass(frozen=True, slots=True)
class Aborted:
    """A session that ended without its message, and why."""

    pgn: int
    source: int
    destination: int
    reason: str
    t: float


@dataclass(frozen=True, slots=True)
class Reply:
    """A TP.CM frame this node owes as the receiver of an RTS."""

    frame_id: int
    data: bytes


TpEvent = Completed | Aborted | Reply


@dataclass(slots=True)
class _Session:
    pgn: int
    source: int
    destination: int
    size: int
    count: int
    kind: Literal["bam", "rts"]
    ours: bool  # we are the destination: we pace it and acknowledge it
    started: float
    deadline: float
    max_per_cts: int = 0xFF
    parts: dict[int, bytes] = field(default_factory=dict)
    window_end: int = 0  # last sequence number the latest CTS cleared

    def data(self) -> bytes:
        return b"".join(self.parts[i] for i in range(1, self.count + 1))[: self.size]


class TpReceiver:
    """Reassembles every transport-protocol session a node hears; see the module docstring.

    `own` says whether an address is this node's (so an RTS to it gets CTS and EoMA from us);
    a pure observer passes nothing. `priority` is that of the TP.CM frames we send.
    """

    def __init__(
        self,
        own: Callable[[int], bool] | Collection[int] = (),
        *,
        max_sessions: int = 64,
        max_own_sessions: int = 8,
        priority: int = 7,
        window: int = WINDOW,
    ) -> None:
        if callable(own):
            self._own = own
        else:
            owned = frozenset(own)
            self._own = owned.__contains__
        self.max_sessions = max(1, max_sessions)
        self.max_own_sessions = max(1, max_own_sessions)
        self.priority = priority
        self.window = max(1, min(window, MAX_PACKETS))
        self._sessions: dict[tuple[int, int], _Session] = {}
        # no session is due before this (never later than the earliest deadline), so the
        # frames of a busy bus skip the scan of the sessions
        self._due = math.inf

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    def feed(self, frame_id: int, data: bytes, t: float) -> list[TpEvent]:
        """What the frame `frame_id`/`data`, heard at `t`, completes, aborts or asks of us."""
        events = self.expire(t)
        pgn = (frame_id >> 8) & 0x3FF00
        if pgn == TP_CM_PGN and len(data) >= 8:
            ident = parse_id(frame_id)
            self._control(ident.source, ident.destination, data, t, events)
        elif pgn == TP_DT_PGN and len(data) >= 2:
            ident = parse_id(frame_id)
            self._packet(ident.source, ident.destination, data, t, events)
        return events

    def expire(self, t: float) -> list[TpEvent]:
        """Sessions past their deadline, dropped (and aborted towards the sender if ours)."""
        events: list[TpEvent] = []
        if t <= self._due:
            return events
        for key in [k for k, s in self._sessions.items() if t > s.deadline]:
            session = self._sessions.pop(key)
            events.append(self._drop(session, "timeout", t))
            if session.ours:
                events.append(self._reply(session, abort_frame(session.pgn, 3)))
        self._due = min((s.deadline for s in self._sessions.values()), default=math.inf)
        return events

    def _arm(self, session: _Session, deadline: float) -> None:
        session.deadline = deadline
        self._due = min(self._due, deadline)

    # -- connection management ---------------------------------------------------------

    def _control(self, source: int, dest: int, data: bytes, t: float, out: list[TpEvent]) -> None:
        control = data[0]
        pgn = int.from_bytes(data[5:8], "little")
        if control in (BAM, RTS):
            if control == BAM and dest != GLOBAL:
                return  # a BAM is only ever broadcast
            self._announce(source, dest, data, t, out)
        elif control == CTS:
            # the receiver (source of the CTS) clears packets of the session it receives
            session = self._sessions.get((dest, source))
            if session is not None and not session.ours and session.kind == "rts":
                first, count = data[2], data[1]
                session.window_end = min(first + count - 1, session.count)
                self._arm(session, t + (T2 if count else T4 + T2))
        elif control == EOMA:
            session = self._sessions.get((dest, source))
            if session is not None and not session.ours and len(session.parts) == session.count:
                del self._sessions[(dest, source)]
                out.append(self._done(session, t))
        elif control == ABORT:
            for key in ((source, dest), (dest, source)):
                session = self._sessions.get(key)
                if session is not None and session.pgn == pgn:
                    del self._sessions[key]
                    reason = ABORT_REASONS.get(data[1], f"reason {data[1]}")
                    out.append(self._drop(session, f"aborted by the sender: {reason}", t))

    def _announce(self, source: int, dest: int, data: bytes, t: float, out: list[TpEvent]) -> None:
        control = data[0]
        announced = Announcement.of(data)
        pgn, size, count = announced.pgn, announced.size, announced.packets
        ours = control == RTS and self._own(dest)
        kind: Literal["bam", "rts"] = "bam" if control == BAM else "rts"
        key = (source, dest)
        old = self._sessions.pop(key, None)
        if old is not None:
            out.append(self._drop(old, "replaced by a new announcement", t))
        refused = announced.problem()
        if refused is None and (limit := self._limit(ours)) is not None:
            refused = f"more than {limit} sessions at once", 2
        if refused is not None:
            problem, reason = refused
            out.append(Aborted(pgn, source, dest, problem, t))
            if ours:
                out.append(Reply(self._cm_id(dest, source), abort_frame(pgn, reason)))
            return
        session = _Session(pgn, source, dest, size, count, kind, ours, t, t + T1)
        if kind == "rts":
            session.max_per_cts = announced.max_per_cts or 0xFF
        self._sessions[key] = session
        self._due = min(self._due, session.deadline)
        if ours:
            self._clear(session, 1, t, out)

    def _limit(self, ours: bool) -> int | None:
        """The bound a new session (ours: addressed to this node) would pass, or None."""
        own = sum(1 for s in self._sessions.values() if s.ours)
        if ours:
            return self.max_own_sessions if own >= self.max_own_sessions else None
        passive = len(self._sessions) - own
        return self.max_sessions if passive >= self.max_sessions else None

    def _clear(self, session: _Session, first: int, t: float, out: list[TpEvent]) -> None:
        count = min(self.window, session.max_per_cts, session.count - first + 1)
        session.window_end = first + count - 1
        self._arm(session, t + T2)
        out.append(self._reply(session, cts_frame(session.pgn, count, first)))

    # -- data ----------------------------------------------------------------------------

    def _packet(self, source: int, dest: int, data: bytes, t: float, out: list[TpEvent]) -> None:
        key = (source, dest)
        session = self._sessions.get(key)
        if session is None:
            return
        seq = data[0]
        expected = len(session.parts) + 1
        if seq in session.parts:
            if session.kind == "rts" and not session.ours:
                session.parts[seq] = bytes(data[1:8]).ljust(
                    7, b"\xff"
                )  # a retransmission asked for
                return
            self._fail(session, f"packet {seq} sent twice", 8, t, out)
            return
        if seq != expected or seq > session.count:
            self._fail(session, f"packet {seq} where {expected} was due", 7, t, out)
            return
        session.parts[seq] = bytes(data[1:8]).ljust(7, b"\xff")
        self._arm(session, t + T1)
        if len(session.parts) == session.count:
            if session.kind == "rts" and not session.ours:
                return  # complete when the receiver acknowledges it
            del self._sessions[key]
            out.append(self._done(session, t))
            if session.ours:
                out.append(self._reply(session, eoma_frame(session.pgn, session.size)))
        elif session.ours and seq == session.window_end:
            self._clear(session, seq + 1, t, out)

    def _fail(self, session: _Session, why: str, reason: int, t: float, out: list[TpEvent]) -> None:
        del self._sessions[(session.source, session.destination)]
        out.append(self._drop(session, why, t))
        if session.ours:
            out.append(self._reply(session, abort_frame(session.pgn, reason)))

    # -- results -------------------------------------------------------------------------

    def _done(self, session: _Session, t: float) -> Completed:
        return Completed(
            session.pgn,
            session.source,
            session.destination,
            session.data(),
            session.started,
            t,
            session.kind,
        )

    @staticmethod
    def _drop(session: _Session, why: str, t: float) -> Aborted:
        return Aborted(session.pgn, session.source, session.destination, why, t)

    def _cm_id(self, source: int, dest: int) -> int:
        return make_id(TP_CM_PGN, source, dest, self.priority)

    def _reply(self, session: _Session, data: bytes) -> Reply:
        return Reply(self._cm_id(session.destination, session.source), data)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(list(self._sessions))

    def in_progress(self) -> list[Progress]:
        """The sessions under way: what is coming, from whom, how far it got."""
        return [
            Progress(s.pgn, s.source, s.destination, len(s.parts) * 7, s.size, s.kind)
            for s in self._sessions.values()
        ]


@dataclass(frozen=True, slots=True)
class Progress:
    """A session under way."""

    pgn: int
    source: int
    destination: int
    received: int  # bytes so far (whole packets)
    size: int
    kind: Literal["bam", "rts"]


@dataclass(frozen=True, slots=True)
class TxFrame:
    """A frame an originator sends: a TP.CM announcement or abort, or a TP.DT packet."""

    frame_id: int
    data: bytes


SenderState = Literal["new", "sending", "waiting", "hold", "done", "aborted"]


class TpSender:
    """The originator of one message of 9 to 1,785 bytes, as a pure state machine.

    To `destination` GLOBAL it is a BAM: the announcement, then one packet every `bam_gap_s`
    (J1939-21: 50 to 200 ms). To one node it is RTS/CTS: the announcement, then the packets
    each CTS clears (a CTS of 0 packets holds the transfer: T4 1.05 s for the next CTS),
    then the receiver's end-of-message acknowledgement; no CTS or EoMA within T3 1.25 s
    of the last frame sent, or a CTS that makes no sense, aborts the session (the abort
    frame is returned to send). A receiver cannot keep the session going for ever: a CTS
    for packets already sent more than MAX_RETRANSMITS times (reason 5, retransmit limit)
    or more than MAX_HOLDS holds in a row abort it too. Call `start`, then `feed` with
    every TP.CM frame the destination sends to `source`, and `poll` at `next_at` (or
    sooner).
    """

    def __init__(
        self,
        pgn: int,
        data: bytes,
        source: int,
        destination: int,
        *,
        priority: int = 7,
        bam_gap_s: float = 0.05,
        max_per_cts: int = 0xFF,
        t3_s: float = T3,
        t4_s: float = T4,
    ) -> None:
        if not 8 < len(data) <= MAX_SIZE:
            raise ValueError(
                f"the transport protocol carries 9 to {MAX_SIZE} bytes, not {len(data)}"
            )
        if not 0.05 <= bam_gap_s <= 0.2:
            raise ValueError("J1939-21 puts 50 to 200 ms between the packets of a BAM")
        self.pgn = pgn
        self.data = bytes(data)
        self.source = source
        self.destination = destination
        self.kind: Literal["bam", "rts"] = "bam" if destination == GLOBAL else "rts"
        self.priority = priority
        self.bam_gap_s = bam_gap_s
        self.max_per_cts = max(1, min(max_per_cts, 0xFF))
        self.t3_s = t3_s
        self.t4_s = t4_s
        self.state: SenderState = "new"
        self.reason: str | None = None  # why it was aborted
        self.next_at: float | None = None  # when `poll` has something to do
        self.packets = packets(self.data)
        self.sent: set[int] = set()  # sequence numbers sent at least once
        self.retransmits = 0  # CTS that cleared packets sent before
        self.holds = 0  # CTS of 0 packets since the last that cleared any
        self._next_bam = 1

    @property
    def count(self) -> int:
        return len(self.packets)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "aborted")

    def _cm(self, data: bytes) -> TxFrame:
        return TxFrame(make_id(TP_CM_PGN, self.source, self.destination, self.priority), data)

    def _dt(self, seq: int) -> TxFrame:
        self.sent.add(seq)
        frame_id = make_id(TP_DT_PGN, self.source, self.destination, self.priority)
        return TxFrame(frame_id, self.packets[seq - 1])

    def _abort(self, why: str, reason: int | None) -> list[TxFrame]:
        self.state = "aborted"
        self.reason = why
        self.next_at = None
        if reason is None or self.kind == "bam":
            return []
        return [self._cm(abort_frame(self.pgn, reason))]

    def start(self, t: float) -> list[TxFrame]:
        """The announcement (BAM or RTS)."""
        if self.state != "new":
            return []
        size = len(self.data)
        if self.kind == "bam":
            self.state = "sending"
            self.next_at = t + self.bam_gap_s
            return [self._cm(bam_frame(self.pgn, size))]
        self.state = "waiting"
        self.next_at = t + self.t3_s
        return [self._cm(rts_frame(self.pgn, size, self.max_per_cts))]

    def feed(self, frame_id: int, data: bytes, t: float) -> list[TxFrame]:
        """What a frame from the destination asks of us (packets, or an abort)."""
        if self.kind == "bam" or self.finished or len(data) < 8:
            return []
        ident = parse_id(frame_id)
        if (
            ident.pgn != TP_CM_PGN
            or ident.source != self.destination
            or ident.destination != self.source
            or int.from_bytes(data[5:8], "little") != self.pgn
        ):
            return []
        control = data[0]
        if control == ABORT:
            why = ABORT_REASONS.get(data[1], f"reason {data[1]}")
            return self._abort(f"aborted by the receiver: {why}", None)
        if control == EOMA:
            if len(self.sent) < self.count:
                return self._abort("acknowledged before every packet was sent", 6)
            self.state = "done"
            self.next_at = None
            return []
        if control != CTS or self.state not in ("waiting", "hold"):
            return []
        count, first = data[1], data[2]
        if count == 0:
            self.holds += 1
            if self.holds > MAX_HOLDS:
                return self._abort(f"the receiver held the transfer {self.holds} times", 3)
            self.state = "hold"
            self.next_at = t + self.t4_s
            return []
        last = first + count - 1
        if not 1 <= first <= self.count or last > self.count or count > self.max_per_cts:
            return self._abort(f"CTS for packets {first}-{last} of {self.count}", 7)
        self.holds = 0
        if first in self.sent:
            self.retransmits += 1
            if self.retransmits > MAX_RETRANSMITS:
                return self._abort(
                    f"the receiver asked again for packets sent {self.retransmits} times", 5
                )
        self.state = "waiting"
        self.next_at = t + self.t3_s
        return [self._dt(seq) for seq in range(first, last + 1)]

    def poll(self, t: float) -> list[TxFrame]:
        """The next BAM packet when its time has come; an abort when the receiver is late."""
        if self.finished or self.next_at is None or t < self.next_at:
            return []
        if self.kind == "bam":
            frame = self._dt(self._next_bam)
            self._next_bam += 1
            if self._next_bam > self.count:
                self.state = "done"
                self.next_at = None
            else:
                self.next_at = t + self.bam_gap_s
            return [frame]
        waited = "T4 after a hold" if self.state == "hold" else "T3"
        return self._abort(f"timeout: the receiver did not answer within {waited}", 3)
