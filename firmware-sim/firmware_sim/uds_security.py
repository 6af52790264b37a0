"""SecurityAccess (UDS 0x27) of the simulated engine ECU: level 1, its seeds, keys and lockout.

The key algorithm is a public demo (`demo_security_key`: key = seed XOR 5A A5 3C C3), so tests
and users can unlock the simulator with udsoncan's `security_algo` or hwbridge's
`security_key`; a real ECU's algorithm is the maker's secret. Three wrong keys in a row lock
requestSeed out for `LOCKOUT_S` seconds (`requiredTimeDelayNotExpired`), on the vehicle's
clock, and the lockout outlives a session change or a reset, as on ECUs that resist guessing.
"""

from __future__ import annotations

import random
from typing import Final

from firmware_sim.clock import Clock
from firmware_sim.deadlines import reached

__all__ = [
    "DEMO_KEY_MASK",
    "LOCKOUT_S",
    "MAX_ATTEMPTS",
    "SEED_LENGTH",
    "SecurityAccess",
    "demo_security_key",
]

DEMO_KEY_MASK: Final = bytes.fromhex("5AA53CC3")
SEED_LENGTH: Final = 4
MAX_ATTEMPTS: Final = 3  # the third wrong key locks requestSeed out
LOCKOUT_S: Final = 10.0
LEVEL: Final = 0x01  # requestSeed; sendKey is LEVEL + 1

INVALID_KEY: Final = 0x35
EXCEEDED_ATTEMPTS: Final = 0x36
DELAY_NOT_EXPIRED: Final = 0x37
SEQUENCE_ERROR: Final = 0x24
SUB_FUNCTION_NOT_SUPPORTED: Final = 0x12
LENGTH: Final = 0x13


def demo_security_key(seed: bytes, level: int) -> bytes:
    """The key the simulated engine ECU expects for `seed` at security `level` (1, or its
    sendKey 2): each byte XOR `5A A5 3C C3`. Its parameter names are the ones udsoncan
    passes, so it can be given as `security_algo` as it is."""
    if level not in (LEVEL, LEVEL + 1):
        raise ValueError(f"the simulated engine ECU has security level 1 only, not {level}")
    if len(seed) != SEED_LENGTH:
        raise ValueError(f"a seed of the simulated engine ECU has 4 bytes, not {len(seed)}")
    return bytes(s ^ m for s, m in zip(seed, DEMO_KEY_MASK, strict=True))


class SecurityAccess:
    """Level 1's state: locked or not, the seed waiting for its key, wrong keys, lockout."""

    def __init__(self, clock: Clock, rng: random.Random) -> None:
        self._clock = clock
        self._rng = rng
        self.unlocked = False
        self._seed: bytes | None = None
        self._wrong_keys = 0
        self._locked_out_until: float | None = None

    def lock(self) -> None:
        """Locked again (session change, reset); a lockout in progress keeps running."""
        self.unlocked = False
        self._seed = None

    def answer(self, args: bytes) -> bytes | int:
        """The positive answer to `27 <args>`, or the NRC that refuses it."""
        sub = args[0] & 0x7F
        if sub == LEVEL:
            return self._request_seed(args[1:])
        if sub == LEVEL + 1:
            return self._send_key(args[1:])
        return SUB_FUNCTION_NOT_SUPPORTED

    def _request_seed(self, record: bytes) -> bytes | int:
        if record:
            return LENGTH
        until = self._locked_out_until
        if until is not None and not reached(self._clock.monotonic(), until):
            return DELAY_NOT_EXPIRED
        self._locked_out_until = None
        if self.unlocked:
            self._seed = None
            return bytes([0x67, LEVEL]) + bytes(SEED_LENGTH)  # zeros: already unlocked
        seed = bytes(SEED_LENGTH)
        while not any(seed):  # a seed of zeros would say "already unlocked"
            seed = self._rng.randbytes(SEED_LENGTH)
        self._seed = seed
        return bytes([0x67, LEVEL]) + seed

    def _send_key(self, key: bytes) -> bytes | int:
        if self._seed is None:
            return SEQUENCE_ERROR  # no seed asked for since the last key
        if len(key) != SEED_LENGTH:
            return LENGTH
        seed, self._seed = self._seed, None
        if key == demo_security_key(seed, LEVEL):
            self.unlocked = True
            self._wrong_keys = 0
            return bytes([0x67, LEVEL + 1])
        self._wrong_keys += 1
        if self._wrong_keys >= MAX_ATTEMPTS:
            self._wrong_keys = 0
            self._locked_out_until = self._clock.monotonic() + LOCKOUT_S
            return EXCEEDED_ATTEMPTS
        return INVALID_KEY
