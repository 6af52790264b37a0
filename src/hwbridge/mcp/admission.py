"""Who may hold one of the HTTP server's connections: a global cap, and a smaller cap per
client address on the connections that have not yet proven the bearer token.

A connection is *unproven* until one of its requests has a head that passed the token check
(with no token configured: until it has delivered a whole request head). When a new
connection would exceed a cap, the oldest unproven connection in that cap's scope (the
client's own, then anyone's) is closed to make room: it has had the longest time to prove
itself, while a client that has the token proves it within one round trip. The oldest that
has already sent something goes first: the server accepts connections in batches before it
reads any of them, and a connection not read yet has not had its chance. Proven
connections are never closed to make room; when they alone fill a cap, the new connection
is refused. So connections without the token cannot keep the token holder out, and one
address cannot evict the unproven connections of others before its own.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Admission", "Held", "check_caps"]


def check_caps(max_connections: int, max_unproven_per_client: int) -> None:
    if not 1 <= max_unproven_per_client <= max_connections:
        raise ValueError(
            "the caps must be 1 <= max_unproven_per_client <= max_connections, not "
            f"{max_unproven_per_client} and {max_connections}"
        )


class Held(Protocol):
    """A connection as admission sees it."""

    @property
    def peer(self) -> str:
        """The client's address (all of a client's connections share it)."""
        ...

    @property
    def heard(self) -> bool:
        """The client has sent something on it (the server has read it)."""
        ...

    def evict(self) -> None:
        """Close the connection to make room for a newer one."""
        ...


class Admission:
    """The connections held now, oldest first, and which of them proved the token."""

    def __init__(self, max_connections: int, max_unproven_per_client: int) -> None:
        check_caps(max_connections, max_unproven_per_client)
        self.max_connections = max_connections
        self.max_unproven_per_client = max_unproven_per_client
        self._unproven: dict[Held, None] = {}  # insertion order: the oldest first
        self._proven: set[Held] = set()
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._unproven) + len(self._proven)

    def admit(self, new: Held) -> bool:
        """Hold `new` (unproven), closing the oldest unproven connections that stand in its
        way; False (and `new` is not held) if proven connections alone fill a cap."""
        mine = [held for held in self._unproven if held.peer == new.peer]
        if len(mine) >= self.max_unproven_per_client:
            self._evict(mine)
        if len(self) >= self.max_connections:
            if not self._unproven:
                self.refused += 1
                return False
            self._evict(list(self._unproven))
        self._unproven[new] = None
        return True

    def prove(self, held: Held) -> None:
        """`held` has sent a request with the token: it is never evicted from now on."""
        if held in self._unproven:
            del self._unproven[held]
            self._proven.add(held)

    def is_proven(self, held: Held) -> bool:
        return held in self._proven

    def leave(self, held: Held) -> None:
        """`held` is closed (whatever closed it); idempotent."""
        self._unproven.pop(held, None)
        self._proven.discard(held)

    def _evict(self, candidates: list[Held]) -> None:
        """Close the oldest of `candidates` (unproven, oldest first) that has been heard
        from, or the oldest."""
        held = next((c for c in candidates if c.heard), candidates[0])
        del self._unproven[held]
        self.evicted += 1
        held.evict()
