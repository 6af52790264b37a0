"""Consent: the user's explicit yes before an action goes out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hwbridge.core.asking import ask_with_timeout

__all__ = ["ConsentCallback", "ask_consent"]

ConsentCallback = Callable[[Any], object]
"""Called with the request (SendRequest, CommandRequest or ServiceRequest)."""


def ask_consent(callback: ConsentCallback | None, request: Any, timeout_s: float) -> bool:
    """Only an explicit True within `timeout_s` approves; no callback, any other answer, an
    error or no answer in time refuses."""
    if callback is None:
        return False
    what = getattr(request, "tool", None) or "the action"
    return ask_with_timeout(lambda: callback(request), timeout_s, what=str(what))
