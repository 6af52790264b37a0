"""hwbridge tools as MCP tools, and a DriverResponse as an MCP tool result.

A tool keeps its JSON Schema and its description as the driver's native function-calling
definitions write them (line breaks inside escaped), and gets annotations that tell the
truth: `readOnlyHint` from `Tool.read_only`, `destructiveHint` on every tool that is not
read-only (sends, periodic starts, raw frames, commands) unless the tool says it only adds
(`Tool.destructive` False, as a remote server may have said). MCP allows dots in names, so
an orchestrator's `bench1.read_signals` keeps its name here. A success carries the result as
structured content (an object; anything else under `result`) and as JSON text; a picture
(`hwbridge.core.images`) as image content beside its summary; a failure
is a tool error (`isError`) whose text starts with the hwbridge code.
"""

from __future__ import annotations

from typing import Any

import orjson
from mcp import types

from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.images import image_of
from hwbridge.core.models import DriverResponse
from hwbridge.core.native import native_tools

__all__ = ["call_result", "error_result", "mcp_tools"]


def mcp_tools(driver: HybridDriver, offered: frozenset[str] | None = None) -> list[types.Tool]:
    """The tools `driver` offers (those named in `offered`, when given) as MCP tools, in the
    driver's order."""
    listed = driver.list_tools()
    definitions = {d["name"]: d for d in native_tools(listed, "anthropic", driver.prompt_strategy)}
    tools = []
    for tool in listed:
        definition = definitions.get(tool.name)
        if definition is None or (offered is not None and tool.name not in offered):
            continue
        tools.append(
            types.Tool(
                name=tool.name,
                title=tool.title,
                description=definition["description"],
                input_schema=definition["input_schema"],
                annotations=types.ToolAnnotations(
                    title=tool.title,
                    read_only_hint=tool.read_only,
                    destructive_hint=not tool.read_only and tool.destructive is not False,
                ),
            )
        )
    return tools


def call_result(response: DriverResponse) -> types.CallToolResult:
    """The MCP result of one call: its result on success, a tool error otherwise."""
    if response.call_executed and not response.call_failed:
        result = response.tool_call_result
        image = image_of(result)
        if image is not None:  # the picture as image content, its summary as text
            summary = orjson.dumps(image.summary).decode()
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text=summary),
                    types.ImageContent(type="image", data=image.data, mime_type=image.mime_type),
                ],
                structured_content=image.summary,
            )
        structured = result if isinstance(result, dict) else {"result": result}
        text = orjson.dumps(result).decode()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
        )
    detail = response.call_detail or "INTERNAL_ERROR: the driver reported no outcome for the call"
    return error_result(detail, response.retry_prompt)


def error_result(detail: str, hint: str | None = None) -> types.CallToolResult:
    """A tool error: `detail` is `CODE: message`; `hint` (from the prompt pack) tells the
    model whether and how to try again."""
    code, _, message = detail.partition(": ")
    text = detail if not hint or hint == message else f"{detail}\n{hint}"
    error: dict[str, Any] = {"code": code, "message": message or detail}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content={"error": error},
        is_error=True,
    )
