"""The transport protocol of SAE J1939-21 as the simulated controllers send with it.

A parameter group longer than 8 bytes (9 to 1785) travels in packets of 7 bytes, each a
TP.DT frame (PGN 60160) whose first byte is its sequence number 1..n, the last one padded
with 0xFF. Connection management (TP.CM, PGN 60416) announces it:

- to everyone (destination 0xFF) with a BAM: `20 size_lo size_hi n FF pgn(3)`, then the
  packets at least 50 ms apart (J1939-21 asks 50 to 200 ms of a sender; here `bam_gap_s`);
- to one node with RTS/CTS, the simulator being the originator: `TP.CM_RTS`
  (`10 size_lo size_hi n FF pgn(3)`: no limit of packets per CTS) to the receiver, which
  answers `TP.CM_CTS` (`11 count next FF FF pgn(3)`): the packets `next` .. `next+count-1`
  go out, then the originator waits for the next CTS or for `TP.CM_EndOfMsgAck`
  (`13 ...`). A CTS with count 0 holds the connection. Either side ends it with
  `TP.Conn_Abort` (`FF reason FF FF FF pgn(3)`).

Timeouts (J1939-21): T1 750 ms and T2 1250 ms are a receiver's (between packets, after its
CTS); the simulator receives no multi-packet messages, so it never waits for them. As an
originator it waits T3 1250 ms after its RTS or the last packet of a block for a CTS or the
EndOfMsgAck, and T4 1050 ms after a CTS(0) for the CTS that resumes; either one passing
sends TP.Conn_Abort with reason 3 (timeout) and ends the session.

One BAM per source address and one RTS/CTS session per (source, destination) pair run at
a time (J1939-21); more are queued and start when the current one ends. This module is
written from J1939-21 for the simulator alone: it shares nothing with `hwbridge.j1939`, so
the two can witness each other.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

import can
from firmware_sim.j1939.ids import GLOBAL, PGN_TP_CM, PGN_TP_DT, frame
from firmware_sim.j1939.scheduler import Timer, Timers

__all__ = [
    "BAM_GAP_S",
    "MAX_SIZE",
    "T1_S",
    "T2_S",
    "T3_S",
    "T4_S",
    "AbortReason",
    "Control",
    "Transport",
    "packets",
]

log = logging.getLogger(__name__)

T1_S: Final = 0.750
"""Receiver: longest wait between two TP.DT packets."""
T2_S: Final = 1.250
"""Receiver: longest wait for a TP.DT after sending a CTS."""
T3_S: Final = 1.250
"""Originator: longest wait for a CTS or EndOfMsgAck after the RTS or a block's last packet."""
T4_S: Final = 1.050
"""Originator: longest wait for the next CTS after a CTS(0) that holds the connection."""
BAM_GAP_S: Final = 0.055
"""Between two packets of a BAM (J1939-21: 50 to 200 ms); a little over 50 ms, so that
scheduling jitter never brings two packets closer than 50 ms."""
MAX_SIZE: Final = 1785  # 255 packets of 7 bytes
_PRIORITY: Final = 7  # J1939-21's default priority for TP.CM and TP.DT
_QUEUE_LIMIT: Final = 16  # transfers waiting per sender (or pair); more are dropped


class Control(IntEnum):
    """The control byte of TP.CM."""

    RTS = 16
    CTS = 17
    END_OF_MSG_ACK = 19
    BAM = 32
    ABORT = 255


class AbortReason(IntEnum):
    """TP.Conn_Abort reasons of J1939-21 the simulator sends or recognises."""

    BUSY = 1  # already in a session, cannot start another
    RESOURCES = 2  # resources needed elsewhere: the answer to an RTS (nothing here takes one)
    TIMEOUT = 3


def packets(data: bytes) -> list[bytes]:
    """The TP.DT payloads of `data`: sequence number, 7 bytes, the last padded with 0xFF."""
    out = []
    for index in range(0, len(data), 7):
        chunk = data[index : index + 7]
        out.append(bytes([index // 7 + 1]) + chunk + b"\xff" * (7 - len(chunk)))
    return out


def _pgn_bytes(pgn: int) -> bytes:
    return pgn.to_bytes(3, "little")


@dataclass
class _Transfer:
    sa: int
    da: int  # GLOBAL for a BAM
    pgn: int
    data: bytes
    packets: list[bytes] = field(init=False)
    next_packet: int = 1  # BAM: the next to send
    holding: bool = False
    timer: Timer | None = None

    def __post_init__(self) -> None:
        self.packets = packets(self.data)

    @property
    def size(self) -> bytes:
        return len(self.data).to_bytes(2, "little")


class Transport:
    """Sends long parameter groups for the simulated controllers.

    `send` puts one frame on the bus (it must not raise); `timers` schedules the packets and
    the timeouts. Frames addressed to one of the controllers' TP.CM go to `on_cm`.
    """

    def __init__(
        self,
        send: Callable[[can.Message], None],
        timers: Timers,
        *,
        bam_gap_s: float = BAM_GAP_S,
    ) -> None:
        if bam_gap_s < 0.050:
            raise ValueError("J1939-21: at least 50 ms between the packets of a BAM")
        self._send = send
        self._timers = timers
        self._bam_gap_s = bam_gap_s
        self._lock = threading.RLock()
        self._bams: dict[int, _Transfer] = {}
        self._bam_queue: dict[int, deque[_Transfer]] = {}
        self._sessions: dict[tuple[int, int], _Transfer] = {}
        self._session_queue: dict[tuple[int, int], deque[_Transfer]] = {}
        self._stopped = False
        self.counts: dict[str, int] = dict.fromkeys(
            ("bam", "rts_cts", "aborts_sent", "aborts_received", "dropped"), 0
        )

    # -- starting transfers -----------------------------------------------------------

    def broadcast(self, sa: int, pgn: int, data: bytes) -> None:
        """Send `data` (9-1785 bytes) to everyone with a BAM from source address `sa`."""
        transfer = _Transfer(sa, GLOBAL, pgn, bytes(_check_size(data)))
        with self._lock:
            if self._stopped:
                return
            if sa in self._bams:
                self._enqueue(self._bam_queue.setdefault(sa, deque()), transfer)
            else:
                self._start_bam(transfer)

    def send_to(self, sa: int, da: int, pgn: int, data: bytes) -> None:
        """Send `data` (9-1785 bytes) from `sa` to `da` with RTS/CTS."""
        if da == GLOBAL:
            raise ValueError("RTS/CTS goes to one destination; use broadcast for 0xFF")
        transfer = _Transfer(sa, da, pgn, bytes(_check_size(data)))
        with self._lock:
            if self._stopped:
                return
            key = (sa, da)
            if key in self._sessions:
                self._enqueue(self._session_queue.setdefault(key, deque()), transfer)
            else:
                self._start_session(transfer)

    def busy(self) -> bool:
        """Whether any transfer is running or waiting."""
        with self._lock:
            return bool(
                self._bams
                or self._sessions
                or any(self._bam_queue.values())
                or any(self._session_queue.values())
            )

    def stop(self) -> None:
        """Forget every transfer (nothing more is sent)."""
        with self._lock:
            self._stopped = True
            for transfer in (*self._bams.values(), *self._sessions.values()):
                if transfer.timer is not None:
                    transfer.timer.cancel()
            self._bams.clear()
            self._sessions.clear()
            self._bam_queue.clear()
            self._session_queue.clear()

    def _enqueue(self, queue: deque[_Transfer], transfer: _Transfer) -> None:
        if len(queue) >= _QUEUE_LIMIT:
            self.counts["dropped"] += 1
            log.warning(
                "PGN %d from 0x%02X not sent: too many transfers queued", transfer.pgn, transfer.sa
            )
            return
        queue.append(transfer)

    # -- BAM --------------------------------------------------------------------------

    def _start_bam(self, transfer: _Transfer) -> None:
        self._bams[transfer.sa] = transfer
        cm = bytes([Control.BAM]) + transfer.size + bytes([len(transfer.packets), 0xFF])
        self._cm(transfer.sa, GLOBAL, cm + _pgn_bytes(transfer.pgn))
        transfer.timer = self._timers.call_at(
            self._timers.now() + self._bam_gap_s, lambda: self._bam_packet(transfer)
        )

    def _bam_packet(self, transfer: _Transfer) -> None:
        with self._lock:
            if self._bams.get(transfer.sa) is not transfer:
                return
            self._dt(transfer.sa, GLOBAL, transfer.packets[transfer.next_packet - 1])
            transfer.next_packet += 1
            if transfer.next_packet <= len(transfer.packets):
                transfer.timer = self._timers.call_at(
                    self._timers.now() + self._bam_gap_s, lambda: self._bam_packet(transfer)
                )
                return
            self.counts["bam"] += 1
            queue = self._bam_queue.get(transfer.sa)
            if queue:
                # the next announcement keeps the same gap after this last packet
                following = queue.popleft()
                transfer.timer = self._timers.call_at(
                    self._timers.now() + self._bam_gap_s, lambda: self._next_bam(following)
                )
            else:
                del self._bams[transfer.sa]

    def _next_bam(self, transfer: _Transfer) -> None:
        with self._lock:
            if self._stopped:
                return
            self._start_bam(transfer)

    # -- RTS/CTS ----------------------------------------------------------------------

    def _start_session(self, transfer: _Transfer) -> None:
        self._sessions[(transfer.sa, transfer.da)] = transfer
        cm = bytes([Control.RTS]) + transfer.size + bytes([len(transfer.packets), 0xFF])
        self._cm(transfer.sa, transfer.da, cm + _pgn_bytes(transfer.pgn))
        self._wait(transfer, T3_S)

    def _wait(self, transfer: _Transfer, timeout_s: float) -> None:
        if transfer.timer is not None:
            transfer.timer.cancel()
        transfer.timer = self._timers.call_at(
            self._timers.now() + timeout_s, lambda: self._timed_out(transfer)
        )

    def _timed_out(self, transfer: _Transfer) -> None:
        with self._lock:
            if self._sessions.get((transfer.sa, transfer.da)) is not transfer:
                return
            log.info(
                "PGN %d from 0x%02X to 0x%02X: no %s in time, aborted",
                transfer.pgn,
                transfer.sa,
                transfer.da,
                "CTS after the hold" if transfer.holding else "CTS or EndOfMsgAck",
            )
            self._abort(transfer, AbortReason.TIMEOUT)
            self._end_session(transfer)

    def _abort(self, transfer: _Transfer, reason: AbortReason) -> None:
        data = bytes([Control.ABORT, reason, 0xFF, 0xFF, 0xFF]) + _pgn_bytes(transfer.pgn)
        self._cm(transfer.sa, transfer.da, data)
        self.counts["aborts_sent"] += 1

    def _end_session(self, transfer: _Transfer) -> None:
        if transfer.timer is not None:
            transfer.timer.cancel()
        key = (transfer.sa, transfer.da)
        del self._sessions[key]
        queue = self._session_queue.get(key)
        if queue and not self._stopped:
            self._start_session(queue.popleft())

    def on_cm(self, sa: int, da: int, data: bytes) -> None:
        """A TP.CM frame from node `sa` to our controller at `da`."""
        if len(data) < 8:
            return
        control, pgn = data[0], int.from_bytes(data[5:8], "little")
        with self._lock:
            transfer = self._sessions.get((da, sa))
            if transfer is None or transfer.pgn != pgn:
                if control == Control.RTS:
                    # the controllers take no multi-packet messages (J1939-21: refuse with
                    # an abort rather than leave the originator waiting for T3)
                    refusal = bytes([Control.ABORT, AbortReason.RESOURCES, 0xFF, 0xFF, 0xFF])
                    self._cm(da, sa, refusal + data[5:8])
                    self.counts["aborts_sent"] += 1
                return
            if control == Control.CTS:
                self._on_cts(transfer, count=data[1], first=data[2])
            elif control == Control.END_OF_MSG_ACK:
                self.counts["rts_cts"] += 1
                self._end_session(transfer)
            elif control == Control.ABORT:
                self.counts["aborts_received"] += 1
                log.info(
                    "PGN %d from 0x%02X to 0x%02X: the receiver aborted (reason %d)",
                    pgn,
                    da,
                    sa,
                    data[1],
                )
                self._end_session(transfer)

    def _on_cts(self, transfer: _Transfer, *, count: int, first: int) -> None:
        if count == 0:  # hold the connection
            transfer.holding = True
            self._wait(transfer, T4_S)
            return
        total = len(transfer.packets)
        if not 1 <= first <= total:
            log.info("PGN %d: CTS asks for packet %d of %d, ignored", transfer.pgn, first, total)
            return
        transfer.holding = False
        last = min(total, first + count - 1)
        for number in range(first, last + 1):
            self._dt(transfer.sa, transfer.da, transfer.packets[number - 1])
        self._wait(transfer, T3_S)

    # -- frames -----------------------------------------------------------------------

    def _cm(self, sa: int, da: int, data: bytes) -> None:
        self._send(frame(_PRIORITY, PGN_TP_CM, sa, data, da))

    def _dt(self, sa: int, da: int, data: bytes) -> None:
        self._send(frame(_PRIORITY, PGN_TP_DT, sa, data, da))


def _check_size(data: bytes) -> bytes:
    if not 9 <= len(data) <= MAX_SIZE:
        raise ValueError(f"the transport protocol carries 9 to {MAX_SIZE} bytes, got {len(data)}")
    return data
