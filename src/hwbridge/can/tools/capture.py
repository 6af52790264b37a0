"""capture: record the bus for a while and summarise it, never dump frames.

Per message: count, rate, mean period and its deviation from the database's cycle time.
Per signal: min, max, mean, last value and number of changes (labels counted as labels).
The size of the result is bounded whatever the bus carries.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from itertools import pairwise
from typing import Any

from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.adapter import CanAdapter
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord, frame_id_text
from hwbridge.core.models import ToolError

__all__ = ["MAX_CAPTURE_MS", "capture"]

MAX_CAPTURE_MS = 10_000
MAX_MESSAGES = 40  # summarised in full; the rest are counted by name
MAX_UNKNOWN_IDS = 20
MAX_SIGNALS = 40  # summarised per message; the rest are counted
MAX_DECODED = 1000  # frames decoded per message for signal statistics (the newest ones)
_WATCH_SLICE_S = 0.02  # how often the bus's state is looked at during a capture


class _SignalStats:
    __slots__ = ("changes", "count", "labels", "last", "maximum", "minimum", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.minimum = math.inf
        self.maximum = -math.inf
        self.last: Any = None
        self.changes = 0
        self.labels: Counter[str] = Counter()

    def add(self, value: Any) -> None:
        if self.count and value != self.last:
            self.changes += 1
        self.last = value
        self.count += 1
        if isinstance(value, dict):
            label = value.get("label")
            if isinstance(label, str):
                self.labels[label] += 1
            value = value.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool):
            self.total += value
            self.minimum = min(self.minimum, value)
            self.maximum = max(self.maximum, value)

    def summary(self, unit: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.minimum <= self.maximum:
            out["min"] = _num(self.minimum)
            out["max"] = _num(self.maximum)
            out["mean"] = _num(round(self.total / self.count, 6))
        if unit:
            out["unit"] = unit
        out["last"] = self.last
        out["changes"] = self.changes
        if self.labels:
            out["labels"] = dict(self.labels.most_common(10))
        return out


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def capture(
    db: CanDatabase,
    monitor: BusMonitor,
    duration_ms: float,
    messages: list[str] | None = None,
    *,
    adapter: CanAdapter | None = None,
) -> dict[str, Any]:
    """Watch the bus for `duration_ms` (bounded) and summarise what the monitor received.

    With `adapter`, its status is watched meanwhile: a bus that goes down ends the capture
    at once, and the summary covers the frames up to the loss (rates over that time only)
    with `complete: false` and `bus_down` saying when and why; BUS_DOWN when nothing was
    received before it.
    """
    duration_s = min(max(float(duration_ms), 10.0), MAX_CAPTURE_MS) / 1000.0
    wanted: set[int] | None = None
    if messages:
        wanted = {id(db.message(name)) for name in messages}
    if duration_s > monitor.history_s:
        raise ToolError(
            "INVALID_VALUE",
            f"the monitor keeps {monitor.history_s:g} s of history; capture at most that",
        )
    start = monitor.now()
    lost = _watch(adapter, duration_s)
    end = monitor.now()
    frames = monitor.history(start=start, end=end)
    if lost is not None and not frames:
        raise ToolError(
            "BUS_DOWN",
            f"The bus went down {(end - start) * 1000:.0f} ms into the capture ({lost}) before"
            " any frame was received; it is being reopened, try again in a few seconds.",
            retryable=True,
        )
    window_s = max(end - start, 1e-3)
    by_message: dict[int, list[FrameRecord]] = {}
    names: dict[int, Any] = {}
    unknown: Counter[tuple[int, bool]] = Counter()
    errors = 0
    for rec in frames:
        if rec.is_error_frame:
            errors += 1
            continue
        message = db.message_for_frame(rec.arbitration_id, rec.is_extended_id)
        if message is None:
            unknown[rec.arbitration_id, rec.is_extended_id] += 1
            continue
        key = id(message)
        if wanted is not None and key not in wanted:
            continue
        names[key] = message
        by_message.setdefault(key, []).append(rec)
    ranked = sorted(by_message, key=lambda k: -len(by_message[k]))
    summaries = {
        names[k].name: _summarise(db, names[k], by_message[k], window_s)
        for k in ranked[:MAX_MESSAGES]
    }
    out: dict[str, Any] = {
        "duration_ms": round(window_s * 1000),
        "frames": len(frames),
        "messages": summaries,
        "total": len(ranked),  # messages received; `returned` of them are summarised
        "returned": len(summaries),
        "truncated": len(summaries) < len(ranked),
    }
    if lost is not None:
        out["complete"] = False
        out["bus_down"] = {
            "after_ms": round(window_s * 1000),
            "requested_ms": round(duration_s * 1000),
            "reason": lost,
            "note": "the bus went down during the capture: counts and rates cover only the"
            " time before the loss",
        }
    if len(ranked) > MAX_MESSAGES:
        out["more_messages"] = {names[k].name: len(by_message[k]) for k in ranked[MAX_MESSAGES:]}
    if wanted is not None:
        silent = [db.message(n).name for n in messages or () if id(db.message(n)) not in names]
        if silent:
            out["not_received"] = silent
    if unknown and wanted is None:
        out["unknown_ids"] = {
            frame_id_text(aid, ext): n for (aid, ext), n in unknown.most_common(MAX_UNKNOWN_IDS)
        }
    if errors:
        out["error_frames"] = errors
    return out


def _watch(adapter: CanAdapter | None, duration_s: float) -> str | None:
    """Sleep `duration_s` in slices; the reason as soon as the bus is found down."""
    deadline = time.monotonic() + duration_s
    reconnects = None if adapter is None else adapter.status().reconnects
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, _WATCH_SLICE_S))
        if adapter is None:
            continue
        status = adapter.status()
        if status.bus_state == "closed":
            raise ToolError("BUS_CLOSED", "This driver was closed during the capture.")
        if not status.connected and status.bus_state != "finished":  # a finished replay: quiet
            return status.last_error or status.bus_state
        if status.reconnects != reconnects:
            return "the bus was lost and reconnected"
    return None


def _summarise(
    db: CanDatabase, message: Any, frames: list[FrameRecord], duration_s: float
) -> dict[str, Any]:
    count = len(frames)
    out: dict[str, Any] = {"count": count, "rate_hz": round(count / duration_s, 2)}
    if count > 1:
        span = frames[-1].timestamp - frames[0].timestamp
        period_ms = span / (count - 1) * 1000
        out["mean_period_ms"] = round(period_ms, 2)
        gaps = [(b.timestamp - a.timestamp) * 1000 for a, b in pairwise(frames)]
        out["max_gap_ms"] = round(max(gaps), 2)
        cycle = message.cycle_time
        if cycle:
            out["cycle_time_ms"] = cycle
            out["cycle_deviation_percent"] = round((period_ms - cycle) / cycle * 100, 1)
    stats: dict[str, _SignalStats] = {}
    decoded = frames[-MAX_DECODED:]
    for rec in decoded:
        for name, value in db.decode(message, rec.data).signals.items():
            stats.setdefault(name, _SignalStats()).add(value)
    units = {spec.name: spec.unit for spec in db.signals(message)}
    names = list(stats)
    out["signals"] = {name: stats[name].summary(units.get(name)) for name in names[:MAX_SIGNALS]}
    if len(names) > MAX_SIGNALS:
        out["more_signals"] = len(names) - MAX_SIGNALS
    if len(decoded) < count:
        out["signals_from_last_frames"] = len(decoded)
    return out
