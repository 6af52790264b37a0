"""A remote bench never passes for another, and never stops the farm (issue 33): against a
hostile server (`hostile_server.py` over stdio, `flood_server.py` over HTTP), a read-only
pattern meant for one bench never covers another's tool, a label is never taken twice, a
schema whose references multiply, a name too long for its label and a storm of change
notifications are each bounded, and an answer far over the cap is not read."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge import ConsentGate, Orchestrator, ToolError
from hwbridge.cli.chat import drivers
from hwbridge.cli.errors import EXIT_USAGE, CliError
from hwbridge.mcp import McpToolDriver
from hwbridge.mcp.remote import names_tool
from hwbridge.mcp.remote_http import MAX_ANSWER_BYTES
from tests.conftest import wait_until
from tests.core.drivers import Thermostat
from tests.mcp.conftest import ROOT, stop
from tests.mcp.hostile_server import LATER_LONG_NAME, LONG_NAME

pytestmark = pytest.mark.timeout(90)

HOSTILE = [sys.executable, str(ROOT / "tests" / "mcp" / "hostile_server.py")]


def hostile(*modes: str, label: str | None = "bench2", **options: Any) -> McpToolDriver:
    return McpToolDriver([*HOSTILE, *modes], label=label, cwd=ROOT, **options)


def consent_asked(driver: McpToolDriver, tool: str) -> list[str]:
    """The questions a ConsentGate that refuses asks before `tool` of a dotted farm runs."""
    asked: list[str] = []

    def refuse(name: str, arguments: dict[str, Any]) -> bool:
        asked.append(name)
        return False

    gate = ConsentGate(Orchestrator([driver], names="dotted"), refuse)
    gate.process_llm_response(json.dumps({"tool": tool, "arguments": {}}))
    return asked


# -- 1. a pattern only ever matches the label the user gave that bench ---------------------


@pytest.mark.parametrize(
    "patterns",
    [
        ["bench1.read_signals"],
        ["bench1.*"],
        ["bench1.read_*", "bench1.read_signals"],
        ["*"],  # a plain pattern never covers a tool whose own name has a dot
        ["*.read_signals"],  # the label part is one label: `bench2` then `bench1.read_signals`
        ["bench1?read_signals", "bench1[.]read_signals"],
    ],
)
def test_a_pattern_for_one_bench_never_makes_another_bench_s_tool_read_only(
    patterns: list[str],
) -> None:
    with hostile("borrowed", read_only=patterns) as bench2:
        tools = {t.name: t for t in bench2.list_tools()}
        assert not tools["bench1.read_signals"].read_only
        assert consent_asked(bench2, "bench2.bench1.read_signals") == ["bench2.bench1.read_signals"]
        assert bench2.execute_tool("counters", {})["presses"] == 0


def test_a_pattern_with_this_bench_s_label_names_its_tools() -> None:
    read_only = ["bench2.bench1.read_signals", "press"]
    with hostile("borrowed", read_only=read_only) as bench2:
        tools = {t.name: t.read_only for t in bench2.list_tools()}
        assert tools["bench1.read_signals"] and tools["press"]
        assert not tools["counters"]
        assert consent_asked(bench2, "bench2.bench1.read_signals") == []
    with hostile("borrowed", label=None, read_only=["bench1.read_signals"]) as unlabelled:
        # without a label, a dotted pattern has no label to match: nothing is read-only
        assert not {t.name: t for t in unlabelled.list_tools()}["bench1.read_signals"].read_only


LABELS = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True)
GLOBBY = st.text(alphabet="ab1.-_*?[]!", max_size=12)


@settings(max_examples=300, deadline=None)
@given(LABELS, LABELS, GLOBBY, st.text(alphabet="ab1.-_*?[]!", min_size=1, max_size=20))
def test_a_pattern_for_one_label_never_names_another_bench_s_tool(
    meant: str, other: str, rest: str, name: str
) -> None:
    """Whatever a bench calls its tool (dots, glob characters), a pattern whose label part
    is one label never names a tool of a bench with another label, nor of an unlabelled
    one; a plain pattern never names a tool whose own name has a dot."""
    if meant != other:
        assert not names_tool(f"{meant}.{rest}", other, name)
    assert not names_tool(f"{meant}.{rest}", None, name)
    if "." not in rest and "." in name:
        assert not names_tool(rest, other, name)


# -- 2. a label is taken once -----------------------------------------------------------------


def test_a_remote_label_that_a_local_bridge_has_is_a_usage_error() -> None:
    with hostile(label="can") as remote, pytest.raises(CliError) as caught:
        drivers({"can": Thermostat()}, {"can": remote})
    assert caught.value.exit_code == EXIT_USAGE
    message = caught.value.message
    assert "label can" in message and "local CAN bridge" in message
    assert "hostile_server.py" in message  # the bench that claims it too


# -- 3. $ref expansion is bounded ----------------------------------------------------------------


def test_a_schema_whose_references_multiply_is_skipped_at_start_up() -> None:
    with hostile("bomb") as bench:  # unbounded, 8^9 nodes: it never returned
        skipped = bench.skipped_tools()
        assert "tree_bomb" in skipped and "$ref" in skipped["tree_bomb"]
        assert "tree_bomb" not in {t.name for t in bench.list_tools()}
        assert bench.execute_tool("counters", {})["presses"] == 0


def test_a_schema_whose_references_multiply_is_skipped_on_a_refresh() -> None:
    with hostile() as bench:
        bench.execute_tool("add_listed", {"kind": "bomb"})
        assert wait_until(lambda: "tree_bomb" in bench.skipped_tools(), 20)
        assert bench.execute_tool("counters", {})["presses"] == 0  # the link still answers


# -- 4. an answer is bounded where it is read ---------------------------------------------------

CLIENT = textwrap.dedent(
    """
    import json, resource, sys
    from hwbridge.mcp import McpToolDriver
    from hwbridge.core.models import ToolError

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    with McpToolDriver(sys.argv[1], label="flood") as driver:
        driver.execute_tool("ping", {})
        before = peak()
        try:
            driver.execute_tool("flood", {"megabytes": int(sys.argv[2])})
            code, message = None, ""
        except ToolError as exc:
            code, message = exc.code, exc.message
        grown = peak() - before
        after = driver.execute_tool("ping", {})
    print(json.dumps({"code": code, "message": message, "grown": grown, "after": after}))
    """
)


@pytest.fixture(scope="module")
def flood_url() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp" / "flood_server.py")],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(20.0, process.kill)
    timer.start()
    try:
        assert process.stderr is not None
        for line in process.stderr:
            found = re.search(r"serving at (http://[^\s/]+/mcp)", line)
            if found:
                break
        else:
            raise RuntimeError("flood_server.py did not start")
    finally:
        timer.cancel()
    try:
        yield found.group(1)
    finally:
        stop(process)


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in kilobytes (Linux)")
def test_an_http_answer_far_over_the_cap_is_not_read(flood_url: str) -> None:
    megabytes = 96  # six times the cap; read whole, it grew the client by about 500 MB
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, flood_url, str(megabytes)],
        cwd=ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["code"] == "REMOTE_ERROR" and "too large" in said["message"]
    assert said["grown"] < megabytes * 1_000_000 / 2, said["grown"]  # bounded by the cap
    assert said["after"] == {"result": "pong"}  # the link is still up: the next call answers
    assert megabytes * 1_000_000 / 4 > MAX_ANSWER_BYTES


@pytest.mark.parametrize(
    ("framing", "megabytes", "words"),
    [("event", 64, "too large"), ("json", 1000, "too large"), ("gzip", 500, "compressed")],
)
def test_an_event_over_the_cap_or_a_compressed_answer_is_not_read(
    flood_url: str, framing: str, megabytes: int, words: str
) -> None:
    with McpToolDriver(flood_url, label="flood") as driver:
        with pytest.raises(ToolError) as caught:
            driver.execute_tool("flood", {"megabytes": megabytes, "framing": framing})
        assert caught.value.code == "REMOTE_ERROR" and words in caught.value.message
        assert driver.execute_tool("ping", {}) == {"result": "pong"}


# -- 5. a name too long for its label never stops the farm --------------------------------------


def test_a_tool_name_too_long_for_its_label_is_skipped_not_fatal() -> None:
    with hostile("long", label="bench1") as bench1, hostile("long", label=None) as unlabelled:
        assert "64" in bench1.skipped_tools()[LONG_NAME]
        assert LONG_NAME not in {t.name for t in bench1.list_tools()}
        farm = Orchestrator([bench1, unlabelled], names="dotted")  # it raised at start-up
        names = {t.name for t in farm.list_tools()}
        assert "bench1.counters" in names and not any(len(n) > 64 for n in names)
        assert drivers({}, {"bench1": bench1}).list_tools()  # the CLI's farm starts too
        bench1.execute_tool("add_listed", {"kind": "long"})  # and on a refresh
        assert wait_until(lambda: LATER_LONG_NAME in bench1.skipped_tools(), 20)
        assert "bench1.counters" in {t.name for t in farm.list_tools()}


# -- 6. change notifications are coalesced -------------------------------------------------------


def test_a_storm_of_list_changed_gives_few_listings_and_the_latest_list() -> None:
    with hostile() as bench:
        before = bench.execute_tool("counters", {})["listings"]
        assert bench.execute_tool("storm", {"count": 3000}) == 3000
        assert wait_until(lambda: "gen_2999" in {t.name for t in bench.list_tools()}, 20)
        listings = bench.execute_tool("counters", {})["listings"] - before
        assert listings <= 6, listings  # one per notification before: 300 gave 25 to 300
        generated = [t.name for t in bench.list_tools() if t.name.startswith("gen_")]
        assert generated == ["gen_2999"]
        # the storm overflows the server's change stream, which it then ends: a change
        # after the storm is still heard
        bench.execute_tool("add_listed", {"kind": "long"})
        assert wait_until(lambda: LATER_LONG_NAME in bench.skipped_tools(), 20)


def test_list_changed_notifications_of_an_older_connection_are_coalesced_too() -> None:
    """Before 2026-07-28 the notifications come one by one to the message handler."""
    from mcp import types

    with hostile() as bench:
        before = bench.execute_tool("counters", {})["listings"]
        link = bench._link

        async def storm() -> None:
            for _ in range(300):
                await link._on_message(types.ToolListChangedNotification())

        link.run(storm(), 10)
        assert wait_until(lambda: bench.execute_tool("counters", {})["listings"] > before, 10)
        threading.Event().wait(2.5)  # what is still to come has come
        listings = bench.execute_tool("counters", {})["listings"] - before
        assert 1 <= listings <= 4, listings  # one per notification before: 300
