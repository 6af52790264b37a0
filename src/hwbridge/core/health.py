"""Health and raw source specs (spec section 14): what a driver says about its connection
and the description it was built from.

A driver that can report them lists the capability flags `healthcheck` and `raw_spec` and has
`healthcheck() -> Health` and `raw_spec() -> dict[str, RawSpec]`. Composite drivers (the
Orchestrator, the decorators) ask their parts through `health_of` and `raw_spec_of`, so a
new bridge (serial, diagnostics) plugs in by implementing the two methods and the flags.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.core.contract import Capability

__all__ = [
    "Health",
    "HealthStatus",
    "RawSpec",
    "SupportsHealthcheck",
    "SupportsRawSpec",
    "health_of",
    "raw_spec_of",
    "worst_status",
]

HealthStatus = Literal["ok", "degraded", "down", "offline", "unknown"]
"""ok: connected and hearing from the device; degraded: connected but something is wrong
(error-passive bus, silence, a finished replay); down: not connected (reconnecting or not);
offline: built without a connection on purpose (catalog only); unknown: cannot tell."""

# How bad each status is when parts are combined: offline and unknown say nothing against
# the others, so an orchestrator with one live bus and one offline catalog is ok.
_RANK: Mapping[str, int] = {"offline": 0, "unknown": 0, "ok": 1, "degraded": 2, "down": 3}


class Health(BaseModel):
    """A snapshot of a driver's connection: overall status, JSON-safe details, and the same
    for each part (a network, a port, an orchestrator's drivers by label)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: HealthStatus
    checked_at: float = Field(default_factory=time.time, description="Unix time of the check")
    details: dict[str, Any] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    parts: dict[str, Health] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True unless the status is `degraded` or `down`."""
        return _RANK[self.status] < _RANK["degraded"]

    # The MCS reference SDK reads a health check as its `HealthCheckResult` mapping.
    def get(self, key: str, default: Any = None) -> Any:
        """`health.get("status")` as the reference SDK reads it: its `HealthStatus` (OK for
        ok and offline, WARNING for degraded, ERROR for down, UNKNOWN); other keys are
        this report's fields."""
        if key == "status":
            return _reference_status(self.status)
        return getattr(self, key) if key in type(self).model_fields else default

    def __getitem__(self, key: str) -> Any:
        if key != "status" and key not in type(self).model_fields:
            raise KeyError(key)
        return self.get(key)

    @classmethod
    def combine(cls, parts: Mapping[str, Health], **details: Any) -> Health:
        """A report whose status is the worst of its parts'."""
        return cls(
            status=worst_status(p.status for p in parts.values()),
            details=details,
            parts=dict(parts),
        )


class RawSpec(BaseModel):
    """A source specification as it was loaded: a DBC, KCD, SYM, ARXML file, a device spec."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = Field(examples=["DBC"])
    source: str | None = Field(default=None, description="the path it was loaded from")
    text: str | None = Field(
        default=None, description="the text as loaded; None when built in memory"
    )
    sha256: str | None = None
    repaired: bool = Field(
        default=False,
        description="True when it loaded only after in-memory repairs; `text` is the original",
    )


@runtime_checkable
class SupportsHealthcheck(Protocol):
    def healthcheck(self) -> Health: ...


@runtime_checkable
class SupportsRawSpec(Protocol):
    def raw_spec(self) -> dict[str, RawSpec]: ...


_REFERENCE_STATUS: Mapping[str, str] = {
    "ok": "OK",
    "offline": "OK",  # built without a connection on purpose: nothing is wrong
    "degraded": "WARNING",
    "down": "ERROR",
    "unknown": "UNKNOWN",
}


def _reference_status(status: str) -> Any:
    """The reference SDK's HealthStatus member (its name as text without the SDK)."""
    name = _REFERENCE_STATUS.get(status, "UNKNOWN")
    try:
        from mcs.driver.core.mixins.healthcheck import HealthStatus as Reference
    except ImportError:
        return name
    return Reference(name)


def worst_status(statuses: Iterable[str]) -> HealthStatus:
    """The worst of `statuses`; `offline` when all are offline, `unknown` when none is known."""
    seen = list(statuses)
    if not seen:
        return "unknown"
    worst = max(seen, key=lambda s: _RANK.get(s, 0))
    if _RANK.get(worst, 0) > 0:
        return worst  # type: ignore[return-value]
    return "offline" if all(s == "offline" for s in seen) else "unknown"


def _flagged(driver: object, flag: Capability) -> bool:
    meta = getattr(driver, "meta", None)
    return flag.value in getattr(meta, "capabilities", ())


def health_of(driver: object) -> Health:
    """The driver's `healthcheck()` when it advertises one; `unknown` otherwise, or when the
    check itself fails (the error is in `problems`: a health check never raises)."""
    if not (_flagged(driver, Capability.HEALTHCHECK) and isinstance(driver, SupportsHealthcheck)):
        return Health(status="unknown", problems=["this driver has no health check"])
    try:
        return driver.healthcheck()
    except Exception as exc:
        return Health(status="unknown", problems=[f"the health check failed: {exc}"[:300]])


def raw_spec_of(driver: object) -> dict[str, RawSpec]:
    """The driver's `raw_spec()` when it advertises one; empty otherwise."""
    if not (_flagged(driver, Capability.RAW_SPEC) and isinstance(driver, SupportsRawSpec)):
        return {}
    return driver.raw_spec()
