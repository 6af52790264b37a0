"""The J1939 tools' LLM-facing text, read from prompts/j1939_tools.toml (none lives in
Python)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["J1939_TOOLS", "J1939Texts", "j1939_texts"]

J1939_TOOLS = ("j1939_dm1", "j1939_dm2", "j1939_request", "j1939_nodes", "j1939_clear_dtcs")


class Guidance(StrictTexts):
    read_only: str
    can_clear: str


class J1939Texts(ToolTexts):
    guidance: Guidance


@cache
def j1939_texts(path: Path | None = None) -> J1939Texts:
    """Load and check the J1939 tool texts (the packaged file unless `path` is given)."""
    return load_tool_texts(J1939Texts, "j1939_tools.toml", J1939_TOOLS, path)
