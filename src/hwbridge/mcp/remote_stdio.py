"""The stdio transport of a remote bench, whose lines are bounded where they are read.

The MCP SDK's stdio client keeps a line until its newline, however long, joining each
chunk to all that came before (a 16 MB line without a newline cost 1.4 s of CPU, a 1 GB one
49 s), then parses it whole (a 36 MB tool listing parsed into 1.4 GB). Here the server is
started, and stopped, by the SDK's own helpers (its process group; stdin closed, SIGTERM,
SIGKILL), and its stdout is read by `_lines`: a line is kept in one growing buffer up to a
cap, and one past it is read through to its end without being kept. Its cap is
MAX_ANSWER_BYTES, as an HTTP answer's; a line that answers a `tools/list` request (its id,
first, is one the `Listing` noted; or its id is not first while a listing is awaited) has
MAX_LISTING_PAGE_BYTES and is counted into the listing. A line past its cap becomes an
error for its request ("answer too large"), as over HTTP, when its id can be read at
either end; the connection stays.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import orjson
from anyio.abc import ByteReceiveStream
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    StdioServerParameters,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, jsonrpc_message_adapter
from mcp_types.jsonrpc import INTERNAL_ERROR

from hwbridge.mcp.remote_http import MAX_ANSWER_BYTES, TOO_LARGE
from hwbridge.mcp.remote_listing import MAX_LISTING_PAGE_BYTES, Listing

__all__ = ["stdio_transport"]

_ENDS = 256  # the bytes at either end of a line searched for its id
_ID_VALUE = rb'(-?\d{1,20}|"(?:[^"\\]|\\.){0,200}")'
_ID_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID_VALUE)
"""A message's id when it is its first member, or comes after `"jsonrpc"` (Python servers)."""
_ID_LAST = re.compile(rb'"id"\s*:\s*' + _ID_VALUE + rb"\s*\}\s*$")
"""A message's id when it is its last member (TypeScript servers)."""
_WRITER_FLUSH_S = 0.5  # as the SDK: time for accepted messages to go out before stdin closes


@asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, listing: Listing
) -> AsyncIterator[TransportStreams]:
    """The server `server` started over stdio (the SDK's `stdio_client`, with bounded
    lines), stopped the SDK's way when the context ends, even when cancelled."""
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=sys.stderr,
        cwd=server.cwd,
    )
    # no awaits until the task group is entered: a cancellation here would leak the process
    reads_in, reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    writes, writes_out = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def read() -> None:
        assert process.stdout is not None
        try:
            async with reads_in:
                try:
                    async for line in _lines(process.stdout, listing):
                        try:
                            await reads_in.send(_message(line, server.encoding))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is gone
                finally:
                    await _drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # our own shutdown, or the server's end: the session sees the stream close

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with writes_out:
                async for item in writes_out:
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (text + "\n").encode(server.encoding, server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await reads_in.aclose()  # a request must not wait for a server that cannot hear
        finally:
            writer_done.set()

    async def shut_down() -> None:
        reads.close()
        writes.close()
        with anyio.move_on_after(_WRITER_FLUSH_S):
            await writer_done.wait()
        await _stop_server_process(process)
        for stream in (reads, writes, reads_in, writes_out):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield reads, writes
        finally:
            with anyio.CancelScope(shield=True):  # the server stops, whatever is cancelled
                await shut_down()
            tasks.cancel_scope.cancel()


class _Line:
    """One line of the server's stdout: its bytes, or (past its cap) only its ends."""

    __slots__ = ("data", "ends", "limit")

    def __init__(self, data: bytes | None, ends: tuple[bytes, bytes], limit: int) -> None:
        self.data = data
        self.ends = ends
        self.limit = limit


async def _lines(stdout: ByteReceiveStream, listing: Listing) -> AsyncIterator[_Line]:
    """The lines of `stdout` (without their newlines), each kept in one buffer up to its
    cap (see the module); one past it is read to its end and handed on without its bytes."""
    buffer = bytearray()  # the line so far, up to its cap and one byte more
    tail = b""  # its last _ENDS bytes, once past its cap
    length = 0  # the whole line's
    limit: int | None = None  # its cap, once its first _ENDS bytes are in
    page = False  # it answers a tools/list request (or may: its id is not first)
    while True:
        try:
            chunk = await stdout.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return
        *ended, rest = chunk.split(b"\n")
        for piece, ends in [*((p, True) for p in ended), (rest, False)]:
            length += len(piece)
            room = (limit or MAX_ANSWER_BYTES) + 1 - len(buffer)
            if room > 0:
                buffer += piece[:room]
            if limit is None and (len(buffer) >= _ENDS or ends):
                page = _may_answer_listing(bytes(buffer[:_ENDS]), listing)
                limit = MAX_LISTING_PAGE_BYTES if page else MAX_ANSWER_BYTES
                del buffer[limit + 1 :]
            if limit is not None and length > limit:
                tail = (tail + piece)[-_ENDS:]
            if not ends:
                continue
            limit = limit or MAX_ANSWER_BYTES
            if page:
                listing.read_bytes += length
            if length > limit:
                yield _Line(None, (bytes(buffer[:_ENDS]), tail), limit)
            elif length:
                yield _Line(bytes(buffer), (b"", b""), limit)
            buffer.clear()
            tail, length, limit, page = b"", 0, None, False


def _may_answer_listing(head: bytes, listing: Listing) -> bool:
    """Whether a line whose first bytes are `head` answers a `tools/list` request the
    listing noted, or may: its id is not first (a TypeScript server's, or one that hides it)
    while a listing is awaited. Such a line has a listing page's cap."""
    found = _ID_FIRST.match(head)
    if found is None:
        return bool(listing.pending)
    return listing.answers(orjson.loads(found.group(1)))


def _message(line: _Line, encoding: str) -> SessionMessage | Exception:
    """The message a line holds; for a line past its cap, an error for its request (when
    its id is first or last, as every server writes it)."""
    if line.data is None:
        reason = f"{TOO_LARGE}: a line of more than {line.limit} bytes"
        head, tail = line.ends
        found = _ID_FIRST.match(head) or _ID_LAST.search(tail)
        if found is None:
            return ValueError(reason)
        error = ErrorData(code=INTERNAL_ERROR, message=reason)
        request_id = orjson.loads(found.group(1))
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    data = line.data if encoding.lower() in ("utf-8", "utf8") else line.data.decode(encoding)
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(data, by_name=False))
    except ValueError as exc:
        return exc
