"""A scripted J1939 ECU on a python-can virtual bus, and drivers with short timeouts.

The peer answers requests from a script: single frames, BAM to everyone, or RTS/CTS to the
requester (it paces its own sends with `TpSender` and receives ours with `TpReceiver`),
NACKs, address claims; a test can also take over any frame with `on_frame`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import can
from hwbridge.j1939 import J1939Driver, J1939Name
from hwbridge.j1939.database.ids import (
    ACK_PGN,
    ADDRESS_CLAIMED_PGN,
    GLOBAL,
    REQUEST_PGN,
    TP_CM_PGN,
    make_id,
    parse_id,
)
from hwbridge.j1939.transport.tp import Completed, Reply, TpReceiver, TpSender
from hwbridge.policy import SendPolicy

pytestmark = pytest.mark.usefixtures("no_thread_leaks")

FAST = {"response_s": 0.25, "claim_wait_s": 0.05, "dm1_window_s": 0.3, "request_timeout_s": 1.0}
"""Driver timings for tests: J1939's own (1.25 s, 250 ms, 1.5 s) shortened."""


@dataclass
class Answer:
    """How the peer answers a request for one PGN: `data` (any length), or a NACK."""

    data: bytes = b""
    nack: bool = False
    via: str = "auto"  # auto (one frame, else BAM to global, RTS/CTS to one), bam, rts


@dataclass
class Peer:
    """An ECU at `address` on virtual channel `channel`."""

    channel: str
    address: int = 0
    name: J1939Name = field(default_factory=lambda: J1939Name(identity_number=7, function=0))
    answers: dict[int, Answer] = field(default_factory=dict)
    claim_on_request: bool = True
    on_frame: Callable[[Peer, can.Message], bool] | None = None  # True: handled
    received: list[can.Message] = field(default_factory=list)
    completed: list[Completed] = field(default_factory=list)
    sent: list[tuple[int, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.bus = can.Bus(interface="virtual", channel=self.channel)
        self.tp = TpReceiver([self.address])
        self.sending: TpSender | None = None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="j1939-test-peer", daemon=True)
        self.thread.start()

    def send(self, frame_id: int, data: bytes) -> None:
        self.bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=True))
        with self.lock:
            self.sent.append((frame_id, bytes(data)))

    def claim(self, address: int | None = None) -> None:
        self.send(
            make_id(ADDRESS_CLAIMED_PGN, self.address if address is None else address, GLOBAL),
            self.name.to_bytes(),
        )

    def frames(self, pgn: int | None = None) -> list[can.Message]:
        with self.lock:
            return [
                m for m in self.received if pgn is None or parse_id(m.arbitration_id).pgn == pgn
            ]

    def _run(self) -> None:
        while not self.stop.is_set():
            msg = self.bus.recv(0.01)
            now = time.monotonic()
            if self.sending is not None:
                for frame in self.sending.poll(now):
                    self.send(frame.frame_id, frame.data)
                if self.sending.finished:
                    self.sending = None
            if msg is None or not msg.is_extended_id:
                continue
            with self.lock:
                self.received.append(msg)
            if self.on_frame is not None and self.on_frame(self, msg):
                continue
            self._handle(msg, now)

    def _handle(self, msg: can.Message, now: float) -> None:
        ident = parse_id(msg.arbitration_id)
        data = bytes(msg.data)
        if ident.pgn == TP_CM_PGN and self.sending is not None:
            for frame in self.sending.feed(msg.arbitration_id, data, now):
                self.send(frame.frame_id, frame.data)
        for event in self.tp.feed(msg.arbitration_id, data, now):
            if isinstance(event, Reply):
                self.send(event.frame_id, event.data)
            elif isinstance(event, Completed):
                with self.lock:
                    self.completed.append(event)
        if ident.pgn != REQUEST_PGN or ident.destination not in (GLOBAL, self.address):
            return
        pgn = int.from_bytes(data[:3], "little")
        if pgn == ADDRESS_CLAIMED_PGN:
            if self.claim_on_request:
                self.claim()
            return
        answer = self.answers.get(pgn)
        if answer is None:
            return
        if answer.nack:
            nack = bytes([1, 0xFF, 0xFF, 0xFF, ident.source]) + pgn.to_bytes(3, "little")
            self.send(make_id(ACK_PGN, self.address, GLOBAL), nack)
            return
        self.answer(pgn, answer, ident.source if ident.destination != GLOBAL else GLOBAL, now)

    def answer(self, pgn: int, answer: Answer, to: int, now: float) -> None:
        data = answer.data
        if len(data) <= 8 and answer.via == "auto":
            self.send(make_id(pgn, self.address, to), data)
            return
        dest = GLOBAL if answer.via == "bam" or (answer.via == "auto" and to == GLOBAL) else to
        self.sending = TpSender(pgn, data, self.address, dest)
        for frame in self.sending.start(now):
            self.send(frame.frame_id, frame.data)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.bus.shutdown()


@pytest.fixture
def channel() -> str:
    return f"j1939-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def peer(channel: str) -> Iterator[Peer]:
    ecu = Peer(channel)
    yield ecu
    ecu.close()


Opener = Callable[..., J1939Driver]


@pytest.fixture
def open_driver(channel: str) -> Iterator[Opener]:
    """J1939Driver.from_can on the channel, with the test timings (overridable)."""
    opened: list[J1939Driver] = []

    def open_(policy: SendPolicy | None = None, **options: Any) -> J1939Driver:
        driver = J1939Driver.from_can(
            bus=f"virtual:{channel}", policy=policy, **{**FAST, **options}
        )
        opened.append(driver)
        return driver

    yield open_
    for driver in opened:
        driver.close()


def call(driver: J1939Driver, tool: str, **arguments: Any) -> Any:
    """A tool call through execute_tool (validated); ToolErrors raise."""
    return driver.execute_tool(tool, arguments)
