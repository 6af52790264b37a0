"""The one SendPolicy on serial devices: raw lines by pattern, no second command smuggled
through a parameter, limits, consent, rate under a flood, dry runs and the audit log; and one
policy object governing a CAN bus and a serial device together."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from firmware_sim.bench_psu import BenchPsu
from hwbridge import CanDriver, Orchestrator, SendPolicy, SerialDriver
from hwbridge.policy import CommandRequest
from tests.serial_bridge.conftest import PSU_SPEC, ROOT
from tests.serial_bridge.test_psu_driver import call, code

DISPLAY = """
[commands.display]
description = "Show a text on the front panel."
send = 'DISP:TEXT "{text}"'
changes_state = true
params.text = { type = "string", max_length = 40 }
"""


def test_raw_lines_need_the_policy_and_its_patterns(psu: BenchPsu) -> None:
    with SerialDriver.from_port(str(psu.link)) as closed:
        assert [t.name for t in closed.list_tools()] == ["serial_read", "port_status"]
        r = call(closed, "serial_query", line="*IDN?")
        assert code(r) == "SEND_NOT_ALLOWED"
    policy = SendPolicy(allow_raw_lines=[r"^MEAS:", r"^\*IDN\?$"], deny_raw_lines=[";"])
    with SerialDriver.from_port(str(psu.link), policy=policy) as driver:
        r = call(driver, "serial_query", line="*IDN?", expect="PSU")
        assert r.tool_call_result["reply"] == "HWBRIDGE,PSU-3005,SIM00001,1.0.0"
        for line in ("OUTP ON", "MEAS:VOLT?;OUTP ON", "MEAS:VOLT?\nOUTP ON"):
            assert code(call(driver, "serial_query", line=line)) == "SEND_NOT_ALLOWED", line
        assert not any(c.startswith("OUTP") for c in psu.commands_seen)
        assert "^MEAS:" in driver.get_driver_system_message()


def test_serial_read_listens_and_stops_at_until(psu: BenchPsu) -> None:
    policy = SendPolicy(allow_raw_lines=[r"^\*IDN\?$"])
    with SerialDriver.from_port(str(psu.link), policy=policy) as driver:
        r = call(driver, "serial_read", duration_ms=50)
        assert r.tool_call_result == {
            "lines": [],
            "count": 0,
            "total": 0,
            "returned": 0,
            "truncated": False,
        }
        result: list[Any] = []
        reader = threading.Thread(
            target=lambda: result.append(call(driver, "serial_read", duration_ms=2000, until="PSU"))
        )
        reader.start()
        assert call(driver, "serial_query", line="*IDN?").call_executed
        reader.join(5)
        read = result[0].tool_call_result
        assert read["until_met"] and read["lines"] == ["HWBRIDGE,PSU-3005,SIM00001,1.0.0"]
        assert (read["total"], read["returned"], read["truncated"]) == (1, 1, False)


def test_a_second_command_cannot_ride_in_a_parameter(psu: BenchPsu, tmp_path: Path) -> None:
    spec = tmp_path / "display.toml"
    spec.write_text(PSU_SPEC.read_text() + DISPLAY)
    policy = SendPolicy(allow_commands=["display"], audit_log=tmp_path / "audit.jsonl")
    with SerialDriver.from_spec(spec, port=str(psu.link), policy=policy) as driver:
        for text in ("hi\nOUTP ON", "hi\rOUTP ON", 'hi";OUTP ON;DISP:TEXT "x', "\x1bOUTP ON"):
            assert code(call(driver, "display", text=text)) == "SEND_NOT_ALLOWED", text
        assert not psu.output
        assert not any("OUTP" in c for c in psu.commands_seen)
    refused = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert len(refused) == 4 and all(e["outcome"] == "refused" for e in refused)


def test_limits_consent_and_dry_runs(psu: BenchPsu) -> None:
    asked: list[CommandRequest] = []

    def consent(request: CommandRequest) -> object:
        asked.append(request)
        return "yes" if request.arguments.get("volts") == 4 else request.line == "VOLT 5.000"

    policy = SendPolicy(
        allow_commands=["set_voltage"],
        command_limits={"set_voltage.volts": (0, 12)},
        require_consent=True,
        consent=consent,
    )
    with SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=policy) as driver:
        assert code(call(driver, "set_voltage", volts=13)) == "OUT_OF_RANGE"
        assert code(call(driver, "set_voltage", volts=4)) == "CONSENT_DENIED"  # "yes" is no
        assert psu.volts == 0.0
        assert call(driver, "set_voltage", volts=5).call_executed
        assert psu.volts == 5.0
        dry = call(driver, "set_voltage", volts=7, dry_run=True)
        assert dry.tool_call_result["dry_run"] and psu.volts == 5.0
        assert code(call(driver, "set_voltage", volts=20, dry_run=True)) == "OUT_OF_RANGE"
    assert [r.line for r in asked] == ["VOLT 4.000", "VOLT 5.000"]
    with SerialDriver.from_spec(
        PSU_SPEC, port=str(psu.link), policy=SendPolicy(allow_commands=["*"], dry_run=True)
    ) as driver:
        assert call(driver, "set_voltage", volts=9).tool_call_result["sent"] is False
        assert psu.volts == 5.0


def test_the_rate_holds_under_a_flood_from_many_threads(psu: BenchPsu, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_commands=["set_voltage"], max_commands_per_second=5, audit_log=audit)
    outcomes: list[str] = []
    with SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=policy) as driver:

        def flood() -> None:
            for n in range(10):
                r = call(driver, "set_voltage", volts=n % 10)
                outcomes.append("ok" if r.call_executed else code(r))

        threads = [threading.Thread(target=flood) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    sent = outcomes.count("ok")
    assert 5 <= sent <= 7 and outcomes.count("RATE_LIMITED") == 40 - sent
    assert sum(c.startswith("VOLT") for c in psu.commands_seen) == sent  # none lost, none extra
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert sum(e["outcome"] == "sent" for e in lines) == sent
    assert all(e["line"].startswith("VOLT ") for e in lines)


def test_one_policy_governs_a_can_bus_and_a_serial_device(psu: BenchPsu) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"], allow_commands=["set_voltage"])
    car = CanDriver.from_dbc(
        ROOT / "dbc" / "demo_vehicle.dbc", bus="virtual:serial-policy", policy=policy
    )
    supply = SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=policy)
    with car, supply:
        bench = Orchestrator({"car": car, "psu": supply})
        tools = {t.name: t for t in bench.list_tools()}
        assert not tools["set_voltage"].read_only and not tools["send_message"].read_only
        assert tools["measure_voltage"].read_only
        sent = call(bench, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 22})
        assert sent.call_executed
        assert call(bench, "set_voltage", volts=3).call_executed
        assert code(call(bench, "output", state="ON")) == "SEND_NOT_ALLOWED"
        assert bench.healthcheck().parts["psu"].status == "ok"
