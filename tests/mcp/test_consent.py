"""`build_server(driver, consent=True)` (`hwbridge mcp --consent`): every call that can
change state asks the client's user by MCP elicitation, showing what would go out; accept
sends it, decline, cancel or no support refuse it and nothing reaches the bus (counted by a
second listener on the bus). Both ways a connection asks: `input_required` (2026-07-28) and
an `elicitation/create` request (the handshake versions before)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp import Client, types

import can
from hwbridge import CanDriver, SendPolicy
from hwbridge.mcp import build_server
from tests.mcp.conftest import text_of

DEMO = "dbc/demo_vehicle.dbc"
REPO = Path(__file__).resolve().parents[2]
CLIMATE = 0x3C0  # ClimateCommand's id in the demo database
SEND = {"message": "ClimateCommand", "signals": {"CabinSetpoint": 22.5, "FanLevel": 3}}
Asked = list[types.ElicitRequestParams]


@pytest.fixture
def bus() -> Iterator[tuple[CanDriver, can.BusABC]]:
    """A driver that may send ClimateCommand, and a listener on the same bus."""
    channel = f"consent-{uuid.uuid4().hex[:10]}"
    listener = can.Bus(interface="virtual", channel=channel)
    driver = CanDriver.from_dbc(
        DEMO, bus=f"virtual:{channel}", policy=SendPolicy(allow_messages=["ClimateCommand"])
    )
    try:
        yield driver, listener
    finally:
        driver.close()
        listener.shutdown()


def sent(listener: can.BusABC) -> int:
    """ClimateCommand frames that reached the bus."""
    count = 0
    while (msg := listener.recv(0.2)) is not None:
        count += msg.arbitration_id == CLIMATE
    return count


def answering(action: Literal["accept", "decline", "cancel"], approve: bool | None = True
              ) -> tuple[Asked, Any]:  # fmt: skip
    asked: Asked = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        content = None if approve is None else {"approve": approve}
        shown = content if action == "accept" else None
        return types.ElicitResult(action=action, content=shown)

    return asked, callback


def call(
    driver: CanDriver, mode: str, callback: Any, tool: str = "send_message", **arguments: Any
) -> types.CallToolResult:
    async def main() -> types.CallToolResult:
        async with Client(
            build_server(driver, consent=True), mode=mode, elicitation_callback=callback
        ) as client:
            return await client.call_tool(tool, arguments or SEND)

    return anyio.run(main)


MODES = ["2026-07-28", "legacy"]


@pytest.mark.parametrize("mode", MODES)
def test_accepted_it_is_sent_once_and_the_question_says_what(
    bus: tuple[CanDriver, can.BusABC], mode: str
) -> None:
    driver, listener = bus
    asked, callback = answering("accept")
    result = call(driver, mode, callback)
    assert not result.is_error, text_of(result)
    assert sent(listener) == 1
    [question] = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert "send_message" in question.message and "ClimateCommand" in question.message
    assert '"CabinSetpoint": 22.5' in question.message
    assert question.requested_schema["properties"]["approve"]["type"] == "boolean"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("action", "approve", "said"),
    [
        ("decline", None, "declined"),
        ("cancel", None, "cancelled"),
        ("accept", False, "did not tick approve"),
    ],
)
def test_declined_cancelled_or_unticked_nothing_is_sent(
    bus: tuple[CanDriver, can.BusABC],
    mode: str,
    action: Literal["accept", "decline", "cancel"],
    approve: bool | None,
    said: str,
) -> None:
    driver, listener = bus
    asked, callback = answering(action, approve)
    result = call(driver, mode, callback)
    assert result.is_error  # a refusal is a failure, never a success
    assert text_of(result).startswith(f"CONSENT_DENIED: the user {said} send_message")
    assert "nothing was sent" in text_of(result)
    assert len(asked) == 1
    assert sent(listener) == 0


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_ask_gets_a_refusal_that_says_so(
    bus: tuple[CanDriver, can.BusABC], mode: str
) -> None:
    driver, listener = bus
    result = call(driver, mode, None)
    assert result.is_error
    assert "cannot ask its user (it does not support elicitation)" in text_of(result)
    assert sent(listener) == 0


@pytest.mark.parametrize("mode", MODES)
def test_reads_are_never_asked_about(bus: tuple[CanDriver, can.BusABC], mode: str) -> None:
    driver, _ = bus
    asked, callback = answering("decline")
    result = call(driver, mode, callback, tool="list_messages", filter="Climate")
    assert not result.is_error, text_of(result)
    assert asked == []


def test_an_answer_for_one_call_does_not_send_another(
    bus: tuple[CanDriver, can.BusABC],
) -> None:
    """At 2026-07-28 the client calls again with the answer: an answer carried to a call with
    other arguments than the question showed is no answer, and it is asked again."""
    driver, listener = bus

    async def main() -> types.CallToolResult | types.InputRequiredResult:
        async with Client(build_server(driver, consent=True), mode="2026-07-28",
                          elicitation_callback=answering("accept")[1]) as client:  # fmt: skip
            first = await client.session.call_tool("send_message", SEND, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            other = {"message": "ClimateCommand", "signals": {"CabinSetpoint": 30.0}}
            accepted = types.ElicitResult(action="accept", content={"approve": True})
            return await client.session.call_tool(
                "send_message",
                other,
                input_responses={"hwbridge_consent": accepted},
                request_state=first.request_state,
                allow_input_required=True,
            )

    again: Callable[[], Awaitable[Any]] = main
    assert isinstance(anyio.run(again), types.InputRequiredResult)
    assert sent(listener) == 0


def test_hwbridge_mcp_consent_asks_over_stdio(tmp_path: Path) -> None:
    """The command: `hwbridge mcp --consent` over stdio, a bench supply on a pty; declined,
    the voltage stays; accepted, it is set; the config printed for clients keeps --consent."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    from firmware_sim.bench_psu import BenchPsu

    psu = BenchPsu(link=tmp_path / "psu")
    psu.start()
    options = ["--spec", "bench_psu", "--port", str(tmp_path / "psu"), "--allow", "set_voltage",
               "--consent"]  # fmt: skip
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "hwbridge", "mcp", *options], cwd=REPO
    )

    async def session(action: Literal["accept", "decline", "cancel"]) -> types.CallToolResult:
        _, callback = answering(action)
        with (tmp_path / "stderr.txt").open("a") as log:
            async with Client(stdio_client(params, errlog=log), elicitation_callback=callback) as c:
                return await c.call_tool("set_voltage", {"volts": 5.0})

    try:
        declined = anyio.run(session, "decline")
        assert declined.is_error and "CONSENT_DENIED" in text_of(declined)
        assert psu.volts == 0.0
        accepted = anyio.run(session, "accept")
        assert not accepted.is_error, text_of(accepted)
        assert psu.volts == 5.0
    finally:
        psu.stop()
    config = subprocess.run(
        [sys.executable, "-m", "hwbridge", "mcp", *options, "--print-config"],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=True,
    )  # fmt: skip
    assert '"--consent"' in config.stdout
