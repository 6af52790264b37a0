"""A J1939 node for the truck's tests, written from J1939-21 apart from the simulator.

`Peer` sends requests and transport protocol answers and reads what comes back over a
python-can virtual bus; `ManualTimers` is a clock the transport protocol's tests move by
hand. The identifier arithmetic is done here again on purpose: a test that parsed frames
with the simulator's own code would share its mistakes.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import can
from firmware_sim.j1939.scheduler import Timer

GLOBAL = 0xFF
TESTER = 0xF9  # the off-board diagnostic tool's usual address
REQUEST = 0xEA00
ACK = 0xE800
CLAIM = 0xEE00
TP_CM = 0xEC00
TP_DT = 0xEB00
DM1, DM2, DM3, DM11 = 65226, 65227, 65228, 65235
RTS, CTS, EOMA, BAM, ABORT = 16, 17, 19, 32, 255


@dataclass(frozen=True)
class Id:
    priority: int
    pgn: int
    sa: int
    da: int


def split(can_id: int) -> Id:
    pf = (can_id >> 16) & 0xFF
    pgn = (can_id >> 8) & 0x3FFFF
    da = GLOBAL
    if pf < 240:
        da = pgn & 0xFF
        pgn &= 0x3FF00
    return Id((can_id >> 26) & 7, pgn, can_id & 0xFF, da)


def join(priority: int, pgn: int, sa: int, da: int = GLOBAL) -> int:
    if ((pgn >> 8) & 0xFF) < 240:
        pgn = (pgn & 0x3FF00) | da
    return priority << 26 | pgn << 8 | sa


def tp_pgn(data: bytes) -> int:
    return int.from_bytes(data[5:8], "little")


class Peer:
    """A node at `sa` on virtual `channel`."""

    def __init__(self, channel: str, sa: int = TESTER) -> None:
        self.sa = sa
        self.bus = can.Bus(interface="virtual", channel=channel)

    def close(self) -> None:
        self.bus.shutdown()

    def send(self, pgn: int, data: bytes, da: int = GLOBAL, priority: int = 6) -> None:
        self.bus.send(
            can.Message(
                arbitration_id=join(priority, pgn, self.sa, da), data=data, is_extended_id=True
            )
        )

    def request(self, pgn: int, da: int = GLOBAL) -> None:
        self.send(REQUEST, pgn.to_bytes(3, "little"), da)

    def cm(self, da: int, data: bytes) -> None:
        self.send(TP_CM, data, da, priority=7)

    def drain(self) -> None:
        while self.bus.recv(0) is not None:
            pass

    def next(
        self, wanted: Callable[[Id, bytes], bool], timeout_s: float = 2.0
    ) -> tuple[Id, bytes, float]:
        """The next frame `wanted` accepts: its id, data and timestamp."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            msg = self.bus.recv(left)
            if msg is not None and msg.is_extended_id:
                ident = split(msg.arbitration_id)
                if wanted(ident, bytes(msg.data)):
                    return ident, bytes(msg.data), msg.timestamp
        raise AssertionError(f"no wanted frame within {timeout_s} s")

    def collect(
        self, seconds: float, wanted: Callable[[Id, bytes], bool]
    ) -> list[tuple[Id, bytes]]:
        out = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            msg = self.bus.recv(left)
            if msg is not None and msg.is_extended_id:
                ident = split(msg.arbitration_id)
                if wanted(ident, bytes(msg.data)):
                    out.append((ident, bytes(msg.data)))
        return out

    def pgn_from(self, pgn: int, sa: int, timeout_s: float = 2.0) -> bytes:
        """The data of the next single frame of `pgn` from `sa`."""
        return self.next(lambda i, d: i.pgn == pgn and i.sa == sa, timeout_s)[1]

    def bam(self, pgn: int, sa: int, timeout_s: float = 3.0) -> tuple[bytes, list[float]]:
        """Reassemble the next BAM of `pgn` from `sa`: its data and packet timestamps.

        Checks on the way what J1939-21 asks of the sender: sequence numbers 1..n in
        order, the announced size and packet count, 0xFF after the data."""
        _, cm, _ = self.next(
            lambda i, d: i.pgn == TP_CM and i.sa == sa and i.da == GLOBAL and d[0] == BAM
            and tp_pgn(d) == pgn,
            timeout_s,
        )  # fmt: skip
        size, count = int.from_bytes(cm[1:3], "little"), cm[3]
        assert cm[4] == 0xFF
        assert count == -(-size // 7)
        data, stamps = b"", []
        for number in range(1, count + 1):
            _, dt, stamp = self.next(
                lambda i, d: i.pgn == TP_DT and i.sa == sa and i.da == GLOBAL, timeout_s
            )
            assert dt[0] == number, f"packet {number} came as {dt[0]}"
            data += dt[1:]
            stamps.append(stamp)
        assert set(data[size:]) <= {0xFF}, data[size:].hex()
        return data[:size], stamps

    def rts(self, sa: int, pgn: int, timeout_s: float = 2.0) -> tuple[int, int, int]:
        """Wait for the RTS of `pgn` from `sa` to this node: (size, packets, max per CTS)."""
        _, cm, _ = self.next(
            lambda i, d: i.pgn == TP_CM and i.sa == sa and i.da == self.sa and d[0] == RTS
            and tp_pgn(d) == pgn,
            timeout_s,
        )  # fmt: skip
        return int.from_bytes(cm[1:3], "little"), cm[3], cm[4]

    def cts(self, sa: int, pgn: int, count: int, first: int) -> None:
        self.cm(sa, bytes([CTS, count, first, 0xFF, 0xFF]) + pgn.to_bytes(3, "little"))

    def packets(self, sa: int, count: int, timeout_s: float = 2.0) -> list[bytes]:
        """The next `count` TP.DT frames from `sa` to this node."""
        return [
            self.next(lambda i, d: i.pgn == TP_DT and i.sa == sa and i.da == self.sa, timeout_s)[1]
            for _ in range(count)
        ]

    def receive(self, sa: int, pgn: int, per_cts: int) -> bytes:
        """A whole RTS/CTS transfer of `pgn` from `sa`, asking `per_cts` packets at a time,
        acknowledged at the end."""
        size, count, _ = self.rts(sa, pgn)
        data = b""
        first = 1
        while first <= count:
            asked = min(per_cts, count - first + 1)
            self.cts(sa, pgn, asked, first)
            for number, dt in enumerate(self.packets(sa, asked), start=first):
                assert dt[0] == number
                data += dt[1:]
            first += asked
        eoma = bytes([EOMA]) + size.to_bytes(2, "little") + bytes([count, 0xFF])
        self.cm(sa, eoma + pgn.to_bytes(3, "little"))
        return data[:size]


class ManualTimers:
    """A clock for the transport protocol's tests: `advance` runs what falls due."""

    def __init__(self) -> None:
        self.time = 0.0
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.time

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        heapq.heappush(self._heap, (when, next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> None:
        target = self.time + seconds
        while self._heap and self._heap[0][0] <= target:
            when, _, timer = heapq.heappop(self._heap)
            self.time = max(self.time, when)
            if not timer.cancelled:
                timer.callback()
        self.time = target
