"""The diagnostic tools' LLM-facing text, read from prompts/obd_tools.toml (none lives in
Python)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hwbridge.core.tool_texts import StrictTexts, ToolTexts, load_tool_texts

__all__ = ["OBD_TOOLS", "DidTexts", "ObdTexts", "OdxTexts", "obd_texts"]

OBD_TOOLS = (
    "obd_supported_pids", "obd_read", "obd_monitor_status", "obd_read_dtcs",
    "obd_freeze_frame", "obd_vehicle_info", "obd_clear_dtcs", "uds_read_did",
    "uds_read_dtcs", "uds_request", "uds_scan_dids", "uds_session", "uds_unlock",
    "uds_write_did", "uds_routine", "uds_reset",
)  # fmt: skip


class Guidance(StrictTexts):
    read_only: str
    can_clear: str
    changes: str
    no_security_key: str


class DidTexts(StrictTexts):
    read: str
    write: str
    value: str


class OdxTexts(StrictTexts):
    read: str
    change: str
    unit: str
    range: str
    dry_run: str
    ecu: str
    guidance: str


class ObdTexts(ToolTexts):
    guidance: Guidance
    dids: DidTexts
    odx: OdxTexts


@cache
def obd_texts(path: Path | None = None) -> ObdTexts:
    """Load and check the diagnostic tool texts (the packaged file unless `path` is given)."""
    return load_tool_texts(ObdTexts, "obd_tools.toml", OBD_TOOLS, path)
