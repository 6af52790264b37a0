"""Health of CAN networks and the databases as loaded (spec section 14: healthcheck, raw_spec).

A health check reads what the adapter and the monitor already know (connection, controller
state, error counters, the age of the last frame); it sends nothing and waits for nothing,
so it is cheap enough to poll.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hwbridge.can.database.database import CanDatabase
from hwbridge.can.network import Network
from hwbridge.core.health import Health, HealthStatus, RawSpec

__all__ = ["SILENT_AFTER_S", "database_raw_spec", "network_health", "networks_health"]

SILENT_AFTER_S = 5.0
"""A connected bus with no frame for this long is reported `degraded` (a vehicle bus is
never quiet; silence usually means a loose connector or a sleeping network)."""

_FORMATS = {".dbc": "DBC", ".kcd": "KCD", ".sym": "SYM", ".arxml": "ARXML"}
_BAD_CONTROLLER = {"passive": "the CAN controller is error-passive", "error": "the bus is off"}
_STATUS_FIELDS = (
    "bus",
    "interface",
    "bus_state",
    "error_frames",
    "listener_errors",
    "reconnecting",
    "reconnects",
    "periodic_tasks",
    "last_error",
)


def network_health(network: Network, *, silent_after_s: float = SILENT_AFTER_S) -> Health:
    """One network: `offline` without a bus, `down` when not connected, `degraded` when
    connected but error-passive, bus-off, silent, or a finished replay; `ok` otherwise."""
    adapter, monitor = network.adapter, network.monitor
    details: dict[str, Any] = {"messages_in_database": len(network.db.messages)}
    if adapter is None or monitor is None:
        details["bus"] = None
        return Health(status="offline", details=details)
    status = adapter.status()
    extra = status.to_dict()
    details.update({k: extra.pop(k) for k in _STATUS_FIELDS})
    if extra.pop("connected", None) is not None and extra:
        details["source"] = extra  # a replayed capture: path, speed, progress, ...
    latest = monitor.latest_frames()
    age = None
    if latest:
        age = max(0.0, monitor.now() - max(r.timestamp for r in latest.values()))
    details["frames_total"] = monitor.frames_total
    details["last_frame_age_s"] = None if age is None else round(age, 3)
    details["adapter_answering"] = status.connected and not status.reconnecting

    problems: list[str] = []
    verdict: HealthStatus = "ok"
    if not status.connected:
        verdict = "down"
        reason = status.last_error or status.bus_state
        note = "; reconnecting" if status.reconnecting else ""
        problems.append(f"not connected ({reason}){note}")
    else:
        if status.bus_state in _BAD_CONTROLLER:
            problems.append(_BAD_CONTROLLER[status.bus_state])
        if status.bus_state == "finished":
            problems.append("the replay has finished")
        elif age is None:
            problems.append("no frame received yet")
        elif age > silent_after_s:
            problems.append(f"no frame for {age:.1f} s")
        if status.listener_errors:
            problems.append(f"{status.listener_errors} frame listener error(s)")
        if problems:
            verdict = "degraded"
    return Health(status=verdict, details=details, problems=problems)


def networks_health(
    networks: Iterable[Network], *, silent_after_s: float = SILENT_AFTER_S
) -> Health:
    """Every network by name; the status is the worst of theirs."""
    parts = {n.name: network_health(n, silent_after_s=silent_after_s) for n in networks}
    return Health.combine(parts)


def database_raw_spec(db: CanDatabase) -> RawSpec:
    """The database's source file as it is now (call it when the database is loaded)."""
    if db.path is None:
        return RawSpec(format="cantools", repaired=bool(db.repairs))
    path = Path(db.path)
    fmt = _FORMATS.get(path.suffix.lower(), path.suffix.lstrip(".").upper() or "unknown")
    try:
        data = path.read_bytes()
    except OSError:
        return RawSpec(format=fmt, source=str(path), repaired=bool(db.repairs))
    return RawSpec(
        format=fmt,
        source=str(path),
        text=_decode(data, fmt),
        sha256=hashlib.sha256(data).hexdigest(),
        repaired=bool(db.repairs),
    )


def _decode(data: bytes, fmt: str) -> str:
    """As the loader reads it: UTF-8 (with or without BOM), else cp1252 for DBC and SYM."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252" if fmt in ("DBC", "SYM") else "utf-8", errors="replace")
