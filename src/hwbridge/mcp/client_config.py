"""Client configuration blocks: what Claude Desktop, Claude Code, Cursor and most other MCP
clients read to start or reach a server (`mcpServers`).

A stdio block names the executable by its absolute path and every file argument as an
absolute path, because a client starts the server from its own working directory with a
minimal environment. An HTTP block never holds a token, only a reference to the
environment variable that holds it (`${VAR}`, which Claude Code expands).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["claude_code_command", "http_config", "hwbridge_command", "stdio_config"]


def hwbridge_command() -> list[str]:
    """The absolute command that runs `hwbridge` from this installation."""
    script = Path(sys.executable).with_name("hwbridge")
    if script.is_file():
        return [str(script)]
    return [str(Path(sys.executable).absolute()), "-m", "hwbridge"]


def stdio_config(command: list[str], *, name: str = "hwbridge") -> dict[str, Any]:
    """`{"mcpServers": {name: {"command": ..., "args": [...]}}}` for a stdio server."""
    return {"mcpServers": {name: {"command": command[0], "args": command[1:]}}}


def http_config(
    url: str, *, name: str = "hwbridge", token_env: str | None = None
) -> dict[str, Any]:
    """`{"mcpServers": {name: {"type": "http", "url": ...}}}`, with the bearer token as a
    reference to the environment variable `token_env`."""
    server: dict[str, Any] = {"type": "http", "url": url}
    if token_env:
        server["headers"] = {"Authorization": f"Bearer ${{{token_env}}}"}
    return {"mcpServers": {name: server}}


def claude_code_command(
    command: list[str] | None = None,
    *,
    url: str | None = None,
    name: str = "hwbridge",
    token_env: str | None = None,
) -> str:
    """The `claude mcp add ...` line that registers the same server with Claude Code."""
    if url is not None:
        words = ["claude", "mcp", "add", "--transport", "http", name, url]
        line = shlex.join(words)
        if token_env:
            line += f' --header "Authorization: Bearer ${token_env}"'
        return line
    return shlex.join(["claude", "mcp", "add", name, "--", *(command or [])])
