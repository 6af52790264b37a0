"""What every bridge's tool texts file (prompts/<bridge>_tools.toml) shares: a description
per tool and per parameter, checked on load so that a missing text fails at once, by name,
instead of reaching an LLM as an empty description."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.models import Tool, ToolParameter
from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["StrictTexts", "ToolTexts", "load_tool_texts"]


class StrictTexts(BaseModel):
    """A table of a texts file: every key known, nothing extra (a typo is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolTexts(StrictTexts):
    """`[tools.<name>]` tables: `description` and one text per parameter."""

    tools: dict[str, dict[str, str]]

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)

    def parameter(
        self, tool: str, name: str, schema: dict[str, Any], required: bool = False
    ) -> ToolParameter:
        """A tool's parameter, described by this file."""
        return ToolParameter(
            name=name, description=self.param(tool, name), required=required, schema=schema
        )

    def read_tool(self, name: str, *params: ToolParameter) -> Tool:
        """A tool that changes nothing, described by this file."""
        return Tool(name=name, description=self.tool(name), parameters=list(params), read_only=True)


T = TypeVar("T", bound=ToolTexts)


def load_tool_texts(
    model: type[T], file_name: str, required: Sequence[str], path: Path | None
) -> T:
    """Load and check a texts file (the packaged `file_name` unless `path` is given): it
    parses, matches `model`, and describes every tool of `required`."""
    source = path or packs_dir() / file_name
    try:
        texts = model.model_validate(tomllib.loads(source.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in required if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
