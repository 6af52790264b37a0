"""How tools and DriverResponses look on a terminal: rich tables and panels, plain when piped."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.json import JSON
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hwbridge.core.images import image_of
from hwbridge.core.models import DriverResponse, Tool

__all__ = ["describe_tool", "response_panel", "schema_type", "short_description", "tools_table"]

_ENUM_SHOWN = 3
_DESCRIPTION_CHARS = 100
_CONTENT_CHARS = 160


def schema_type(schema: Mapping[str, Any] | None) -> str:
    """A parameter's JSON Schema in a few characters: `integer 0..30000`, `string[]`, enums."""
    if not schema:
        return "any"
    if "enum" in schema:
        values = [str(v) for v in schema["enum"]]
        if len(values) > _ENUM_SHOWN:
            return " | ".join([*values[:_ENUM_SHOWN], f"... ({len(values)} values)"])
        return " | ".join(values)
    kind = schema.get("type", "any")
    text = " | ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array":
        items = schema.get("items")
        text = f"{schema_type(items if isinstance(items, Mapping) else None)}[]"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        text += f" {low}..{high}"
    elif low is not None:
        text += f" >={low}"
    elif high is not None:
        text += f" <={high}"
    return text


def _parameters(tool: Tool) -> Text:
    lines = [
        f"{p.name}{'' if p.required else '?'}: {schema_type(p.schema)}" for p in tool.parameters
    ]
    return Text("\n".join(lines) if lines else "-")


def short_description(tool: Tool, limit: int = _DESCRIPTION_CHARS) -> str:
    """The description cut at a word near `limit`: the table is a map, `describe` has it all."""
    text = " ".join((tool.description or tool.title or "").split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(",;:") + "..."


def tools_table(tools: Iterable[Tool], title: str | None = None) -> Table:
    """Name, parameters with types ('?' marks optional ones), first sentence of the description."""
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("Tool", style="bold cyan", no_wrap=True)
    table.add_column("Parameters", style="green")
    table.add_column("Description", ratio=1)
    for tool in tools:
        table.add_row(Text(tool.name), _parameters(tool), Text(short_description(tool)))
    return table


def describe_tool(tool: Tool) -> RenderableType:
    """One tool in full: its description and each parameter's schema and meaning."""
    table = Table(show_header=True, expand=False, box=None, padding=(0, 2, 0, 0))
    table.add_column("Parameter", style="bold green", no_wrap=True)
    table.add_column("Required")
    table.add_column("Schema")
    table.add_column("Description", ratio=1)
    for p in tool.parameters:
        schema = json.dumps(p.schema or {}, ensure_ascii=False)
        table.add_row(
            Text(p.name), "yes" if p.required else "no", Text(schema), Text(p.description or "")
        )
    body: list[RenderableType] = [Text(tool.description or tool.title or "")]
    if tool.parameters:
        body += [Text(""), table]
    else:
        body.append(Text("No parameters.", style="dim"))
    return Panel(Group(*body), title=Text(tool.name, style="bold cyan"), title_align="left")


def _outcome(response: DriverResponse) -> tuple[str, str]:
    if response.call_executed and response.call_failed:
        return "partly executed", "yellow"
    if response.call_executed:
        return "executed", "green"
    if response.call_failed:
        return "failed", "red"
    return "no tool call: final answer (or another driver's call)", "dim"


def _content(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= _CONTENT_CHARS else text[: _CONTENT_CHARS - 3] + "..."


def _messages(messages: list[dict[str, Any]]) -> Table:
    table = Table(show_header=False, box=None, padding=(0, 1, 0, 0))
    table.add_column("role", style="magenta", no_wrap=True)
    table.add_column("content", ratio=1)
    for message in messages:
        role = str(message.get("role", "?"))
        body = message.get("content")
        if body in (None, "", []):  # OpenAI tool_calls, Gemini parts: show what is there
            body = {k: v for k, v in message.items() if k not in ("role", "content")}
        table.add_row(Text(role), Text(_content(body)))
    return table


def response_panel(response: DriverResponse) -> Panel:
    """A DriverResponse as a person reads it: outcome, result, retry prompt, messages."""
    label, style = _outcome(response)
    parts: list[RenderableType] = []
    if response.call_detail:
        parts.append(Text.assemble(("detail: ", "bold"), response.call_detail))
    if response.call_executed:
        parts.append(Text("result:", style="bold"))
        shown = response.tool_call_result
        image = image_of(shown)
        if image is not None:  # the summary, not kilobytes of base64
            shown = {"image": f"{image.mime_type}, {image.size_bytes} bytes", **image.summary}
        result = json.dumps(shown, ensure_ascii=False, default=str)
        parts.append(JSON(result, indent=2, highlight=False))
    if response.retry_prompt:
        parts.append(Text("retry prompt:", style="bold"))
        parts.append(Text(response.retry_prompt))
    if response.messages:
        parts.append(Text("messages to append:", style="bold"))
        parts.append(_messages(response.messages))
    if not parts:
        parts.append(Text("nothing executed; the text would be shown to the user", style="dim"))
    title = Text(label, style=f"bold {style}")
    return Panel(Group(*parts), title=title, title_align="left", border_style=style)
