"""Health reports in both SDKs' shapes: hwbridge's `Health` and the reference's
`HealthCheckResult` (`{"status": HealthStatus}` with OK, WARNING, ERROR, UNKNOWN)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcs.driver.core.mixins.healthcheck import HealthStatus

from hwbridge.core.health import Health
from hwbridge.core.health import HealthStatus as HwStatus
from hwbridge.core.jsonsafe import to_jsonable

__all__ = ["health_from_reference", "health_to_reference"]

_FROM_REFERENCE: Mapping[str, HwStatus] = {
    "OK": "ok",
    "WARNING": "degraded",
    "ERROR": "down",
    "UNKNOWN": "unknown",
}


def health_to_reference(health: Health) -> dict[str, Any]:
    """The reference's HealthCheckResult: its status, and hwbridge's report under `health`."""
    return {"status": health.get("status"), "health": health.model_dump(mode="json")}


def health_from_reference(result: object) -> Health:
    """A reference driver's health check as a Health; a malformed report is `unknown`,
    never healthy (as the reference orchestrator reads it)."""
    if not isinstance(result, Mapping):
        return Health(status="unknown", problems=["the health check returned no mapping"])
    raw = result.get("status")
    name = raw.value if isinstance(raw, HealthStatus) else str(raw)
    status = _FROM_REFERENCE.get(name, "unknown")
    details = {str(k): to_jsonable(v) for k, v in result.items() if k != "status"}
    problems = [] if name in _FROM_REFERENCE else [f"unrecognised status {name[:60]!r}"]
    return Health(status=status, details=details, problems=problems)
