"""A "response pending" (7F xx 78) over both adapters (issue 20): the final answer is waited
for within the request's budget, over ISO-TP and through an ELM327 of either kind (before
v2.1 the chip takes the pending for the answer; from v2.1 it waits itself), and a request
that went out always says so."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firmware_sim.elm327 import Elm327Device
from firmware_sim.obd import DEFAULT_VIN
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.obd import Elm327Adapter, IsoTpObdAdapter, ObdDriver
from hwbridge.obd.transport.base import Ecu, ObdAdapter
from hwbridge.policy import SendPolicy
from tests.obd.conftest import Opener, ScriptedElm

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_leaks")]

SELF_TEST = {"ecu": "engine", "request": "31 01 02 03"}  # the engine ECU's self-test routine
ENGINE = Ecu.from_response(0x7E8, False)
KINDS = ["can", "elm327 v1.5", "elm327 v2.1"]


def call(driver: ObdDriver, tool: str, **arguments: Any) -> Any:
    response = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert response.call_executed, response.call_detail
    return response.tool_call_result


def audited(log: Path) -> list[tuple[str, str]]:
    return [(x["service"], x["outcome"]) for x in map(json.loads, log.read_text().splitlines())]


@pytest.fixture
def make_adapter(channel: str, car: VirtualVehicle) -> Iterator[Callable[..., ObdAdapter]]:
    """An adapter of one kind on the vehicle, with its own timings."""
    made: list[ObdAdapter] = []
    devices: list[Elm327Device] = []

    def make(kind: str, timeout_s: float = 1.0, p2_star_s: float = 5.0) -> ObdAdapter:
        adapter: IsoTpObdAdapter | Elm327Adapter
        if kind == "can":
            bus = PythonCanAdapter(f"virtual:{channel}")
            adapter = IsoTpObdAdapter(bus, timeout_s=timeout_s, own_adapter=True)
        else:
            device = Elm327Device(channel, version=kind.removeprefix("elm327 v"))
            device.start()
            devices.append(device)
            adapter = Elm327Adapter.open(device.port_name, timeout_s=timeout_s)
        adapter.p2_star_s = p2_star_s
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()
    for device in devices:
        device.stop()


def test_a_routine_answered_after_response_pending_comes_back_answered(
    open_driver: Opener, car: VirtualVehicle, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    driver = open_driver(SendPolicy(allow_services=["uds_0x31"], audit_log=log))
    started = time.monotonic()
    result = call(driver, "uds_request", **SELF_TEST)
    assert result == {
        "ecu": "engine",
        "service": "RoutineControl",
        "sent": True,
        "answered": True,
        "positive": True,
        "data": "71 01 02 03 00",
    }
    assert time.monotonic() - started >= 0.3  # the ECU's routine took that long
    assert audited(log) == [("uds_0x31", "sent")]
    assert call(driver, "uds_read_did", ecu="engine", did="VIN")["value"] == DEFAULT_VIN


@pytest.mark.parametrize("kind", KINDS)
def test_pending_moves_the_deadline_past_the_first_timeout(
    make_adapter: Callable[..., ObdAdapter], car: VirtualVehicle, kind: str
) -> None:
    assert car.obd is not None
    car.obd.routine_s, car.obd.pending_every_s = 1.3, 0.5
    adapter = make_adapter(kind, timeout_s=0.2)  # an ELM327 waits at least 1 s for a prompt
    adapter.request(b"\x01\x00")  # connected
    started = time.monotonic()
    replies = adapter.request(b"\x31\x01\x02\x03", ecu=ENGINE)
    took = time.monotonic() - started
    assert [(r.ecu.name, r.data.hex(" "), r.error) for r in replies] == [
        ("engine", "71 01 02 03 00", None)
    ]
    assert 1.3 <= took < 1.3 + 4.0  # answered when the routine ends, a margin for a busy machine


@pytest.mark.parametrize("kind", KINDS)
def test_an_ecu_pending_past_the_budget_was_sent_and_says_why_it_is_unanswered(
    make_adapter: Callable[..., ObdAdapter], car: VirtualVehicle, tmp_path: Path, kind: str
) -> None:
    assert car.obd is not None
    car.obd.routine_s, car.obd.pending_every_s = 30.0, 0.2  # pending without end
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_services=["uds_0x31"], audit_log=log)
    # budget: max(the UDS tools' 2 s, P2* 0.5 s)
    with ObdDriver(make_adapter(kind, p2_star_s=0.5), policy) as driver:
        started = time.monotonic()
        result = call(driver, "uds_request", **SELF_TEST)
        took = time.monotonic() - started
    assert 1.9 <= took < 2.0 + 4.0  # the 2 s budget (pending for 30 s), plus a margin
    assert result["sent"] is True and result["answered"] is False
    assert result["problem"].startswith("it answered 'response pending' (0x78) ")
    assert result["problem"].endswith(" times but sent no final answer within 2.0 s")
    assert "may have taken effect" in result["note"]
    assert audited(log) == [("uds_0x31", "sent")]


def test_a_functional_pending_the_chip_stopped_listening_to_is_reported(
    scripted: Callable[[dict[str, bytes]], ScriptedElm], tmp_path: Path
) -> None:
    """A chip before v2.1 goes back to its prompt after a functional request's pending (it
    waits ATST for more): nothing can be listened for without a filter, so it says so."""
    elm = scripted(
        {
            "0100": b"7E8 06 41 00 98 18 00 13 00",
            "04": b"7E8 03 7F 04 78 00 00 00 00\r7E9 01 44 00 00 00 00 00 00",
        }
    )
    policy = SendPolicy(allow_services=["obd_clear_dtcs"], audit_log=tmp_path / "audit.jsonl")
    with ObdDriver.from_elm327(elm.port, policy, timeout_s=0.5) as driver:
        result = call(driver, "obd_clear_dtcs")
    assert result["sent"] is True and result["acknowledged_by"] == ["transmission"]
    assert result["refused_by"] == [
        {
            "ecu": "engine",
            "problem": "it answered 'response pending' (0x78) and the ELM327 stopped listening "
            "before its final answer",
        }
    ]
    assert "note" not in result  # an ECU did answer
