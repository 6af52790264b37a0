"""How long a diagnostic request waits when an ECU says "response pending": one rule for
both adapters.

ISO 14229 lets an ECU that needs time answer `7F xx 78` (requestCorrectlyReceived-
ResponsePending); the tester then waits P2* (5 s) for the final answer, again after every
further pending. A request never waits past its budget, max(timeout, P2*) from when it went
out (udsoncan's overall request timeout), so an ECU that pends without end is bounded.
"""

from __future__ import annotations

import time

__all__ = ["PENDING", "PendingClock", "another_service_note", "for_another_service", "is_pending"]

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


def another_service_note(payload: bytes) -> str:
    """Why an ECU that answered only for another service has no answer to this request."""
    shown = payload[:8].hex(" ").upper()
    if payload[0] == NEGATIVE:
        return (
            f"it sent only a negative response to another service (0x{payload[1]:02X}: "
            f"{shown}), not an answer to this request"
        )
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
