"""How long a diagnostic request waits when an ECU says "response pending": one rule for
both adapters.

ISO 14229 lets an ECU that needs time answer `7F xx 78` (requestCorrectlyReceived-
ResponsePending); the tester then waits P2* (5 s) for the final answer, again after every
further pending. A request never waits past its budget, max(timeout, P2*) from when it went
out (udsoncan's overall request timeout), so an ECU that pends without end is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = [
    "PENDING",
    "PendingClock",
    "another_service_note",
    "for_another_request",
    "for_another_service",
    "is_pending",
]

PENDING = 0x78
NEGATIVE = 0x7F
_POSITIVE = 0x40  # a positive response's first byte: the service + 0x40
_POSITIVE_FIRST = 0x41  # OBD-II mode 01's answer, the lowest there is


def is_pending(payload: bytes, service: int) -> bool:
    """Whether an answer is a "response pending" (`7F xx 78`) for a request of `service`:
    never a final answer. A pending that names another service is not this request's."""
    return (
        len(payload) >= 3
        and payload[0] == NEGATIVE
        and payload[1] == service
        and payload[2] == PENDING
    )


def for_another_service(payload: bytes, service: int) -> bool:
    """Whether an answer belongs to another request than this one of `service`: a negative
    response (`7F xx ..`) that names another service (ISO 14229-1 10.4: its second byte is
    the service it refuses), or a positive response of another service (its first byte is
    that service + 0x40, OBD-II and UDS alike). Such an answer comes late from an earlier
    request, or from another tester on the bus; this request goes on waiting for its own."""
    if not payload:
        return False
    if payload[0] == NEGATIVE:
        return len(payload) >= 2 and payload[1] != service
    return _POSITIVE_FIRST <= payload[0] < NEGATIVE and payload[0] != service + _POSITIVE


def _pid_of(answer: bytes, request: bytes, step: int = 1) -> bool:
    """OBD-II modes 01, 06, 09 (and 02, whose PIDs come with a frame number): the answer's
    first parameter is one of the PIDs asked for (any, when none was)."""
    asked = request[1::step]
    return not asked or (len(answer) >= 2 and answer[1] in asked)


def _did_of(answer: bytes, request: bytes) -> bool:
    """ReadDataByIdentifier: the answer's first identifier is one asked for (any, when no
    whole identifier was)."""
    asked = {request[i : i + 2] for i in range(1, len(request) - 1, 2)}
    return not asked or answer[1:3] in asked


def _same_head(size: int) -> Callable[[bytes, bytes], bool]:
    """A sub-function (its suppress-answer bit off) and what follows it, echoed."""

    def echoed(answer: bytes, request: bytes) -> bool:
        head = bytes([request[1] & 0x7F]) + request[2 : 1 + size] if len(request) > 1 else b""
        return answer[1 : 1 + len(head)] == head

    return echoed


_ECHOED: dict[int, Callable[[bytes, bytes], bool]] = {
    0x01: _pid_of,
    0x02: lambda answer, request: _pid_of(answer, request, 2),
    0x06: _pid_of,
    0x09: _pid_of,
    0x10: _same_head(1),  # DiagnosticSessionControl: the session
    0x11: _same_head(1),  # ECUReset: the reset type
    0x19: _same_head(1),  # ReadDTCInformation: the report type
    0x22: _did_of,
    0x27: _same_head(1),  # SecurityAccess: the level
    0x28: _same_head(1),  # CommunicationControl: the control type
    0x2E: _same_head(2),  # WriteDataByIdentifier: the identifier
    0x2F: _same_head(2),  # InputOutputControlByIdentifier: the identifier
    0x31: _same_head(3),  # RoutineControl: the control type and the routine
    0x3E: _same_head(1),  # TesterPresent
}
"""What a positive answer echoes of its request (ISO 15031-5, ISO 14229-1), per service."""


def for_another_request(answer: bytes, request: bytes) -> bool:
    """Whether `answer` belongs to another request than `request`: another service's
    (`for_another_service`), or the same service's for other parameters (mode 01 PID 0D's
    answer while PID 0C is asked; a DID that was not asked for), as a late answer of an
    earlier request is. Services whose answers echo nothing are judged by service alone."""
    if not request:
        return False
    if for_another_service(answer, request[0]):
        return True
    if len(answer) < 2 or answer[0] != request[0] + _POSITIVE:
        return False
    echoed = _ECHOED.get(request[0])
    return echoed is not None and not echoed(answer, request)


def another_service_note(payload: bytes, service: int | None = None) -> str:
    """Why an ECU that answered only another request has no answer to this one (of
    `service`, when known)."""
    shown = payload[:8].hex(" ").upper()
    if payload[0] == NEGATIVE:
        return (
            f"it sent only a negative response to another service (0x{payload[1]:02X}: "
            f"{shown}), not an answer to this request"
        )
    if service is not None and payload[0] == service + _POSITIVE:
        return f"it sent only an answer to another request ({shown}), not an answer to this one"
    return (
        f"it sent only an answer to another service (0x{payload[0] - _POSITIVE:02X}: "
        f"{shown}), not an answer to this request"
    )


class PendingClock:
    """The deadline of one request: `first_s` for the first answer, moved by each pending to
    `p2_star_s` from then, never past the budget. Counts the pendings per ECU."""

    def __init__(
        self, first_s: float, p2_star_s: float, budget_s: float, *, now: float | None = None
    ) -> None:
        self.started = time.monotonic() if now is None else now
        self.budget_s = max(budget_s, first_s)
        self.p2_star_s = p2_star_s
        self.end = self.started + self.budget_s
        self.deadline = min(self.started + max(first_s, 0.0), self.end)
        self.pendings: dict[int, int] = {}  # response id -> pending answers

    def pending(self, ident: int, now: float | None = None) -> None:
        """`ident`'s ECU said "response pending": wait P2* more (within the budget)."""
        now = time.monotonic() if now is None else now
        self.pendings[ident] = self.pendings.get(ident, 0) + 1
        self.deadline = max(self.deadline, min(now + self.p2_star_s, self.end))

    def left(self, now: float | None = None) -> float:
        """Seconds to the deadline (0 once it passed)."""
        return max(0.0, self.deadline - (time.monotonic() if now is None else now))

    def waited(self, now: float | None = None) -> float:
        """Seconds waited for answers so far: to now, or to the deadline once it passed
        (what happens after it, such as stopping an adapter, is no waiting)."""
        now = time.monotonic() if now is None else now
        return max(0.0, min(now, self.deadline) - self.started)

    def unanswered(self, ident: int, now: float | None = None) -> str:
        """Why `ident`'s ECU has no answer although it said "response pending"."""
        count = self.pendings.get(ident, 0)
        times = "once" if count == 1 else f"{count} times"
        return (
            f"it answered 'response pending' (0x78) {times} but sent no final answer "
            f"within {self.waited(now):.1f} s"
        )
