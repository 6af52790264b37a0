"""Address claiming (SAE J1939-81) for this node, as a pure state machine with the time
passed in.

A node claims an address by sending its NAME in an Address Claimed message (PGN 60928)
from that address; if another node claims the same address, the lower NAME keeps it. The
loser, when it is arbitrary-address capable, claims a free address in the self-configurable
range 128-247; when none is free (or it is not capable) it sends Cannot Claim (the claim
from the null address 254) and sends nothing else. A claim holds once `wait_s` (250 ms)
passed without a contest; a request for Address Claimed is answered with the claim.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from hwbridge.j1939.database.ids import ADDRESS_CLAIMED_PGN, GLOBAL, NULL_ADDRESS, make_id
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.transport.tp import TxFrame

__all__ = ["CLAIM_WAIT_S", "SELF_CONFIGURABLE", "AddressClaimer", "ClaimState", "claim_frame"]

CLAIM_WAIT_S = 0.25
RETRY_S = 5.0  # after Cannot Claim, how long before a new start() tries again
SELF_CONFIGURABLE = range(128, 248)
ClaimState = Literal["idle", "claiming", "claimed", "cannot_claim"]


def claim_frame(name: J1939Name, address: int) -> TxFrame:
    """Address Claimed (or Cannot Claim, from address 254) for `name`."""
    return TxFrame(make_id(ADDRESS_CLAIMED_PGN, address, GLOBAL, 6), name.to_bytes())


class AddressClaimer:
    """This node's address: `start` claims it, `on_claim` and `on_request` answer what the
    bus says, `poll` makes a claim hold after `wait_s`. `taken(address)` says whether
    another node is known at an address (a claim or frames heard from it)."""

    def __init__(
        self,
        name: J1939Name,
        preferred: int = 249,
        *,
        wait_s: float = CLAIM_WAIT_S,
        pool: Iterable[int] = SELF_CONFIGURABLE,
    ) -> None:
        if not 0 <= preferred <= 253:
            raise ValueError(f"an address to claim is 0..253, not {preferred}")
        self.name = name
        self.preferred = preferred
        self.wait_s = wait_s
        self.pool = tuple(a for a in pool if 0 <= a <= 253)
        self.state: ClaimState = "idle"
        self.address: int | None = None
        self.deadline = 0.0
        self.why: str | None = None  # why we cannot claim
        self.contests = 0  # claims for our address by others, won or lost
        self.retry_at = 0.0
        self._tried: set[int] = set()

    @property
    def holds(self) -> int | None:
        """The address once the claim holds, else None."""
        return self.address if self.state == "claimed" else None

    def owns(self, address: int) -> bool:
        """Whether `address` is ours (claimed or being claimed)."""
        return self.address == address and self.state in ("claiming", "claimed")

    def start(self, t: float, taken: Callable[[int], bool]) -> list[TxFrame]:
        """Claim the preferred address (a free one of the pool when another node is known
        there and we can move); nothing when already claiming or claimed."""
        if self.state in ("claiming", "claimed"):
            return []
        if self.state == "cannot_claim" and t < self.retry_at:
            return []
        self._tried.clear()
        self.why = None
        address = self.preferred
        if taken(self.preferred) and self.name.arbitrary_address_capable:
            address = self._free(taken) or self.preferred
        return self._claim(address, t)

    def _claim(self, address: int, t: float) -> list[TxFrame]:
        self.state = "claiming"
        self.address = address
        self._tried.add(address)
        self.deadline = t + self.wait_s
        return [claim_frame(self.name, address)]

    def _free(self, taken: Callable[[int], bool]) -> int | None:
        for address in self.pool:
            if address not in self._tried and not taken(address):
                return address
        return None

    def on_claim(
        self, source: int, name: J1939Name, t: float, taken: Callable[[int], bool]
    ) -> list[TxFrame]:
        """Another node claimed `source`: keep our address (our NAME is lower: claim again),
        or move, or give up."""
        if self.state not in ("claiming", "claimed") or source != self.address:
            return []
        theirs = name.to_int()
        ours = self.name.to_int()
        if theirs == ours:
            return []  # our own claim, heard back
        self.contests += 1
        if ours < theirs:
            return [claim_frame(self.name, source)]
        lost = source
        if self.name.arbitrary_address_capable:
            address = self._free(lambda a: a == lost or taken(a))
            if address is not None:
                return self._claim(address, t)
            self.why = (
                f"address {lost} was claimed by a node with a lower NAME and no address of "
                f"{self.pool[0]}-{self.pool[-1]} is free"
                if self.pool
                else f"address {lost} was claimed by a node with a lower NAME"
            )
        else:
            self.why = f"address {lost} was claimed by a node with a lower NAME"
        self.state = "cannot_claim"
        self.address = None
        self.retry_at = t + RETRY_S
        return [claim_frame(self.name, NULL_ADDRESS)]

    def on_request(self, destination: int) -> list[TxFrame]:
        """A request for Address Claimed to `destination`: our claim (or Cannot Claim)."""
        if self.state in ("claiming", "claimed") and destination in (GLOBAL, self.address):
            assert self.address is not None
            return [claim_frame(self.name, self.address)]
        if self.state == "cannot_claim" and destination == GLOBAL:
            return [claim_frame(self.name, NULL_ADDRESS)]
        return []

    def poll(self, t: float) -> None:
        if self.state == "claiming" and t >= self.deadline:
            self.state = "claimed"

    def reset(self, why: str | None = None) -> None:
        """Forget the claim (the bus could not carry it)."""
        self.state = "idle"
        self.address = None
        self.why = why
