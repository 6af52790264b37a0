"""The engine ECU's UDS server: the diagnostics that change things, and the state they need.

On top of the read-only answers of `firmware_sim.uds` (which it falls back to), the engine
ECU keeps a diagnostic session, security access and a running self test, so a tester can do
what a workshop does: `10 03` enters the extended session (`10 02` programming is refused
with conditionsNotCorrect 0x22: the engine runs), which drops back to the default session
after `S3_S` seconds without a request (TesterPresent `3E 00`/`3E 80` keeps it);
SecurityAccess 0x27 level 1 (`firmware_sim.uds_security`) in the extended session;
WriteDataByIdentifier 0x2E of DID 0x0101 IdleSpeedTarget (unsigned 16-bit rpm, 600-1000,
extended session and unlocked), which sets the idle speed the vehicle runs at; RoutineControl
0x31 of the self test 0x0203 (`firmware_sim.uds_self_test`); ECUReset 0x11 (hard, keyOffOn,
soft, in the extended session), after which the ECU is in the default session, locked, and
silent for `RESET_SILENCE_S` while it reboots. Reads (0x22) of 0x0101 and of F186 (the active
session) work in any session. Every time runs on the vehicle's clock, so tests advance a
`SimulatedClock` instead of sleeping. Any request bytes get an answer or silence, never an
exception.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Final, Protocol, runtime_checkable

from firmware_sim.clock import Clock
from firmware_sim.deadlines import reached
from firmware_sim.model import VehicleState
from firmware_sim.uds import SELF_TEST, UdsIdentity, data_identifiers, negative, read_dids
from firmware_sim.uds_security import SecurityAccess
from firmware_sim.uds_self_test import SelfTest

__all__ = [
    "DEFAULT_SESSION",
    "EXTENDED_SESSION",
    "IDLE_TARGET_DID",
    "IDLE_TARGET_RANGE",
    "PROGRAMMING_SESSION",
    "RESET_SILENCE_S",
    "S3_S",
    "IdleTarget",
    "UdsServer",
]

DEFAULT_SESSION: Final = 0x01
PROGRAMMING_SESSION: Final = 0x02
EXTENDED_SESSION: Final = 0x03
S3_S: Final = 5.0
RESET_SILENCE_S: Final = 0.2
IDLE_TARGET_DID: Final = 0x0101
IDLE_TARGET_RANGE: Final = (600, 1000)
_TIMING: Final = bytes.fromhex("003201F4")  # P2 50 ms, P2* 5000 ms (in 10 ms)
_RESETS: Final = frozenset({0x01, 0x02, 0x03})  # hard, keyOffOn, soft
_SUB_FUNCTION_NOT_SUPPORTED = 0x12
_LENGTH = 0x13
_CONDITIONS_NOT_CORRECT = 0x22
_OUT_OF_RANGE = 0x31
_SECURITY_DENIED = 0x33
_NOT_IN_SESSION = 0x7F

ReadOnly = Callable[[], "bytes | None"]


@runtime_checkable
class IdleTarget(Protocol):
    """A vehicle whose idle speed can be set (what a write of DID 0x0101 does)."""

    def set_idle_rpm(self, rpm: float) -> None: ...


class UdsServer:
    """One ECU's diagnostic state, shared by its 11-bit and 29-bit addresses.

    `answer` takes every request to the ECU (OBD-II ones too: a rebooting ECU answers
    nothing) and `read_only` gives the stateless answer for services it does not change.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        identity: UdsIdentity,
        vin: str,
        pids: Mapping[int, Callable[[VehicleState], bytes]],
        idle: IdleTarget | None,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._idle = idle
        self.security = SecurityAccess(clock, rng if rng is not None else random.Random())
        self.self_test = SelfTest(clock)
        self._session = DEFAULT_SESSION
        self._last_request = clock.monotonic()
        self._silent_until: float | None = None
        self._dids = data_identifiers(identity, vin, pids)
        self._dids[0xF186] = lambda s: bytes([self._session])
        self._dids[IDLE_TARGET_DID] = lambda s: round(s.idle_target_rpm).to_bytes(2, "big")

    @property
    def session(self) -> int:
        """The active session now (a session left idle past S3 is over)."""
        self._expire(self._clock.monotonic())
        return self._session

    def rebooting(self) -> bool:
        """Whether the ECU is still silent after a reset."""
        until = self._silent_until
        return until is not None and not reached(self._clock.monotonic(), until)

    def answer(
        self, request: bytes, state: VehicleState, functional: bool, read_only: ReadOnly
    ) -> bytes | None:
        """The response to `request`, or None when the ECU stays silent."""
        if not request or self.rebooting():
            return None
        now = self._clock.monotonic()
        self._expire(now)
        self._last_request = now
        service, args = request[0], request[1:]
        if service == 0x10:
            return self._session_control(args, functional)
        if service == 0x22:
            return read_dids(args, state, self._dids, functional)
        if service == 0x27:
            return self._security_access(args, functional)
        if service == 0x2E:
            return self._write_did(args, functional)
        if service == 0x31:
            return self._routine_control(args, functional)
        if service == 0x11:
            return self._reset(args, functional, now)
        return read_only()

    def _expire(self, now: float) -> None:
        if self._session != DEFAULT_SESSION and reached(now, self._last_request + S3_S):
            self._enter(DEFAULT_SESSION)

    def _enter(self, session: int) -> None:
        """ISO 14229-1: any transition but default to default locks and ends routines."""
        if session != DEFAULT_SESSION or self._session != DEFAULT_SESSION:
            self.security.lock()
            self.self_test.forget()
        self._session = session

    def _session_control(self, args: bytes, functional: bool) -> bytes | None:
        if len(args) != 1:
            return negative(0x10, _LENGTH, functional)
        session = args[0] & 0x7F
        if session == PROGRAMMING_SESSION:
            return negative(0x10, _CONDITIONS_NOT_CORRECT, functional)
        if session not in (DEFAULT_SESSION, EXTENDED_SESSION):
            return negative(0x10, _SUB_FUNCTION_NOT_SUPPORTED, functional)
        self._enter(session)
        return None if args[0] & 0x80 else bytes([0x50, session]) + _TIMING

    def _security_access(self, args: bytes, functional: bool) -> bytes | None:
        if self._session != EXTENDED_SESSION:
            return negative(0x27, _NOT_IN_SESSION, functional)
        if not args:
            return negative(0x27, _LENGTH, functional)
        result = self.security.answer(args)
        if isinstance(result, int):
            return negative(0x27, result, functional)
        return None if args[0] & 0x80 else result

    def _write_did(self, args: bytes, functional: bool) -> bytes | None:
        if self._session != EXTENDED_SESSION:
            return negative(0x2E, _NOT_IN_SESSION, functional)
        if len(args) < 3:
            return negative(0x2E, _LENGTH, functional)
        if int.from_bytes(args[:2], "big") != IDLE_TARGET_DID:
            return negative(0x2E, _OUT_OF_RANGE, functional)  # not a DID it lets you write
        if not self.security.unlocked:
            return negative(0x2E, _SECURITY_DENIED, functional)
        if len(args) != 4:
            return negative(0x2E, _LENGTH, functional)
        rpm = int.from_bytes(args[2:], "big")
        low, high = IDLE_TARGET_RANGE
        if not low <= rpm <= high:
            return negative(0x2E, _OUT_OF_RANGE, functional)
        if self._idle is None:
            return negative(0x2E, _CONDITIONS_NOT_CORRECT, functional)
        self._idle.set_idle_rpm(float(rpm))
        return b"\x6e" + args[:2]

    def _routine_control(self, args: bytes, functional: bool) -> bytes | None:
        if len(args) < 3:
            return negative(0x31, _LENGTH, functional)
        if int.from_bytes(args[1:3], "big") != SELF_TEST:
            return negative(0x31, _OUT_OF_RANGE, functional)
        result = self.self_test.answer(args[0] & 0x7F, args[1:3])
        if isinstance(result, int):
            return negative(0x31, result, functional)
        return None if args[0] & 0x80 else result

    def _reset(self, args: bytes, functional: bool, now: float) -> bytes | None:
        if self._session != EXTENDED_SESSION:
            return negative(0x11, _NOT_IN_SESSION, functional)
        if len(args) != 1:
            return negative(0x11, _LENGTH, functional)
        kind = args[0] & 0x7F
        if kind not in _RESETS:
            return negative(0x11, _SUB_FUNCTION_NOT_SUPPORTED, functional)
        self._enter(DEFAULT_SESSION)
        self.self_test.forget()
        self._silent_until = now + RESET_SILENCE_S
        return None if args[0] & 0x80 else bytes([0x51, kind])
