"""How long a diagnostic request waits when an ECU says "response pending": one rule for
both adapters.

ISO 14229 lets an ECU that needs time answer `7F xx 78` (requestCorrectlyReceived-
ResponsePending); the tester then waits P2* (5 s) for the final answer, again after every
further pending. A request never waits past its budget, max(timeout, P2*) from when it went
out (udsoncan's overall request timeout), so an ECU that pends without end is bounded.
"""

from __future__ import annotations

import time

__all__ = ["PENDING", "PendingClock", "is_pending"]

PENDING = 0x78


def is_pending(payload: bytes) -> bool:
    """Whether an answer is a "response pending" (`7F xx 78`), never a final answer."""
    return len(payload) >= 3 and payload[0] == 0x7F and payload[2] == PENDING


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

    def unanswered(self, ident: int) -> str:
        """Why `ident`'s ECU has no answer although it said "response pending"."""
        count = self.pendings.get(ident, 0)
        times = "once" if count == 1 else f"{count} times"
        return (
            f"it answered 'response pending' (0x78) {times} but sent no final answer "
            f"within {self.deadline - self.started:.1f} s"
        )
