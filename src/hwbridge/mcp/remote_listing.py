"""What a bench's tool listing may cost this side: its tools are counted and measured as
each `tools/list` page arrives, before the SDK makes a model of any of them.

A listing is read page by page; `Listing` (one per connection's link, one listing at a time)
counts across its pages. The transport's streams are wrapped (`listing_transport`) so each
`tools/list` answer is cut where it arrives, once JSON has been parsed and before the SDK
validates it into `Tool` models (the part that costs: 300,000 tiny tools took 9 s):

- at most MAX_TOOLS tools are read per listing; the ones after are only counted;
- of each tool only what is used is kept (name, title, description cut to
  MAX_DESCRIPTION_CHARS, input schema, the annotations' known hints; an output schema, icons
  or `_meta` are dropped), so a listing of 15 MB descriptions is not kept at 15 MB;
- a tool whose input schema is over MAX_SCHEMA_BYTES is skipped here (with the reason), and
  so is every tool once the bench's tools kept reach MAX_CATALOGUE_BYTES.

Over HTTP the bytes are bounded while read as well (`hwbridge.mcp.remote_http`): a
`tools/list` answer is read up to MAX_LISTING_PAGE_BYTES, and no further page is asked for
once a listing has read MAX_LISTING_BYTES. A bench over stdio is a process you started: its
pages are parsed whole, then cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import orjson
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from hwbridge.mcp.remote_tools import (
    MAX_CATALOGUE_BYTES,
    MAX_DESCRIPTION_CHARS,
    MAX_SCHEMA_BYTES,
    MAX_TOOLS,
    cut_text,
    past_catalogue,
)

__all__ = [
    "MAX_LISTING_BYTES",
    "MAX_LISTING_PAGE_BYTES",
    "Listed",
    "Listing",
    "listing_transport",
]

MAX_LISTING_PAGE_BYTES = 4 * 1024 * 1024
"""Over HTTP, a `tools/list` answer (one page) is read up to this many bytes; past it the
page, and the listing, fails."""
MAX_LISTING_BYTES = 8 * 1024 * 1024
"""Over HTTP, no further page is asked for once a listing has read this many bytes."""
_HINTS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_PENDING_IDS = 64  # tools/list requests awaiting their answer that are remembered


@dataclass(frozen=True)
class Listed:
    """One whole listing as it was kept: the tools, those skipped while reading it (name ->
    reason) and how many were not read at all (past MAX_TOOLS)."""

    tools: tuple[Any, ...]  # mcp.types.Tool, in the server's order
    skipped: dict[str, str] = field(default_factory=dict)
    unread: int = 0


class Listing:
    """The count of the listing being read (all its pages): tools read, bytes kept and, over
    HTTP, bytes read. `begin()` starts a new one; the link reads one listing at a time."""

    def __init__(self) -> None:
        self.pending: dict[Any, None] = {}  # ids of tools/list requests sent, oldest first
        self.begin()

    def begin(self) -> None:
        self.read = 0  # tools read (kept or skipped)
        self.kept_bytes = 0
        self.read_bytes = 0  # bytes of tools/list answers read over HTTP
        self.unread = 0
        self.skipped: dict[str, str] = {}

    @property
    def full(self) -> bool:
        """No further page is worth asking for."""
        return (
            self.read >= MAX_TOOLS
            or self.kept_bytes >= MAX_CATALOGUE_BYTES
            or self.read_bytes >= MAX_LISTING_BYTES
        )

    def cut_page(self, result: dict[str, Any]) -> dict[str, Any]:
        """A `tools/list` result with only what this listing keeps of it."""
        tools = result.get("tools")
        if not isinstance(tools, list):
            return result  # not a listing: the SDK says what is wrong with it
        kept: list[Any] = []
        for index, raw in enumerate(tools):
            if self.read >= MAX_TOOLS:
                self.unread += len(tools) - index
                break
            self.read += 1
            if not isinstance(raw, dict):
                kept.append(raw)  # the SDK refuses the page, as it would have
                continue
            tool = _used(raw)
            name = str(tool.get("name"))[:80]
            try:
                schema_bytes = len(orjson.dumps(tool.get("inputSchema")))
                size = len(orjson.dumps(tool))
            except TypeError:  # an integer past 64 bits, say: tool_of says so
                kept.append(tool)
                continue
            if schema_bytes > MAX_SCHEMA_BYTES:
                self.skipped[name] = (
                    f"its input schema is {schema_bytes} bytes (at most {MAX_SCHEMA_BYTES})"
                )
            elif self.kept_bytes + size > MAX_CATALOGUE_BYTES:
                self.skipped[name] = past_catalogue()
            else:
                self.kept_bytes += size
                kept.append(tool)
        return {**result, "tools": kept}

    def note(self, request_id: Any) -> None:
        """A `tools/list` request was sent with this id."""
        self.pending[_correlated(request_id)] = None
        while len(self.pending) > _PENDING_IDS:  # unanswered long ago: forgotten
            del self.pending[next(iter(self.pending))]

    def answers(self, request_id: Any) -> bool:
        """Whether a message with this id answers a `tools/list` request (not yet answered):
        correlated as the SDK correlates it ("7" answers 7), or a bench could slip a listing
        past every bound by echoing the id as a string."""
        return isinstance(request_id, int | str) and _correlated(request_id) in self.pending

    def answered(self, request_id: Any) -> None:
        """The answer to the `tools/list` request with this id came."""
        self.pending.pop(_correlated(request_id), None)

    def listed(self, tools: list[Any]) -> Listed:
        return Listed(tuple(tools), dict(self.skipped), self.unread)


def _used(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a listed tool this side uses: never more than a prompt can carry."""
    tool: dict[str, Any] = {"name": raw.get("name"), "inputSchema": raw.get("inputSchema")}
    for key, limit in (("title", 200), ("description", MAX_DESCRIPTION_CHARS)):
        value = raw.get(key)
        if isinstance(value, str):
            tool[key] = cut_text(value, limit) or ""
        elif value is not None:
            tool[key] = value  # not a string: the SDK refuses the page, as it would have
    if isinstance(tool["name"], str) and len(tool["name"]) > 80:
        tool["name"] = tool["name"][:80]  # still no name a provider takes: skipped later
    annotations = raw.get("annotations")
    if isinstance(annotations, dict):
        tool["annotations"] = {k: annotations[k] for k in _HINTS if k in annotations}
        title = tool["annotations"].get("title")
        if isinstance(title, str):
            tool["annotations"]["title"] = title[:200]
    elif annotations is not None:
        tool["annotations"] = annotations
    return tool


@asynccontextmanager
async def listing_transport(
    transport: AbstractAsyncContextManager[TransportStreams], listing: Listing
) -> AsyncIterator[TransportStreams]:
    """`transport` with each `tools/list` answer cut by `listing` as it arrives."""
    async with transport as (read, write):
        yield _CuttingReads(read, listing), _NotingWrites(write, listing)


class _Wrapped:
    """A stream of the transport's, closed as a whole (and as an async context) through it."""

    _inner: ReadStream[SessionMessage | Exception] | WriteStream[SessionMessage]

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _NotingWrites(_Wrapped):
    """The write stream, noting the id of each `tools/list` request sent."""

    def __init__(self, inner: WriteStream[SessionMessage], listing: Listing) -> None:
        self._inner: WriteStream[SessionMessage] = inner
        self._listing = listing

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest) and message.method == "tools/list":
            self._listing.note(message.id)
        await self._inner.send(item)


class _CuttingReads(_Wrapped):
    """The read stream, with each answer to a noted `tools/list` request cut."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], listing: Listing) -> None:
        self._inner: ReadStream[SessionMessage | Exception] = inner
        self._listing = listing

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    def _cut(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and self._listing.answers(
            message.id
        ):
            self._listing.answered(message.id)
            if isinstance(message, JSONRPCResponse):
                cut = message.model_copy(update={"result": self._listing.cut_page(message.result)})
                return SessionMessage(cut, metadata=item.metadata)
        return item

    async def receive(self) -> SessionMessage | Exception:
        return self._cut(await self._inner.receive())

    def __aiter__(self) -> _CuttingReads:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._cut(await self._inner.__anext__())


def _correlated(request_id: Any) -> Any:
    """A request id as the SDK pairs answers with requests ("7" is 7)."""
    return coerce_request_id(request_id) if isinstance(request_id, int | str) else request_id
