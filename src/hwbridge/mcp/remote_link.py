"""One connection to a remote MCP server, held on an event loop thread of its own.

`McpToolDriver` is called from any thread, sync or async; the MCP client (the official
SDK's `Client`, anyio) lives here, in one daemon thread running one event loop, so every
caller shares one connection and calls to the same server overlap on it (JSON-RPC ids
keep them apart).

The connection is held by a task that enters the client and waits; when the transport
fails (the server died, the network dropped) that task ends and the link is *down*: the
calls in flight fail with REMOTE_DOWN, and the next call connects again (at most one
attempt a second while the server stays away, so a dead bench costs no time). A connection
dropped or closed is ended by the SDK's own shutdown (a stdio server: stdin closed, then
terminated, then killed), and `close()` waits for every one it started.

After each connection, and when the server says its tools changed, the tools are listed
again, within `connect_timeout_s`, and `on_tools` hears of a change. Listings are read one
at a time, each bounded as it is read (`hwbridge.mcp.remote_listing`), numbered as they
begin, and handed over one at a time, the newest only: an older listing never replaces a
newer one. Change notifications are coalesced: at most one listing runs and one waits, and
a listing they ask for starts at least LIST_INTERVAL_S after the last one ended, so a storm
of them costs one listing a second, not one each. Over HTTP, an answer is read up to a cap
(`hwbridge.mcp.remote_http`).

A call has one deadline over all its rounds: a server that answers `input_required`
(2026-07-28) is asked again within it for a read, and not at all for a call that changes
state (`InputRequired`): that would send it again without a new consent. Unless the call
was given `Questions` (`hwbridge.mcp.questions`): a server's questions about it (either way
it asks) then go to the person, and the time the person takes is added to the deadline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_REQUEST

from hwbridge.__about__ import __version__
from hwbridge.core.models import ToolError
from hwbridge.mcp.questions import Questions
from hwbridge.mcp.remote_http import http_transport
from hwbridge.mcp.remote_listing import Listed, Listing, listing_transport
from hwbridge.mcp.remote_stdio import stdio_transport

__all__ = ["InputRequired", "LinkState", "RemoteLink", "Target"]

log = logging.getLogger(__name__)

T = TypeVar("T")
LinkState = Literal["connecting", "connected", "down", "closed"]
RETRY_AFTER_S = 1.0
"""After a failed connection, calls fail at once for this long before the next attempt."""
LIST_INTERVAL_S = 1.0
"""A listing a change notification asks for starts at least this long after the last one."""
RELIST_PAUSE_MAX_S = 60.0
"""A listing that failed is tried again after 2, 4, ... seconds, then once a minute."""
STOP_WAIT_S = 10.0
"""How long `close()` waits for the connections it started to end: the SDK's own shutdown
of a stdio server (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL) ends within about 7 s."""
_MAX_PAGES = 16


class InputRequired(Exception):
    """The server answered a call that changes state with `input_required`: it is not sent
    again (that would run it again without a new consent)."""


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

    def client(self, listing: Listing, **options: Any) -> Client:
        """A client whose tool listings are counted and cut by `listing` as they arrive."""
        if self.url is not None:
            transport = http_transport(self.url, self.token, listing)
        else:
            assert self.command is not None
            transport = stdio_transport(self.command, listing)
        return Client(listing_transport(transport, listing), **options)


@dataclass
class _Asking:
    """A call in flight whose server's questions go to a person, and its deadline."""

    questions: Questions
    deadline: asyncio.Timeout | None = None


@dataclass
class _Held:
    """One live connection: the client, the task holding it open, and what it said."""

    client: Client
    task: asyncio.Task[None]
    stop: asyncio.Event
    server: str
    protocol: str


@dataclass
class _Holder:
    """A task holding a connection, live or on its way out: `stop` ends it the SDK's way
    (its shutdown stops a stdio server), `scope` cancels it while it connects."""

    stop: asyncio.Event
    scope: anyio.CancelScope
    ready: bool = False


@dataclass(frozen=True)
class _Fetched:
    """A listing as read, numbered when it began."""

    generation: int
    listed: Listed


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
        on_tools: Callable[[Listed], None],
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
        self.tools: tuple[types.Tool, ...] = ()  # the newest listing read, as it was kept
        self._held: _Held | None = None
        self._asking: list[_Asking] = []  # calls in flight whose questions go to a person
        self._in_flight = 0  # calls in flight, reads and changes
        self._holders: dict[asyncio.Task[None], _Holder] = {}
        self._connecting: asyncio.Future[_Held] | None = None
        self._failed_at = -float("inf")
        self._listed_at = -float("inf")
        self._listing = asyncio.Lock()  # one listing at a time
        self._count = Listing()  # what the listing being read has read so far
        self._generation = 0  # of the last listing begun
        self._fetched: _Fetched | None = None  # the newest listing read
        self._handing = threading.Lock()  # one listing handed over at a time
        self._handed = 0  # the generation last handed over
        self._handed_signature: list[Any] | None = None
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

    def close(self) -> None:
        """Close the connection and end the loop thread, once every connection this link
        started has ended (a stdio server process stopped: at most about STOP_WAIT_S)."""
        if self.state == "closed":
            return
        try:
            self.run(self._disconnect(), STOP_WAIT_S + 5)
        except (TimeoutError, RuntimeError, ToolError):
            log.warning("the connection to %s did not close in time", self.target.shown)
        self.state = "closed"
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()

    def hand_over(self) -> None:
        """Hand the newest listing read to `on_tools`, unless it was handed over already or
        is what was handed over last. Listings are handed over one at a time, from any
        thread but the loop's (a listener may call back into the driver): whichever thread
        comes first hands over the newest, so an older one never follows a newer one."""
        with self._handing:
            fetched = self._fetched
            if fetched is None or fetched.generation <= self._handed:
                return
            self._handed = fetched.generation
            signature = _signature(fetched.listed)
            if signature == self._handed_signature:
                return
            self._handed_signature = None  # until it is taken: a failure is tried again
            try:
                self._on_tools(fetched.listed)
            except Exception:
                log.exception("the tools of %s could not be taken", self.target.shown)
                return
            self._handed_signature = signature

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
        ready.add_done_callback(_retrieved)  # it may fail after this connection was given up
        holder = _Holder(asyncio.Event(), anyio.CancelScope())
        task = asyncio.ensure_future(self._hold(ready, holder))
        self._holders[task] = holder
        task.add_done_callback(self._holders.pop)
        try:
            held = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout_s)
        except BaseException as exc:
            holder.scope.cancel()  # anyio's way: the SDK's shielded shutdown still runs
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
            await self._list_tools(held.client)
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

    async def _hold(self, ready: asyncio.Future[_Held], holder: _Holder) -> None:
        """Enter the client, hand it over, and keep it open until `holder.stop` or until
        the transport fails."""
        task = asyncio.current_task()
        assert task is not None
        try:
            with holder.scope:
                async with self.target.client(
                    self._count,
                    cache=None,
                    message_handler=self._on_message,
                    elicitation_callback=self._elicited,
                    client_info=types.Implementation(name="hwbridge", version=__version__),
                ) as client:
                    info = client.server_info
                    server = f"{info.name} {info.version}" if info is not None else "unnamed"
                    held = _Held(client, task, holder.stop, server, client.protocol_version)
                    holder.ready = True
                    if not ready.done():
                        ready.set_result(held)
                    listening = asyncio.ensure_future(self._listen(client))
                    try:
                        await holder.stop.wait()
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
            if not ready.done():  # cancelled while connecting
                ready.set_exception(ConnectionError("the connection was given up"))
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
        """A call found the connection broken: drop it (the SDK's shutdown ends it, and
        stops a stdio server), connect again on the next call."""
        held = self._held
        if held is not None:
            self._held = None
            held.stop.set()
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
        """End every connection this link started, and wait (STOP_WAIT_S at most) until
        each has: a connection dropped a moment ago may still be stopping its server."""
        if self._relister is not None:
            self._relister.cancel()
        self._held = None
        for holder in self._holders.values():
            holder.stop.set()
            if not holder.ready:
                holder.scope.cancel()
        holding = set(self._holders)
        if not holding:
            return
        _, late = await asyncio.wait(holding, timeout=STOP_WAIT_S)
        for task in late:  # the SDK's shutdown did not end: nothing gentler is left
            log.warning("the connection to %s did not end; cancelling it", self.target.shown)
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=2.0)

    # -- tools -------------------------------------------------------------------------

    async def _list_tools(self, client: Client) -> None:
        """List the server's tools (every page, bounded as read: `remote_listing`; within
        `connect_timeout_s`), one listing at a time, and hand the listing over."""
        async with self._listing:
            self._generation += 1
            generation = self._generation
            count = self._count
            count.begin()
            tools: list[types.Tool] = []
            cursor: str | None = None
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    for _ in range(_MAX_PAGES):
                        page = await client.list_tools(cursor=cursor)
                        tools.extend(page.tools)
                        cursor = page.next_cursor
                        if cursor is None or count.full:
                            break
            finally:
                self._listed_at = time.monotonic()  # a failing listing is paced as well
            if count.unread or cursor is not None:
                log.warning(
                    "%s lists more tools than are read (%d read, %d more, more pages: %s)",
                    self.target.shown,
                    count.read,
                    count.unread,
                    cursor is not None,
                )
            listed = count.listed(tools)
            if self._fetched is None or generation > self._fetched.generation:
                self._fetched = _Fetched(generation, listed)
                self.tools = listed.tools
        # told from a thread of its own: a listener may call back into the driver
        threading.Thread(target=self.hand_over, name="hwbridge-remote-tools", daemon=True).start()

    async def refresh_tools(self) -> None:
        """List the tools again now (after the listing in flight, if any); a listing that
        does not end within `connect_timeout_s` is given up (TimeoutError), one that fails
        raises what it failed with."""
        held = self._held
        if held is None:
            return
        await self._list_tools(held.client)

    def _changed(self) -> None:
        """The server says its tools changed: list them again, coalesced with what is
        already asked for (at most one listing running and one waiting)."""
        self._relist = True
        if self._relister is None or self._relister.done():
            self._relister = asyncio.ensure_future(self._relist_when_due())

    async def _relist_when_due(self) -> None:
        """List again while a change is announced, LIST_INTERVAL_S after the last listing;
        a listing that fails (or is given up) is tried again, twice as late each time up to
        RELIST_PAUSE_MAX_S: a server need not announce a change again until it was listed."""
        pause = LIST_INTERVAL_S
        while self._relist:
            wait = self._listed_at + pause - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._relist = False  # what is announced from here on asks for one more
            try:
                await self.refresh_tools()
                pause = LIST_INTERVAL_S
            except Exception as exc:
                log.warning(
                    "the tools of %s could not be listed again (tried again in %g s): %s",
                    self.target.shown,
                    min(pause * 2, RELIST_PAUSE_MAX_S),
                    describe(exc) if not isinstance(exc, TimeoutError) else "no answer",
                )
                self._relist = True
                pause = min(pause * 2, RELIST_PAUSE_MAX_S)

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
        *,
        changes_state: bool,
        questions: Questions | None = None,
    ) -> types.CallToolResult:
        """One `tools/call`, all its rounds within `timeout_s` once connected (TimeoutError
        past it; the server is told to cancel). A read follows `input_required` rounds (the
        SDK's, at most 10); a call that changes state is sent once: `InputRequired` instead
        of a second round, unless `questions` can put the server's questions to the person
        (then each round carries the person's answers) or hand them back (`relay`: the round
        is left in `questions.pending`)."""
        self._in_flight += 1  # a server's question can only be told apart with one in flight
        try:
            if not changes_state:
                client = await self.client()
                self.calls += 1
                async with asyncio.timeout(timeout_s):
                    return await client.call_tool(
                        name, arguments, read_timeout_seconds=timeout_s, progress_callback=progress
                    )
            return await self._change(name, arguments, timeout_s, progress, questions)
        finally:
            self._in_flight -= 1

    async def _change(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float,
        progress: ProgressFnT | None,
        questions: Questions | None,
    ) -> types.CallToolResult:
        client = await self.client()
        self.calls += 1
        if questions is not None and questions.can_ask and not questions.relay:
            asking = _Asking(questions)
            self._asking.append(asking)
            try:
                async with asyncio.timeout(timeout_s) as asking.deadline:
                    # rounds answered by the person through `_elicited`: no read timeout of
                    # its own, the deadline (stopped while the person reads) bounds them all
                    return await client.call_tool(name, arguments, progress_callback=progress)
            finally:
                self._asking.remove(asking)
        relay = questions if questions is not None and questions.relay else None
        async with asyncio.timeout(timeout_s):
            result = await client.session.call_tool(
                name,
                arguments,
                read_timeout_seconds=timeout_s,
                progress_callback=progress,
                allow_input_required=True,
                input_responses=relay.answers if relay is not None else None,
                request_state=relay.state if relay is not None else None,
            )
        if isinstance(result, types.InputRequiredResult):
            if relay is not None:  # handed back to the client that can be asked
                relay.pending, relay.pending_from = result, self.where
            raise InputRequired(name)
        return result

    async def _elicited(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The server asks its client's user (either way a server asks): passed on to the
        person of the one call in flight that can ask, or refused when there is none (or
        more than one, which the question cannot be told apart for)."""
        if len(self._asking) != 1 or self._in_flight != 1:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message="no one can be asked about this call here (the question cannot be "
                "told to be about one call: ask again when no other call is in flight)",
            )
        asking = self._asking[0]
        deadline = asking.deadline
        left = None
        loop = asyncio.get_running_loop()
        if deadline is not None and deadline.when() is not None:
            left = max(0.0, cast(float, deadline.when()) - loop.time())
            deadline.reschedule(None)  # the call's time stops while the person reads
        try:
            return await asking.questions.ask(self.where, params)  # bounded: its own timeout
        finally:
            if deadline is not None and left is not None and not deadline.expired():
                deadline.reschedule(loop.time() + left)

    async def read_resource(self, uri: str, timeout_s: float) -> types.ReadResourceResult:
        client = await self.client()
        return await asyncio.wait_for(client.read_resource(uri), timeout_s)

    async def resources(self, timeout_s: float) -> list[str]:
        client = await self.client()
        listed = await asyncio.wait_for(client.list_resources(), timeout_s)
        return [str(r.uri) for r in listed.resources]


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _signature(listed: Listed) -> list[Any]:
    tools = [t.model_dump(mode="json", exclude_none=True) for t in listed.tools]
    return [tools, listed.skipped, listed.unread]


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
