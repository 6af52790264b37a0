"""A hostile bus against J1939Link, on an in-memory adapter the test drives frame by frame:
floods of announcements and claims, receivers that never let a transfer end. Whatever the
bus does, what we send stays within the send policy's one frame budget and ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import can
from hwbridge.can.transport.adapter import (
    AdapterStatus,
    CanAdapter,
    FrameListener,
    PeriodicHandle,
)
from hwbridge.j1939 import J1939Name
from hwbridge.j1939.database.ids import (
    ADDRESS_CLAIMED_PGN,
    GLOBAL,
    TP_CM_PGN,
    make_id,
    parse_id,
)
from hwbridge.j1939.transport import tp
from hwbridge.j1939.transport.link import J1939Link
from hwbridge.policy import SendPolicy


class Wire(CanAdapter):
    """An adapter that records what is sent and delivers what the test injects."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes]] = []
        self.listeners: list[FrameListener] = []
        self.on_send: Callable[[int, bytes], None] | None = None
        self.lock = threading.Lock()

    def send(self, msg: can.Message, timeout_s: float | None = None) -> None:
        with self.lock:
            self.sent.append((int(msg.arbitration_id), bytes(msg.data)))
        if self.on_send is not None:
            self.on_send(int(msg.arbitration_id), bytes(msg.data))

    def add_listener(self, callback: FrameListener) -> None:
        self.listeners.append(callback)

    def remove_listener(self, callback: FrameListener) -> None:
        if callback in self.listeners:
            self.listeners.remove(callback)

    def send_periodic(self, *args: object, **kwargs: object) -> PeriodicHandle:
        raise NotImplementedError

    def status(self) -> AdapterStatus:
        return AdapterStatus(True, "wire", None, "active", 0, None, False, 0, 0, 0)

    def close(self) -> None:
        pass

    def inject(self, frame_id: int, data: bytes) -> None:
        msg = can.Message(arbitration_id=frame_id, data=data, is_extended_id=True)
        for callback in list(self.listeners):
            callback(msg)

    def frames(self, pgn: int) -> list[tuple[int, bytes]]:
        with self.lock:
            return [(i, d) for i, d in self.sent if parse_id(i).pgn == pgn]


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def open_link(wire: Wire) -> Iterator[Callable[..., J1939Link]]:
    links: list[J1939Link] = []

    def open_(policy: SendPolicy, **options: object) -> J1939Link:
        link = J1939Link(policy, claim_wait_s=0.01, **options)  # type: ignore[arg-type]
        link.attach(wire, own=False)
        links.append(link)
        return link

    yield open_
    for link in links:
        link.close()


def _spend_all(policy: SendPolicy) -> None:
    while not policy.take_frame():
        pass


def test_a_flood_of_rts_gets_no_cts_beyond_the_policys_frame_budget(
    wire: Wire, open_link: Callable[..., J1939Link]
) -> None:
    policy = SendPolicy(max_frames_per_second=2)
    link = open_link(policy)
    address = link.claim()
    _spend_all(policy)  # the tool's own sends took the budget
    before = len(wire.sent)
    for source in range(100):
        wire.inject(make_id(TP_CM_PGN, source, address, 7), tp.rts_frame(65260, 100))
    # the CTS and aborts owed share the one budget: nothing (or a token refilled meanwhile)
    assert len(wire.sent) - before <= 1
    assert link.describe()["replies_dropped"] >= 99


def test_a_contested_claim_that_cannot_be_sent_gives_the_address_up(
    wire: Wire, open_link: Callable[..., J1939Link]
) -> None:
    policy = SendPolicy(max_frames_per_second=1)
    link = open_link(policy)
    address = link.claim()
    _spend_all(policy)
    # a node with a higher NAME claims our address: we win, but our claim cannot go out
    higher = J1939Name(identity_number=5, function=200, arbitrary_address_capable=True)
    wire.inject(make_id(ADDRESS_CLAIMED_PGN, address, GLOBAL), higher.to_bytes())
    assert [d for i, d in wire.frames(ADDRESS_CLAIMED_PGN)] == [link.name.to_bytes()]
    # the other node believes it holds the address: we must not send from it
    assert link.address is None
    assert "could not be sent" in (link.describe()["claim_problem"] or "")


def test_a_receiver_that_asks_for_the_packets_again_and_again_is_aborted(
    wire: Wire, open_link: Callable[..., J1939Link]
) -> None:
    link = open_link(SendPolicy(allow_raw_frames=True, max_frames_per_second=1000), t3_s=0.2)
    address = link.claim()
    cts = make_id(TP_CM_PGN, 0, address, 7)
    sent = threading.Event()
    asked: list[int] = []

    def answer(frame_id: int, data: bytes) -> None:
        # every RTS and every last packet gets a CTS for the whole message again (the test
        # stops after 50: a sender without a limit would go on for as long as it is asked)
        ident = parse_id(frame_id)
        if sent.is_set() or ident.destination != 0 or len(asked) >= 50:
            return
        if (ident.pgn == TP_CM_PGN and data[0] == tp.RTS) or data[0] == 2:
            asked.append(1)
            threading.Thread(target=wire.inject, args=(cts, tp.cts_frame(65260, 2, 1))).start()

    wire.on_send = answer
    outcome = link.transmit(65260, bytes(14), 0)
    sent.set()
    assert not outcome.complete and "asked again" in (outcome.problem or "")
    # the first window and two retransmissions: 6 packets, then the abort (reason 5)
    assert len([d for i, d in wire.sent if parse_id(i).pgn == 0xEB00]) == 6
    assert wire.frames(TP_CM_PGN)[-1][1][:2] == bytes([tp.ABORT, 5])


def test_a_claim_differing_from_ours_only_in_the_reserved_bit_is_contested(
    wire: Wire, open_link: Callable[..., J1939Link]
) -> None:
    link = open_link(SendPolicy())
    address = link.claim()
    ours = link.name.to_bytes()
    impostor = (int.from_bytes(ours, "little") | 1 << 48).to_bytes(8, "little")
    wire.inject(make_id(ADDRESS_CLAIMED_PGN, address, GLOBAL), impostor)
    # a higher NAME than ours (bit 48 set), not our own claim heard back: we claim again
    assert [d for i, d in wire.frames(ADDRESS_CLAIMED_PGN)] == [ours, ours]
    assert link.address == address
