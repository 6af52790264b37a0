"""A remote call's bounds, against a hostile server (`hostile_server.py` over stdio, issue 33,
review 2): `close()` after a call that timed out still stops the server process, and a call
that the server answers with `input_required` round after round has one deadline over all
its rounds, and is sent once when it changes state."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from hwbridge import ToolError
from hwbridge.mcp import McpToolDriver
from tests.mcp.test_remote_hostile import hostile

pytestmark = pytest.mark.timeout(90)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] != "Z"
    except (OSError, IndexError):
        return True


# -- 5. close() stops every server process it started ----------------------------------------


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states from /proc")
def test_close_right_after_a_timed_out_call_stops_the_server() -> None:
    bench = hostile(timeout_s=1)
    pid = bench.execute_tool("counters", {})["pid"]
    with pytest.raises(ToolError) as caught:
        bench.execute_tool("hang", {})  # the connection is dropped: it is in doubt
    assert caught.value.code == "REMOTE_TIMEOUT"
    bench.close()
    assert not alive(pid)  # it was left running, holding whatever it held


# -- 6. one deadline over every input_required round ------------------------------------------


def test_a_read_asked_for_round_after_round_ends_at_its_deadline(tmp_path: Path) -> None:
    log = tmp_path / "rounds"
    with hostile(timeout_s=2, read_only=["rounds"]) as bench:
        with pytest.raises(ToolError) as caught:
            bench.execute_tool("rounds", {"seconds": 1.5, "log": str(log)})
        assert caught.value.code == "REMOTE_TIMEOUT" and "within 2 s" in caught.value.message
    assert len(log.read_text().splitlines()) <= 2  # round 1 at 0 s, round 2 at 1.5 s


def test_an_awaited_read_asked_for_rounds_ends_at_its_deadline_too(tmp_path: Path) -> None:
    log = tmp_path / "rounds"
    with hostile(timeout_s=2, read_only=["rounds"]) as bench:

        async def call() -> None:
            await bench.aexecute_tool("rounds", {"seconds": 1.5, "log": str(log)})

        with pytest.raises(ToolError) as caught:
            asyncio.run(asyncio.wait_for(call(), 60))
        assert caught.value.code == "REMOTE_TIMEOUT"
    assert len(log.read_text().splitlines()) <= 2


def test_a_call_that_changes_state_is_not_sent_again_for_another_round(tmp_path: Path) -> None:
    log = tmp_path / "rounds"
    with hostile(timeout_s=20) as bench:  # `rounds` is not named read-only: it changes state
        with pytest.raises(ToolError) as caught:
            bench.execute_tool("rounds", {"seconds": 0.1, "log": str(log)})
        assert caught.value.code == "REMOTE_UNSUPPORTED"
        assert "input_required" in caught.value.message
    assert len(log.read_text().splitlines()) == 1  # it was sent once, not eleven times


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process states from /proc")
def test_a_server_that_never_answers_is_stopped_when_the_driver_gives_up(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    with pytest.raises(ToolError) as caught:
        McpToolDriver([sys.executable, "-c", script], label="mute", connect_timeout_s=2)
    assert caught.value.code == "REMOTE_DOWN"
    assert not alive(int(pid_file.read_text()))  # it was left running for its minute
