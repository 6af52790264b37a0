"""Which diagnostic services that change an ECU's state or security may be sent: none unless
named (`obd_clear_dtcs`, `uds_0x2E`, `j1939_dm11`, `j1939_dm3`...; globs allowed)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Final

from hwbridge.core.models import ToolError
from hwbridge.policy.requests import ServiceRequest

__all__ = ["J1939_SERVICES", "SERVICE_NAMES", "ServiceRules", "service_pattern"]

J1939_SERVICES: Final = ("j1939_dm11", "j1939_dm3")
"""J1939 requests that change state: DM11 clears active trouble codes, DM3 previously active
ones."""

SERVICE_NAMES: Final = (
    "obd_clear_dtcs",
    *(f"uds_0x{sid:02X}" for sid in range(0x10, 0x100)),
    *J1939_SERVICES,
)
"""Every name a service that changes state can have (the policy judges these)."""

_UDS = re.compile(r"(?i)uds_0x([0-9a-f]{2})")


class ServiceRules:
    def __init__(self, allow_services: Iterable[str]) -> None:
        if isinstance(allow_services, str):
            raise TypeError(f"allow_services takes a list, e.g. [{allow_services!r}]")
        self.allow = tuple(service_pattern(p) for p in allow_services)

    def allows(self, service: str) -> bool:
        return any(fnmatch.fnmatchcase(service, pattern) for pattern in self.allow)

    def check(self, request: ServiceRequest) -> None:
        if not self.allows(request.service):
            allowed = ", ".join(self.allow) or "none (read-only)"
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"{request.service} changes the vehicle's state and is not allowed by the send "
                f"policy. Services that may be sent: {allowed}.",
            )


def service_pattern(pattern: str) -> str:
    """An allow_services entry in the policy's spelling (`uds_0x2e` -> `uds_0x2E`);
    ValueError when it names no service, so a typo never silently allows nothing."""
    text = str(pattern).strip()
    if match := _UDS.fullmatch(text):
        text = f"uds_0x{match.group(1).upper()}"
    elif text.lower() == "obd_clear_dtcs" or text.lower() in J1939_SERVICES:
        text = text.lower()
    if not any(fnmatch.fnmatchcase(name, text) for name in SERVICE_NAMES):
        raise ValueError(
            f"allow_services: {pattern!r} names no diagnostic service; they are "
            "obd_clear_dtcs, uds_0xNN by service id (uds_0x2E, uds_0x31, uds_0x11, ...), "
            "j1939_dm11 and j1939_dm3"
        )
    return text
