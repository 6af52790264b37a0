"""Which diagnostic services that change an ECU's state or security may be sent: none unless
named (`obd_clear_dtcs`, `uds_0x2E`...; globs allowed)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from hwbridge.core.models import ToolError
from hwbridge.policy.requests import ServiceRequest

__all__ = ["ServiceRules"]


class ServiceRules:
    def __init__(self, allow_services: Iterable[str]) -> None:
        if isinstance(allow_services, str):
            raise TypeError(f"allow_services takes a list, e.g. [{allow_services!r}]")
        self.allow = tuple(allow_services)

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
