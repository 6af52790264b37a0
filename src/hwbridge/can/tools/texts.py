"""The CAN tools' LLM-facing text, read from prompts/can_tools.toml (none lives in Python)."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["CanTexts", "can_texts"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Guidance(_Strict):
    read_only: str
    can_send: str
    offline: str


class TypedTexts(_Strict):
    read: str
    send: str
    cycle: str
    signal: str


class CanTexts(_Strict):
    guidance: Guidance
    tools: dict[str, dict[str, str]]
    typed: TypedTexts

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)


_REQUIRED_TOOLS = (
    "list_messages", "describe_message", "search_signals", "read_signals", "read_message",
    "wait_for_signal", "capture", "bus_status", "decode_frame", "send_message", "send_frame",
    "start_periodic", "stop_periodic",
)  # fmt: skip


@cache
def can_texts(path: Path | None = None) -> CanTexts:
    """Load and check the CAN tool texts (the packaged file unless `path` is given)."""
    source = path or packs_dir() / "can_tools.toml"
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
        texts = CanTexts.model_validate(raw)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in _REQUIRED_TOOLS if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
