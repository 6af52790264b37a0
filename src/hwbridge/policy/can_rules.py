"""What may go onto a CAN bus: allowed messages, signal limits, raw frames and their ids,
and the rate budget that periodic sends reserve."""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from hwbridge.core.limits import TokenBucket
from hwbridge.core.models import ToolError
from hwbridge.policy.bounds import check_bounds, parse_bounds
from hwbridge.policy.requests import SendRequest

__all__ = ["CanRules"]


def _id_key(entry: int | tuple[int, bool]) -> tuple[int, bool]:
    if isinstance(entry, tuple):
        return int(entry[0]), bool(entry[1])
    return int(entry), int(entry) > 0x7FF


class CanRules:
    """The CAN part of a SendPolicy (see SendPolicy for the meaning of each argument)."""

    def __init__(
        self,
        allow_messages: Iterable[str],
        signal_limits: Mapping[str, tuple[float, float]] | None,
        allow_raw_frames: bool,
        allow_ids: Iterable[int | tuple[int, bool]] | None,
        max_frames_per_second: float,
    ) -> None:
        if max_frames_per_second <= 0:
            raise ValueError("max_frames_per_second must be positive")
        if isinstance(allow_messages, str):
            raise TypeError("allow_messages takes a list of names, e.g. ['ClimateCommand']")
        self.allow = tuple(allow_messages)
        self.limits = parse_bounds("signal_limits", "Message.Signal", signal_limits)
        self.raw = allow_raw_frames
        self.ids = frozenset(_id_key(i) for i in allow_ids) if allow_ids is not None else None
        self.rate = float(max_frames_per_second)
        self.bucket = TokenBucket(self.rate)
        self.periodic_lock = threading.Lock()
        self.periodic: dict[str, float] = {}

    @property
    def allows_sending(self) -> bool:
        return bool(self.allow) or self.raw

    def allows_message(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow)

    def describe(self) -> dict[str, Any]:
        return {
            "allow_messages": list(self.allow),
            "signal_limits": {k: list(v) for k, v in self.limits.items()},
            "allow_raw_frames": self.raw,
            "max_frames_per_second": self.rate,
        }

    def check(self, request: SendRequest) -> None:
        """Raise ToolError unless the frame may go out (what, and within which limits)."""
        if request.kind == "raw":
            if not self.raw:
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    "Raw frames are not allowed by the send policy; use send_message with a "
                    "message from the database if it is allowed.",
                )
            key = (request.arbitration_id, request.is_extended)
            if self.ids is not None and key not in self.ids:
                kind = "29-bit" if request.is_extended else "11-bit"
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    f"{kind} frame id 0x{request.arbitration_id:X} is not allowed by the send "
                    "policy.",
                )
        elif request.message is None or not self.allows_message(request.message):
            allowed = ", ".join(self.allow) or "none (read-only)"
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"Sending {request.message} is not allowed by the send policy. "
                f"Messages that may be sent: {allowed}.",
            )
        if request.message:  # a raw frame of a database message meets its limits too
            self.check_limits(request.message, request.physical or request.signals)
        if request.kind == "periodic":
            with self.periodic_lock:
                self._periodic_budget(request)

    def take(self, request: SendRequest) -> float:
        """Spend the frame's token, right before it goes out (after consent, so a user's
        slow answer cannot let two frames out within one token's time); for a periodic
        send, also check its budget and return the rate it reserves."""
        with self.periodic_lock:  # budget check, token and reservation are one step
            periodic_rate = 0.0
            if request.kind == "periodic":
                periodic_rate = self._periodic_budget(request)
                # its first frame goes out at once (a restart's too): it takes a token
                own = request.periodic_key
                reserved = sum(r for k, r in self.periodic.items() if k != own)
            else:
                reserved = sum(self.periodic.values())
            wait = self.bucket.take(reserved)
            if wait:
                first = ""
                if request.kind == "periodic":
                    first = "the first frame of a periodic send goes out at once; "
                raise ToolError(
                    "RATE_LIMITED",
                    f"The send policy allows {self.rate:g} frames per second for all "
                    f"sends ({reserved:g} of them taken by periodic sends); {first}try again "
                    f"in {min(max(wait, 0.001), 60):.3f} s"
                    + (" or stop a periodic send." if reserved else "."),
                    retryable=True,
                )
            if request.kind == "periodic":
                self.periodic[request.periodic_key] = periodic_rate
        return periodic_rate

    def take_frame(self) -> float:
        """One token for a protocol's own frame (periodic sends' reservations honoured);
        0 when taken, else the seconds to wait."""
        with self.periodic_lock:
            return self.bucket.take(sum(self.periodic.values()))

    def release(self, message: str, scope: str = "") -> None:
        with self.periodic_lock:
            self.periodic.pop(f"{scope}/{message}", None)

    def check_limits(self, message: str, signals: Mapping[str, Any]) -> None:
        """OUT_OF_RANGE unless every limited signal is within its limits.

        `signals` are the values on the wire by physical value (`SendRequest.physical`); a
        decoded labelled value is checked by its "value", which is physical too.
        """
        check_bounds(self.limits, message, signals, labelled=True)

    def _periodic_budget(self, request: SendRequest) -> float:
        """The rate a periodic send would add; RATE_LIMITED if it does not fit (caller locks)."""
        period = request.period_ms or 0
        if period <= 0:
            raise ToolError("INVALID_VALUE", "period_ms must be positive.")
        rate = 1000.0 / period
        key = request.periodic_key
        others = sum(r for k, r in self.periodic.items() if k != key)
        if others + rate > self.rate:
            free = self.rate - others
            hint = (
                f"Use a period of at least {1000.0 / free:.0f} ms or stop another periodic send."
                if free > 0
                else "Stop another periodic send first."
            )
            raise ToolError(
                "RATE_LIMITED",
                f"A period of {period:g} ms adds {rate:g} frames/s; with the periodic "
                f"sends already running that exceeds the policy's {self.rate:g} frames/s. " + hint,
            )
        return rate
