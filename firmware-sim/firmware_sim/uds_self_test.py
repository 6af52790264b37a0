"""The engine ECU's self test, RoutineControl (UDS 0x31) routine 0x0203, with a lifetime.

Start (0x01) answers `71 01 02 03 00` (routineInfo 00: started); requestRoutineResults (0x03)
then says `IN_PROGRESS` until `RUN_S` seconds of the vehicle's clock after the start, and
`PASSED` after; stop (0x02) while it runs ends it `STOPPED`. Results or stop of a routine that
was not started (since power-on, a reset or a session change), or stop of one that has ended,
get requestSequenceError 0x24, as ISO 14229-1 says.
"""

from __future__ import annotations

from typing import Final

from firmware_sim.clock import Clock
from firmware_sim.deadlines import reached

__all__ = ["IN_PROGRESS", "PASSED", "RUN_S", "STOPPED", "SelfTest"]

RUN_S: Final = 2.0
PASSED: Final = 0x00
IN_PROGRESS: Final = 0x01
STOPPED: Final = 0x02
_START, _STOP, _RESULTS = 0x01, 0x02, 0x03
_SEQUENCE_ERROR: Final = 0x24
_SUB_FUNCTION_NOT_SUPPORTED: Final = 0x12


class SelfTest:
    """When the self test started, and whether it was stopped."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._started: float | None = None
        self._stopped = False

    def forget(self) -> None:
        """No routine ran (power-on, reset, session change)."""
        self._started = None
        self._stopped = False

    def status(self) -> int | None:
        """PASSED, IN_PROGRESS or STOPPED; None if it was not started."""
        if self._started is None:
            return None
        if self._stopped:
            return STOPPED
        return PASSED if reached(self._clock.monotonic(), self._started + RUN_S) else IN_PROGRESS

    def answer(self, sub: int, routine: bytes) -> bytes | int:
        """The positive answer to `31 <sub> <routine>`, or the NRC that refuses it."""
        if sub == _START:
            self._started, self._stopped = self._clock.monotonic(), False
            return bytes([0x71, _START]) + routine + b"\x00"
        if sub not in (_STOP, _RESULTS):
            return _SUB_FUNCTION_NOT_SUPPORTED
        status = self.status()
        if status is None or (sub == _STOP and status != IN_PROGRESS):
            return _SEQUENCE_ERROR
        if sub == _STOP:
            self._stopped = True
            status = STOPPED
        return bytes([0x71, sub]) + routine + bytes([status])
