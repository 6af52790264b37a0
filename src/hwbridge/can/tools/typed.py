"""Typed tools: `read_<Message>` and `send_<Message>` with parameters typed from the DBC.

Choices become an enum of labels, ranges become minimum and maximum, units go into the
description. They are offered only when the database is small enough for the prompt budget.
"""

from __future__ import annotations

from typing import Any

from hwbridge.can.database.database import CanDatabase, SignalSpec
from hwbridge.can.tools.texts import CanTexts
from hwbridge.core.models import Tool, ToolParameter, is_valid_tool_name

__all__ = ["TypedTool", "read_tool", "send_tool"]

_MAX_DESCRIPTION = 240  # a DBC comment is configuration, but keep the prompt bounded


class TypedTool:
    """Which message a typed tool stands for, and whether it reads or sends."""

    __slots__ = ("kind", "message")

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def _signal_schema(spec: SignalSpec, texts: CanTexts) -> dict[str, Any]:
    number: dict[str, Any] = {
        "type": "integer" if spec.int_like else "number",
        "minimum": _number(spec.low),
        "maximum": _number(spec.high),
    }
    if not spec.choices:
        return number
    labels = {"type": "string", "enum": list(dict.fromkeys(spec.choices.values()))}
    span = spec.high - spec.low
    if spec.int_like and spec.scale == 1 and len(spec.choices) > span:
        return labels  # every value has a label: the labels are the whole vocabulary
    return {"anyOf": [labels, number]}  # e.g. FanLevel: Off, 1..7, Auto


def _signal_description(spec: SignalSpec, texts: CanTexts) -> str | None:
    parts = []
    if spec.unit:
        parts.append(texts.typed.signal.format(unit=spec.unit))
    if spec.comment:
        parts.append(spec.comment[:_MAX_DESCRIPTION])
    return "; ".join(parts) or None


def read_tool(db: CanDatabase, message: Any, texts: CanTexts) -> Tool | None:
    name = f"read_{message.name}"
    if not is_valid_tool_name(name):
        return None
    cycle = texts.typed.cycle.format(cycle_ms=message.cycle_time) if message.cycle_time else ""
    # names and units straight from cantools: listing them needs no value specs
    signals = ", ".join(f"{s.name} [{s.unit}]" if s.unit else s.name for s in message.signals)
    description = texts.typed.read.format(
        message=message.name, id=f"0x{message.frame_id:X}", cycle=cycle, signals=signals
    )
    timeout = texts.param("read_message", "timeout_ms")
    return Tool(
        name=name,
        read_only=True,
        description=description[: _MAX_DESCRIPTION * 4],
        parameters=[
            ToolParameter(
                name="timeout_ms",
                description=timeout,
                schema={"type": "integer", "minimum": 0, "maximum": 30000},
            )
        ],
    )


def send_tool(db: CanDatabase, message: Any, texts: CanTexts) -> Tool | None:
    """None for messages a typed tool cannot describe (multiplexed, or a bad name)."""
    name = f"send_{message.name}"
    if not is_valid_tool_name(name) or message.is_multiplexed():
        return None
    comment = message.comment if isinstance(message.comment, str) else ""
    params = [
        ToolParameter(
            name=spec.name,
            description=_signal_description(spec, texts),
            schema=_signal_schema(spec, texts),
        )
        for spec in db.signals(message)
        if is_valid_tool_name(spec.name)
    ]
    params.append(
        ToolParameter(
            name="dry_run",
            description=texts.param("send_message", "dry_run"),
            schema={"type": "boolean"},
        )
    )
    if len({p.name for p in params}) != len(params):
        return None
    description = texts.typed.send.format(
        message=message.name, id=f"0x{message.frame_id:X}", comment=comment[:_MAX_DESCRIPTION]
    )
    return Tool(name=name, description=description.strip(), parameters=params)
