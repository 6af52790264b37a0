"""One UDS request to one ECU, judged by the send policy on its exact bytes before it goes out.

Every tool that changes an ECU (`uds_session`, `uds_unlock`, `uds_write_did`, `uds_routine`,
`uds_reset`) sends through `GatedRequests.send`: the policy name comes from the bytes
(`policy_service`), not from the tool, so no spelling of a request slips past it; consent,
dry run and the audit line are the policy's, as for `obd_clear_dtcs`. `Sent.answer` reads the
ECU's answer the same way for all of them: a positive answer's bytes, a negative answer by its
ISO 14229 name (a NEGATIVE_RESPONSE failure that says the request went out), or no answer (a
result that says the request may have taken effect).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.obd.database.uds import nrc_name, policy_service
from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter, UnansweredRequest
from hwbridge.policy import SendPolicy, ServiceRequest
from hwbridge.policy.outcomes import failure_outcome

__all__ = ["GatedRequests", "Refusal", "Sent"]

_MAY_HAVE_ACTED = "it may have taken effect: check before sending it again"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A negative answer: the code and its ISO 14229 name."""

    code: int

    @property
    def name(self) -> str:
        return nrc_name(self.code)

    def text(self) -> str:
        return f"{self.name} (0x{self.code:02X})"


@dataclass(frozen=True)
class Sent:
    """What became of one request: not sent (dry run), or sent with the ECU's replies."""

    ecu: Ecu
    request: bytes
    dry_run: bool = False
    replies: list[EcuReply] = field(default_factory=list)
    unanswered: str | None = None  # the adapter's code when the answer did not finish
    audit_error: str | None = None

    @property
    def reply(self) -> EcuReply | None:
        return self.replies[0] if self.replies else None

    def refusal(self) -> Refusal | None:
        """The ECU's negative answer to this request, if that is what it said."""
        reply = self.reply
        if reply is None or not reply.complete:
            return None
        data = reply.data
        if len(data) >= 3 and data[0] == 0x7F and data[1] == self.request[0]:
            return Refusal(data[2])
        return None

    def positive(self) -> bytes | None:
        """The positive answer's bytes (service id + 0x40 first), or None."""
        reply = self.reply
        if reply is None or not reply.complete:
            return None
        # compared as numbers: 0xC0-0xFF have no positive answer id (sid + 0x40 > 0xFF)
        positive = len(reply.data) > 0 and reply.data[0] == self.request[0] + 0x40
        return reply.data if positive else None

    def no_answer(self, what: str) -> dict[str, Any] | None:
        """The result for a request that went out without a usable answer, else None;
        `what` names the request (`requestSeed`, or `the hard reset`)."""
        reply = self.reply
        if reply is not None and reply.complete:
            return None
        what = what.removeprefix("the ")  # each note says "the ... request" itself
        if reply is not None and reply.request_cut:
            note = f"only part of the {what} request went out (the ECU stopped it part way)"
        elif reply is not None:
            note = f"the {what} request went out but its answer did not finish ({reply.error})"
        elif self.unanswered:
            note = f"{self.unanswered}: the {what} request went out but its answer did not finish"
        else:
            note = f"the {what} request went out but the {self.ecu.name} ECU did not answer"
        return self.outcome(answered=False, note=f"{note}; {_MAY_HAVE_ACTED}.")

    def outcome(self, **fields: Any) -> dict[str, Any]:
        """A result for this request: the ECU, that it was sent, and `fields`."""
        out: dict[str, Any] = {"ecu": self.ecu.name, "sent": True, **fields}
        if self.audit_error:
            out["audit_error"] = self.audit_error
        return out

    def refused(self, refusal: Refusal, what: str, after: str = "") -> ToolError:
        """The failure for a negative answer: it names the code, and says the request went
        out (the ECU read it and said no)."""
        return ToolError(
            "NEGATIVE_RESPONSE",
            f"The {self.ecu.name} ECU refused {what}: {refusal.text()}. The request was sent "
            f"and answered; nothing was retried.{after}",
        )


class GatedRequests:
    """Sends requests to one ECU at a time through `adapter`, each judged by `policy`."""

    def __init__(self, adapter: ObdAdapter, policy: SendPolicy, timeout_s: float = 2.0) -> None:
        self.adapter = adapter
        self.policy = policy
        self.timeout_s = timeout_s

    def send(self, ecu: Ecu, payload: bytes, *, tool: str, secret_from: int | None = None) -> Sent:
        """Judge `payload` (unless it only reads), then send it; a dry run judges only.
        `secret_from`: where a secret starts in it (a key), kept out of the audit line."""
        service = policy_service(payload)
        if service is None:
            return self._read(ecu, payload)
        request = ServiceRequest(service, payload, ecu.name, tool, secret_from)
        if self.policy.dry_run:
            self.policy.check(request)
            return Sent(ecu, payload, dry_run=True)
        with self.policy.open_audit() as audit:  # AUDIT_FAILED here, before anything goes out
            self.policy.check(request)
            try:
                replies = self.adapter.request(payload, ecu=ecu, timeout_s=self.timeout_s)
            except UnansweredRequest as exc:  # it went out and may have taken effect
                error = audit.write(request, "sent", exc.code)
                return Sent(ecu, payload, unanswered=exc.code, audit_error=error)
            except ToolError as exc:
                audit.write(request, failure_outcome(exc), exc.code)
                raise
            error = audit.write(request, "sent")
        return Sent(ecu, payload, replies=replies, audit_error=error)

    def _read(self, ecu: Ecu, payload: bytes) -> Sent:
        try:
            replies = self.adapter.request(payload, ecu=ecu, timeout_s=self.timeout_s)
        except UnansweredRequest as exc:
            return Sent(ecu, payload, unanswered=exc.code)
        return Sent(ecu, payload, replies=replies)
