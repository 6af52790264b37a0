"""A bench's tool listings, against a hostile server (`hostile_server.py` over stdio, issue
33, review 2): the newest listing is the one that holds, however long an older one takes;
what one bench may list, and what is kept of it, is bounded (tools read, bytes kept, bytes
of a page); a listing that is never answered is given up, and later changes are still
followed."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
from mcp import types

from hwbridge import Orchestrator, ToolError
from hwbridge.mcp import McpToolDriver
from hwbridge.mcp import remote as remote_module
from hwbridge.mcp.remote_listing import MAX_LISTING_PAGE_BYTES
from hwbridge.mcp.remote_tools import (
    MAX_CATALOGUE_BYTES,
    MAX_DESCRIPTION_CHARS,
    MAX_TOOLS,
    tool_of,
)
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.mcp.hostile_server import LATER_LONG_NAME
from tests.mcp.test_remote_hostile import consent_asked, hostile

pytestmark = pytest.mark.timeout(90)


def quick_to_give_up(connect_timeout_s: float) -> McpToolDriver:
    """A hostile bench whose listings are given up after `connect_timeout_s`. Starting it
    (a Python process importing the MCP SDK) is not what these tests time, and on a busy
    machine it may take longer than that: a start that found no answer is tried again."""
    for attempt in range(3):
        try:
            return hostile(connect_timeout_s=connect_timeout_s)
        except ToolError as error:
            if error.code != "REMOTE_DOWN" or attempt == 2:
                raise
    raise AssertionError("unreachable")


def names(driver: McpToolDriver) -> set[str]:
    return {t.name for t in driver.list_tools()}


# -- 1. an older listing never replaces a newer one ----------------------------------------------


@pytest.mark.slow
def test_the_newest_listing_holds_however_long_an_older_one_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bench marks `press` read-only, then destructive; the older listing is slow to
    take (a tool of it takes 3 s to make): `press` must end up destructive, asked about."""
    made = tool_of
    slow_done = threading.Event()

    def slow(listed: types.Tool, **options: Any) -> Any:
        if listed.name == "slow_marker":
            time.sleep(3)
            slow_done.set()
        return made(listed, **options)

    monkeypatch.setattr(remote_module, "tool_of", slow)  # where the driver makes its tools
    with hostile(trust_annotations=True) as bench:
        farm = Orchestrator([bench], names="dotted")
        bench.execute_tool("relist", {"kind": "stale"})
        assert wait_until(lambda: bench.execute_tool("counters", {})["listings"] >= 2, 20)
        bench.execute_tool("relist", {"kind": "final"})
        assert slow_done.wait(20)
        assert wait_until(lambda: "final" in names(bench), 20)
        time.sleep(1.0)  # whatever was still to be taken has been (a negative check)
        assert "slow_marker" not in names(bench)
        assert not {t.name: t for t in bench.list_tools()}["press"].read_only
        assert consent_asked(bench, "bench2.press") == ["bench2.press"]
        offered = {t.name for t in farm.list_tools()}
        assert "bench2.final" in offered and "bench2.slow_marker" not in offered


# -- 2. a label an alias could not tell apart ---------------------------------------------------


@pytest.mark.parametrize("label", ["a__b", "bench_"])
def test_a_label_with_the_alias_separator_is_refused_before_connecting(label: str) -> None:
    with pytest.raises(ValueError, match="__"):
        hostile(label=label)


# -- 3. what one bench may list, and what is kept of it --------------------------------------------


def test_past_the_catalogue_budget_tools_are_skipped_with_the_reason() -> None:
    with hostile() as bench:
        size = 50_000  # 20 tools of 50 KB schemas: 1 MB of tools in every request
        bench.execute_tool("relist", {"kind": "fat", "count": 20, "size": size})
        assert wait_until(lambda: any(n.startswith("fat") for n in names(bench)), 20)
        kept = [t for t in bench.list_tools() if t.name.startswith("fat")]
        skipped = {n: r for n, r in bench.skipped_tools().items() if n.startswith("fat")}
        assert len(kept) + len(skipped) == 20
        assert 0 < len(kept) <= MAX_CATALOGUE_BYTES // size
        assert all(str(MAX_CATALOGUE_BYTES) in reason for reason in skipped.values())
        farm = Orchestrator([bench], names="dotted")
        native = str(farm.get_native_tools("openai"))
        assert len(native) < 2 * MAX_CATALOGUE_BYTES
        assert bench.execute_tool("counters", {})["presses"] == 0  # the link still answers


def test_tools_past_the_first_512_are_counted_not_read() -> None:
    with hostile() as bench:
        bench.execute_tool("relist", {"kind": "many", "count": 20_000})
        assert wait_until(lambda: "t0" in names(bench), 20)
        assert len(bench._link.tools) == MAX_TOOLS
        problems = " ".join(bench.healthcheck().problems)
        found = re.search(r"(\d+) more of the server's tools were not read", problems)
        assert found is not None, problems
        assert 20_000 - MAX_TOOLS <= int(found.group(1)) <= 20_000


def test_only_what_is_used_of_a_listing_is_kept() -> None:
    with hostile() as bench:
        bench.execute_tool("relist", {"kind": "wordy", "count": 8, "size": 400_000})
        assert wait_until(lambda: "wordy0" in names(bench), 20)
        held = sum(len(t.description or "") for t in bench._link.tools)
        assert held <= len(bench._link.tools) * MAX_DESCRIPTION_CHARS  # it kept 3.2 MB
        assert {len(t.description or "") for t in bench.list_tools() if "wordy" in t.name} == {
            MAX_DESCRIPTION_CHARS
        }


def test_a_listing_page_past_its_cap_is_refused_and_the_tools_stay() -> None:
    with hostile() as bench:
        before = names(bench)
        count = MAX_LISTING_PAGE_BYTES // 40  # tiny tools: a page of about 5 MB
        bench.execute_tool("relist", {"kind": "many", "count": count})
        with pytest.raises(ToolError) as caught:
            bench.refresh_tools()
        assert caught.value.code == "REMOTE_ERROR" and "too large" in caught.value.message
        assert names(bench) == before
        assert bench.execute_tool("counters", {})["presses"] == 0  # the connection stays


def test_a_stdio_answer_past_the_cap_is_not_read_and_the_link_stays() -> None:
    """The SDK's stdio client kept any line whole (one of 1 GB without a newline: 49 s of
    CPU); an answer is read up to 16 MiB, as over HTTP."""
    with hostile() as bench:
        with pytest.raises(ToolError) as caught:
            bench.execute_tool("structured", {"chars": 20_000_000})
        assert caught.value.code == "REMOTE_ERROR" and "too large" in caught.value.message
        assert bench.execute_tool("counters", {})["presses"] == 0


# -- 7. a listing that is never answered ---------------------------------------------------------


def test_an_unanswered_listing_is_given_up_and_later_changes_are_followed() -> None:
    with quick_to_give_up(2) as bench:
        listings = bench.execute_tool("counters", {})["listings"]
        bench.execute_tool("mute", {"listings": 1})  # the listing it asks for never ends
        assert wait_until(lambda: bench.execute_tool("counters", {})["listings"] > listings)
        bench.execute_tool("add_listed", {"kind": "long"})  # a change after it
        assert wait_until(lambda: LATER_LONG_NAME in bench.skipped_tools(), 30)


def test_refresh_tools_of_a_listing_never_answered_is_a_tool_error() -> None:
    connect_timeout_s = 2
    with quick_to_give_up(connect_timeout_s) as bench:
        bench.execute_tool("mute", {"listings": 2})
        started = time.monotonic()
        with pytest.raises(ToolError) as caught:
            bench.refresh_tools()
        assert caught.value.code == "REMOTE_TIMEOUT"
        # two listings of connect_timeout_s at most; the bug: it never ended
        assert time.monotonic() - started < 2 * connect_timeout_s + BUSY_MARGIN_S
        assert bench.execute_tool("counters", {})["presses"] == 0
