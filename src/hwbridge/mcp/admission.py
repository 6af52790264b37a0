"""Who may hold one of the HTTP server's connections.

A connection is *silent* until the server has read its first bytes. Silent connections
wait apart, in a room of their own (`max_silent`): the server accepts connections in batches
and calls each one's `connection_made` before it reads any of them, so at that moment a
client that has the token looks just like one that will never send anything. A silent
connection is never closed to make room for another one during its first `silent_grace_s`:
when the room is full of connections that young, the newcomer is refused (503); once they
are older, a newcomer closes the oldest of them. So a burst of silent connections cannot
close a client that connected before it, and a client that speaks promptly leaves the room
before anything can close it.

When its first bytes are read, a connection joins the others, *unproven* until one of its
requests has a head that passed the token check (with no token configured: until it has
delivered a whole request head). Beyond a cap (`max_connections` in all, or
`max_unproven_per_client` unproven per client address) the unproven connection that
connected first in that cap's scope (the client's own, then anyone's) is closed to make
room: it has had the longest time to prove itself, while a client that has the token proves
it with its first request. A proven connection is closed to make room only for another
proven one, and only if it is between requests or holding an event stream (a GET whose
response is under way), the one waiting longest first: never while it sends a request or
awaits its answer. When no connection can be closed, the newcomer is refused. So
connections without the token cannot keep the token holder out, and streams left open
cannot keep out a new client that has the token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Admission", "Held", "check_caps"]

MAX_SILENT = 512
SILENT_GRACE_S = 0.1


def check_caps(
    max_connections: int,
    max_unproven_per_client: int,
    max_silent: int = MAX_SILENT,
    silent_grace_s: float = SILENT_GRACE_S,
) -> None:
    if not 1 <= max_unproven_per_client <= max_connections:
        raise ValueError(
            "the caps must be 1 <= max_unproven_per_client <= max_connections, not "
            f"{max_unproven_per_client} and {max_connections}"
        )
    if max_silent < 1:
        raise ValueError(f"max_silent must be at least 1, not {max_silent}")
    if not (math.isfinite(silent_grace_s) and silent_grace_s >= 0):
        raise ValueError(f"silent_grace_s must be 0 or more, not {silent_grace_s}")


class Held(Protocol):
    """A connection as admission sees it."""

    @property
    def peer(self) -> str:
        """The client's address (all of a client's connections share it)."""
        ...

    @property
    def idle_since(self) -> float | None:
        """For a proven connection: since when (`time.monotonic()`) it has been between
        requests or holding an event stream; None while a request is sent or answered."""
        ...

    def evict(self) -> None:
        """Close the connection to make room for a newer one."""
        ...


class Admission:
    """The connections held now, and when each connected: silent, unproven and proven."""

    def __init__(
        self,
        max_connections: int,
        max_unproven_per_client: int,
        max_silent: int = MAX_SILENT,
        silent_grace_s: float = SILENT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_caps(max_connections, max_unproven_per_client, max_silent, silent_grace_s)
        self.max_connections = max_connections
        self.max_unproven_per_client = max_unproven_per_client
        self.max_silent = max_silent
        self.silent_grace_s = silent_grace_s
        self._clock = clock
        self._silent: dict[Held, float] = {}  # when each connected; insertion order: oldest first
        self._unproven: dict[Held, float] = {}  # when each connected
        self._proven: set[Held] = set()
        self.evicted = 0  # closed to make room, unproven or silent
        self.evicted_proven = 0  # proven, idle or streaming, closed for a newer proven one
        self.refused = 0

    def __len__(self) -> int:
        return len(self._silent) + len(self._unproven) + len(self._proven)

    def arrive(self, new: Held) -> bool:
        """Hold `new`, just connected (silent): closing the oldest silent connection if the
        room is full and it is past its grace; False (not held) if all are younger."""
        if len(self._silent) >= self.max_silent:
            oldest, since = next(iter(self._silent.items()))
            if self._clock() - since < self.silent_grace_s:
                self.refused += 1
                return False
            del self._silent[oldest]
            self.evicted += 1
            oldest.evict()
        self._silent[new] = self._clock()
        return True

    def admit(self, new: Held, proven: bool = False) -> bool:
        """Hold `new`, which has just sent its first bytes (`proven`: they carry the token),
        closing what stands in its way; False (and `new` is not held) if nothing may be
        closed. A connection that did not `arrive` counts as connected now."""
        since = self._silent.pop(new, None)
        connected = self._clock() if since is None else since
        if not proven:
            mine = {c: t for c, t in self._unproven.items() if c.peer == new.peer}
            if len(mine) >= self.max_unproven_per_client:
                self._evict(mine)
        if len(self._unproven) + len(self._proven) >= self.max_connections:
            if self._unproven:
                self._evict(self._unproven)
            elif not (proven and self._evict_idle_proven()):
                self.refused += 1
                return False
        if proven:
            self._proven.add(new)
        else:
            self._unproven[new] = connected
        return True

    def prove(self, held: Held) -> None:
        """`held` has sent a request with the token: from now on it is closed only to make
        room for another proven connection, and only while idle or streaming."""
        if held in self._unproven:
            del self._unproven[held]
            self._proven.add(held)

    def is_proven(self, held: Held) -> bool:
        return held in self._proven

    def leave(self, held: Held) -> None:
        """`held` is closed (whatever closed it); idempotent."""
        self._silent.pop(held, None)
        self._unproven.pop(held, None)
        self._proven.discard(held)

    def _evict(self, candidates: dict[Held, float]) -> None:
        """Close the unproven connection among `candidates` that connected first."""
        held = min(candidates, key=candidates.__getitem__)
        del self._unproven[held]
        self.evicted += 1
        held.evict()

    def _evict_idle_proven(self) -> bool:
        """Close the proven connection idle or streaming the longest, if there is one."""
        idle = [(since, c) for c in self._proven if (since := c.idle_since) is not None]
        if not idle:
            return False
        _, held = min(idle, key=lambda pair: pair[0])
        self._proven.discard(held)
        self.evicted_proven += 1
        held.evict()
        return True
