"""J1939Link: this node on a J1939 bus, over one CanAdapter (shared or owned).

It registers one listener with the adapter (whose single notifier may also feed a CanDriver
and an ObdDriver on the same connection) and keeps, bounded, what the tools read: the nodes
heard and the NAMEs they claimed, the latest payload of each parameter group per source
(single frames and transport-protocol messages alike, reassembled by `TpReceiver`), and the
acknowledgements. Before it sends anything it claims an address (`AddressClaimer`); then
it sends requests and waits for their answers (`request`), and sends messages of any length
(`transmit`: one frame, a BAM to everyone, or an RTS/CTS session to one node, `TpSender`).

Threads: the adapter's receive thread runs `on_frame`; the frames the protocol owes other
nodes at once (CTS, end-of-message acknowledgement, aborts, NACKs, our claim when asked for
it or contested) are sent from there. Everything a tool asks for (a claim, a request, a
message) is sent by the tool's thread. Both spend the policy's one frame budget
(`SendPolicy.take_frame`, shared with the CAN driver's sends): a flood of announcements or
requests from the bus cannot make us send more than `max_frames_per_second` in all. A frame
owed when the budget is spent is dropped (counted in `replies_dropped`); when it was our
address claim, we stop using that address rather than hold one the bus was not told of.
Time is `time.monotonic()` when a frame is handled, whatever the frame's timestamp.
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import can
from hwbridge.can.transport.adapter import BusSpec, CanAdapter, PythonCanAdapter, build_message
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import ToolError
from hwbridge.j1939.database.ids import (
    ACK_PGN,
    ADDRESS_CLAIMED_PGN,
    GLOBAL,
    MAX_PGN,
    NULL_ADDRESS,
    REQUEST_PGN,
    TP_CM_PGN,
    TP_DT_PGN,
    is_pdu1,
    make_id,
    parse_id,
)
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.transport.address import CLAIM_WAIT_S, AddressClaimer
from hwbridge.j1939.transport.tp import (
    T3,
    Aborted,
    Completed,
    Progress,
    Reply,
    TpReceiver,
    TpSender,
    TxFrame,
)
from hwbridge.policy import SendPolicy

__all__ = [
    "ACK_KINDS",
    "Ack",
    "Heard",
    "J1939Link",
    "RequestOutcome",
    "TransmitOutcome",
    "default_name",
    "group",
]

log = logging.getLogger(__name__)

ACK_KINDS = {0: "ack", 1: "nack", 2: "access_denied", 3: "cannot_respond"}
_PROTOCOL_PGNS = frozenset({ACK_PGN, REQUEST_PGN, TP_CM_PGN, TP_DT_PGN, ADDRESS_CLAIMED_PGN})
_TICK_S = 0.05  # how often a waiting thread lets stalled sessions time out
_MAX_PGNS_PER_NODE = 64
_MAX_CANNOT_CLAIM = 32
_SEND_WAIT_S = 1.0  # how long a protocol frame may wait for the frame budget


def group(pgn: int) -> int:
    """The PGN as frames carry it: a PDU1 group's PDU-specific byte is the destination,
    not part of the PGN (0xEF12 is PGN 0xEF00)."""
    return pgn & 0x3FF00 if is_pdu1(pgn) else pgn


def default_name(identity_number: int | None = None) -> J1939Name:
    """This tool's NAME: an off-board diagnostic-service tool (function 129) of the global
    industry group, arbitrary-address capable; a random identity number unless given."""
    return J1939Name(
        identity_number=secrets.randbits(21) if identity_number is None else identity_number,
        function=129,
        industry_group=0,
        arbitrary_address_capable=True,
    )


@dataclass(frozen=True, slots=True)
class Heard:
    """The latest payload of one parameter group from one source."""

    pgn: int
    source: int
    destination: int
    data: bytes
    t: float  # time.monotonic() when it was complete
    transport: Literal["frame", "bam", "rts"]


@dataclass(frozen=True, slots=True)
class Ack:
    """An Acknowledgment (PGN 59392) of a parameter group."""

    source: int
    control: int
    pgn: int
    group_function: int
    t: float

    @property
    def kind(self) -> str:
        return ACK_KINDS.get(self.control, f"control {self.control}")


@dataclass(slots=True)
class _Node:
    first: float
    last: float
    frames: int = 0
    pgns: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Waiter:
    pgn: int
    destination: int  # GLOBAL: anyone's answer
    since: float
    answers: dict[int, Heard] = field(default_factory=dict)
    acks: dict[int, Ack] = field(default_factory=dict)
    aborts: dict[int, str] = field(default_factory=dict)

    def wants(self, source: int) -> bool:
        return self.destination in (GLOBAL, source)


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What came back for a request (or, listening only, what was heard)."""

    pgn: int
    destination: int
    address: int | None  # ours, when it was sent
    sent: bool
    waited_s: float
    answers: dict[int, Heard]
    acks: dict[int, Ack]
    aborts: dict[int, str]
    cut: list[Progress]  # transfers still under way when the time ran out


@dataclass(frozen=True, slots=True)
class TransmitOutcome:
    """How a message went out: one frame, a BAM or an RTS/CTS session."""

    pgn: int
    destination: int
    address: int
    transport: Literal["frame", "bam", "rts"]
    size: int
    packets: int
    complete: bool
    problem: str | None = None


@dataclass(slots=True)
class _Outgoing:
    sender: TpSender
    outbox: collections.deque[TxFrame] = field(default_factory=collections.deque)


class J1939Link(Closing):
    """One J1939 node on a CanAdapter; see the module docstring.

    `name` is this node's NAME (default: `default_name()`), `address` the address it
    prefers (249, off-board diagnostic-service tool #1). `response_s` is how long a request
    waits for answers when no transfer is under way (J1939-21's T3, 1.25 s); `claim_wait_s`
    how long a claim must stand uncontested (250 ms); `bam_gap_s` the time between the
    packets of a BAM we send (50 ms), `t3_s` how long our RTS/CTS session waits for the
    receiver (T3, 1.25 s). Tests shorten them.
    """

    def __init__(
        self,
        policy: SendPolicy | None = None,
        *,
        name: J1939Name | None = None,
        address: int = 249,
        response_s: float = 1.25,
        claim_wait_s: float = CLAIM_WAIT_S,
        bam_gap_s: float = 0.05,
        t3_s: float = T3,
        max_latest: int = 2048,
    ) -> None:
        if not 0 <= address <= 253:
            raise ValueError(f"address must be 0..253, not {address}")
        self.policy = policy or SendPolicy()
        self.name = name or default_name()
        self.response_s = response_s
        self.bam_gap_s = bam_gap_s
        self.t3_s = t3_s
        self._max_latest = max(16, max_latest)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._send_lock = threading.Lock()
        self._claim_lock = threading.Lock()
        self._claimer = AddressClaimer(self.name, address, wait_s=claim_wait_s)
        self._tp = TpReceiver(self._claimer.owns)
        self._nodes: dict[int, _Node] = {}
        self._claims: dict[int, tuple[J1939Name, float]] = {}
        self._cannot_claim: dict[int, tuple[J1939Name, float]] = {}
        self._latest: collections.OrderedDict[tuple[int, int], Heard] = collections.OrderedDict()
        self._waiters: list[_Waiter] = []
        self._outgoing: dict[int, _Outgoing] = {}
        self._adapter: CanAdapter | None = None
        self._own_adapter = False
        self._listening_since = time.monotonic()
        self._read_only: str | None = None
        self._last_error: str | None = None
        self._frames = 0
        self._replies_dropped = 0
        self._sent = 0
        self._closed = False

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls, bus: BusSpec | CanAdapter, policy: SendPolicy | None = None, **kwargs: Any
    ) -> J1939Link:
        """A link on `bus`: a CanAdapter to share, a `replay:` capture, or anything
        `PythonCanAdapter` opens (the link's listener is there before the first frame)."""
        from hwbridge.can.transport.bus_url import is_replay_url
        from hwbridge.can.transport.replay import ReplayAdapter

        link = cls(policy, **kwargs)
        if isinstance(bus, CanAdapter):
            link.attach(bus, own=False)
        elif is_replay_url(bus):
            link.attach(
                ReplayAdapter.from_url(bus, listeners=[link.on_frame]), own=True, listening=True
            )
        else:
            link.attach(PythonCanAdapter(bus, listeners=[link.on_frame]), own=True, listening=True)
        return link

    def attach(self, adapter: CanAdapter, *, own: bool, listening: bool = False) -> None:
        """Listen to `adapter` (unless `listening`: it calls `on_frame` already); `own`
        closes it with the link."""
        if self._adapter is not None:
            raise RuntimeError("this link is attached to a bus already")
        self._adapter = adapter
        self._own_adapter = own
        self._listening_since = time.monotonic()
        if not listening:
            adapter.add_listener(self.on_frame)

    @property
    def adapter(self) -> CanAdapter:
        if self._adapter is None:
            raise ToolError("BUS_DOWN", "The J1939 link is not attached to a bus.")
        return self._adapter

    @property
    def listening_since(self) -> float:
        return self._listening_since

    # -- the listener (the adapter's receive thread) -------------------------------------

    def on_frame(self, msg: can.Message) -> None:
        if not msg.is_extended_id or msg.is_error_frame or msg.is_remote_frame:
            return
        owed: list[TxFrame] = []
        with self._lock:
            if self._closed:
                return
            self._hear(int(msg.arbitration_id), bytes(msg.data), time.monotonic(), owed)
        if owed:
            self._send_owed(owed)

    def _hear(self, frame_id: int, data: bytes, t: float, owed: list[TxFrame]) -> None:
        """One frame into the state (lock held); frames we owe go to `owed`."""
        self._frames += 1
        ident = parse_id(frame_id)
        source, pgn, dest = ident.source, ident.pgn, ident.destination
        if source < NULL_ADDRESS:
            node = self._nodes.get(source)
            if node is None:
                node = self._nodes[source] = _Node(t, t)
            node.last = t
            node.frames += 1
            if pgn in node.pgns or len(node.pgns) < _MAX_PGNS_PER_NODE:
                node.pgns[pgn] = node.pgns.get(pgn, 0) + 1
        for event in self._tp.feed(frame_id, data, t):
            if isinstance(event, Completed):
                if event.pgn > MAX_PGN:  # an announcement naming no parameter group
                    continue
                self._store(
                    Heard(event.pgn, event.source, event.destination, event.data, t, event.kind)
                )
            elif isinstance(event, Aborted):
                self._aborted(event)
            elif isinstance(event, Reply):
                owed.append(TxFrame(event.frame_id, event.data))
        if pgn == TP_CM_PGN:
            outgoing = self._outgoing.get(source)
            if outgoing is not None and dest == outgoing.sender.source:
                frames = outgoing.sender.feed(frame_id, data, t)
                outgoing.outbox.extend(frames)
                self._changed.notify_all()
            return
        if pgn == TP_DT_PGN:
            return
        if pgn == ADDRESS_CLAIMED_PGN:
            if len(data) >= 8:
                self._claimed(source, J1939Name.from_bytes(data), t, owed)
            return
        if pgn == REQUEST_PGN:
            if len(data) >= 3:
                self._requested(source, dest, int.from_bytes(data[:3], "little"), owed)
            return
        if pgn == ACK_PGN:
            # to us, or to everyone naming us (byte 5; 0xFF from ECUs before J1939-21 2006)
            ours = self._claimer.address
            if len(data) >= 8 and dest in (GLOBAL, ours) and data[4] in (0xFF, ours):
                self._acknowledged(source, data, t)
            return
        if source < NULL_ADDRESS:
            self._store(Heard(pgn, source, dest, data, t, "frame"))

    def _store(self, heard: Heard) -> None:
        key = (heard.pgn, heard.source)
        self._latest.pop(key, None)
        self._latest[key] = heard
        if len(self._latest) > self._max_latest:
            self._latest.popitem(last=False)
        woke = False
        for waiter in self._waiters:
            if waiter.pgn == heard.pgn and waiter.wants(heard.source):
                waiter.answers.setdefault(heard.source, heard)
                woke = True
        if woke:
            self._changed.notify_all()

    def _aborted(self, event: Aborted) -> None:
        woke = False
        for waiter in self._waiters:
            if waiter.pgn == event.pgn and waiter.wants(event.source):
                waiter.aborts.setdefault(event.source, event.reason)
                woke = True
        if woke:
            self._changed.notify_all()

    def _claimed(self, source: int, name: J1939Name, t: float, owed: list[TxFrame]) -> None:
        if source == NULL_ADDRESS:
            key = name.to_int()
            self._cannot_claim.pop(key, None)
            if len(self._cannot_claim) < _MAX_CANNOT_CLAIM:
                self._cannot_claim[key] = (name, t)
            return
        if source > NULL_ADDRESS:
            return
        if name != self.name:
            for address, (other, _) in list(self._claims.items()):
                if other == name and address != source:
                    del self._claims[address]  # the node moved
            self._claims[source] = (name, t)
        owed.extend(self._claimer.on_claim(source, name, t, self._taken))
        self._changed.notify_all()

    def _requested(self, source: int, dest: int, pgn: int, owed: list[TxFrame]) -> None:
        if pgn == ADDRESS_CLAIMED_PGN:
            owed.extend(self._claimer.on_request(dest))
        elif dest != GLOBAL and self._claimer.owns(dest) and source < NULL_ADDRESS:
            # J1939-21: a request to us for a group we do not send gets a NACK
            nack = bytes([1, 0xFF, 0xFF, 0xFF, source]) + pgn.to_bytes(3, "little")
            owed.append(TxFrame(make_id(ACK_PGN, dest, source, 6), nack))

    def _acknowledged(self, source: int, data: bytes, t: float) -> None:
        ack = Ack(source, data[0], int.from_bytes(data[5:8], "little"), data[1], t)
        woke = False
        for waiter in self._waiters:
            if waiter.pgn == ack.pgn and waiter.wants(source):
                waiter.acks.setdefault(source, ack)
                woke = True
        if woke:
            self._changed.notify_all()

    def _taken(self, address: int) -> bool:
        """Another node is known at `address` (lock held)."""
        claim = self._claims.get(address)
        if claim is not None and claim[0] != self.name:
            return True
        return address in self._nodes and not self._claimer.owns(address)

    # -- sending -------------------------------------------------------------------------

    def _send(self, frame: TxFrame) -> None:
        """One frame onto the bus; ToolError when it cannot go (a replay: read-only)."""
        message = build_message(frame.frame_id, frame.data, extended=True, fd=False)
        try:
            with self._send_lock:
                self.adapter.send(message)
        except ToolError as exc:
            self._last_error = exc.message
            if exc.code == "READ_ONLY_BUS":
                self._read_only = exc.message
            raise
        self._sent += 1

    def _send_owed(self, frames: Iterable[TxFrame]) -> None:
        """Frames the protocol owes, each within the policy's frame budget (never waiting:
        this is the receive thread); one that cannot go is dropped."""
        for frame in frames:
            if self.policy.take_frame():
                self._replies_dropped += 1
                self._unsent(frame, "the send policy's frame budget was spent")
                continue
            try:
                self._send(frame)
            except ToolError as exc:
                log.debug("J1939: could not send a frame the protocol owes: %s", exc.message)
                self._unsent(frame, exc.message)

    def _unsent(self, frame: TxFrame, why: str) -> None:
        """A frame owed could not go out: when it was our address claim (an answer to a
        contest or a request), the bus may believe the address free or another node's; we
        give it up rather than send from it."""
        ident = parse_id(frame.frame_id)
        if ident.pgn != ADDRESS_CLAIMED_PGN or ident.source >= NULL_ADDRESS:
            return
        with self._lock:
            if self._claimer.owns(ident.source):
                self._claimer.reset(f"our claim of address {ident.source} could not be sent: {why}")
                self._changed.notify_all()

    def _spend(self, wait_up_to_s: float) -> None:
        """One frame of the policy's budget, waiting up to `wait_up_to_s` for it."""
        end = time.monotonic() + wait_up_to_s
        while True:
            wait = self.policy.take_frame()
            if not wait:
                return
            if time.monotonic() + wait > end:
                rate = self.policy.max_frames_per_second
                raise ToolError(
                    "RATE_LIMITED",
                    f"The send policy allows {rate:g} frames per second on this bus and they "
                    f"are spent; try again in {min(max(wait, 0.001), 60):.3f} s.",
                    retryable=True,
                )
            time.sleep(wait)

    @property
    def preferred_address(self) -> int:
        return self._claimer.preferred

    @property
    def read_only(self) -> str | None:
        """Why nothing can be sent on this bus (a replay), or None."""
        return self._read_only

    @property
    def address(self) -> int | None:
        """Our address while the claim holds."""
        with self._lock:
            self._claimer.poll(time.monotonic())
            return self._claimer.holds

    def claim(self) -> int:
        """Our address, claimed first when it is not yet: ToolError NO_ADDRESS when no
        address can be had, READ_ONLY_BUS when the bus takes no frame."""
        if self._read_only is not None:
            raise ToolError("READ_ONLY_BUS", self._read_only)
        with self._claim_lock:
            with self._lock:
                now = time.monotonic()
                self._claimer.poll(now)
                if self._claimer.holds is not None:
                    return self._claimer.holds
                frames = self._claimer.start(now, self._taken)
                if not frames:
                    raise self._no_address()
            try:
                for frame in frames:
                    self._spend(_SEND_WAIT_S)
                    self._send(frame)
            except ToolError as exc:
                with self._lock:
                    self._claimer.reset(exc.message)
                raise
            end = time.monotonic() + 8 * self._claimer.wait_s + 1.0
            with self._lock:
                while True:
                    now = time.monotonic()
                    self._claimer.poll(now)
                    if self._claimer.holds is not None:
                        return self._claimer.holds
                    if self._claimer.state != "claiming":
                        raise self._no_address()
                    if now >= end:
                        self._claimer.reset("the claim was contested for too long")
                        raise self._no_address()
                    self._changed.wait(max(0.0, min(self._claimer.deadline, end) - now) + 0.001)

    def _no_address(self) -> ToolError:
        why = self._claimer.why or "the address claim did not hold"
        return ToolError(
            "NO_ADDRESS",
            f"This tool could not claim a J1939 address ({why}); it sends nothing without one.",
            retryable=True,
        )

    def _watch(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.append(waiter)

    def _unwatch(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _tick(self, now: float) -> None:
        """Let stalled sessions time out (and send the aborts we owe); lock held."""
        owed: list[TxFrame] = []
        for event in self._tp.expire(now):
            if isinstance(event, Aborted):
                self._aborted(event)
            elif isinstance(event, Reply):
                owed.append(TxFrame(event.frame_id, event.data))
        if owed:
            self._lock.release()
            try:
                self._send_owed(owed)
            finally:
                self._lock.acquire()

    def request(
        self,
        pgn: int,
        destination: int = GLOBAL,
        *,
        timeout_s: float = 2.0,
        window_s: float | None = None,
    ) -> RequestOutcome:
        """Send a Request for `pgn` to `destination` (GLOBAL: everyone) and collect the
        answers: from the destination, its answer, acknowledgement or abort ends the wait;
        otherwise the wait ends `window_s` (default `response_s`) after the request when no
        transfer of `pgn` is under way, and at `timeout_s` in any case."""
        if not 0 <= pgn <= 0x3FFFF:
            raise ToolError("INVALID_VALUE", f"A PGN is 0..262143, not {pgn}.")
        pgn = group(pgn)
        address = self.claim()
        self._spend(0.0)  # a flood of tool calls is refused here, not sent
        waiter = _Waiter(pgn, destination, time.monotonic())
        self._watch(waiter)
        try:
            frame = TxFrame(
                make_id(REQUEST_PGN, address, destination, 6), pgn.to_bytes(3, "little")
            )
            self._send(frame)
            return self._collect(waiter, address, True, timeout_s, window_s)
        finally:
            self._unwatch(waiter)

    def listen(
        self, pgn: int, *, timeout_s: float, source: int = GLOBAL, until_first: bool = False
    ) -> RequestOutcome:
        """Collect what is heard of `pgn` (from `source`, or anyone) for `timeout_s`; with
        `until_first`, stop at the first complete message."""
        waiter = _Waiter(group(pgn), source, time.monotonic())
        self._watch(waiter)
        try:
            return self._collect(waiter, None, False, timeout_s, timeout_s, until_first=until_first)
        finally:
            self._unwatch(waiter)

    def _busy(self, waiter: _Waiter) -> list[Progress]:
        """Transfers of the waiter's group under way from a source it waits for (lock held)."""
        return [
            p
            for p in self._tp.in_progress()
            if p.pgn == waiter.pgn and waiter.wants(p.source) and p.source not in waiter.answers
        ]

    def _collect(
        self,
        waiter: _Waiter,
        address: int | None,
        sent: bool,
        timeout_s: float,
        window_s: float | None,
        *,
        until_first: bool = False,
    ) -> RequestOutcome:
        start = waiter.since
        end = start + max(0.0, timeout_s)
        window_end = min(start + (self.response_s if window_s is None else window_s), end)
        specific = waiter.destination != GLOBAL
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                self._tick(now)
                source = waiter.destination
                if specific and (
                    source in waiter.answers or source in waiter.acks or source in waiter.aborts
                ):
                    break
                if until_first and waiter.answers:
                    break
                busy = self._busy(waiter)
                if now >= end or (now >= window_end and not busy):
                    break
                limit = end if busy else window_end
                self._changed.wait(max(0.0, min(limit - now, _TICK_S)))
            return RequestOutcome(
                waiter.pgn,
                waiter.destination,
                address,
                sent,
                round(time.monotonic() - start, 3),
                dict(waiter.answers),
                dict(waiter.acks),
                dict(waiter.aborts),
                self._busy(waiter),
            )

    def transmit(
        self,
        pgn: int,
        data: bytes,
        destination: int = GLOBAL,
        *,
        priority: int = 6,
        source: int | None = None,
    ) -> TransmitOutcome:
        """Send `data` as parameter group `pgn`: one frame up to 8 bytes, else a BAM (to
        GLOBAL) or an RTS/CTS session (to one node). The caller has the policy's judgement
        of frames from `source` (when given, NO_ADDRESS and nothing sent if our claim ends
        at another address); every frame spends the policy's frame budget (the packets
        wait for it)."""
        if not 0 <= pgn <= 0x3FFFF:
            raise ToolError("INVALID_VALUE", f"A PGN is 0..262143, not {pgn}.")
        address = self.claim()
        if source is not None and address != source:
            raise ToolError(
                "NO_ADDRESS",
                f"This tool's address claim ended at {address}, not {source}, the address "
                "the send policy judged the frames from; nothing was sent. Call again to "
                "send from it.",
                retryable=True,
            )
        if len(data) <= 8:
            self._spend(0.0)
            self._send(TxFrame(make_id(pgn, address, destination, priority), bytes(data)))
            return TransmitOutcome(pgn, destination, address, "frame", len(data), 1, True)
        try:
            sender = TpSender(  # TP.CM names a PDU1 group without its destination byte
                group(pgn), data, address, destination, bam_gap_s=self.bam_gap_s, t3_s=self.t3_s
            )
        except ValueError as exc:
            raise ToolError("INVALID_VALUE", f"{exc}.") from None
        outgoing = _Outgoing(sender)
        with self._lock:
            if destination in self._outgoing:
                raise ToolError(
                    "BUSY",
                    f"A transfer to address {destination} is under way; J1939 allows one "
                    "at a time.",
                    retryable=True,
                )
            self._outgoing[destination] = outgoing
        try:
            return self._run_session(outgoing, address)
        finally:
            with self._lock:
                self._outgoing.pop(destination, None)

    def _run_session(self, outgoing: _Outgoing, address: int) -> TransmitOutcome:
        sender = outgoing.sender
        with self._lock:
            frames = sender.start(time.monotonic())
        self._spend(0.0)
        self._send(frames[0])
        self._keep_bam_gap(sender)
        while True:
            with self._lock:
                now = time.monotonic()
                frames = list(outgoing.outbox)
                outgoing.outbox.clear()
                frames += sender.poll(now)
                if not frames:
                    if sender.finished:
                        break
                    wait = (sender.next_at or now + _TICK_S) - now
                    self._changed.wait(max(0.0, min(wait, _TICK_S)))
                    continue
            for frame in frames:
                try:
                    self._spend(_SEND_WAIT_S)
                    self._send(frame)
                except ToolError as exc:
                    with self._lock:
                        sender.state = "aborted"
                        sender.reason = f"a frame could not be sent: {exc.message}"
                    break
            with self._lock:
                if sender.state == "waiting":
                    sender.next_at = time.monotonic() + sender.t3_s  # T3 from the last packet
            self._keep_bam_gap(sender)
        return TransmitOutcome(
            sender.pgn,
            sender.destination,
            address,
            sender.kind,
            len(sender.data),
            sender.count,
            sender.state == "done",
            sender.reason,
        )

    def _keep_bam_gap(self, sender: TpSender) -> None:
        """A BAM's next packet `bam_gap_s` after this one really went out: the gap counted
        from when the thread woke let a packet the budget or the scheduler held back be
        followed by the next one 38 ms later (a loaded run), under J1939-21's 50 ms."""
        with self._lock:
            if sender.kind == "bam" and sender.next_at is not None:
                sender.next_at = max(sender.next_at, time.monotonic() + sender.bam_gap_s)

    # -- what was heard ------------------------------------------------------------------

    def heard(self, pgn: int) -> dict[int, Heard]:
        """The latest payload of `pgn` per source."""
        pgn = group(pgn)
        with self._lock:
            return {s: h for (p, s), h in self._latest.items() if p == pgn}

    def nodes(self) -> dict[str, Any]:
        """A snapshot: who was heard (first, last, frames, groups), who claimed what."""
        with self._lock:
            return {
                "nodes": {
                    a: (n.first, n.last, n.frames, dict(n.pgns)) for a, n in self._nodes.items()
                },
                "claims": dict(self._claims),
                "cannot_claim": [n for n, _ in self._cannot_claim.values()],
            }

    def in_progress(self) -> list[Progress]:
        with self._lock:
            return self._tp.in_progress()

    def wait(self, seconds: float, stop: Callable[[], bool] | None = None) -> None:
        """Sleep up to `seconds` while frames keep being handled (`stop` ends it early)."""
        end = time.monotonic() + seconds
        with self._lock:
            while True:
                now = time.monotonic()
                self._tick(now)
                if now >= end or (stop is not None and stop()):
                    return
                self._changed.wait(min(end - now, _TICK_S))

    def describe(self) -> dict[str, Any]:
        adapter = self._adapter
        status = adapter.status() if adapter is not None else None
        with self._lock:
            self._claimer.poll(time.monotonic())
            claim = self._claimer
            return {
                "transport": "SAE J1939 (hwbridge.j1939)",
                "bus": status.bus if status is not None else None,
                "connected": bool(status and status.connected) and not self._closed,
                "address": claim.holds,
                "claim": claim.state,
                "claim_problem": claim.why,
                "name": f"0x{self.name.to_int():016X}",
                "read_only": self._read_only,
                "nodes_heard": len(self._nodes),
                "frames_heard": self._frames,
                "frames_sent": self._sent,
                "sessions": self._tp.sessions,
                "replies_dropped": self._replies_dropped,
                "last_error": self._last_error or (status.last_error if status else None),
            }

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        adapter = self._adapter
        if adapter is None:
            return
        adapter.remove_listener(self.on_frame)
        if self._own_adapter:
            adapter.close()
