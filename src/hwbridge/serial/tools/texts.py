"""The serial tools' LLM-facing text, read from prompts/serial_tools.toml (none lives in
Python). A device's own command descriptions come from its spec."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["SerialTexts", "serial_texts"]


class Guidance(StrictTexts):
    query: str
    query_can_change: str
    stream: str
    offline: str
    port: str
    port_read_only: str


class TypedTexts(StrictTexts):
    dry_run: str
    max_age_ms: str
    timeout_ms: str
    unit: str
    changes_state: str


class SerialTexts(ToolTexts):
    guidance: Guidance
    typed: TypedTexts


_REQUIRED_TOOLS = ("port_status", "serial_query", "serial_read")


@cache
def serial_texts(path: Path | None = None) -> SerialTexts:
    """Load and check the serial tool texts (the packaged file unless `path` is given)."""
    return load_tool_texts(SerialTexts, "serial_tools.toml", _REQUIRED_TOOLS, path)
