"""The discovery tools' LLM-facing text, read from prompts/discovery_tools.toml."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["TOOLS", "DiscoveryTexts", "discovery_texts"]

TOOLS = (
    "survey_bus",
    "snapshot_bus",
    "diff_snapshots",
    "correlate_signal",
    "define_signal",
    "draft_dbc",
    "mark_event",
    "rank_events",
    "match_known_databases",
)


class Guidance(StrictTexts):
    discovery: str
    obd: str
    matching: str  # added when match_known_databases is offered


class DiscoveryTexts(ToolTexts):
    guidance: Guidance


@cache
def discovery_texts(path: Path | None = None) -> DiscoveryTexts:
    """Load and check the texts (the packaged file unless `path` is given)."""
    return load_tool_texts(DiscoveryTexts, "discovery_tools.toml", TOOLS, path)
