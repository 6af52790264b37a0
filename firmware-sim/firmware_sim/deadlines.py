"""When a diagnostic timer (S3, a lockout, a routine, a reboot) has run out.

Deadlines are sums of floats (`now + 0.2`), while a `SimulatedClock` lands on whole
nanoseconds: a nanosecond of slack makes 0.4 + 0.2 reached at 0.6, as the clock's own
scheduling does.
"""

from __future__ import annotations

from typing import Final

__all__ = ["reached"]

_SLACK_S: Final = 1e-9


def reached(now: float, deadline: float) -> bool:
    """Whether `deadline` has come at `now` (within a nanosecond)."""
    return now >= deadline - _SLACK_S
