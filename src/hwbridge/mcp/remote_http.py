"""The HTTP client of a remote bench, whose answers are bounded where they are read.

The MCP SDK reads a JSON answer whole (`response.aread()`), however large: a server that
answers with 200 MB costs the client a gigabyte before anything could cut the result. Here
the SDK's own client (`create_mcp_http_client`: its timeouts, proxies from the environment)
gets a response hook that puts every answer's body behind a stream that counts what it hands
on and stops past `MAX_ANSWER_BYTES` (or at once when the Content-Length says so), raising
`AnswerTooLarge`: an httpx2 `StreamError`, which the SDK turns into an error for that one
request while the connection stays. An event stream (which may stay open for hours) is not
counted as a whole: each of its events gets the same bound from the SDK's own
`max_sse_event_size`. Answers are asked for uncompressed and a compressed one is
refused: a small gzip body can unpack to gigabytes. A `tools/list` answer (one page of a
listing, event stream or not) is read up to `MAX_LISTING_PAGE_BYTES`, and counted into the
`Listing` being read (`hwbridge.mcp.remote_listing`), which asks for no page past its total.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx2
import orjson
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from hwbridge.mcp.remote_listing import MAX_LISTING_PAGE_BYTES, Listing

__all__ = [
    "MAX_ANSWER_BYTES",
    "AnswerTooLarge",
    "answer_too_large",
    "bounded_http_client",
    "http_transport",
]

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most one answer (a JSON body, one server-sent event) may hold: well above the
largest result kept (1,000,000 characters, which JSON may spell in up to six bytes each,
and hwbridge's servers send it twice: as text and as structured content)."""
TOO_LARGE = "answer too large"
_SSE_TOO_LARGE = "byte limit"  # the SDK's words for an event past max_sse_event_size


class AnswerTooLarge(httpx2.StreamError):
    """An answer longer than the cap: reading stopped there."""


class AnswerRefused(httpx2.StreamError):
    """An answer that cannot be read within the cap (compressed when asked not to be)."""


@asynccontextmanager
async def http_transport(
    url: str, token: str | None, listing: Listing | None = None
) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP transport to `url` over a `bounded_http_client` (closed with
    it), its events bounded as its bodies are; `tools/list` answers are counted into
    `listing`."""
    async with (
        bounded_http_client(token, listing=listing) as http,
        streamable_http_client(
            url, http_client=http, max_sse_event_size=MAX_ANSWER_BYTES
        ) as streams,
    ):
        yield streams


def bounded_http_client(
    token: str | None, limit: int = MAX_ANSWER_BYTES, *, listing: Listing | None = None
) -> httpx2.AsyncClient:
    """The SDK's HTTP client, reading at most `limit` bytes of any answer (of a `tools/list`
    answer, MAX_LISTING_PAGE_BYTES, counted into `listing`), asking for it uncompressed,
    with the bearer `token` when given."""
    headers = {"Accept-Encoding": "identity"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    client = create_mcp_http_client(headers=headers)
    hooks = client.event_hooks
    bound = _bounding(limit, listing)
    client.event_hooks = {**hooks, "response": [*hooks.get("response", []), bound]}
    return client


def answer_too_large(exc: MCPError) -> bool:
    """Whether the SDK's error for a request is an answer that was cut here."""
    message = exc.error.message if exc.error is not None else str(exc)
    return TOO_LARGE in message or _SSE_TOO_LARGE in message


def _bounding(limit: int, listing: Listing | None) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook: the body is read through `_Bounded` (an event stream, which may stay
    open for hours, is bounded per event by the SDK instead of as a whole; the answer to a
    `tools/list` request is bounded as a whole, whatever its framing)."""

    async def bound(response: httpx2.Response) -> None:
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        refusal: httpx2.StreamError | None = None
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        length = response.headers.get("content-length", "")
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        page = _lists_tools(response.request)
        most: int | None = MAX_LISTING_PAGE_BYTES if page else None if events else limit
        if encoding not in ("", "identity"):
            refusal = AnswerRefused(f"the answer is compressed ({encoding[:20]}) unasked")
        elif most is not None and length.isdigit() and int(length) > most:
            refusal = AnswerTooLarge(f"{TOO_LARGE}: {int(length)} bytes, at most {most}")
        counted = listing if page else None
        response.stream = _Bounded(response.stream, most, refusal, counted)

    return bound


def _lists_tools(request: httpx2.Request) -> bool:
    """Whether `request` is a `tools/list` request (the SDK posts each one as JSON)."""
    if request.method != "POST":
        return False
    try:
        body = orjson.loads(request.content)
    except (orjson.JSONDecodeError, httpx2.RequestNotRead, TypeError):
        return False
    return isinstance(body, dict) and body.get("method") == "tools/list"


class _Bounded(httpx2.AsyncByteStream):
    """A body stream that raises instead of handing on more than `limit` bytes (None: no
    bound), or raises `refusal` before reading anything."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        limit: int | None,
        refusal: httpx2.StreamError | None,
        listing: Listing | None = None,
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._refusal = refusal
        self._listing = listing

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._refusal is not None:
            raise self._refusal
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if self._listing is not None:
                self._listing.read_bytes += len(chunk)
            if self._limit is not None and read > self._limit:
                raise AnswerTooLarge(f"{TOO_LARGE}: more than {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
