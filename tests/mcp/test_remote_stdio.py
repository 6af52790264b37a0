"""The lines of a stdio bench, read in one buffer each up to a cap (issue 33, review 2
findings 3 and 9): any stream, cut into any chunks, gives back its lines, those past their
cap without their bytes but with the id that lets their request fail at once."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCResponse

from hwbridge.mcp import remote_stdio
from hwbridge.mcp.remote_listing import Listing

ANSWER_CAP, PAGE_CAP = 600, 300  # the module's (16 MiB, 4 MiB), made small


class Chunks:
    """A byte stream that hands out the given chunks, then ends."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def receive(self) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)


def read(chunks: list[bytes], listing: Listing) -> list[remote_stdio._Line]:
    async def collect() -> list[remote_stdio._Line]:
        return [line async for line in remote_stdio._lines(Chunks(chunks), listing)]  # type: ignore[arg-type]

    return anyio.run(collect)


@pytest.fixture(autouse=True)
def small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_stdio, "MAX_ANSWER_BYTES", ANSWER_CAP)
    monkeypatch.setattr(remote_stdio, "MAX_LISTING_PAGE_BYTES", PAGE_CAP)


LINES = st.lists(st.binary(max_size=900).map(lambda b: b.replace(b"\n", b"x")), max_size=8)


@settings(max_examples=300, deadline=None)
@given(LINES, st.lists(st.integers(min_value=1, max_value=400), max_size=40))
def test_any_stream_in_any_chunks_gives_its_lines_each_within_its_cap(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(stream[at : at + cut])
        at += cut
    chunks.append(stream[at:])
    read_lines = read([c for c in chunks if c], Listing())
    expected = [line for line in lines if line]
    assert len(read_lines) == len(expected)
    for got, line in zip(read_lines, expected, strict=True):
        if len(line) <= ANSWER_CAP:
            assert got.data == line
        else:
            assert got.data is None and got.ends[0] == line[:256] and got.ends[1] == line[-256:]


def test_a_line_past_its_cap_fails_its_request_whichever_end_holds_its_id() -> None:
    body = b'"result":{"content":[{"type":"text","text":"' + b"x" * 1000 + b'"}]}'
    python = b'{"jsonrpc":"2.0","id":7,' + body + b"}\n"
    typescript = b"{" + body + b',"jsonrpc":"2.0","id":"q-8"}\n'
    lines = read([python + typescript], Listing())
    ids = []
    for line in lines:
        message = remote_stdio._message(line, "utf-8")
        assert isinstance(message, SessionMessage)
        assert isinstance(message.message, JSONRPCError)
        assert "too large" in message.message.error.message
        ids.append(message.message.id)
    assert ids == [7, "q-8"]


def test_a_listing_page_has_the_page_cap_and_is_counted() -> None:
    listing = Listing()
    listing.note(3)
    page = b'{"jsonrpc":"2.0","id":3,"result":{"tools":[' + b" " * 400 + b"]}}\n"
    answer = b'{"jsonrpc":"2.0","id":4,"result":{"tools":[' + b" " * 400 + b"]}}\n"
    first, second = read([page + answer], listing)
    assert first.data is None and first.limit == PAGE_CAP  # past a page's cap
    answered = remote_stdio._message(second, "utf-8")
    assert isinstance(answered, SessionMessage) and isinstance(answered.message, JSONRPCResponse)
    assert listing.read_bytes == len(page) - 1


def test_a_page_whose_id_is_echoed_as_a_string_is_still_the_listing_s() -> None:
    """The SDK pairs "3" with request 3 (as the TypeScript SDK does): so must the listing's
    bounds, or a bench escapes them all by quoting the id."""
    listing = Listing()
    listing.note(3)
    page = b'{"jsonrpc":"2.0","id":"3","result":{"tools":[' + b" " * 400 + b"]}}\n"
    [line] = read([page], listing)
    assert line.data is None and line.limit == PAGE_CAP
    assert listing.answers("3") and listing.answers(3)
    listing.answered("3")
    assert not listing.pending


@pytest.mark.timeout(60)
def test_a_bench_quoting_its_ids_gets_the_listing_caps(tmp_path: Path) -> None:
    """2,000 tools answered under a quoted id: the page's cap (made 300 bytes here) holds - it
    was not applied, and all 2,000 tools were kept."""
    from hwbridge.core.models import ToolError
    from hwbridge.mcp import McpToolDriver

    server = tmp_path / "quoting.py"
    server.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' not in m: continue\n"
        "    mid, method = m['id'], m.get('method')\n"
        "    if method == 'initialize':\n"
        "        r = {'protocolVersion': m['params']['protocolVersion'],\n"
        "             'capabilities': {'tools': {}}, 'serverInfo': {'name': 's', 'version': '1'}}\n"
        "    elif method == 'tools/list':\n"
        "        r = {'tools': [{'name': f't{i}', 'inputSchema': {'type': 'object'}}\n"
        "                       for i in range(2000)]}\n"
        "        mid = str(mid)\n"
        "    else:\n"
        "        r = {}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': mid, 'result': r}), flush=True)\n"
    )
    with pytest.raises(ToolError, match="answer too large: a line of more than 300 bytes"):
        McpToolDriver([sys.executable, str(server)], label="q", connect_timeout_s=20)
