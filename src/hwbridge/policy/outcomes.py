"""What a failure means for the audit log: nothing went out, or something may have.

A write that timed out half way, or whose completion the transport cannot confirm, is not a
failure to send: part or all of the line may be on the device. Those errors carry their own
codes, are never marked retryable (a retry could run the command twice), and are audited as
`unconfirmed`, so the log never says `failed` for a command that may have taken effect.
"""

from __future__ import annotations

from typing import Final

from hwbridge.core.models import ToolError

__all__ = ["MAYBE_SENT", "failure_outcome"]

MAYBE_SENT: Final = frozenset({"WRITE_INCOMPLETE", "WRITE_UNCONFIRMED"})
"""Codes of errors after which the device may have received the request."""


def failure_outcome(exc: ToolError) -> str:
    """The audit outcome of a request that ended in `exc`."""
    return "unconfirmed" if exc.code in MAYBE_SENT else "failed"
