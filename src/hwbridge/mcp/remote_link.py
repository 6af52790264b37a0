"""One connection to a remote MCP server, held on an event loop thread of its own.

`McpToolDriver` is called from any thread, sync or async; the MCP client (the official
SDK's `Client`, anyio) lives here, in one daemon thread running one event loop, so every
caller shares one connection and calls to the same server overlap on it (JSON-RPC ids
keep them apart).

The connection is held by a task that enters the client and waits; when the transport
fails (the server died, the network dropped) that task ends and the link is *down*: the
calls in flight fail with REMOTE_DOWN, and the next call connects again (at most one
attempt a second while the server stays away, so a dead bench costs no time). After each
connection, and when the server says its tools changed, the tools are listed again and
`on_tools` hears of a change. Change notifications are coalesced: at most one listing runs
and one waits, and a listing they ask for starts at least LIST_INTERVAL_S after the last one
ended, so a storm of them costs one listing a second, not one each. Over HTTP, an answer is
read up to a cap (`hwbridge.mcp.remote_http`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from mcp import Client, StdioServerParameters, types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from hwbridge.__about__ import __version__
from hwbridge.core.models import ToolError
from hwbridge.mcp.remote_http import http_transport
from hwbridge.mcp.remote_tools import MAX_TOOLS

__all__ = ["LinkState", "RemoteLink", "Target"]

log = logging.getLogger(__name__)

T = TypeVar("T")
LinkState = Literal["connecting", "connected", "down", "closed"]
RETRY_AFTER_S = 1.0
"""After a failed connection, calls fail at once for this long before the next attempt."""
LIST_INTERVAL_S = 1.0
"""A listing a change notification asks for starts at least this long after the last one."""
_MAX_PAGES = 16


@dataclass(frozen=True)
class Target:
    """Where the server is: a streamable-HTTP URL (with an optional bearer token) or a
    command started over stdio. `shown` names it without the token."""

    url: str | None = None
    command: StdioServerParameters | None = None
    token: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        if self.url is not None:
            return self.url
        assert self.command is not None
        return " ".join([self.command.command, *self.command.args])[:200]

    def client(self, **options: Any) -> Client:
        if self.url is not None:
            return Client(http_transport(self.url, self.token), **options)
        assert self.command is not None
        return Client(self.command, **options)


@dataclass
class _Held:
    """One live connection: the client, the task holding it open, and what it said."""

    client: Client
    task: asyncio.Task[None]
    stop: asyncio.Event
    server: str
    protocol: str


class RemoteLink:
    """The connection to one server; every method may be called from any thread except
    this link's own loop thread."""

    def __init__(
        self,
        target: Target,
        *,
        name: str,
        where: str,
        connect_timeout_s: float,
        on_tools: Callable[[list[types.Tool]], None],
    ) -> None:
        self.target = target
        self.where = where  # how messages name the server (its label and URL)
        self.connect_timeout_s = connect_timeout_s
        self._on_tools = on_tools
        self.state: LinkState = "connecting"
        self.last_error: str | None = None
        self.down_since: float | None = None
        self.connections = 0
        self.calls = 0
        self.failures = 0
        self.server: str | None = None
        self.protocol: str | None = None
        self.tools: list[types.Tool] = []
        self.skipped_tools = 0
        self._held: _Held | None = None
        self._connecting: asyncio.Future[_Held] | None = None
        self._failed_at = -float("inf")
        self._listed_at = -float("inf")
        self._listing = asyncio.Lock()  # one listing at a time
        self._relist = False  # a change was announced since the last listing began
        self._relister: asyncio.Task[None] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"hwbridge-remote[{name}]", daemon=True
        )
        self._thread.start()

    # -- from any thread ---------------------------------------------------------------

    def run(self, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run `work` on the link's loop and wait at most `timeout_s` for it (then it is
        cancelled and TimeoutError raised)."""
        future = self.submit(work)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError("a remote call cannot wait for itself on the link's own loop")
        if self.state == "closed":
            work.close()
            raise ToolError("REMOTE_DOWN", f"the connection to {self.where} is closed")
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the connection (and the stdio server process) and end the loop thread."""
        if self.state == "closed":
            return
        try:
            self.run(self._disconnect(), timeout_s)
        except (TimeoutError, RuntimeError, ToolError):
            log.debug("the connection to %s did not close in time", self.target.shown)
        self.state = "closed"
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._loop.close()

    # -- on the loop ---------------------------------------------------------------------

    async def client(self) -> Client:
        """The live client, connecting first when there is none (REMOTE_DOWN if that fails,
        or failed less than RETRY_AFTER_S ago)."""
        held = self._held
        if held is not None and not held.task.done():
            return held.client
        if self._connecting is None:
            if time.monotonic() - self._failed_at < RETRY_AFTER_S:
                raise self._down(self.last_error or "it did not answer")
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            held = await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None
        return held.client

    async def _connect(self) -> _Held:
        self.state = "connecting"
        ready: asyncio.Future[_Held] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        task = asyncio.ensure_future(self._hold(ready, stop))
        try:
            held = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout_s)
        except BaseException as exc:
            task.cancel()
            self._failed_at = time.monotonic()
            self.state = "down"
            self.down_since = self.down_since or time.time()
            if isinstance(exc, TimeoutError):
                reason = f"no answer within {self.connect_timeout_s:g} s"
            elif isinstance(exc, Exception):
                reason = describe(exc)
            else:
                raise
            self.last_error = reason
            raise self._down(reason) from None
        self._held = held
        try:
            await asyncio.wait_for(self._list_tools(held.client), self.connect_timeout_s)
        except Exception as exc:  # it answered, but not with its tools: as good as down
            reason = f"its tools could not be listed: {describe(exc)}"
            self.lost(reason)
            self._failed_at = time.monotonic()
            raise self._down(reason) from None
        self.connections += 1
        self.state = "connected"
        self.down_since = None
        self.server, self.protocol = held.server, held.protocol
        return held

    async def _hold(self, ready: asyncio.Future[_Held], stop: asyncio.Event) -> None:
        """Enter the client, hand it over, and keep it open until `stop` or until the
        transport fails."""
        task = asyncio.current_task()
        assert task is not None
        try:
            async with self.target.client(
                cache=None,
                message_handler=self._on_message,
                client_info=types.Implementation(name="hwbridge", version=__version__),
            ) as client:
                info = client.server_info
                server = f"{info.name} {info.version}" if info is not None else "unnamed"
                held = _Held(client, task, stop, server, client.protocol_version)
                if not ready.done():
                    ready.set_result(held)
                listening = asyncio.ensure_future(self._listen(client))
                try:
                    await stop.wait()
                finally:
                    listening.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError())
            if isinstance(exc, Exception):
                self._lost(task, describe(exc))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        else:
            self._lost(task, "closed")

    def _lost(self, task: asyncio.Task[None], reason: str) -> None:
        held = self._held
        if held is None or held.task is not task or self.state == "closed":
            return
        self._held = None
        if not held.stop.is_set():  # not asked to close: the server went away
            log.warning("the connection to %s was lost: %s", self.target.shown, reason)
            self.state = "down"
            self.last_error = reason
            self.down_since = time.time()

    def lost(self, reason: str) -> None:
        """A call found the connection broken: drop it, connect again on the next call."""
        held = self._held
        if held is not None:
            self._held = None
            held.stop.set()
            held.task.cancel()
        if self.state != "closed":
            self.state = "down"
            self.last_error = reason
            self.down_since = self.down_since or time.time()

    def _down(self, reason: str) -> ToolError:
        return ToolError(
            "REMOTE_DOWN",
            f"{self.where} does not answer ({reason}); nothing was sent. It is tried again "
            "on the next call",
            retryable=True,
        )

    async def _disconnect(self) -> None:
        if self._relister is not None:
            self._relister.cancel()
        held, self._held = self._held, None
        if held is None:
            return
        held.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(held.task), 3.0)
        except (TimeoutError, asyncio.CancelledError):
            held.task.cancel()
        except Exception:
            log.debug("closing %s", self.target.shown, exc_info=True)

    # -- tools -------------------------------------------------------------------------

    async def _list_tools(self, client: Client) -> None:
        """List the server's tools (every page, bounded) and report a change."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS:
                break
        self._listed_at = time.monotonic()
        self.skipped_tools = max(0, len(tools) - MAX_TOOLS)
        tools = tools[:MAX_TOOLS]
        if _signature(tools) != _signature(self.tools):
            self.tools = tools
            # told from a thread of its own: a listener may call back into the driver
            threading.Thread(
                target=self._on_tools, args=(tools,), name="hwbridge-remote-tools", daemon=True
            ).start()

    async def refresh_tools(self) -> None:
        """List the tools again now (after the listing in flight, if any)."""
        async with self._listing:
            held = self._held
            if held is None:
                return
            try:
                await self._list_tools(held.client)
            except Exception as exc:
                log.warning("the tools of %s could not be listed again: %s", self.target.shown, exc)
            finally:
                self._listed_at = time.monotonic()  # a failing listing is paced as well

    def _changed(self) -> None:
        """The server says its tools changed: list them again, coalesced with what is
        already asked for (at most one listing running and one waiting)."""
        self._relist = True
        if self._relister is None or self._relister.done():
            self._relister = asyncio.ensure_future(self._relist_when_due())

    async def _relist_when_due(self) -> None:
        while self._relist:
            wait = self._listed_at + LIST_INTERVAL_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._relist = False  # what is announced from here on asks for one more
            await self.refresh_tools()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed()
        elif isinstance(message, Exception):
            log.debug("the transport of %s reported: %s", self.target.shown, message)

    async def _listen(self, client: Client) -> None:
        """On a 2026-07-28 connection, change notifications come over `subscriptions/listen`
        (when the server offers them); older connections send them to `_on_message`. A
        stream that ends once open (a server ends one whose backlog overflows: a storm of
        changes) is opened again, at most once per LIST_INTERVAL_S, and the tools listed
        again once it is: nothing said while none was open is replayed."""
        capabilities = client.server_capabilities
        if capabilities.tools is None or not capabilities.tools.list_changed:
            return
        again = False
        while True:
            opened = False
            try:
                async with client.listen(tools_list_changed=True) as events:
                    opened = True
                    if again:  # what changed while no stream was open is listed
                        self._changed()
                    async for _event in events:
                        self._changed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not opened:  # an old protocol, refused, or the connection is gone
                    log.debug("no change notifications from %s: %s", self.target.shown, exc)
                    return
                log.debug("the change stream of %s dropped: %s", self.target.shown, exc)
            again = True
            await asyncio.sleep(LIST_INTERVAL_S)

    # -- calls -------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float,
        progress: ProgressFnT | None,
    ) -> types.CallToolResult:
        """One `tools/call`; MCPError and transport errors propagate (see McpToolDriver)."""
        client = await self.client()
        self.calls += 1
        return await client.call_tool(
            name, arguments, read_timeout_seconds=timeout_s, progress_callback=progress
        )

    async def read_resource(self, uri: str, timeout_s: float) -> types.ReadResourceResult:
        client = await self.client()
        return await asyncio.wait_for(client.read_resource(uri), timeout_s)

    async def resources(self, timeout_s: float) -> list[str]:
        client = await self.client()
        listed = await asyncio.wait_for(client.list_resources(), timeout_s)
        return [str(r.uri) for r in listed.resources]


def _signature(tools: list[types.Tool]) -> list[Any]:
    return [t.model_dump(mode="json", exclude_none=True) for t in tools]


def describe(exc: BaseException) -> str:
    """One line for what went wrong, from the innermost cause (an exception group holds the
    transport's own error)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message[:200]
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
