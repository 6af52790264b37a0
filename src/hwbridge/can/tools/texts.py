"""The CAN tools' LLM-facing text, read from prompts/can_tools.toml (none lives in Python)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["CanTexts", "can_texts"]


class Guidance(StrictTexts):
    read_only: str
    can_send: str
    offline: str


class TypedTexts(StrictTexts):
    read: str
    send: str
    cycle: str
    signal: str


class CanTexts(ToolTexts):
    guidance: Guidance
    typed: TypedTexts


_REQUIRED_TOOLS = (
    "list_messages", "describe_message", "search_signals", "read_signals", "read_message",
    "wait_for_signal", "capture", "bus_status", "decode_frame", "send_message", "send_frame",
    "start_periodic", "stop_periodic", "signal_timeseries", "plot_signals",
)  # fmt: skip


@cache
def can_texts(path: Path | None = None) -> CanTexts:
    """Load and check the CAN tool texts (the packaged file unless `path` is given)."""
    return load_tool_texts(CanTexts, "can_tools.toml", _REQUIRED_TOOLS, path)
