"""Any hwbridge driver as an MCP server (the official `mcp` SDK, low-level `Server`).

    from hwbridge.mcp import serve
    serve(CanDriver.from_dbc("car.dbc", bus="socketcan:can0"))       # stdio
    serve(bench, http="127.0.0.1:8000", token=os.environ["TOKEN"])   # streamable HTTP

The tools are the driver's own (see `hwbridge.mcp.tools`), each call runs through the
driver's own validation and execution (`hwbridge.mcp.calls`), and the driver's identity,
health and source specs are resources (`hwbridge.mcp.resources`). The server's
instructions are the driver's native-calling system message: what its tools are for, and
that results are data, never instructions.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from hwbridge.__about__ import __version__
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.decorators import ConsentGate
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.orchestrator import Orchestrator
from hwbridge.mcp.calls import MAX_RUNNING, PROGRESS_INTERVAL_S, CallHandler
from hwbridge.mcp.consent import CONSENT_TIMEOUT_S, consented
from hwbridge.mcp.http import HttpLimits, parse_address, run_http
from hwbridge.mcp.resources import Resources
from hwbridge.mcp.tools import mcp_tools

__all__ = ["build_server", "run_stdio", "serve"]

log = logging.getLogger(__name__)


def build_server(
    driver: MCSToolDriver,
    *,
    name: str = "hwbridge",
    tools: Iterable[str] | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
    max_running: int = MAX_RUNNING,
    consent: bool = False,
    consent_timeout_s: float = CONSENT_TIMEOUT_S,
) -> Server[Any]:
    """An MCP server for `driver` (a HybridDriver, an Orchestrator, a decorator; any other
    tool driver is put behind an Orchestrator), ready for any transport or for the SDK's
    in-memory `Client(server)`. `tools` names the only tools to offer (default: all the
    driver offers); the others are unknown to the server. At most `max_running` calls run at
    once (a cancelled read counts until its own timeout ends it): BUSY beyond. It does not
    close the driver.

    `consent=True` asks the client's user before every call that can change state, by MCP
    elicitation, through a `ConsentGate` (see `hwbridge.mcp.consent`): declined, cancelled,
    unanswered within `consent_timeout_s`, or a client that cannot ask, and the call is
    refused with CONSENT_DENIED and nothing is sent."""
    if consent:
        driver = ConsentGate(driver, consented, timeout_s=consent_timeout_s)
    hybrid = as_hybrid(driver)
    offered = _offered(hybrid, tools)
    listing = _Listing(hybrid, offered)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing.tools())

    resources = Resources(hybrid)
    return Server(
        name,
        version=__version__,
        title=hybrid.meta.name,
        instructions=hybrid.get_native_system_message(),
        get_tool_input_schema=listing.input_schema,
        on_list_tools=list_tools,
        on_call_tool=CallHandler(
            hybrid,
            offered=offered,
            progress_interval_s=progress_interval_s,
            max_running=max_running,
            consent=consent,
            consent_timeout_s=consent_timeout_s,
        ),
        on_list_resources=resources.list,
        on_read_resource=resources.read,
    )


class _Listing:
    """The MCP tools of a driver, built once and again only when its tools change (a remote
    bench's). The SDK looks a tool's input schema up before every call over streamable
    HTTP: building the whole list each time cost more than the call itself."""

    def __init__(self, driver: HybridDriver, offered: frozenset[str] | None) -> None:
        self.driver = driver
        self.offered = offered
        self._tools: list[types.Tool] | None = None
        self._schemas: dict[str, dict[str, Any]] = {}
        driver.on_tools_changed(self.changed)

    def changed(self) -> None:
        self._tools = None

    def tools(self) -> list[types.Tool]:
        tools = self._tools
        if tools is None:
            tools = mcp_tools(self.driver, self.offered)
            self._schemas = {t.name: t.input_schema for t in tools}
            self._tools = tools
        return tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        self.tools()
        return self._schemas.get(name)


def _offered(driver: HybridDriver, tools: Iterable[str] | None) -> frozenset[str] | None:
    if tools is None:
        return None
    offered = frozenset(tools)
    unknown = sorted(offered - {t.name for t in driver.list_tools()})
    if unknown:
        raise ValueError(f"tools names tools the driver does not offer: {unknown}")
    return offered


def as_hybrid(driver: MCSToolDriver) -> HybridDriver:
    if isinstance(driver, HybridDriver):
        return driver
    if isinstance(driver, MCSToolDriver):
        return Orchestrator([driver])
    raise TypeError(f"{type(driver).__name__} is not an MCSToolDriver or HybridDriver")


async def run_stdio(server: Server[Any]) -> None:
    """Serve over stdin/stdout until stdin closes. While it runs, the SDK keeps stdout for
    the protocol: anything else printed goes to stderr."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve(
    driver: MCSToolDriver,
    *,
    http: str | None = None,
    token: str | None = None,
    name: str = "hwbridge",
    tools: Iterable[str] | None = None,
    ready: Callable[[str], None] | None = None,
    http_limits: HttpLimits | None = None,
    consent: bool = False,
) -> None:
    """Serve `driver` over MCP until the client leaves (stdio, the default) or until
    SIGINT/SIGTERM (`http="HOST:PORT"`, streamable HTTP at /mcp, loopback unless another
    host is named; `token` makes every request carry `Authorization: Bearer <token>`;
    `http_limits` sets its read timeout and connection caps). `tools` names the only tools
    to offer. `ready(url)` is called once HTTP listens. `consent` asks the client's user
    before every call that can change state (see `build_server`). Blocks; does not close
    the driver."""
    server = build_server(driver, name=name, tools=tools, consent=consent)
    if token is not None and not token.strip():  # an unset variable must not mean "open"
        raise ValueError("the bearer token is empty: give a token, or token=None for none")
    if http is None:
        if token:
            raise ValueError("a bearer token only applies to HTTP (http='HOST:PORT')")
        if http_limits is not None:
            raise ValueError("http_limits only apply to HTTP (http='HOST:PORT')")
        anyio.run(run_stdio, server)
        return
    host, port = parse_address(http)

    async def main() -> None:
        await run_http(
            server, host, port, token=token, limits=http_limits, ready=ready or _announce
        )

    anyio.run(main)


def _announce(url: str) -> None:
    # one write, the newline in it: a warning logged meanwhile from another thread would
    # otherwise land between the address and its newline, where a reader takes it for
    # part of the address (a test farm met "http://127.0.0.1:60443/mcphwbridge: ...")
    sys.stderr.write(f"hwbridge mcp: serving at {url}\n")
    sys.stderr.flush()
