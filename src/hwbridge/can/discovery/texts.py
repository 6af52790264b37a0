"""The discovery tools' LLM-facing text, read from prompts/discovery_tools.toml."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["TOOLS", "DiscoveryTexts", "discovery_texts"]

TOOLS = (
    "survey_bus",
    "snapshot_bus",
    "diff_snapshots",
    "correlate_signal",
    "define_signal",
    "draft_dbc",
)


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Guidance(_Strict):
    discovery: str


class DiscoveryTexts(_Strict):
    guidance: Guidance
    tools: dict[str, dict[str, str]]

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)


@cache
def discovery_texts(path: Path | None = None) -> DiscoveryTexts:
    """Load and check the texts (the packaged file unless `path` is given)."""
    source = path or packs_dir() / "discovery_tools.toml"
    try:
        texts = DiscoveryTexts.model_validate(tomllib.loads(source.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in TOOLS if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
