"""aprocess_llm_response: the same answers as the sync API, many drivers at once, honest
cancellation (reads are abandoned, sends are waited for and reported)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import can
from hwbridge import (
    CanDriver,
    ConsentGate,
    DriverMeta,
    DriverResponse,
    MCSDriver,
    Orchestrator,
    SendPolicy,
)
from hwbridge.core.aio import CallJob, ExecutionCancelled, run_in_worker
from tests.conftest import BUSY_MARGIN_S
from tests.core.drivers import Thermostat
from tests.core.test_properties import json_like

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"
_IDS = re.compile(r"\b(call_[0-9a-f]{16}|[0-9a-f]{8})\b")

arguments = st.fixed_dictionaries(
    {},
    optional={
        "room": st.sampled_from(["kitchen", "living_room", "garage"]),
        "celsius": st.integers(-5, 40) | st.floats(0, 35, allow_nan=False),
        "kind": st.sampled_from(["tool_error", "retryable", "crash"]),
        "text": st.text(max_size=10),
    },
)
calls = st.tuples(
    st.sampled_from(["get_temperature", "set_temperature", "fail", "echo", "nope"]), arguments
)


def text_call(call: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"tool": call[0], "arguments": call[1]})


def openai_message(batch: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(batch)
        ],
    }


def anthropic_message(batch: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "Let me check."}]
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(batch)
    ]
    return {"role": "assistant", "content": blocks}


llm_outputs = (
    calls.map(text_call)
    | calls.map(lambda c: f"Sure.\n```json\n{text_call(c)}\n```")
    | st.lists(calls, min_size=1, max_size=3).map(openai_message)
    | st.lists(calls, min_size=1, max_size=3).map(anthropic_message)
    | st.text(max_size=80)
    | json_like
)


def normalized(response: DriverResponse) -> str:
    """The response as JSON, with random ids (error ids, generated call ids) blanked."""
    return _IDS.sub("<id>", json.dumps(response.model_dump(), sort_keys=True, default=str))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=llm_outputs, wrap=st.sampled_from(["plain", "orchestrator", "consent"]))
def test_sync_and_async_give_the_same_answers(output: Any, wrap: str) -> None:
    def build() -> tuple[Thermostat, Any]:
        inner = Thermostat()
        if wrap == "orchestrator":
            return inner, Orchestrator({"room": inner})
        if wrap == "consent":
            return inner, ConsentGate(inner, lambda tool, args: tool != "fail")
        return inner, inner

    sync_inner, sync_driver = build()
    async_inner, async_driver = build()
    expected = sync_driver.process_llm_response(output)
    got = asyncio.run(async_driver.aprocess_llm_response(output))
    assert normalized(got) == normalized(expected)
    assert async_inner.executed == sync_inner.executed
    if isinstance(output, dict | str):
        chunk = asyncio.run(async_driver.aprocess_llm_response(output, streaming=True))
        assert chunk == DriverResponse()  # an unfinished chunk runs nothing
        two_phase = asyncio.run(
            async_driver.aexecute_tool_call(async_driver.detect_tool_call(output))
        )
        assert normalized(two_phase) == normalized(expected)


def test_many_drivers_wait_at_once_without_blocking_the_loop() -> None:
    """Eight reads that each wait 1 s take about 1 s together, and the loop ticks."""
    read_s = 1.0  # one after the other, 8 s: more than one read and a busy machine's margin
    drivers = [
        CanDriver.from_dbc(DEMO, bus=f"virtual:aio-{uuid.uuid4().hex[:8]}") for _ in range(8)
    ]
    read = json.dumps(
        {
            "tool": "read_message",
            "arguments": {"message": "EngineData", "timeout_ms": int(read_s * 1000)},
        }
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def main() -> list[DriverResponse]:
        tick = asyncio.create_task(ticker())
        try:
            return await asyncio.gather(*(d.aprocess_llm_response(read) for d in drivers))
        finally:
            tick.cancel()

    try:
        start = time.monotonic()
        results = asyncio.run(main())
        elapsed = time.monotonic() - start
    finally:
        for d in drivers:
            d.close()
    assert all(r.call_failed and "NOT_RECEIVED" in (r.call_detail or "") for r in results), [
        r.call_detail for r in results
    ]
    assert elapsed < read_s + BUSY_MARGIN_S  # together; one after the other: 8 s
    assert ticks >= 15  # the event loop ran all along


WAIT_S = 20.0
"""A wait that a cancellation must not wait out."""


def test_a_cancelled_read_ends_at_once() -> None:
    with CanDriver.from_dbc(DEMO, bus=f"virtual:aio-{uuid.uuid4().hex[:8]}") as driver:
        wait = json.dumps(
            {
                "tool": "wait_for_signal",
                "arguments": {
                    "signal": "EngineSpeed",
                    "op": ">",
                    "value": 1,
                    "timeout_ms": int(WAIT_S * 1000),
                },
            }
        )

        async def main() -> float:
            task = asyncio.create_task(driver.aprocess_llm_response(wait))
            await asyncio.sleep(0.1)  # the read is under way (it cannot be seen from here)
            task.cancel()
            start = time.monotonic()
            with pytest.raises(ExecutionCancelled) as caught:
                await task
            assert caught.value.response is None  # only a read: nothing to report
            return time.monotonic() - start

        assert asyncio.run(main()) < WAIT_S / 2  # at once, not when the wait ends


def test_a_cancelled_send_is_waited_for_and_reported() -> None:
    channel = f"aio-{uuid.uuid4().hex[:8]}"
    asked = threading.Event()

    def slow_yes(tool: str, args: dict[str, Any]) -> bool:
        asked.set()
        time.sleep(0.3)  # the user thinks, then approves
        return True

    peer = can.Bus(interface="virtual", channel=channel)
    car = CanDriver.from_dbc(
        DEMO, bus=f"virtual:{channel}", policy=SendPolicy(allow_messages=["ClimateCommand"])
    )
    try:
        gate = ConsentGate(car, slow_yes)
        send = '{"tool": "send_ClimateCommand", "arguments": {"CabinSetpoint": 22}}'

        async def main() -> DriverResponse:
            task = asyncio.create_task(gate.aprocess_llm_response(send))
            while not asked.is_set():
                await asyncio.sleep(0.005)
            task.cancel()
            with pytest.raises(ExecutionCancelled) as caught:
                await task
            assert task.cancelled()
            return caught.value.response  # type: ignore[no-any-return]

        response = asyncio.run(main())
        assert response.call_executed and response.tool_call_result["id"] == "0x3C0"
        assert response.messages  # what the conversation needs to stay honest
        frame = peer.recv(1.0)
        assert frame is not None and frame.arbitration_id == 0x3C0  # it really went out
    finally:
        car.close()
        peer.shutdown()


def test_work_cancelled_before_it_begins_does_nothing() -> None:
    ran: list[str] = []
    release = threading.Event()

    def work(job: CallJob) -> str:
        release.wait(2)
        if not job.begin(True):
            ran.append("skipped")
            return "never seen"
        ran.append("ran")
        return "done"

    async def main() -> None:
        task = asyncio.create_task(run_in_worker(work))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(ExecutionCancelled) as caught:
            await task
        assert caught.value.response is None
        release.set()

    asyncio.run(main())
    deadline = time.monotonic() + 2
    while not ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran == ["skipped"]


class Plain(MCSDriver):
    """A driver written against the bare contract: the default async path applies."""

    meta = DriverMeta(id="0d3c1f0e-1111-4c1e-9a57-2b1f0c3d4e5f", name="Plain", version="1.0.0")

    def __init__(self) -> None:
        self.started = threading.Event()
        self.done = threading.Event()

    def get_function_description(self, model_name: str | None = None) -> str:
        return "[]"

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        return "no tools"

    def process_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        self.started.set()
        time.sleep(0.2)  # work that takes a while
        self.done.set()
        return DriverResponse(call_executed=True, tool_call_result=str(llm_response))


def test_the_contract_default_is_async_and_waits_when_cancelled() -> None:
    driver = Plain()
    assert asyncio.run(driver.aprocess_llm_response("x")).tool_call_result == "x"

    async def main() -> None:
        task = asyncio.create_task(driver.aprocess_llm_response("y"))
        async with asyncio.timeout(BUSY_MARGIN_S):
            while not driver.started.is_set():  # the call has begun
                await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(ExecutionCancelled) as caught:
            await task
        assert driver.done.is_set()  # it cannot tell reads from sends: it waited
        assert caught.value.response.tool_call_result == "y"

    driver.started.clear()
    driver.done.clear()
    asyncio.run(main())
