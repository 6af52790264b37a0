"""SendPolicy: what may be sent onto a bus, how fast, and with whose consent.

Sending a frame can move a real actuator, so the default policy is read-only and every send
(one-shot, raw or periodic) passes `SendPolicy.check` before anything reaches the adapter.
The request it judges is the frame that goes out: its final bytes (after any counter or
checksum hook) and the signals decoded from them, by physical value. A refusal is a
`ToolError` with a stable code; it never counts as a success.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from hwbridge.core.models import ToolError

__all__ = ["AuditEntry", "SendPolicy", "SendRequest"]

log = logging.getLogger(__name__)

SendKind = Literal["message", "raw", "periodic"]


@dataclass(frozen=True, slots=True)
class SendRequest:
    """One intended transmission, as the policy and a consent callback see it.

    For a database message, `data` is the payload that goes out (after any hook),
    `signals` its signals decoded from `data` as JSON values, and `physical` each of them
    as a physical number (a label resolved to its raw value, then through scale and
    offset): what `signal_limits` are checked against.
    """

    kind: SendKind
    arbitration_id: int
    data: bytes
    is_extended: bool = False
    message: str | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    period_ms: float | None = None
    tool: str | None = None
    scope: str = ""  # the network: periodic budgets are per (network, message)
    physical: Mapping[str, float] = field(default_factory=dict)

    @property
    def periodic_key(self) -> str:
        return f"{self.scope}/{self.message or hex(self.arbitration_id)}"

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


def _id_key(entry: int | tuple[int, bool]) -> tuple[int, bool]:
    if isinstance(entry, tuple):
        return int(entry[0]), bool(entry[1])
    return int(entry), int(entry) > 0x7FF


class _TokenBucket:
    """Frames per second with a one-second burst; exact under concurrent senders.

    `reserved` frames/s (running periodic sends) come off the refill rate and the burst, so
    one-shot and periodic sends together never exceed the rate.
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = max(1.0, rate)
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self, reserved: float = 0.0) -> float:
        """Take a token; return 0 on success, else the seconds until one would be there."""
        free = self.rate - reserved
        if free <= 0:
            return math.inf
        with self._lock:
            now = time.monotonic()
            capacity = max(1.0, free)
            self._tokens = min(capacity, self._tokens + (now - self._stamp) * free)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) / free


class SendPolicy:
    """Read-only unless told otherwise.

    allow_messages: message names (globs allowed, e.g. "Climate*") that may be sent.
    signal_limits: {"Message.Signal": (min, max)}, narrower than the database's ranges.
    allow_raw_frames: permits `send_frame` (raw id + bytes, no database checks).
    allow_ids: when given, raw frames may only use these ids: an int is an 11-bit id (a
        29-bit one above 0x7FF); (id, extended) names the frame format explicitly.
    max_frames_per_second: for all sends together, periodic ones included.
    require_consent: every send asks `consent(request)`; no callback or False refuses it.
    dry_run: everything is checked and encoded, nothing is transmitted.
    audit_log: path of a JSON-lines file; every send and refusal is appended. A path that
        cannot be opened for appending is refused here, not after a frame went out.
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
        allow_ids: Iterable[int | tuple[int, bool]] | None = None,
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
        self._ids = frozenset(_id_key(i) for i in allow_ids) if allow_ids is not None else None
        self._rate = float(max_frames_per_second)
        self._consent_required = require_consent
        self._consent = consent
        self._dry_run = dry_run
        self._audit = Path(audit_log) if audit_log is not None else None
        if self._audit is not None:
            try:
                self._audit.open("a", encoding="utf-8").close()
            except OSError as exc:
                raise ValueError(
                    f"audit_log {str(self._audit)!r} cannot be written: {exc.strerror or exc}"
                ) from exc
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
            key = (request.arbitration_id, request.is_extended)
            if self._ids is not None and key not in self._ids:
                kind = "29-bit" if request.is_extended else "11-bit"
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    f"{kind} frame id 0x{request.arbitration_id:X} is not allowed by the send "
                    "policy.",
                )
        elif request.message is None or not self.allows_message(request.message):
            allowed = ", ".join(self._allow) or "none (read-only)"
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"Sending {request.message} is not allowed by the send policy. "
                f"Messages that may be sent: {allowed}.",
            )
        if request.message:
            self.check_limits(request.message, request.physical or request.signals)
        with self._periodic_lock:  # budget check and reservation are one step
            periodic_rate = 0.0
            if request.kind == "periodic":
                periodic_rate = self._periodic_budget(request)
                # its first frame goes out at once (a restart's too): it takes a token
                own = request.periodic_key
                reserved = sum(r for k, r in self._periodic.items() if k != own)
            else:
                reserved = sum(self._periodic.values())
            wait = self._bucket.take(reserved)
            if wait:
                first = ""
                if request.kind == "periodic":
                    first = "the first frame of a periodic send goes out at once; "
                raise ToolError(
                    "RATE_LIMITED",
                    f"The send policy allows {self._rate:g} frames per second for all "
                    f"sends ({reserved:g} of them taken by periodic sends); {first}try again "
                    f"in {min(max(wait, 0.001), 60):.3f} s"
                    + (" or stop a periodic send." if reserved else "."),
                    retryable=True,
                )
        if self._consent_required and not self._ask_consent(request):
            raise ToolError(
                "CONSENT_DENIED",
                "The user did not approve this transmission; it was not sent.",
            )
        if request.kind == "periodic":
            with self._periodic_lock:  # reserved only once everything said yes
                self._periodic[request.periodic_key] = periodic_rate

    def _ask_consent(self, request: SendRequest) -> bool:
        """Only an explicit True approves; no callback, any other answer or an error refuses."""
        if self._consent is None:
            return False
        try:
            return self._consent(request) is True
        except Exception:
            log.exception("the consent callback failed; the send is refused")
            return False

    def check_limits(self, message: str, signals: Mapping[str, Any]) -> None:
        """OUT_OF_RANGE unless every limited signal is within its limits.

        `signals` are the values on the wire by physical value (`SendRequest.physical`); a
        decoded labelled value is checked by its "physical" number when it has one (scale
        or offset), else by its number.
        """
        for name, given in signals.items():
            bounds = self._limits.get(f"{message}.{name}")
            if bounds is None:
                continue
            value = given
            if isinstance(given, Mapping):
                value = given["physical"] if "physical" in given else given.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ToolError(
                    "OUT_OF_RANGE",
                    f"{message}.{name} is limited by the send policy and needs a number; "
                    f"got {value!r}.",
                )
            lo, hi = bounds
            if not lo <= value <= hi:
                raise ToolError(
                    "OUT_OF_RANGE",
                    f"{message}.{name} must be between {lo:g} and {hi:g} under the send "
                    f"policy; got {value:g}.",
                )

    def _periodic_budget(self, request: SendRequest) -> float:
        """The rate a periodic send would add; RATE_LIMITED if it does not fit (caller locks)."""
        period = request.period_ms or 0
        if period <= 0:
            raise ToolError("INVALID_VALUE", "period_ms must be positive.")
        rate = 1000.0 / period
        key = request.periodic_key
        others = sum(r for k, r in self._periodic.items() if k != key)
        if others + rate > self._rate:
            free = self._rate - others
            hint = (
                f"Use a period of at least {1000.0 / free:.0f} ms or stop another periodic send."
                if free > 0
                else "Stop another periodic send first."
            )
            raise ToolError(
                "RATE_LIMITED",
                f"A period of {period:g} ms adds {rate:g} frames/s; with the periodic "
                f"sends already running that exceeds the policy's {self._rate:g} frames/s. " + hint,
            )
        return rate

    def release_periodic(self, message: str, scope: str = "") -> None:
        """Give back the rate budget of a periodic send that stopped."""
        with self._periodic_lock:
            self._periodic.pop(f"{scope}/{message}", None)

    # -- audit -----------------------------------------------------------------------------

    def _audit_line(self, request: SendRequest, outcome: str, code: str | None) -> str:
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "outcome": outcome,
            "dry_run": self._dry_run,
            **request.describe(),
        }
        if code:
            entry["code"] = code
        return json.dumps(entry, ensure_ascii=False, default=str) + "\n"

    def audit(self, request: SendRequest, *, outcome: str, code: str | None = None) -> str | None:
        """Append one JSON line (time, tool call, frame, outcome) when an audit log is set.

        Returns None, or why the line could not be written: that is logged and reported,
        never raised, so it cannot turn a frame that went out into a failure.
        """
        if self._audit is None:
            return None
        line = self._audit_line(request, outcome, code)
        try:
            with self._audit_lock, self._audit.open("a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:
            return self._audit_failed(exc)
        return None

    def open_audit(self) -> AuditEntry:
        """The audit log, opened before a frame goes out, for the line written after it.

        A log that cannot be opened refuses the send (AUDIT_FAILED, nothing sent) instead
        of failing once the frame is on the bus.
        """
        if self._audit is None:
            return AuditEntry(self, None)
        try:
            handle = self._audit.open("a", encoding="utf-8")
        except OSError as exc:
            raise ToolError(
                "AUDIT_FAILED",
                "The send policy's audit log cannot be written, so nothing was sent "
                f"({exc.strerror or type(exc).__name__}).",
            ) from exc
        return AuditEntry(self, handle)

    def _audit_failed(self, exc: OSError) -> str:
        log.error("the audit log %s could not be written: %s", self._audit, exc)
        return f"the audit log could not be written ({exc.strerror or type(exc).__name__})"


class AuditEntry:
    """One audit line to come: the log is already open, so writing it can only fail on the
    disk itself, and that is reported (`write` returns why), never raised."""

    def __init__(self, policy: SendPolicy, handle: TextIO | None) -> None:
        self._policy = policy
        self._handle = handle

    def write(self, request: SendRequest, outcome: str, code: str | None = None) -> str | None:
        if self._handle is None:
            return None
        line = self._policy._audit_line(request, outcome, code)
        try:
            with self._policy._audit_lock:
                self._handle.write(line)
                self._handle.flush()
        except OSError as exc:
            return self._policy._audit_failed(exc)
        return None

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:
                self._policy._audit_failed(exc)

    def __enter__(self) -> AuditEntry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
