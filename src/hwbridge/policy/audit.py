"""The send policy's audit log: one JSON line per action and per refusal.

A path that cannot be written is refused when the policy is built; before an action goes
out the log is opened (so a log that broke since refuses the action: AUDIT_FAILED); a line
that cannot be written after the action went out is reported, never raised, because the
action has happened (invariant 10).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from hwbridge.core.models import ToolError
from hwbridge.policy.requests import PolicyRequest

__all__ = ["AuditEntry", "AuditTrail"]

log = logging.getLogger(__name__)


class AuditTrail:
    """A JSON-lines file, or nothing (`path` None): every method is then a no-op."""

    def __init__(self, path: str | Path | None, *, dry_run: bool) -> None:
        self.path = Path(path) if path is not None else None
        self.dry_run = dry_run
        self.lock = threading.Lock()
        if self.path is not None:
            try:
                self.path.open("a", encoding="utf-8").close()
            except OSError as exc:
                raise ValueError(
                    f"audit_log {str(self.path)!r} cannot be written: {exc.strerror or exc}"
                ) from exc

    def line(self, request: PolicyRequest, outcome: str, code: str | None) -> str:
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "outcome": outcome,
            "dry_run": self.dry_run,
            **request.describe(),
        }
        if code:
            entry["code"] = code
        return json.dumps(entry, ensure_ascii=False, default=str) + "\n"

    def write(self, request: PolicyRequest, outcome: str, code: str | None = None) -> str | None:
        """Append one line; None, or why it could not be written (logged, not raised)."""
        if self.path is None:
            return None
        text = self.line(request, outcome, code)
        try:
            with self.lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            return self.failed(exc)
        return None

    def open(self) -> AuditEntry:
        """The log, opened before an action goes out, for the line written after it."""
        if self.path is None:
            return AuditEntry(self, None)
        try:
            handle = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ToolError(
                "AUDIT_FAILED",
                "The send policy's audit log cannot be written, so nothing was sent "
                f"({exc.strerror or type(exc).__name__}).",
            ) from exc
        return AuditEntry(self, handle)

    def failed(self, exc: OSError) -> str:
        log.error("the audit log %s could not be written: %s", self.path, exc)
        return f"the audit log could not be written ({exc.strerror or type(exc).__name__})"


class AuditEntry:
    """One audit line to come: the log is already open, so writing it can only fail on the
    disk itself, and that is reported (`write` returns why), never raised."""

    def __init__(self, trail: AuditTrail, handle: TextIO | None) -> None:
        self._trail = trail
        self._handle = handle

    def write(self, request: PolicyRequest, outcome: str, code: str | None = None) -> str | None:
        if self._handle is None:
            return None
        text = self._trail.line(request, outcome, code)
        try:
            with self._trail.lock:
                self._handle.write(text)
                self._handle.flush()
        except OSError as exc:
            return self._trail.failed(exc)
        return None

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError as exc:
                self._trail.failed(exc)

    def __enter__(self) -> AuditEntry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
