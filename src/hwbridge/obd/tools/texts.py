"""The diagnostic tools' LLM-facing text, read from prompts/obd_tools.toml (none lives in
Python)."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = ["OBD_TOOLS", "ObdTexts", "obd_texts"]

OBD_TOOLS = (
    "obd_supported_pids", "obd_read", "obd_monitor_status", "obd_read_dtcs",
    "obd_freeze_frame", "obd_vehicle_info", "obd_clear_dtcs", "uds_read_did",
    "uds_read_dtcs", "uds_request",
)  # fmt: skip


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Guidance(_Strict):
    read_only: str
    can_clear: str


class ObdTexts(_Strict):
    guidance: Guidance
    tools: dict[str, dict[str, str]]

    def tool(self, name: str) -> str:
        return self.tools[name]["description"]

    def param(self, tool: str, name: str) -> str | None:
        return self.tools[tool].get(name)


@cache
def obd_texts(path: Path | None = None) -> ObdTexts:
    """Load and check the diagnostic tool texts (the packaged file unless `path` is given)."""
    source = path or packs_dir() / "obd_tools.toml"
    try:
        texts = ObdTexts.model_validate(tomllib.loads(source.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    missing = [t for t in OBD_TOOLS if "description" not in texts.tools.get(t, {})]
    if missing:
        raise PromptPackError(f"{source}: no description for tool(s) {', '.join(missing)}")
    return texts
