"""`hwbridge mcp --remote` passes a bench's consent question on to its own client (issue 36):
a bench served with `hwbridge mcp --consent` asks before each send; behind an aggregating
server the question reaches the person at the far end, labelled as the bench's, either way
that client is asked (`elicitation/create` mid-call, or `input_required` handed back with
the bench's state sealed in the server's). Accept sends once; decline, cancel or nobody to
ask sends nothing. Frames are counted by a listener on the simulator's bus."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any, Literal

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client, types

import can
from hwbridge import Orchestrator
from hwbridge.mcp import McpToolDriver, build_server
from hwbridge.mcp.consent import binding
from hwbridge.mcp.questions import Sealed, StateSeal
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
    assert "asks:\nAn AI assistant asks to run send_message" in asked[0]
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
