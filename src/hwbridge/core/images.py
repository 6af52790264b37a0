"""A tool result that carries a picture: the image itself and a summary in words and numbers.

A tool returns `ImageResult(...).to_result()`, a plain JSON-safe dict:

    {"type": "image", "mime_type": "image/png", "data": "<base64>", "summary": {...}}

Each wire format carries it where it can (`hwbridge.core.messages`): an Anthropic
`tool_result` gets an image block, Gemini an inline image beside the function response, MCP
image content (`hwbridge.mcp.tools`). Where a format cannot carry a picture (OpenAI tool
messages, text dialects) the model gets the summary and a note from the prompt pack saying
so. A picture is at most `MAX_IMAGE_BYTES` bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["IMAGE_MIME_TYPES", "MAX_IMAGE_BYTES", "ImageResult", "image_of"]

MAX_IMAGE_BYTES = 200_000
IMAGE_MIME_TYPES = ("image/png", "image/jpeg", "image/svg+xml")
_KEYS = frozenset({"type", "mime_type", "data", "summary"})
_MAX_DATA_CHARS = (MAX_IMAGE_BYTES + 2) // 3 * 4


class ImageResult(BaseModel):
    """A picture a tool shows: `data` is base64, `summary` what a model reads without it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mime_type: str = Field(pattern=r"^image/(png|jpeg|svg\+xml)$")
    data: str = Field(max_length=_MAX_DATA_CHARS)
    summary: dict[str, Any]

    @classmethod
    def of_bytes(
        cls, data: bytes, summary: dict[str, Any], mime_type: str = "image/png"
    ) -> ImageResult:
        """An image result from raw bytes; ValueError past `MAX_IMAGE_BYTES`."""
        if len(data) > MAX_IMAGE_BYTES:
            raise ValueError(f"a picture is at most {MAX_IMAGE_BYTES} bytes, not {len(data)}")
        return cls(
            mime_type=mime_type, data=base64.b64encode(data).decode("ascii"), summary=summary
        )

    @property
    def size_bytes(self) -> int:
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    def to_result(self) -> dict[str, Any]:
        """The JSON-safe tool result."""
        return {
            "type": "image",
            "mime_type": self.mime_type,
            "data": self.data,
            "summary": self.summary,
        }


def image_of(result: Any) -> ImageResult | None:
    """The picture a tool result carries, or None for any other result (never raises)."""
    if type(result) is not dict or len(result) != 4 or result.get("type") != "image":
        return None
    if result.keys() != _KEYS:
        return None
    mime, data, summary = result["mime_type"], result["data"], result["summary"]
    if (
        mime not in IMAGE_MIME_TYPES
        or type(data) is not str
        or len(data) > _MAX_DATA_CHARS
        or type(summary) is not dict
    ):
        return None
    return ImageResult.model_construct(mime_type=mime, data=data, summary=summary)
