"""The capture tools' LLM-facing text, from prompts/capture_tools.toml (none lives in Python)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import Field

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["CaptureTexts", "TableTexts", "capture_texts"]

TOOLS = (
    "describe_dataset",
    "query",
    "signal_stats",
    "find_events",
    "signal_timeseries",
    "plot_signals",
)


class Guidance(StrictTexts):
    dataset: str


class TableTexts(StrictTexts):
    """A table hwbridge writes itself: what it holds, and a comment per column."""

    about: str
    columns: dict[str, str]


class CaptureTexts(ToolTexts):
    guidance: Guidance
    tables: dict[str, TableTexts] = Field(default_factory=dict)


@cache
def capture_texts(path: Path | None = None) -> CaptureTexts:
    """Load and check the capture tool texts (the packaged file unless `path` is given)."""
    return load_tool_texts(CaptureTexts, "capture_tools.toml", TOOLS, path)
