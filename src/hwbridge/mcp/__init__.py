"""Every hwbridge driver as an MCP server, and any MCP server as a driver: extra `mcp` (the
official `mcp` SDK, 2.x).

    from hwbridge.mcp import serve
    serve(driver)                                  # stdio: Claude Desktop, Claude Code, ...
    serve(driver, http="127.0.0.1:8000")           # streamable HTTP at /mcp
    serve(driver, http=":8000", http_limits=HttpLimits(read_timeout_s=5))

    from hwbridge.mcp import McpToolDriver         # a remote bench (or anyone's server)
    bench = McpToolDriver("http://10.0.0.11:8000/mcp", token=TOKEN, label="bench1")

`build_server(driver)` gives the SDK `Server` itself (for your own transport, or the SDK's
in-memory `Client(server)` in tests). The `hwbridge mcp` command does the same from a DBC,
and with `--remote URL` serves many benches behind one endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    import mcp.server
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "hwbridge.mcp needs the MCP Python SDK: pip install 'mcs-hwbridge[mcp]'"
    ) from exc

from hwbridge._lazy import lazy_package
from hwbridge.mcp.calls import PROGRESS_INTERVAL_S
from hwbridge.mcp.http import MCP_PATH, HttpLimits
from hwbridge.mcp.resources import DRIVER_URI, HEALTH_URI, SPEC_PREFIX
from hwbridge.mcp.server import build_server, run_stdio, serve

if TYPE_CHECKING:  # the client side loads only when it is used
    from hwbridge.mcp.remote import McpToolDriver

# the public names are the imports above (written once)
__getattr__, __dir__ = lazy_package(globals())
