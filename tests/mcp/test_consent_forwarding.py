"""`hwbridge mcp --remote` passes a bench's consent question on to its own client (issue 36):
a bench served with `hwbridge mcp --consent` asks before each send; behind an aggregating
server the question reaches the person at the far end, labelled as the bench's, either way
that client is asked (`elicitation/create` mid-call, or `input_required` handed back with
the bench's state sealed in the server's). Accept sends once; decline, cancel or nobody to
ask sends nothing. Frames are counted by a listener on the simulator's bus."""

from __future__ import annotations

import json
import sys
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client, types

import can
from hwbridge import CanDriver, Orchestrator, SendPolicy
from hwbridge.mcp import McpToolDriver, build_server
from hwbridge.mcp.consent import binding
from hwbridge.mcp.questions import MAX_QUESTIONS, Sealed, StateSeal, label, passable
from tests.mcp.conftest import ROOT, text_of
from tests.sim.test_cli import Sim, launch

pytestmark = pytest.mark.timeout(120)

CLIMATE = 0x3C0
SEND = {"message": "ClimateCommand", "signals": {"CabinSetpoint": 22.5, "FanLevel": 3}}
TOOL = "bench1.send_message"
MODES = ["legacy", "2026-07-28"]  # how this server's own client is asked


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    # a bus without the demo car's own ClimateCommand frames: only the bench's are counted
    simulator = launch(
        "--socketcand", "127.0.0.1:0", "--dbc", str(ROOT / "dbc" / "gnss_module.dbc")
    )
    yield simulator
    simulator.stop()


@pytest.fixture(scope="module")
def bench(sim: Sim) -> Iterator[McpToolDriver]:
    """`hwbridge mcp --bus ... --allow ClimateCommand --consent` over stdio: a bench that asks."""
    command = [
        sys.executable, "-m", "hwbridge", "mcp", "--bus", bus_of(sim), "--dbc", "dbc/demo_vehicle.dbc",
        "--allow", "ClimateCommand", "--consent",
    ]  # fmt: skip
    driver = McpToolDriver(command, label="bench1", cwd=ROOT, connect_timeout_s=30)
    yield driver
    driver.close()


@pytest.fixture
def listener(sim: Sim) -> Iterator[can.BusABC]:
    bus = can.Bus(interface="socketcand", host="127.0.0.1", port=sim.port, channel="vcan0")
    try:
        yield bus
    finally:
        bus.shutdown()


def bus_of(sim: Sim) -> str:
    return f"socketcand://127.0.0.1:{sim.port}/vcan0"


def sent(listener: can.BusABC) -> int:
    """ClimateCommand frames seen in the next second."""
    count, end = 0, time.monotonic() + 1.0
    while (left := end - time.monotonic()) > 0:
        msg = listener.recv(left)
        count += msg is not None and msg.arbitration_id == CLIMATE
    return count


def served_call(
    bench: McpToolDriver,
    mode: str,
    action: Literal["accept", "decline", "cancel"] | None,
    asked: list[str],
    *,
    consent: bool = False,
) -> types.CallToolResult:
    """`TOOL` through an aggregating server in front of `bench`; its client answers each
    question with `action` (None: a client that cannot be asked)."""

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        content = {"approve": True} if action == "accept" else None
        return types.ElicitResult(action=action or "cancel", content=content)

    server = build_server(Orchestrator([bench], names="dotted"), consent=consent)

    async def main() -> types.CallToolResult:
        options: dict[str, Any] = {} if action is None else {"elicitation_callback": answer}
        async with Client(server, mode=mode, **options) as client:
            return await client.call_tool(TOOL, SEND)

    return anyio.run(main)


@pytest.mark.parametrize("mode", MODES)
def test_the_bench_question_reaches_the_person_and_accept_sends_once(
    bench: McpToolDriver, listener: can.BusABC, mode: str
) -> None:
    asked: list[str] = []
    result = served_call(bench, mode, "accept", asked)
    assert not result.is_error, text_of(result)
    assert sent(listener) == 1
    assert len(asked) == 1
    # the bench's own question, said to be the bench's, with what would go out
    assert asked[0].startswith("bench1 (")
    assert "asks:\n| An AI assistant asks to run send_message" in asked[0]
    assert '"CabinSetpoint": 22.5' in asked[0]


@pytest.mark.parametrize("mode", MODES)
def test_with_consent_here_too_the_person_is_asked_twice_and_it_is_sent_once(
    bench: McpToolDriver, listener: can.BusABC, mode: str
) -> None:
    asked: list[str] = []
    result = served_call(bench, mode, "accept", asked, consent=True)
    assert not result.is_error, text_of(result)
    assert sent(listener) == 1
    assert len(asked) == 2  # this server's own question, then the bench's
    assert asked[0].startswith("An AI assistant asks to run bench1.send_message")
    assert asked[1].startswith("bench1 (")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declined_or_cancelled_nothing_is_sent(
    bench: McpToolDriver, listener: can.BusABC, mode: str, action: Literal["decline", "cancel"]
) -> None:
    asked: list[str] = []
    result = served_call(bench, mode, action, asked)
    assert result.is_error
    assert "CONSENT_DENIED" in text_of(result)
    assert sent(listener) == 0
    assert len(asked) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_be_asked_sends_nothing(
    bench: McpToolDriver, listener: can.BusABC, mode: str
) -> None:
    result = served_call(bench, mode, None, [])
    assert result.is_error
    assert sent(listener) == 0


def test_a_python_caller_has_no_one_to_ask_and_sends_nothing(
    bench: McpToolDriver, listener: can.BusABC
) -> None:
    farm = Orchestrator([bench], names="dotted")
    response = farm.process_llm_response({"tool": TOOL, "arguments": SEND})
    assert response.call_failed
    assert sent(listener) == 0


# -- the sealed state --------------------------------------------------------------------------


def test_a_state_opens_only_for_its_own_call_and_server() -> None:
    seal, other = StateSeal(), StateSeal()
    bound = binding("bench1.send_message", SEND)
    state = seal.seal(bound, Sealed(approved=True, bench_state="abc"))
    assert seal.open(state, bound) == Sealed(True, "abc")
    moved = binding("bench1.send_message", {**SEND, "signals": {"CabinSetpoint": 26}})
    assert seal.open(state, moved) is None  # another call
    assert other.open(state, bound) is None  # another server (or a forged one)
    body, _, mac = state.rpartition(".")
    assert seal.open(body + "x." + mac, bound) is None


@given(st.text(max_size=300))
def test_any_other_state_is_refused(state: str) -> None:
    assert StateSeal().open(state, binding("t", {})) is None


# -- what an attack found (review of issue 36): each of these failed before ------------------


@pytest.fixture
def asking(tmp_path: Path) -> Iterator[tuple[McpToolDriver, Path]]:
    """A bench that asks by `elicitation/create` mid-call (tests/mcp/asking_bench.py), with a
    2 s call timeout, and the file it writes its presses to."""
    log = tmp_path / "presses.log"
    bench = McpToolDriver(
        [sys.executable, str(ROOT / "tests" / "mcp" / "asking_bench.py"), str(log)],
        label="bench1",
        timeout_s=2,
        connect_timeout_s=30,
    )
    yield bench, log
    bench.close()


def presses(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def ask_through(
    bench: McpToolDriver, arguments: dict[str, Any], answer_after_s: float = 0.0
) -> tuple[types.CallToolResult, list[str]]:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        await anyio.sleep(answer_after_s)
        return types.ElicitResult(action="accept", content={"approve": True})

    server = build_server(Orchestrator([bench], names="dotted"))

    async def main() -> types.CallToolResult:
        async with Client(server, mode="legacy", elicitation_callback=answer) as client:
            return await client.call_tool("bench1.press", arguments)

    return anyio.run(main), asked


def test_a_person_slower_than_the_call_timeout_still_decides(
    asking: tuple[McpToolDriver, Path],
) -> None:
    """The call's 2 s stop while the person reads: a yes after 3 s presses (it failed with
    REMOTE_TIMEOUT, "may have run", while nothing had been sent)."""
    bench, log = asking
    result, asked = ask_through(bench, {"tag": "slow"}, answer_after_s=3.0)
    assert not result.is_error, text_of(result)
    assert len(asked) == 1 and presses(log) == ["PRESS slow"]


def test_a_bench_asking_on_and_on_gets_four_answers_at_most(
    asking: tuple[McpToolDriver, Path],
) -> None:
    bench, log = asking
    result, asked = ask_through(bench, {"tag": "many", "n": 12})
    assert result.is_error and presses(log) == []
    assert len(asked) == MAX_QUESTIONS


def test_a_question_about_another_call_never_reaches_this_person(
    asking: tuple[McpToolDriver, Path],
) -> None:
    """While A's person reads, a Python caller with no one to ask sends B to the same
    bench: B's question must not be put to A's person (B was pressed on A's yes before)."""
    bench, log = asking
    farm = Orchestrator([bench], names="dotted")
    asked: list[str] = []
    b_result: list[Any] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        await anyio.sleep(1.5)
        return types.ElicitResult(action="accept", content={"approve": True})

    def call_b() -> None:
        time.sleep(0.5)
        b_result.append(
            farm.process_llm_response({"tool": "bench1.press", "arguments": {"tag": "B"}})
        )

    async def main() -> types.CallToolResult:
        async with Client(build_server(farm), mode="legacy", elicitation_callback=answer) as c:
            other = threading.Thread(target=call_b)
            other.start()
            try:
                return await c.call_tool("bench1.press", {"tag": "A"})
            finally:
                await anyio.to_thread.run_sync(other.join)

    result = anyio.run(main)
    assert b_result[0].call_failed
    assert "PRESS B" not in presses(log)
    assert all("Press B" not in question for question in asked)
    assert not result.is_error or "PRESS A" not in presses(log)  # A is never misreported


def test_a_round_sent_again_sends_nothing(sim: Sim, listener: can.BusABC) -> None:
    """A 2026-07-28 client that sends the last round of a consented call again (a retry, a
    replay) is asked again: one yes, one frame (three replays sent three more before)."""
    channel_bus = bus_of(sim)
    driver = CanDriver.from_dbc(
        ROOT / "dbc" / "demo_vehicle.dbc",
        bus=channel_bus,
        policy=SendPolicy(allow_messages=["ClimateCommand"]),
    )
    server = build_server(driver, consent=True)
    yes = types.ElicitResult(action="accept", content={"approve": True})

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the rounds are driven by hand here")

    async def main() -> list[Any]:
        async with Client(server, mode="2026-07-28", elicitation_callback=never) as client:
            first = await client.session.call_tool("send_message", SEND, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            answers: dict[str, Any] = dict.fromkeys(first.input_requests or {}, yes)
            rounds = []
            for _ in range(3):  # the answered round, then the same round twice again
                rounds.append(
                    await client.session.call_tool(
                        "send_message",
                        SEND,
                        allow_input_required=True,
                        input_responses=answers,
                        request_state=first.request_state,
                    )
                )
            return rounds

    try:
        answered, *replays = anyio.run(main)
    finally:
        driver.close()
    assert isinstance(answered, types.CallToolResult) and not answered.is_error
    assert all(isinstance(r, types.InputRequiredResult) for r in replays)
    assert sent(listener) == 1


@given(st.text(max_size=400))
def test_a_bench_question_is_plain_and_marked_as_the_bench_s(message: str) -> None:
    shown = label("bench1 (http://bench)", message)
    head, *lines = shown.split("\n")
    assert head == "bench1 (http://bench) asks:"
    assert all(line.startswith("| ") for line in lines)
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in shown.replace("\n", ""))


def test_a_bench_form_is_plain_too() -> None:
    form = {"type": "object", "title": "\x1b[1mverified\u202e", "properties": {
        "approve": {"type": "boolean", "title": "tick \x07" + "x" * 1000}}}  # fmt: skip
    shown = passable(form)
    assert shown is not None
    text = json.dumps(shown, ensure_ascii=False)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert len(shown["properties"]["approve"]["title"]) <= 300
