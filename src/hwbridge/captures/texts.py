"""The capture tools' LLM-facing text, from prompts/capture_tools.toml (none lives in Python)."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["CaptureTexts", "capture_texts"]

TOOLS = ("describe_dataset", "query", "signal_stats", "find_events")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Guidance(_Strict):
    dataset: str


class CaptureTexts(_Strict):
    guidance: Guidance
    tools: dict[str, dict[str, str]]

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)


@cache
def capture_texts(path: Path | None = None) -> CaptureTexts:
    """Load and check the capture tool texts (the packaged file unless `path` is given)."""
    source = path or packs_dir() / "capture_tools.toml"
    try:
        texts = CaptureTexts.model_validate(tomllib.loads(source.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in TOOLS if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
