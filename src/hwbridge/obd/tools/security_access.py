"""SecurityAccess (UDS 0x27): requestSeed, the user's key function, sendKey.

The key algorithm is the ECU maker's secret and the user's own code (`security_key`); hwbridge
ships none. The seed and the key are used here and nowhere else: they never reach a tool
result, an error message, a log line or the audit log (which says "key sent"). Every negative
answer is reported by its ISO 14229 name and never retried: ECUs count wrong keys and lock
testers out. A key function that raises, or returns something that is not a key of the seed's
length, is a failure before the key is sent, and nothing is sent after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from hwbridge.core.models import ToolError
from hwbridge.obd.tools.gated import GatedRequests, Sent
from hwbridge.obd.tools.session_keeper import SessionKeeper
from hwbridge.obd.transport.base import Ecu

__all__ = ["KeyLength", "SecurityAccessFlow", "SecurityKey", "parse_level"]

log = logging.getLogger(__name__)

SecurityKey = Callable[[bytes, int, str], bytes]
"""`key(seed, level, ecu)`: the key for `seed` at requestSeed `level` of the ECU named `ecu`."""

KeyLength = Callable[[bytes, int, str], int]
"""How long the key for a seed must be (the seed's length unless a definition says otherwise:
the extension point for diagnostic descriptions that declare it)."""

_MAX_LEVEL: Final = 0x7D  # requestSeed levels are odd, 0x01-0x7D (sendKey is level + 1)


def _seed_length(seed: bytes, level: int, ecu: str) -> int:
    return len(seed)


def parse_level(level: Any) -> int:
    """A requestSeed level: an odd number 1-125; INVALID_VALUE otherwise."""
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= _MAX_LEVEL:
        raise ToolError("INVALID_VALUE", "level is the requestSeed level: an odd number 1-125.")
    if level % 2 == 0:
        raise ToolError(
            "INVALID_VALUE",
            f"level {level} is a sendKey sub-function; give the requestSeed level "
            f"{level - 1} (odd numbers: 1, 3, 5...).",
        )
    return level


class SecurityAccessFlow:
    """Unlocks one security level of one ECU, with the user's key function."""

    def __init__(
        self,
        gate: GatedRequests,
        keeper: SessionKeeper,
        key_function: SecurityKey | None,
        key_length: KeyLength = _seed_length,
    ) -> None:
        self.gate = gate
        self.keeper = keeper
        self.key_function = key_function
        self.key_length = key_length

    def unlock(self, ecu: Ecu, level: int) -> dict[str, Any]:
        if self.key_function is None:
            raise ToolError(
                "NO_SECURITY_KEY",
                "No security key function was given to this driver (security_key, or "
                "--security-key MODULE:FUNCTION), so no ECU can be unlocked; nothing was sent.",
            )
        level = parse_level(level)
        self.keeper.confirm(ecu, self.gate.timeout_s)
        seed_sent = self.gate.send(ecu, bytes([0x27, level]), tool="uds_unlock")
        if seed_sent.dry_run:
            return {
                "sent": False,
                "dry_run": True,
                "would_send": [f"27 {level:02X} (requestSeed)", f"27 {level + 1:02X} and the key"],
            }
        seed = self._seed(seed_sent, level)
        if isinstance(seed, dict):
            return seed
        if not any(seed):
            self.keeper.unlocked(ecu, level)
            return seed_sent.outcome(
                unlocked=True,
                level=level,
                note="the ECU sent a seed of zeros: it was unlocked already; no key was sent",
                state=self.keeper.state(ecu),
            )
        key = self._key(seed, level, ecu)
        key_sent = self.gate.send(
            ecu, bytes([0x27, level + 1]) + key, tool="uds_unlock", secret_from=2
        )
        del seed, key
        if (unanswered := key_sent.no_answer("sendKey")) is not None:
            return unanswered | {"unlocked": "unknown", "state": self.keeper.state(ecu)}
        if (refusal := key_sent.refusal()) is not None:
            self.keeper.answered(ecu, refusal.code)
            raise key_sent.refused(
                refusal, f"the key for level {level}", " Ask the user before another attempt."
            )
        answer = key_sent.positive()
        if answer is None or answer[:2] != bytes([0x67, level + 1]):
            raise ToolError("INVALID_RESPONSE", "The ECU's answer to sendKey is not valid.")
        self.keeper.unlocked(ecu, level)
        result = key_sent.outcome(unlocked=True, level=level, state=self.keeper.state(ecu))
        if seed_sent.audit_error and "audit_error" not in result:
            result["audit_error"] = seed_sent.audit_error
        return result

    def _seed(self, sent: Sent, level: int) -> bytes | dict[str, Any]:
        """The seed from the answer to requestSeed; a result (no answer) or a failure."""
        if (unanswered := sent.no_answer("requestSeed")) is not None:
            return unanswered | {"unlocked": False, "note": "no seed came; no key was sent"}
        if (refusal := sent.refusal()) is not None:
            self.keeper.answered(sent.ecu, refusal.code)
            raise sent.refused(refusal, f"a seed for level {level}", " No key was sent.")
        data = sent.positive()
        if data is None or data[:2] != bytes([0x67, level]) or len(data) < 3:
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {sent.ecu.name} ECU's answer to requestSeed is not a seed; no key was sent.",
            )
        return bytes(data[2:])

    def _key(self, seed: bytes, level: int, ecu: Ecu) -> bytes:
        """The user's key for `seed`; KEY_FUNCTION_FAILED (nothing sent) when it fails."""
        assert self.key_function is not None
        try:
            key = self.key_function(seed, level, ecu.name)
            wanted = self.key_length(seed, level, ecu.name)
        except Exception as exc:  # the user's code: its message may quote the seed
            log.warning("the security key function failed (%s)", type(exc).__name__)
            raise ToolError(
                "KEY_FUNCTION_FAILED",
                f"The security key function failed ({type(exc).__name__}) for level {level} of "
                f"the {ecu.name} ECU; no key was sent. Tell the user: it is their function.",
            ) from None
        if not isinstance(key, bytes | bytearray) or len(key) != wanted:
            what = f"{len(key)} bytes" if isinstance(key, bytes | bytearray) else "no bytes"
            raise ToolError(
                "KEY_FUNCTION_FAILED",
                f"The security key function returned {what} for a {wanted}-byte key "
                f"(level {level}, {ecu.name} ECU); no key was sent. Tell the user: it is "
                "their function.",
            )
        return bytes(key)
