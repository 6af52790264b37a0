"""SerialDriver.from_spec on the simulated SCPI supply: typed tools, the load model, the
device's errors, identity before any state change, and every failure within its timeout."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from firmware_sim.bench_psu import BenchPsu
from hwbridge import DriverResponse, HybridDriver, SendPolicy, SerialDriver
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.serial_bridge.conftest import PSU_SPEC

ALLOW = SendPolicy(allow_commands=["set_*", "output"], max_commands_per_second=100)


def call(driver: HybridDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def value(response: DriverResponse, field: str) -> Any:
    assert response.call_executed, response.call_detail
    result = response.tool_call_result
    assert isinstance(result, dict)
    return result["values"][field]["value"]


def code(response: DriverResponse) -> str:
    assert response.call_failed, response.tool_call_result
    assert response.call_detail is not None
    return response.call_detail.split(":")[0]


def variant(tmp_path: Path, old: str, new: str, *more: tuple[str, str]) -> Path:
    text = PSU_SPEC.read_text()
    for was, becomes in ((old, new), *more):
        assert was in text
        text = text.replace(was, becomes, 1)
    path = tmp_path / "variant.toml"
    path.write_text(text)
    return path


PORT_TIMEOUT = ("timeout_ms = 1000", "timeout_ms = 20000")
"""The spec's port timeout, made far longer than a busy machine's margin: a call that is
promised to end sooner (its own timeout, or at once) must not wait for this one."""


def test_a_bench_session_current_follows_voltage_and_the_limit_trips(psu: BenchPsu) -> None:
    with SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=ALLOW) as driver:
        assert value(call(driver, "identify"), "model") == "PSU-3005"
        assert call(driver, "set_current_limit", amps=1.0).tool_call_result == {
            "command": "set_current_limit", "line": "CURR 1.000", "sent": True, "confirmed": True
        }  # fmt: skip
        call(driver, "set_voltage", volts=6)
        call(driver, "output", state="ON")
        assert value(call(driver, "measure_voltage"), "volts") == 6.0
        assert value(call(driver, "measure_current"), "amps") == 0.6  # 6 V into 10 ohm
        psu.load_ohms = 4.0  # a heavier load: 1.5 A, above the 1 A limit
        assert value(call(driver, "measure_current"), "amps") == 0.0  # tripped
        assert value(call(driver, "output_state"), "on") is False
        error = call(driver, "read_error").tool_call_result
        assert error["values"]["code"]["value"] == -300
        assert "over-current" in error["values"]["message"]["value"]  # device text, as data
        assert psu.commands_seen[0] == "*IDN?"  # identity first, once


def test_a_value_the_device_refuses_is_reported_as_written_and_refused(
    psu: BenchPsu, tmp_path: Path
) -> None:
    spec = variant(tmp_path, "minimum = 0, maximum = 30", "minimum = 0, maximum = 50")
    with SerialDriver.from_spec(spec, port=str(psu.link), policy=ALLOW) as driver:
        r = call(driver, "set_voltage", volts=45)
        assert code(r) == "DEVICE_ERROR"
        assert "was written" in (r.call_detail or "") and "-222" in (r.call_detail or "")
        assert psu.volts == 0.0


def test_an_undefined_header_is_found_in_the_error_queue(psu: BenchPsu, tmp_path: Path) -> None:
    spec = variant(tmp_path, 'send = "VOLT?"', 'send = "VOLTS?"\ntimeout_ms = 200', PORT_TIMEOUT)
    with SerialDriver.from_spec(spec, port=str(psu.link)) as driver:
        started = time.monotonic()
        r = call(driver, "voltage_setpoint")
        assert code(r) == "DEVICE_ERROR" and "-113" in (r.call_detail or "")
        # its own 200 ms, then the error queue answers at once
        assert time.monotonic() - started < 0.2 + BUSY_MARGIN_S


def test_another_device_on_the_port_is_never_sent_a_command(psu: BenchPsu, tmp_path: Path) -> None:
    spec = variant(tmp_path, "expect = '^HWBRIDGE,PSU-3005,'", "expect = '^ACME,PSU-9000,'")
    with SerialDriver.from_spec(spec, port=str(psu.link), policy=ALLOW) as driver:
        r = call(driver, "set_voltage", volts=5)
        assert code(r) == "WRONG_DEVICE" and "nothing was sent" in (r.call_detail or "")
        assert value(call(driver, "measure_voltage"), "volts") == 0.0  # queries still run
        assert psu.commands_seen == ["*IDN?", "MEAS:VOLT?"]


@pytest.mark.parametrize("fault", ["silence", "garbage", "partial", "overlong"])
def test_a_misbehaving_device_fails_the_call_within_its_timeout(
    psu: BenchPsu, fault: str, tmp_path: Path
) -> None:
    spec = variant(tmp_path, "timeout_ms = 1000", "timeout_ms = 200")
    with SerialDriver.from_spec(spec, port=str(psu.link)) as driver:
        psu.inject_fault(fault)
        started = time.monotonic()
        r = call(driver, "measure_voltage")
        assert code(r) == "NO_REPLY"
        # 200 ms, and as long for the error queue
        assert time.monotonic() - started < 2 * 0.2 + BUSY_MARGIN_S
        psu.inject_fault(None)
        assert value(call(driver, "measure_voltage"), "volts") == 0.0


def test_the_device_goes_away_and_comes_back(psu: BenchPsu, tmp_path: Path) -> None:
    with SerialDriver.from_spec(
        variant(tmp_path, *PORT_TIMEOUT),
        port=str(psu.link),
        policy=ALLOW,
        adapter_options={"backoff_initial_s": 0.02, "backoff_max_s": 0.1},
    ) as driver:
        call(driver, "set_voltage", volts=2)
        psu.stop()
        started = time.monotonic()
        assert code(call(driver, "measure_voltage")) == "PORT_DOWN"
        assert time.monotonic() - started < 20.0 / 2  # at once, not after the port's timeout
        assert driver.healthcheck().status == "down"
        psu.start()  # a new supply: its identity is asked again before the next change
        assert driver.adapter is not None and driver.adapter.wait_connected(3.0)
        assert call(driver, "set_voltage", volts=3).call_executed
        # identity, the queue read out (nothing earlier is blamed on it), the command, its check
        assert psu.commands_seen[-4:] == ["*IDN?", "SYST:ERR?", "VOLT 3.000", "SYST:ERR?"]
        assert wait_until(lambda: driver.healthcheck().status == "ok", BUSY_MARGIN_S)


def test_sixteen_threads_share_one_driver(psu: BenchPsu) -> None:
    with SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=ALLOW) as driver:
        call(driver, "set_voltage", volts=5)
        call(driver, "output", state="ON")
        expected = {"measure_voltage": ("volts", 5.0), "measure_current": ("amps", 0.5),
                    "identify": ("model", "PSU-3005")}  # fmt: skip
        wrong: list[Any] = []

        def work(i: int) -> None:
            for n in range(12):
                tool = list(expected)[(i + n) % 3]
                field, want = expected[tool]
                r = call(driver, tool)
                got = r.tool_call_result["values"][field]["value"] if r.call_executed else r
                if got != want:
                    wrong.append((tool, got))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not wrong


def test_every_call_is_answered_when_the_port_is_gone(psu: BenchPsu) -> None:
    driver = SerialDriver.from_spec(PSU_SPEC, port=str(psu.link))
    driver.close()
    assert code(call(driver, "measure_voltage")) == "PORT_DOWN"
    assert call(driver, "port_status").tool_call_result["state"] == "down"


def test_an_error_already_queued_is_never_blamed_on_the_next_command(psu: BenchPsu) -> None:
    policy = SendPolicy(allow_commands=["set_voltage", "set_current_limit", "output"])
    with SerialDriver.from_spec(PSU_SPEC, port=str(psu.link), policy=policy) as bench:
        for tool, arguments in (
            ("set_current_limit", {"amps": 1}),
            ("set_voltage", {"volts": 5}),
            ("output", {"state": "ON"}),
        ):
            assert call(bench, tool, **arguments).call_executed
        psu.load_ohms = 1.0  # the load shorts: 5 A > 1 A, the supply trips and queues -300
        call(bench, "measure_voltage")
        r = call(bench, "set_voltage", volts=3)
        assert r.call_executed, r.call_detail  # it took effect: never "refused"
        assert r.tool_call_result["confirmed"] is True
        assert r.tool_call_result["earlier_device_errors"] == ["-300"]
        assert psu.volts == 3.0
