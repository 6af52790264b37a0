"""What the J1939 tools share: how a source address, a diagnostic message and a list are
shown to a model (bounded, JSON-safe, every list with total/returned/truncated)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hwbridge.core.models import ToolError
from hwbridge.j1939.database.catalog import J1939Database
from hwbridge.j1939.database.dm import parse_dm
from hwbridge.j1939.database.ids import GLOBAL
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.database.tables import address_name
from hwbridge.j1939.transport.link import Heard

__all__ = [
    "MAX_DTCS_SHOWN",
    "MAX_SOURCES",
    "J1939Settings",
    "age",
    "counted",
    "dm_entry",
    "put",
    "source_info",
    "target",
]

MAX_SOURCES = 32  # answers (sources) shown per call
MAX_DTCS_SHOWN = 40  # trouble codes shown per source

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class J1939Settings:
    """The tools' times: DM1 is held for `dm1_window_s` (an ECU broadcasts it every second);
    a request waits `request_timeout_s` unless the call says otherwise."""

    dm1_window_s: float = 1.5
    request_timeout_s: float = 2.0


def age(t: float, now: float | None = None) -> float:
    """Seconds since monotonic time `t`, rounded for a model to read."""
    return round(max(0.0, (time.monotonic() if now is None else now) - t), 3)


def counted(items: Sequence[T], limit: int) -> tuple[list[T], dict[str, Any]]:
    """The first `limit` items and their total/returned/truncated."""
    shown = list(items[:limit])
    return shown, {
        "total": len(items),
        "returned": len(shown),
        "truncated": len(shown) < len(items),
    }


def put(result: dict[str, Any], key: str, items: Sequence[Any]) -> None:
    """A secondary list (NACKs, aborts, sources no longer current...) into `result`: at most
    MAX_SOURCES items, and `<key>_total`, `<key>_truncated` when there were more."""
    result[key] = list(items[:MAX_SOURCES])
    if len(items) > MAX_SOURCES:
        result[f"{key}_total"] = len(items)
        result[f"{key}_truncated"] = True


def source_info(address: int, claims: Mapping[int, tuple[J1939Name, float]]) -> dict[str, Any]:
    """An address as a model reads it: the number, what it is usually for, and the function
    its claimed NAME says."""
    out: dict[str, Any] = {"source": address}
    preferred = address_name(address)
    if preferred:
        out["preferred_for"] = preferred
    claim = claims.get(address)
    if claim is not None:
        described = claim[0].describe()
        out["function"] = described["function"]
        if described["function_name"]:
            out["function_name"] = described["function_name"]
    return out


def dm_entry(heard: Heard, db: J1939Database, now: float) -> dict[str, Any]:
    """One DM1/DM2 payload: lamps, flashing, the codes (bounded), how it came."""
    out: dict[str, Any] = {"heard_s_ago": age(heard.t, now), "transport": heard.transport}
    try:
        dm = parse_dm(heard.data, db.database_spn_name)
    except ValueError as exc:
        out["problem"] = f"not a diagnostic message: {exc}"
        out["data"] = heard.data[:16].hex(" ").upper()
        return out
    out["lamps"] = dm.lamps.model_dump()
    if dm.flashing:
        out["flashing"] = dict(dm.flashing)
    codes = []
    for dtc in dm.dtcs:
        code: dict[str, Any] = {"spn": dtc.spn}
        if dtc.spn_name:
            code["spn_name"] = dtc.spn_name
        code["fmi"] = dtc.fmi
        if dtc.fmi_text:
            code["fmi_text"] = dtc.fmi_text
        code["occurrence_count"] = dtc.occurrence_count
        if dtc.conversion_method:
            code["conversion_method"] = 1
        codes.append(code)
    shown, meta = counted(codes, MAX_DTCS_SHOWN)
    out["dtcs"] = shown
    out.update({f"dtcs_{k}": v for k, v in meta.items()})
    return out


def target(address: Any) -> int:
    """The `address` argument as a destination (GLOBAL when absent); bounded 0..253."""
    if address is None:
        return GLOBAL
    if isinstance(address, bool) or not isinstance(address, int) or not 0 <= address <= 253:
        raise ToolError(
            "INVALID_VALUE", f"address must be a source address 0..253, not {address!r}."
        )
    return address
