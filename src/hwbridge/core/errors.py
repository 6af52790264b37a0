"""`ToolError`, the failure every tool raises, in a module of its own: it imports neither
pydantic nor the rest of the core, so what only raises it (the query worker's parent, the
series of a dataset behind `hwbridge plot`) loads in milliseconds. `hwbridge.core.models`
and `hwbridge.core` export the same class.
"""

from __future__ import annotations

from typing import Any

from hwbridge.core.jsonsafe import clean_text

__all__ = ["MAX_ERROR_CHARS", "ToolError"]

MAX_ERROR_CHARS = 1000
"""A ToolError's message is cut to this length: it often quotes the LLM's own input."""


class ToolError(Exception):
    """Raised by a tool to fail with a stable code and a message the LLM can act on.

    The message is bounded (MAX_ERROR_CHARS), so an error that quotes a megabyte of hostile
    input still gives the LLM a short hint.
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        code = clean_text(str(code)[:64])
        message = clean_text(str(message))
        if len(message) > MAX_ERROR_CHARS:
            message = message[: MAX_ERROR_CHARS - 3] + "..."
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_tool_error, (self.code, self.message, self.retryable))


def _rebuild_tool_error(code: str, message: str, retryable: bool) -> ToolError:
    return ToolError(code, message, retryable=retryable)
