"""The UDS services that change an ECU: session control (0x10), writes (0x2E), routines (0x31)
and resets (0x11), each built from the tool's arguments and sent through `GatedRequests`.

Each result (and each refusal) says which session the ECU is in as far as hwbridge knows
(`SessionKeeper.state`); before a request that needs a session, the session held is checked
with the ECU, so a session it dropped is reported, not assumed.
"""

from __future__ import annotations

from typing import Any, Final

from hwbridge.core.models import ToolError
from hwbridge.obd.database.did_definitions import DidDefinitions
from hwbridge.obd.tools.did_values import (
    DefinedDidValues,
    DidValueEncoder,
    HexDidValues,
    parse_data_identifier,
    parse_hex_bytes,
    parse_routine,
)
from hwbridge.obd.tools.gated import GatedRequests, Sent
from hwbridge.obd.tools.session_keeper import SessionKeeper, parse_session, session_name
from hwbridge.obd.transport.base import Ecu

__all__ = ["RESET_KINDS", "ROUTINE_ACTIONS", "UdsControl"]

ROUTINE_ACTIONS: Final = {"start": 0x01, "stop": 0x02, "result": 0x03}
RESET_KINDS: Final = {"hard": 0x01, "key_off_on": 0x02, "soft": 0x03}
_MAX_ROUTINE_DATA: Final = 4091  # 31, the action and the routine take 4 of 4095 bytes


def _choice(table: dict[str, int], value: Any, what: str) -> int:
    if isinstance(value, str) and value.strip().lower() in table:
        return table[value.strip().lower()]
    raise ToolError("INVALID_VALUE", f"{what} is one of {', '.join(table)}.")


class UdsControl:
    """The state-changing UDS tools of one driver."""

    def __init__(
        self,
        gate: GatedRequests,
        keeper: SessionKeeper,
        values: DidValueEncoder | None = None,
        dids: DidDefinitions | None = None,
    ) -> None:
        self.gate = gate
        self.keeper = keeper
        self.dids = dids
        self.values: DidValueEncoder = values or (
            DefinedDidValues(dids) if dids is not None else HexDidValues()
        )

    def _answer(self, sent: Sent, what: str) -> bytes | dict[str, Any]:
        """The positive answer's bytes; a result when none came; NEGATIVE_RESPONSE (with the
        session as hwbridge knows it) when the ECU said no."""
        if (unanswered := sent.no_answer(what)) is not None:
            return unanswered | {"state": self.keeper.state(sent.ecu)}
        if (refusal := sent.refusal()) is not None:
            self.keeper.answered(sent.ecu, refusal.code)
            state = self.keeper.state(sent.ecu)
            where = f" The ECU is in the {state['session']} session as far as hwbridge knows"
            where += f" ({state['note']})." if "note" in state else "."
            raise sent.refused(refusal, what, where)
        data = sent.positive()
        if data is None:
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {sent.ecu.name} ECU answered {what} with something that is not its "
                "answer; the request was sent and may have taken effect.",
            )
        return data

    @staticmethod
    def _dry(sent: Sent) -> dict[str, Any]:
        return {"sent": False, "dry_run": True, "request": sent.request.hex(" ").upper()}

    def session(self, ecu: Ecu, session_text: Any) -> dict[str, Any]:
        session = parse_session(session_text)
        sent = self.gate.send(ecu, bytes([0x10, session]), tool="uds_session")
        if sent.dry_run:
            return self._dry(sent)
        data = self._answer(sent, f"the {session_name(session)} session")
        if isinstance(data, dict):
            return data
        if data[1:2] != bytes([session]):
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {ecu.name} ECU confirmed another session than the one asked for.",
            )
        self.keeper.entered(ecu, session)
        return sent.outcome(session=session_name(session), state=self.keeper.state(ecu))

    def write_did(self, ecu: Ecu, did_text: Any, value: Any) -> dict[str, Any]:
        did = parse_data_identifier(did_text, self.dids)
        record = self.values.encode(did, value)
        self.keeper.confirm(ecu, self.gate.timeout_s)
        request = bytes([0x2E, did >> 8, did & 0xFF]) + record
        sent = self.gate.send(ecu, request, tool="uds_write_did")
        if sent.dry_run:
            return self._dry(sent)
        data = self._answer(sent, f"the write of DID {did:04X}")
        if isinstance(data, dict):
            return data
        defined = self.dids.by_did.get(did) if self.dids is not None else None
        if defined is None:
            return sent.outcome(
                written=True,
                did=f"{did:04X}",
                value=record.hex(" ").upper(),
                state=self.keeper.state(ecu),
            )
        typed = defined.decode(record)
        return sent.outcome(
            written=True,
            **{k: typed[k] for k in ("did", "name", "value", "unit", "label") if k in typed},
            raw=record.hex(" ").upper(),
            state=self.keeper.state(ecu),
        )

    def routine(
        self, ecu: Ecu, routine_text: Any, action: Any, data_text: Any = None
    ) -> dict[str, Any]:
        routine = parse_routine(routine_text)
        sub = _choice(ROUTINE_ACTIONS, action, "action")
        record = b""
        if data_text is not None:
            record = parse_hex_bytes(data_text, "data", limit=_MAX_ROUTINE_DATA, empty=True)
        self.keeper.confirm(ecu, self.gate.timeout_s)
        request = bytes([0x31, sub, routine >> 8, routine & 0xFF]) + record
        sent = self.gate.send(ecu, request, tool="uds_routine")
        if sent.dry_run:
            return self._dry(sent)
        name = str(action).strip().lower()
        answer = self._answer(sent, f"{name} of routine {routine:04X}")
        if isinstance(answer, dict):
            return answer
        if answer[1:4] != request[1:4]:
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {ecu.name} ECU answered for another routine or action than {routine:04X}.",
            )
        return sent.outcome(
            routine=f"{routine:04X}",
            action=name,
            status_record=answer[4:68].hex(" ").upper(),
            state=self.keeper.state(ecu),
        )

    def reset(self, ecu: Ecu, kind: Any) -> dict[str, Any]:
        sub = _choice(RESET_KINDS, kind, "kind")
        self.keeper.confirm(ecu, self.gate.timeout_s)
        sent = self.gate.send(ecu, bytes([0x11, sub]), tool="uds_reset")
        if sent.dry_run:
            return self._dry(sent)
        name = str(kind).strip().lower()
        data = self._answer(sent, f"the {name} reset")
        if isinstance(data, dict):
            self.keeper.lost(ecu, "a reset was asked for, and may have happened")
            return data | {"state": self.keeper.state(ecu)}
        self.keeper.lost(ecu, f"the ECU reset ({name})")
        return sent.outcome(
            reset=name,
            state=self.keeper.state(ecu),
            note="the ECU restarts: it may not answer for a moment",
        )
