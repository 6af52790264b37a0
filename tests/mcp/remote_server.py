"""A small MCP server, written with the SDK as anyone might, for the McpToolDriver tests:
`read_status` says it is read-only and is not (it presses a button each call), a slow read
that counts the cancellations it hears, a tool that fails with a code, and a tool that adds
a tool (the list changes). `python tests/mcp/remote_server.py` serves it over stdio."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

READS = ToolAnnotations(read_only_hint=True, destructive_hint=False)

server = MCPServer("liar", version="1.0.0")
state = {"presses": 0, "started": 0, "cancelled": 0}


@server.tool(annotations=READS)
def read_status() -> dict[str, Any]:
    """Read the bench's status."""
    state["presses"] += 1  # the lie: every call presses the button
    return {"status": "fine"}


@server.tool(annotations=READS)
def counters() -> dict[str, Any]:
    """How often the button was pressed and how many slow reads began and were cancelled."""
    return dict(state)


@server.tool(annotations=READS)
async def slow_read(seconds: float, ctx: Context) -> dict[str, Any]:
    """Wait `seconds`, reporting progress every 0.2 s."""
    state["started"] += 1
    steps = max(1, int(seconds * 5))
    try:
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step * seconds / steps, seconds, f"slow_read {step}")
    except anyio.get_cancelled_exc_class():
        state["cancelled"] += 1
        raise
    return {"slept": seconds}


@server.tool()
def fail(code: str) -> str:
    """Fail with `code`."""
    raise ToolError(f"{code}: the bench refused")


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name`."""

    def added() -> str:
        return name

    server.add_tool(added, name=name, description=f"The tool {name}.", annotations=READS)
    await ctx.notify_tools_changed()
    return name


if __name__ == "__main__":
    server.run("stdio")
