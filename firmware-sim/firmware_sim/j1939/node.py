"""One simulated J1939 controller on the network: its address, its requests, its DM1.

- Address claim (J1939-81): at start the node sends Address Claimed (PGN 60928, to 0xFF,
  its NAME as data) and sends it again when asked (a Request for PGN 60928 to 0xFF or to
  its address). Another node claiming the same address with a lower NAME wins: the node,
  not arbitrary address capable, sends Cannot Claim Address (source 0xFE) and falls silent;
  with a higher NAME the contender loses and the node claims its address again.
- Requests (PGN 59904, J1939-21; data: the requested PGN, 3 bytes little endian): a
  supported PGN of up to 8 bytes is answered in one frame; a longer one with a BAM when
  the request went to everyone, with RTS/CTS to the requester when it went to this node.
  An unsupported PGN is answered with a negative Acknowledgement (PGN 59392, control byte
  1) when the request went to this node, with nothing when it went to everyone.
- Diagnostics (J1939-73): DM1 every second and on request, DM2 on request, DM11 and DM3
  clear the active and the previously active DTCs; a request sent to this node gets a
  positive Acknowledgement (control byte 0) for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import IntEnum
from typing import Final

import can
from firmware_sim.j1939.controllers import ControllerSpec
from firmware_sim.j1939.diagnostics import DtcStore
from firmware_sim.j1939.ids import (
    GLOBAL,
    NULL_ADDRESS,
    PGN_ACKNOWLEDGEMENT,
    PGN_ADDRESS_CLAIMED,
    PGN_DM1,
    PGN_DM2,
    PGN_DM3,
    PGN_DM11,
    frame,
)
from firmware_sim.j1939.transport import Transport

__all__ = ["Answer", "Node"]

log = logging.getLogger(__name__)

Answer = Callable[[int], tuple[bytes, int] | None]
"""What a node answers for a PGN: (payload, priority), or None when it does not support it."""
_PRIORITY: Final = 6


class Ack(IntEnum):
    """Control byte of the Acknowledgement (PGN 59392)."""

    POSITIVE = 0
    NEGATIVE = 1


class Node:
    """A controller application: `spec` says who it is, `answer` what it answers with.

    `send` puts one frame on the bus; `transport` sends what is longer than 8 bytes;
    `on_cleared` runs after a DM11 (the truck ends the conditions of the cleared faults).
    """

    def __init__(
        self,
        spec: ControllerSpec,
        *,
        send: Callable[[can.Message], None],
        transport: Transport,
        answer: Answer,
        on_cleared: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.address = spec.address
        self.name = spec.name
        self.dtcs = DtcStore()
        self._send = send
        self._transport = transport
        self._answer = answer
        self._on_cleared = on_cleared
        self._lock = threading.Lock()
        self._claimed = False
        self._lost = False
        self.requests_answered = 0

    @property
    def active(self) -> bool:
        """Whether the node holds its address (claimed and not lost to a contender)."""
        with self._lock:
            return self._claimed and not self._lost

    @property
    def lost(self) -> bool:
        with self._lock:
            return self._lost

    # -- address claim ----------------------------------------------------------------

    def claim(self) -> None:
        """Send Address Claimed for the node's address (or Cannot Claim once it lost it)."""
        with self._lock:
            source = NULL_ADDRESS if self._lost else self.address
            self._claimed = True
        self._send(frame(_PRIORITY, PGN_ADDRESS_CLAIMED, source, self.name))

    def on_address_claimed(self, sa: int, name: bytes) -> None:
        """Another node claimed `sa` with `name`."""
        if sa != self.address or len(name) != 8 or bytes(name) == self.name:
            return
        with self._lock:
            if self._lost:
                return
            ours, theirs = int.from_bytes(self.name, "little"), int.from_bytes(name, "little")
            self._lost = theirs < ours
        if theirs < ours:
            log.warning(
                "%s: address 0x%02X lost to NAME %s; cannot claim another",
                self.spec.key,
                sa,
                bytes(name).hex(),
            )
        self.claim()

    # -- requests ---------------------------------------------------------------------

    def on_request(self, requester: int, da: int, pgn: int) -> None:
        """A Request for `pgn` from `requester` to `da` (this node's address or 0xFF)."""
        addressed = da == self.address
        if not addressed and da != GLOBAL:
            return
        if pgn == PGN_ADDRESS_CLAIMED:
            with self._lock:
                claimed = self._claimed
            if claimed:
                self.claim()
            return
        if not self.active:
            return
        if pgn in (PGN_DM11, PGN_DM3):
            self._clear(pgn)
            if addressed:
                self._acknowledge(Ack.POSITIVE, requester, pgn)
            return
        found = self._payload(pgn)
        if found is None:
            if addressed:
                self._acknowledge(Ack.NEGATIVE, requester, pgn)
            return
        payload, priority = found
        self.requests_answered += 1
        self.send_pgn(pgn, payload, priority, requester if addressed else GLOBAL)

    def _payload(self, pgn: int) -> tuple[bytes, int] | None:
        if pgn == PGN_DM1:
            return self.dtcs.dm1(), _PRIORITY
        if pgn == PGN_DM2:
            return self.dtcs.dm2(), _PRIORITY
        return self._answer(pgn)

    def _clear(self, pgn: int) -> None:
        if pgn == PGN_DM3:
            self.dtcs.clear_previous()
            return
        self.dtcs.clear_active()
        if self._on_cleared is not None:
            self._on_cleared()

    def _acknowledge(self, control: Ack, requester: int, pgn: int) -> None:
        data = bytes([control, 0xFF, 0xFF, 0xFF, requester]) + pgn.to_bytes(3, "little")
        self._send(frame(_PRIORITY, PGN_ACKNOWLEDGEMENT, self.address, data, GLOBAL))

    # -- sending ----------------------------------------------------------------------

    def send_pgn(self, pgn: int, payload: bytes, priority: int, da: int = GLOBAL) -> None:
        """One frame up to 8 bytes; longer: RTS/CTS to `da`, or BAM when `da` is 0xFF (or
        the null address, which cannot take part in a connection)."""
        if len(payload) <= 8:
            self._send(frame(priority, pgn, self.address, payload, da))
        elif da in (GLOBAL, NULL_ADDRESS):
            self._transport.broadcast(self.address, pgn, payload)
        else:
            self._transport.send_to(self.address, da, pgn, payload)

    def send_dm1(self) -> None:
        """The periodic DM1 (every second, with or without a fault)."""
        if self.active:
            self.send_pgn(PGN_DM1, self.dtcs.dm1(), _PRIORITY)
