"""Decorators over tool drivers: consent, hooks, rate limits and an audit trail, each a
HybridDriver of its own that changes one thing and passes the rest through."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from hwbridge import AuditLog, CanDriver, ConsentGate, Hooks, Orchestrator, RateLimit
from tests.core.drivers import Thermostat

DEMO = "dbc/demo_vehicle.dbc"


def call(driver: Any, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def code(r: Any) -> str:
    return (r.call_detail or "").split(":")[0]


# -- ConsentGate ----------------------------------------------------------------------------


def test_consent_gate_inside_an_orchestrator_and_every_call_mode() -> None:
    heat = Thermostat()
    seen: list[str] = []

    def ask(tool: str, arguments: dict[str, Any]) -> bool:
        seen.append(tool)
        return False

    gate = ConsentGate(heat, ask, every_call=True)
    orch = Orchestrator({"heat": gate})
    r = call(orch, "get_temperature", room="kitchen")
    assert code(r) == "CONSENT_DENIED" and heat.executed == [] and seen == ["get_temperature"]
    with pytest.raises(ValueError, match="timeout_s"):
        ConsentGate(heat, lambda *_: True, timeout_s=0)


# -- Hooks, RateLimit, AuditLog -------------------------------------------------------------


def test_hooks_run_around_calls_and_a_failing_hook_changes_no_outcome() -> None:
    events: list[tuple[Any, ...]] = []

    def broken(*args: Any) -> None:
        raise RuntimeError("hook bug")

    hooked = Hooks(
        Thermostat(),
        pre=[lambda tool, args: events.append(("pre", tool)), broken],
        post=[broken, lambda tool, args, result: events.append(("post", tool, result))],
        on_failure=[broken, lambda tool, args, exc: events.append(("failed", tool, exc.code))],
    )
    ok = call(hooked, "get_temperature", room="kitchen")
    assert ok.call_executed and not ok.call_failed
    bad = call(hooked, "fail", kind="tool_error")
    assert bad.call_failed and code(bad) == "HEATER_OFFLINE"
    assert events == [
        ("pre", "get_temperature"),
        ("post", "get_temperature", {"room": "kitchen", "celsius": 21.5}),
        ("pre", "fail"),
        ("failed", "fail", "HEATER_OFFLINE"),
    ]


def test_rate_limit_refuses_calls_over_the_rate_without_running_them() -> None:
    heat = Thermostat()
    limited = RateLimit(heat, calls_per_second=100, per_tool={"set_temperature": 1})
    first = call(limited, "set_temperature", room="kitchen", celsius=20)
    second = call(limited, "set_temperature", room="kitchen", celsius=21)
    assert first.call_executed and second.call_failed and code(second) == "RATE_LIMITED"
    assert "try again" in (second.retry_prompt or "")
    assert call(limited, "get_temperature", room="kitchen").call_executed
    assert [t for t, _ in heat.executed] == ["set_temperature", "get_temperature"]
    with pytest.raises(ValueError, match="per_tool"):
        RateLimit(heat, per_tool={"set_temp": 1})


def test_rate_limit_holds_under_a_flood_of_threads() -> None:
    heat = Thermostat()
    limited = RateLimit(heat, calls_per_second=5)
    results: list[bool] = []
    lock = threading.Lock()

    def flood() -> None:
        for _ in range(20):
            r = call(limited, "get_temperature", room="kitchen")
            with lock:
                results.append(r.call_executed)

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 160
    assert sum(results) == len(heat.executed) <= 5 + 2  # a burst of 5, a little refill


def test_audit_log_records_every_call_and_refuses_a_path_it_cannot_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "calls.jsonl"
    audited = AuditLog(Thermostat(), path)
    call(audited, "get_temperature", room="kitchen")
    call(audited, "fail", kind="tool_error")
    call(audited, "fail", kind="crash")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["tool"], e["outcome"], e.get("code")) for e in lines] == [
        ("get_temperature", "done", None),
        ("fail", "failed", "HEATER_OFFLINE"),
        ("fail", "failed", "INTERNAL_ERROR"),
    ]
    assert lines[0]["arguments"] == {"room": "kitchen"} and lines[0]["duration_ms"] >= 0
    with pytest.raises(ValueError, match="cannot be written"):
        AuditLog(Thermostat(), tmp_path / "missing" / "dir" / "calls.jsonl")


def test_decorators_stack_and_keep_only_the_flags_they_honour(tmp_path: Path) -> None:
    with CanDriver.from_dbc(DEMO, bus=None) as car:
        stacked = AuditLog(RateLimit(ConsentGate(car, lambda *_: True), 50), tmp_path / "a.jsonl")
        assert "multi_connection" in stacked.meta.capabilities  # the CAN driver's, passed on
        assert call(stacked, "list_messages").call_executed
        r = call(stacked, "send_message", message="ClimateCommand", signals={})
        assert code(r) == "SEND_NOT_ALLOWED"  # the read-only policy's refusal passes through
        assert stacked.get_driver_system_message() == car.get_driver_system_message()
    plain = Hooks(Thermostat())
    assert "multi_connection" not in plain.meta.capabilities
    assert plain.meta.bindings[0].capability == "thermostat"
