"""Runner: stop reasons, the kept conversation, a CAN driver on a live bus, and Ctrl-C
(task cancellation) that never leaves a send half-reported. Driven through the OpenAI SDK
against the loopback fake."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import can
from firmware_sim import VirtualVehicle
from hwbridge import (
    CanDriver,
    ConsentGate,
    DriverMeta,
    DriverResponse,
    ExecutionCancelled,
    MCSDriver,
    Orchestrator,
    Runner,
    SendPolicy,
    llm,
)
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.core.drivers import Thermostat
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, sse

if TYPE_CHECKING:  # the SDK is imported by the first test that needs it, not at collection
    from hwbridge.llm import OpenAIClient

pytestmark = pytest.mark.timeout(30)

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


def client(fake: FakeProvider, **options: Any) -> OpenAIClient:
    return llm.OpenAIClient("gpt-4o-mini", base_url=fake.base_url, max_retries=0, **options)


def call(n: int, name: str, arguments: dict[str, Any]) -> str:
    return P.openai_stream([], [(f"call_{n:04d}", name, arguments)])


def test_max_rounds_stops_a_model_that_never_answers(fake_openai: FakeProvider) -> None:
    fake_openai.script(*(sse(call(n, "get_temperature", {"room": "kitchen"})) for n in range(3)))
    result = Runner(Thermostat(), client(fake_openai), max_rounds=3).run("loop")
    assert result.stop_reason == "max_rounds" and result.answer is None
    assert result.detail == "no final answer after 3 rounds"
    assert len(result.steps) == 3 and len(fake_openai.requests) == 3


def test_the_same_failing_call_twice_stops_the_run(fake_openai: FakeProvider) -> None:
    failing = {"kind": "tool_error"}
    fake_openai.script(
        sse(call(1, "fail", failing)),
        sse(call(2, "echo", {"text": "other"})),
        sse(call(3, "fail", failing)),
    )
    driver = Thermostat()
    result = Runner(driver, client(fake_openai)).run("break it")
    assert result.stop_reason == "repeated_failure"
    assert result.detail == "fail failed again with the same arguments"
    assert [s.calls[0].code for s in result.steps] == ["HEATER_OFFLINE", None, "HEATER_OFFLINE"]
    assert [s.calls[0].ok for s in result.steps] == [False, True, False]


def test_a_failure_with_new_arguments_is_a_fresh_try(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(call(1, "set_temperature", {"room": "garage", "celsius": 20})),  # invalid
        sse(call(2, "set_temperature", {"room": "kitchen", "celsius": 20})),
        sse(P.openai_stream(["Set."])),
    )
    driver = Thermostat()
    result = Runner(driver, client(fake_openai)).run("garage to 20")
    assert result.ok and result.answer == "Set."
    assert result.steps[0].calls[0].code == "INVALID_ARGUMENTS"
    assert driver.executed == [("set_temperature", {"room": "kitchen", "celsius": 20})]
    # the model got the retry hint as the tool message of its call
    retry = fake_openai.requests[1]["messages"][3]
    assert retry["role"] == "tool" and "garage" in retry["content"]


def test_a_second_run_continues_the_conversation(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(call(1, "get_temperature", {"room": "kitchen"})),
        sse(P.openai_stream(["21.5 degC."])),
        sse(P.openai_stream(["Still 21.5 degC."])),
    )
    runner = Runner(Thermostat(), client(fake_openai))
    assert runner.run("kitchen?").answer == "21.5 degC."
    assert runner.run("and now?").answer == "Still 21.5 degC."
    roles = [m["role"] for m in fake_openai.requests[2]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert runner.messages[-1] == {"role": "assistant", "content": "Still 21.5 degC."}
    runner.reset()
    assert runner.messages == []


def test_a_provider_error_after_tool_rounds_keeps_them(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(call(1, "get_temperature", {"room": "kitchen"}))
    )  # then the fake says 500
    runner = Runner(Thermostat(), client(fake_openai))
    result = runner.run("kitchen?")
    assert result.stop_reason == "provider_error" and len(result.steps) == 1
    assert [m["role"] for m in runner.messages] == ["user", "assistant", "tool"]


def test_a_can_driver_on_a_live_bus(fake_openai: FakeProvider) -> None:
    channel = f"runner-{uuid.uuid4().hex[:8]}"
    fake_openai.script(
        sse(
            P.openai_stream(
                [],
                [
                    ("call_r", "read_signals", {"signals": ["EngineSpeed", "GearLever"]}),
                    ("call_s", "send_message", {"message": "ClimateCommand", "signals": {}}),
                ],
            )
        ),
        sse(P.openai_stream(["The engine idles."])),
    )
    with (
        VirtualVehicle(DEMO, channel=channel),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as car,
    ):
        result = Runner(car, client(fake_openai)).run("What is the engine doing?")
    read, send = result.steps[0].calls
    assert read.ok and read.result["values"]["EngineSpeed"]["unit"] == "rpm"
    assert read.result["values"]["GearLever"]["label"] == "P"
    assert not send.ok and send.code == "SEND_NOT_ALLOWED"  # read-only: refused, not passed
    assert result.answer == "The engine idles."
    tools = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert "read_signals" in tools and "send_message" not in tools


STALL_S = 20.0
"""How long the scripted answer stalls after its first event: far longer than any margin."""


def test_ctrl_c_abandons_a_request_in_flight(fake_openai: FakeProvider) -> None:
    fake_openai.script(sse(P.openai_stream(["slow ", "answer"]), stall_s=STALL_S))
    shown: list[str] = []
    runner = Runner(Thermostat(), client(fake_openai), on_text=shown.append)

    async def main() -> float:
        task = asyncio.create_task(runner.arun("hello"))
        async with asyncio.timeout(BUSY_MARGIN_S):
            while not fake_openai.requests:  # the request is in flight
                await asyncio.sleep(0.005)
        task.cancel()
        start = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start

    assert asyncio.run(main()) < STALL_S / 2  # abandoned, not waited for
    assert runner.messages == [{"role": "user", "content": "hello"}]  # no half answer kept
    assert "answer" not in "".join(shown)


def test_ctrl_c_during_a_send_waits_for_it_and_records_it(fake_openai: FakeProvider) -> None:
    channel = f"runner-{uuid.uuid4().hex[:8]}"
    asking = threading.Event()

    def slow_yes(tool: str, arguments: dict[str, Any]) -> bool:
        asking.set()
        time.sleep(0.3)  # the user thinks, meanwhile Ctrl-C is pressed
        return True

    fake_openai.script(sse(call(1, "send_ClimateCommand", {"CabinSetpoint": 22})))
    peer = can.Bus(interface="virtual", channel=channel)
    car = CanDriver.from_dbc(
        DEMO, bus=f"virtual:{channel}", policy=SendPolicy(allow_messages=["ClimateCommand"])
    )
    steps: list[Any] = []
    try:
        runner = Runner(
            Orchestrator({"car": ConsentGate(car, slow_yes)}),
            client(fake_openai),
            on_step=steps.append,
        )

        async def main() -> None:
            task = asyncio.create_task(runner.arun("22 degrees please"))
            while not asking.is_set():
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(ExecutionCancelled) as caught:
                await task
            assert caught.value.response.call_executed

        asyncio.run(main())
        # what went out is in the conversation, call and result together
        assert [m["role"] for m in runner.messages] == ["user", "assistant", "tool"]
        assert '"0x3C0"' in runner.messages[-1]["content"]
        assert steps and steps[0].calls[0].ok
        assert wait_until(lambda: (m := peer.recv(0.1)) is not None and m.arbitration_id == 0x3C0)
    finally:
        car.close()
        peer.shutdown()


def test_one_run_at_a_time(fake_openai: FakeProvider) -> None:
    fake_openai.script(sse(P.openai_stream(["a"]), stall_s=0.5), sse(P.openai_stream(["b"])))
    runner = Runner(Thermostat(), client(fake_openai))

    async def main() -> None:
        first = asyncio.create_task(runner.arun("one"))
        async with asyncio.timeout(BUSY_MARGIN_S):
            while not fake_openai.requests:  # the first run is under way (its answer stalls)
                await asyncio.sleep(0.005)
        with pytest.raises(RuntimeError, match="already running"):
            await runner.arun("two")
        assert (await first).answer == "a"

    asyncio.run(main())
    with pytest.raises(ValueError, match="max_rounds"):
        Runner(Thermostat(), client(fake_openai), max_rounds=0)


class Echo(MCSDriver):
    """A driver written against the bare contract (no two-phase API, no native tools)."""

    meta = DriverMeta(id="0d3c1f0e-2222-4c1e-9a57-2b1f0c3d4e5f", name="Echo", version="1.0.0")

    def get_function_description(self, model_name: str | None = None) -> str:
        return '[{"name": "echo"}]'

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        return 'Call {"tool": "echo"} to hear yourself.'

    def process_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        if not isinstance(llm_response, str) or '"echo"' not in llm_response:
            return DriverResponse()
        return DriverResponse(
            call_executed=True,
            tool_call_result="echo",
            messages=[
                {"role": "assistant", "content": llm_response},
                {"role": "user", "content": "echo"},
            ],
        )


def test_a_bare_mcs_driver_in_text_mode(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(P.openai_stream(['{"tool": "echo"}'])),
        sse(P.openai_stream(["Heard it."])),
        sse(P.openai_stream(['{"tool": "echo"}'])),
        sse(P.openai_stream(["Again."])),
    )
    runner = Runner(Echo(), client(fake_openai, mode="text"))
    result = runner.run("echo please")
    assert result.answer == "Heard it." and result.steps[0].response.call_executed
    assert result.steps[0].calls == []  # no two-phase API: the response tells what happened
    assert (
        fake_openai.requests[0]["messages"][0]["content"]
        == 'Call {"tool": "echo"} to hear yourself.'
    )
    assert asyncio.run(runner.arun("again")).answer == "Again."
    with pytest.raises(ValueError, match="native tools"):
        Runner(Echo(), client(fake_openai)).run("native mode needs native tools")
