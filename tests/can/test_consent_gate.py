"""A ConsentGate around a CanDriver gates every send, typed or generic, one-shot or
periodic, raw or encoded: a refusal of any kind puts nothing on the bus."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import can
from hwbridge import CanDriver, ConsentGate, SendPolicy
from tests.can.conftest import recv_all

DEMO = "dbc/demo_vehicle.dbc"


def call(driver: Any, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def code(r: Any) -> str:
    return (r.call_detail or "").split(":")[0]


SEND_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("send_message", {"message": "ClimateCommand", "signals": {"CabinSetpoint": 21}}),
    ("send_ClimateCommand", {"CabinSetpoint": 21}),
    ("start_periodic", {"message": "ClimateCommand", "signals": {}, "period_ms": 100}),
    ("send_frame", {"id": "0x3C0", "data": "00"}),
]


@pytest.mark.parametrize(
    "answer",
    [False, None, "y", 1, "raise", "hang"],
    ids=["false", "none", "y", "one", "raises", "no-answer"],
)
def test_consent_gate_stops_every_kind_of_send(
    channel: str, peer: can.BusABC, answer: object
) -> None:
    asked: list[str] = []

    def ask(tool: str, arguments: dict[str, Any]) -> object:
        asked.append(tool)
        if answer == "raise":
            raise RuntimeError("the terminal went away")
        if answer == "hang":
            time.sleep(5)
        return answer

    policy = SendPolicy(allow_messages=["ClimateCommand"], allow_raw_frames=True)
    with CanDriver.from_dbc(
        DEMO, bus=f"virtual:{channel}", policy=policy, exposure="messages"
    ) as car:
        gate = ConsentGate(car, ask, timeout_s=0.2)
        for tool, arguments in SEND_CALLS:
            r = call(gate, tool, **arguments)
            assert r.call_failed and not r.call_executed, tool
            assert code(r) == "CONSENT_DENIED"
        assert call(gate, "list_messages").call_executed  # reads are not asked about
        assert call(gate, "decode_frame", id="0x100", data="00").call_executed
    assert asked == [tool for tool, _ in SEND_CALLS]
    assert recv_all(peer, timeout_s=0.2) == []


def test_consent_gate_lets_an_approved_send_through(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"])
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as car:
        gate = ConsentGate(car, lambda tool, arguments: True)
        r = call(gate, "send_ClimateCommand", CabinSetpoint=21)
        assert r.call_executed, r.retry_prompt
    assert len(recv_all(peer, timeout_s=0.2)) == 1
