"""A token bucket: so many events per second with a one-second burst, exact under threads.

Shared by every rate limit in hwbridge (the RateLimit decorator, the send policy), so that
all of them count, refuse and recover the same way.
"""

from __future__ import annotations

import math
import threading
import time

__all__ = ["TokenBucket"]


class TokenBucket:
    """`rate` events per second; a burst of at most max(1, rate) after a quiet second.

    `take(reserved)` spends one token; `reserved` events per second (say, running periodic
    sends) come off the refill rate and the burst first, so they and the one-off events
    together never exceed `rate`.
    """

    def __init__(self, rate: float) -> None:
        if not rate > 0:
            raise ValueError("a rate limit must be a positive number of events per second")
        self.rate = float(rate)
        self._tokens = max(1.0, self.rate)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self, reserved: float = 0.0) -> float:
        """Take a token; return 0 on success, else the seconds until one would be there."""
        free = self.rate - reserved
        if free <= 0:
            return math.inf
        with self._lock:
            now = time.monotonic()
            capacity = max(1.0, free)
            self._tokens = min(capacity, self._tokens + (now - self._stamp) * free)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) / free
