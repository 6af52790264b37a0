"""The time a simulated vehicle lives in: the machine's (`RealClock`) or a test's
(`SimulatedClock`).

On real time a vehicle's sender thread sleeps until a frame is due, so what it sends depends
on how soon a busy machine wakes it. On a `SimulatedClock` nothing moves until the test calls
`advance(seconds)`: every frame due in that span is computed and sent before `advance`
returns, stamped with the simulated moment it was due, so the same seed gives the same frames
with the same timestamps however loaded the machine is, and ten simulated seconds take
milliseconds.

    clock = SimulatedClock()
    with VirtualVehicle(DEMO, channel="bench", clock=clock) as car, can.Bus(...) as peer:
        clock.advance(2.0)          # 2 s of frames are in peer's queue now
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol

__all__ = ["Clock", "RealClock", "SimulatedClock", "Timed"]

_SLACK_S: Final = 1e-9
SIMULATED_EPOCH: Final = 1_767_225_600.0
"""Where a `SimulatedClock` starts by default, as a Unix time (2026-01-01 00:00 UTC)."""


class Clock(Protocol):
    """What the simulator reads the time from."""

    def monotonic(self) -> float:
        """Seconds that only go forward: when things are due, how far the model steps."""
        ...

    def time(self) -> float:
        """The Unix time of now, as frame timestamps carry it."""
        ...


class Timed(Protocol):
    """Something that runs on a `SimulatedClock`: it says when it next has work to do, and
    does it when the clock gets there."""

    def next_due(self) -> float | None:
        """The monotonic time of the next work, or None if there is none."""
        ...

    def run_due(self, now: float) -> None:
        """Do everything due at or before `now`."""
        ...


class RealClock:
    """The machine's clocks: `time.monotonic` and `time.time`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


class SimulatedClock:
    """Time that moves only when `advance` is called; `epoch` is the Unix time at zero.

    Participants (`Timed`) attach and detach themselves; `advance` runs their work in time
    order, each at the simulated moment it was due, in the calling thread.
    """

    def __init__(self, epoch: float = SIMULATED_EPOCH) -> None:
        self.epoch = float(epoch)
        self._ns = 0  # whole nanoseconds: ten advances of 0.1 s make exactly 1 s
        self._now = 0.0  # the moment participants run at (a due time) or _ns in seconds
        self._lock = threading.RLock()
        self._participants: list[Timed] = []

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self.epoch + self._now

    def attach(self, participant: Timed) -> None:
        with self._lock:
            if participant not in self._participants:
                self._participants.append(participant)

    def detach(self, participant: Timed) -> None:
        with self._lock:
            if participant in self._participants:
                self._participants.remove(participant)

    def advance(self, seconds: float) -> None:
        """Move the time forward by `seconds` (>= 0), running what falls due on the way."""
        if not seconds >= 0.0:  # also refuses NaN
            raise ValueError(f"a clock only goes forward: advance({seconds!r})")
        with self._lock:
            self._ns += round(seconds * 1e9)
            target = self._ns / 1e9
            participants = self._participants
            while len(participants) == 1:  # one participant (nearly always): the loop below
                participant = participants[0]
                due = participant.next_due()
                if due is None or due > target + _SLACK_S:
                    break
                self._now = max(self._now, due)
                participant.run_due(self._now + _SLACK_S)
            while True:
                pending = [
                    (due, p) for p in self._participants if (due := p.next_due()) is not None
                ]
                # a nanosecond of slack: a due time that is a sum of floats lands on either
                # side of the same decimal target
                due_now = [(due, p) for due, p in pending if due <= target + _SLACK_S]
                if not due_now:
                    break
                moment = min(due for due, _ in due_now)
                self._now = max(self._now, moment)
                for due, participant in due_now:
                    if due <= self._now + _SLACK_S:
                        participant.run_due(self._now + _SLACK_S)
            self._now = target
