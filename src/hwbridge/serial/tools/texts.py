"""The serial tools' LLM-facing text, read from prompts/serial_tools.toml (none lives in
Python). A device's own command descriptions come from its spec."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["SerialTexts", "serial_texts"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Guidance(_Strict):
    query: str
    query_can_change: str
    stream: str
    offline: str
    port: str
    port_read_only: str


class TypedTexts(_Strict):
    dry_run: str
    max_age_ms: str
    timeout_ms: str
    unit: str
    changes_state: str


class SerialTexts(_Strict):
    guidance: Guidance
    tools: dict[str, dict[str, str]]
    typed: TypedTexts

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)


_REQUIRED_TOOLS = ("port_status", "serial_query", "serial_read")


@cache
def serial_texts(path: Path | None = None) -> SerialTexts:
    """Load and check the serial tool texts (the packaged file unless `path` is given)."""
    source = path or packs_dir() / "serial_tools.toml"
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
        texts = SerialTexts.model_validate(raw)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in _REQUIRED_TOOLS if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
