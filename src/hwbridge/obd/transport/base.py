"""The port every diagnostic adapter implements (spec section 4: swappable adapters).

`ObdAdapter.request(payload, ecu=None)` sends one diagnostic request and returns what the
ECUs answered: functionally (ecu None) every ECU that answers within the time allowed,
physically only the ECU given. Both adapters (ISO-TP over python-can, an ELM327 on a serial
port) give the same replies for the same vehicle, so the tools never know which one runs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

from hwbridge.core.lifetime import Closing
from hwbridge.core.models import ToolError

__all__ = [
    "FUNCTIONAL_11",
    "FUNCTIONAL_29",
    "Addressing",
    "Ecu",
    "EcuReply",
    "ObdAdapter",
    "UnansweredRequest",
    "is_response_id",
]

FUNCTIONAL_11 = 0x7DF
FUNCTIONAL_29 = 0x18DB33F1
Addressing = Literal["auto", "11bit", "29bit"]

_NAMES_11 = {0x7E8: "engine", 0x7E9: "transmission"}
_NAMES_29 = {0x10: "engine", 0x18: "transmission"}


def is_response_id(arbitration_id: int, extended: bool) -> bool:
    """Whether a frame id is an OBD response to the tester (ISO 15765-4)."""
    if extended:
        return (arbitration_id & 0x1FFFFF00) == 0x18DAF100
    return 0x7E8 <= arbitration_id <= 0x7EF


@dataclass(frozen=True, slots=True)
class Ecu:
    """One ECU as ISO 15765-4 addresses it: where requests go, where its answers come from.

    Its `name` is what the driver reports and the tools accept: `engine` and `transmission`
    for the first two emission-related ECUs (0x7E8/0x7E9, or source address 0x10/0x18 with
    29-bit ids, by the standard's convention), `ecu_7EA` or `ecu_1A` for the others.
    """

    request_id: int
    response_id: int
    extended: bool

    @classmethod
    def from_response(cls, response_id: int, extended: bool) -> Ecu:
        if extended:
            source = response_id & 0xFF
            return cls(0x18DA00F1 | source << 8, response_id, True)
        return cls(response_id - 8, response_id, False)

    @property
    def name(self) -> str:
        if self.extended:
            source = self.response_id & 0xFF
            return _NAMES_29.get(source, f"ecu_{source:02X}")
        return _NAMES_11.get(self.response_id, f"ecu_{self.response_id:03X}")

    @property
    def address(self) -> str:
        """The request id as the tools write it: `0x7E0`, `0x18DA10F1`."""
        return f"0x{self.request_id:03X}" if not self.extended else f"0x{self.request_id:08X}"

    def describe(self) -> dict[str, Any]:
        width = 8 if self.extended else 3
        return {
            "name": self.name,
            "request_id": self.address,
            "response_id": f"0x{self.response_id:0{width}X}",
        }


@dataclass(frozen=True, slots=True)
class EcuReply:
    """One ECU's answer: the reassembled payload, or why it could not be completed.
    `request_cut`: the ECU stopped a multi-frame request part way (its flow control), so
    only part of the request went out."""

    ecu: Ecu
    data: bytes
    error: str | None = None
    request_cut: bool = False

    @property
    def complete(self) -> bool:
        return self.error is None


class UnansweredRequest(ToolError):
    """The adapter sent the request, but its answer did not finish in time. For a read it
    is a timeout like any other; for a service that changes state it is not a failure:
    the request reached the vehicle and may have taken effect."""


class ObdAdapter(Closing, ABC):
    """How requests reach the vehicle; one request at a time, safe to share between threads."""

    suppressed_wait_s: float | None = None
    """How long to wait for a negative answer to a request whose positive answer is
    suppressed (tester present `3E 80`); None: the adapter's own timeout (an ELM327 waits for
    its chip to say NO DATA, or the next command would interrupt it)."""

    @abstractmethod
    def request(
        self, payload: bytes, *, ecu: Ecu | None = None, timeout_s: float | None = None
    ) -> list[EcuReply]:
        """Send `payload` functionally (ecu None) or to `ecu`; every answer, in arrival
        order. A 0x78 "response pending" is waited through (`pending.PendingClock`), never
        returned; an ECU that pended but sent no final answer is an incomplete reply that
        says so. Raises ToolError when the request could not go out or the adapter failed."""

    @abstractmethod
    def ecus(self) -> list[Ecu]:
        """The ECUs that answered so far (found on connection), in address order."""

    @property
    @abstractmethod
    def extended(self) -> bool | None:
        """True with 29-bit ids, False with 11-bit ids, None before the vehicle answered."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-safe state for the health check and `obd_status`: transport, protocol,
        connection, counters, last error."""

    @abstractmethod
    def close(self) -> None:
        """Release what the adapter opened; idempotent."""
