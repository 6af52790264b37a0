"""SendPolicy: what may be sent onto a bus, how fast, and with whose consent.

Sending a frame can move a real actuator, so the default policy is read-only and every send
(one-shot, raw or periodic) passes `SendPolicy.check` before anything reaches the adapter.
A refusal is a `ToolError` with a stable code; it never counts as a success.
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from hwbridge.core.models import ToolError

__all__ = ["SendPolicy", "SendRequest"]

SendKind = Literal["message", "raw", "periodic"]


@dataclass(frozen=True, slots=True)
class SendRequest:
    """One intended transmission, as the policy and a consent callback see it."""

    kind: SendKind
    arbitration_id: int
    data: bytes
    is_extended: bool = False
    message: str | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    period_ms: float | None = None
    tool: str | None = None

    def describe(self) -> dict[str, Any]:
        frame = {
            "id": f"0x{self.arbitration_id:X}",
            "extended": self.is_extended,
            "data": self.data.hex(" ").upper(),
        }
        out: dict[str, Any] = {"kind": self.kind, "frame": frame}
        if self.message:
            out["message"] = self.message
        if self.signals:
            out["signals"] = dict(self.signals)
        if self.period_ms is not None:
            out["period_ms"] = self.period_ms
        if self.tool:
            out["tool"] = self.tool
        return out


ConsentCallback = Callable[[SendRequest], bool]


class _TokenBucket:
    """Frames per second with a one-second burst; exact under concurrent senders."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int = 1) -> float:
        """Take n tokens; return 0 on success, else the seconds until they would be there."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= n:
                self._tokens -= n
                return 0.0
            return (n - self._tokens) / self.rate


class SendPolicy:
    """Read-only unless told otherwise.

    allow_messages: message names (globs allowed, e.g. "Climate*") that may be sent.
    signal_limits: {"Message.Signal": (min, max)}, narrower than the database's ranges.
    allow_raw_frames: permits `send_frame` (raw id + bytes, no database checks).
    allow_ids: when given, raw frames may only use these arbitration ids.
    max_frames_per_second: for all sends together, periodic ones included.
    require_consent: every send asks `consent(request)`; no callback or False refuses it.
    dry_run: everything is checked and encoded, nothing is transmitted.
    audit_log: path of a JSON-lines file; every send and refusal is appended.
    """

    def __init__(
        self,
        *,
        allow_messages: Iterable[str] = (),
        signal_limits: Mapping[str, tuple[float, float]] | None = None,
        allow_raw_frames: bool = False,
        max_frames_per_second: float = 20,
        require_consent: bool = False,
        dry_run: bool = False,
        audit_log: str | Path | None = None,
        allow_ids: Iterable[int] | None = None,
        consent: ConsentCallback | None = None,
    ) -> None:
        if max_frames_per_second <= 0:
            raise ValueError("max_frames_per_second must be positive")
        if isinstance(allow_messages, str):
            raise TypeError("allow_messages takes a list of names, e.g. ['ClimateCommand']")
        self._allow = tuple(allow_messages)
        limits = dict(signal_limits or {})
        for key, bounds in limits.items():
            lo, hi = bounds
            if "." not in key or lo > hi:
                raise ValueError(
                    f"signal_limits[{key!r}] must be 'Message.Signal': (min, max) with min <= max"
                )
        self._limits = {k: (float(v[0]), float(v[1])) for k, v in limits.items()}
        self._raw = allow_raw_frames
        self._ids = frozenset(allow_ids) if allow_ids is not None else None
        self._rate = float(max_frames_per_second)
        self._consent_required = require_consent
        self._consent = consent
        self._dry_run = dry_run
        self._audit = Path(audit_log) if audit_log is not None else None
        self._audit_lock = threading.Lock()
        self._bucket = _TokenBucket(self._rate)
        self._periodic_lock = threading.Lock()
        self._periodic: dict[str, float] = {}

    # -- what the tools need to know -------------------------------------------------------

    @property
    def allows_sending(self) -> bool:
        return bool(self._allow) or self._raw

    @property
    def allows_raw_frames(self) -> bool:
        return self._raw

    @property
    def dry_run(self) -> bool:
        return self._dry_run

    @property
    def max_frames_per_second(self) -> float:
        return self._rate

    def allows_message(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self._allow)

    def limits_for(self, message: str, signal: str) -> tuple[float, float] | None:
        return self._limits.get(f"{message}.{signal}")

    def describe(self) -> dict[str, Any]:
        """The policy as data, for bus_status and the prompt's guidance."""
        return {
            "read_only": not self.allows_sending,
            "allow_messages": list(self._allow),
            "signal_limits": {k: list(v) for k, v in self._limits.items()},
            "allow_raw_frames": self._raw,
            "max_frames_per_second": self._rate,
            "require_consent": self._consent_required,
            "dry_run": self._dry_run,
        }

    # -- the gate --------------------------------------------------------------------------

    def check(self, request: SendRequest) -> None:
        """Raise ToolError unless `request` may go onto the bus now; consumes rate budget."""
        try:
            self._check(request)
        except ToolError as exc:
            self.audit(request, outcome="refused", code=exc.code)
            raise

    def _check(self, request: SendRequest) -> None:
        if request.kind == "raw":
            if not self._raw:
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    "Raw frames are not allowed by the send policy; use send_message with a "
                    "message from the database if it is allowed.",
                )
            if self._ids is not None and request.arbitration_id not in self._ids:
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    f"Frame id 0x{request.arbitration_id:X} is not allowed by the send policy.",
                )
        elif request.message is None or not self.allows_message(request.message):
            allowed = ", ".join(self._allow) or "none (read-only)"
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"Sending {request.message} is not allowed by the send policy. "
                f"Messages that may be sent: {allowed}.",
            )
        if request.message:
            self._check_limits(request.message, request.signals)
        if request.kind == "periodic":
            self._check_periodic_budget(request)
        else:
            wait = self._bucket.take()
            if wait:
                raise ToolError(
                    "RATE_LIMITED",
                    f"The send policy allows {self._rate:g} frames per second; "
                    f"try again in {max(wait, 0.001):.3f} s.",
                    retryable=True,
                )
        if self._consent_required:
            granted = False
            if self._consent is not None:
                granted = bool(self._consent(request))
            if not granted:
                raise ToolError(
                    "CONSENT_DENIED",
                    "The user did not approve this transmission; it was not sent.",
                )

    def _check_limits(self, message: str, signals: Mapping[str, Any]) -> None:
        for name, value in signals.items():
            bounds = self._limits.get(f"{message}.{name}")
            if bounds is None or isinstance(value, str | bool):
                continue
            if not isinstance(value, int | float):
                continue
            lo, hi = bounds
            if not lo <= value <= hi:
                raise ToolError(
                    "OUT_OF_RANGE",
                    f"{message}.{name} must be between {lo:g} and {hi:g} under the send "
                    f"policy; got {value:g}.",
                )

    def _check_periodic_budget(self, request: SendRequest) -> None:
        period = request.period_ms or 0
        if period <= 0:
            raise ToolError("INVALID_VALUE", "period_ms must be positive.")
        rate = 1000.0 / period
        with self._periodic_lock:
            others = sum(r for k, r in self._periodic.items() if k != request.message)
            if others + rate > self._rate:
                raise ToolError(
                    "RATE_LIMITED",
                    f"A period of {period:g} ms adds {rate:g} frames/s; with the periodic "
                    f"sends already running that exceeds the policy's {self._rate:g} frames/s. "
                    f"Use a period of at least {1000.0 / max(self._rate - others, 1e-9):.0f} ms "
                    "or stop another periodic send.",
                )
            self._periodic[request.message or f"0x{request.arbitration_id:X}"] = rate

    def release_periodic(self, message: str) -> None:
        """Give back the rate budget of a periodic send that stopped."""
        with self._periodic_lock:
            self._periodic.pop(message, None)

    # -- audit -----------------------------------------------------------------------------

    def audit(self, request: SendRequest, *, outcome: str, code: str | None = None) -> None:
        """Append one JSON line (time, tool call, frame, outcome) when an audit log is set."""
        if self._audit is None:
            return
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "outcome": outcome,
            "dry_run": self._dry_run,
            **request.describe(),
        }
        if code:
            entry["code"] = code
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with self._audit_lock, self._audit.open("a", encoding="utf-8") as fh:
            fh.write(line)
