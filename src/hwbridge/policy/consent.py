"""Consent: the user's explicit yes before an action goes out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["ConsentCallback", "ask_consent"]

log = logging.getLogger(__name__)

ConsentCallback = Callable[[Any], object]
"""Called with the request (SendRequest, CommandRequest or ServiceRequest)."""


def ask_consent(callback: ConsentCallback | None, request: Any) -> bool:
    """Only an explicit True approves; no callback, any other answer or an error refuses."""
    if callback is None:
        return False
    try:
        return callback(request) is True
    except Exception:
        log.exception("the consent callback failed; the action is refused")
        return False
