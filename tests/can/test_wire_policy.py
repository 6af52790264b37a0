"""The send policy judges the frame that goes out, and every outcome is reported honestly.

A second python-can bus on the same virtual channel counts what really reaches the bus.
The database overlaps signals as real DBCs do, scales labelled values, and gives a rolling
counter bits of a limited signal.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge import CanDriver, DriverResponse, SendPolicy, counter_and_checksum
from hwbridge.policy import SendRequest
from tests.can.conftest import recv_all
from tests.can.test_driver import DEMO
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = pytest.mark.timeout(30)

DBC = """VERSION ""

NS_ :

BS_:

BU_: HMI HVAC

BO_ 960 ClimateCommand: 8 HMI
 SG_ CabinSetpoint : 0|8@1+ (0.5,0) [16|30] "degC" HVAC
 SG_ SetpointByte : 0|8@1+ (1,0) [0|255] "" HVAC
 SG_ FanLevel : 8|4@1+ (1,0) [0|8] "" HVAC

BO_ 961 TorqueRequest: 8 HMI
 SG_ ReqTorque : 0|8@1+ (1,-125) [-125|130] "%" HVAC
 SG_ Gear : 8|4@1+ (1,0) [0|8] "" HVAC

BO_ 962 Stepper: 8 HMI
 SG_ Position : 0|8@1+ (1,0) [0|255] "" HVAC
 SG_ Counter : 0|4@1+ (1,0) [0|15] "" HVAC

VAL_ 961 ReqTorque 0 "Off" 125 "Zero" ;
"""


@pytest.fixture
def dbc(tmp_path: Path) -> Path:
    path = tmp_path / "overlapping.dbc"
    path.write_text(DBC)
    return path


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def code(r: DriverResponse) -> str:
    return (r.call_detail or "").split(":")[0]


# -- item 1: overlapping signals ------------------------------------------------------------


def test_limits_hold_on_the_signal_an_overlapping_one_rewrites(
    dbc: Path, channel: str, peer: can.BusABC
) -> None:
    asked: list[SendRequest] = []

    def consent(request: SendRequest) -> bool:
        asked.append(request)
        return True

    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
        require_consent=True,
        consent=consent,
    )
    with CanDriver.from_dbc(dbc, bus=f"virtual:{channel}", policy=policy) as d:
        # raw 60 is CabinSetpoint 30 degC: inside the database's range, outside the limit
        over = call(d, "send_message", message="ClimateCommand", signals={"SetpointByte": 60})
        assert code(over) == "OUT_OF_RANGE" and "between 18 and 26" in (over.call_detail or "")
        # raw 100 is CabinSetpoint 50 degC: outside the database's range too
        wild = call(d, "send_message", message="ClimateCommand", signals={"SetpointByte": 100})
        assert code(wild) == "OUT_OF_RANGE" and "CabinSetpoint" in (wild.call_detail or "")
        dry = call(
            d, "send_message", message="ClimateCommand", signals={"SetpointByte": 60}, dry_run=True
        )
        assert code(dry) == "OUT_OF_RANGE"
        both = call(
            d,
            "send_message",
            message="ClimateCommand",
            signals={"SetpointByte": 44, "CabinSetpoint": 21},
        )
        assert code(both) == "INVALID_VALUE" and "shares bits" in (both.call_detail or "")
        assert asked == []  # nothing was put before the user
        ok = call(d, "send_message", message="ClimateCommand", signals={"SetpointByte": 44})
        assert ok.call_executed, ok.call_detail
    frames = recv_all(peer, timeout_s=0.2)
    assert [bytes(f.data)[0] for f in frames] == [44]
    # the consent callback and the result saw the wire's 22 degC, not the default 16
    assert asked[0].signals["CabinSetpoint"] == 22
    assert asked[0].physical["CabinSetpoint"] == 22
    assert ok.tool_call_result["signals"]["CabinSetpoint"] == 22
    assert any("shares bits" in n for n in ok.tool_call_result["notes"])


def test_the_audit_log_records_the_frame_on_the_wire(
    dbc: Path, channel: str, peer: can.BusABC, tmp_path: Path
) -> None:
    audit = tmp_path / "sends.jsonl"
    policy = SendPolicy(allow_messages=["ClimateCommand"], audit_log=audit)
    with CanDriver.from_dbc(dbc, bus=f"virtual:{channel}", policy=policy) as d:
        assert call(
            d, "send_message", message="ClimateCommand", signals={"SetpointByte": 44}
        ).call_executed
    entry = json.loads(audit.read_text().splitlines()[-1])
    assert entry["outcome"] == "sent"
    assert entry["signals"]["CabinSetpoint"] == 22
    assert entry["frame"]["data"] == bytes(recv_all(peer, timeout_s=0.2)[0].data).hex(" ").upper()


def test_a_periodic_counter_cannot_walk_a_limited_signal_out_of_its_limits(
    dbc: Path, channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(
        allow_messages=["Stepper", "ClimateCommand"],
        signal_limits={"Stepper.Position": (0, 5)},
        max_frames_per_second=150,
    )
    hooks = {"Stepper": counter_and_checksum("Counter")}  # Counter is Position's low nibble
    with CanDriver.from_dbc(dbc, bus=f"virtual:{channel}", policy=policy, hooks=hooks) as d:
        started = call(d, "start_periodic", message="Stepper", signals={}, period_ms=10)
        assert started.call_executed, started.call_detail
        sender = d.networks["can"].sender
        assert wait_until(lambda: sender.running() == [], timeout_s=BUSY_MARGIN_S)
        status = call(d, "bus_status").tool_call_result
        assert "between 0 and 5" in status["periodic_stopped"]["Stepper"]
        stopped = call(d, "stop_periodic", message="Stepper")
        assert code(stopped) == "NOT_RUNNING" and "between 0 and 5" in (stopped.call_detail or "")
        # nor may it change a value the caller gave: six frames went out, so the counter
        # would turn Position 2 into 8
        given = call(d, "start_periodic", message="Stepper", signals={"Position": 2}, period_ms=10)
        assert code(given) == "INVALID_VALUE" and "Position = 8" in (given.call_detail or "")
        # the stopped task's 100 frames/s were given back: another fits the 150 again
        other = call(
            d,
            "start_periodic",
            message="ClimateCommand",
            signals={"CabinSetpoint": 21},
            period_ms=10,
        )
        assert other.call_executed, other.call_detail
        assert call(d, "stop_periodic", message="ClimateCommand").call_executed
    positions = [bytes(f.data)[0] for f in recv_all(peer, timeout_s=0.2) if f.arbitration_id == 962]
    assert positions[:6] == [0, 1, 2, 3, 4, 5]
    assert max(positions) <= 5


def test_a_hook_may_not_write_a_limited_signal(dbc: Path) -> None:
    policy = SendPolicy(allow_messages=["Stepper"], signal_limits={"Stepper.Counter": (0, 3)})
    hooks = {"Stepper": counter_and_checksum("Counter")}
    with pytest.raises(ValueError, match="Counter"):
        CanDriver.from_dbc(dbc, bus=None, policy=policy, hooks=hooks)


# -- item 2: labelled signals with a scale or offset -----------------------------------------


def test_labelled_values_are_judged_by_physical_value(
    dbc: Path, channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(
        allow_messages=["TorqueRequest"],
        signal_limits={"TorqueRequest.ReqTorque": (-20, 20)},
        max_frames_per_second=100,
    )
    with CanDriver.from_dbc(dbc, bus=f"virtual:{channel}", policy=policy) as d:
        # -125 % is raw 0, which is labelled "Off": still -125 %, outside -20..20
        for value in (-125, "Off"):
            r = call(d, "send_message", message="TorqueRequest", signals={"ReqTorque": value})
            assert code(r) == "OUT_OF_RANGE", value
        # "Zero" is raw 125, which is 0 %: inside the limits
        for value in ("Zero", 0, 10):
            r = call(d, "send_message", message="TorqueRequest", signals={"ReqTorque": value})
            assert r.call_executed, (value, r.call_detail)
        zero = call(d, "send_message", message="TorqueRequest", signals={"ReqTorque": "Zero"})
        assert zero.tool_call_result["signals"]["ReqTorque"] == {
            "value": 0,
            "raw": 125,
            "label": "Zero",
        }
    assert [bytes(f.data)[0] for f in recv_all(peer, timeout_s=0.2)] == [125, 125, 135, 125]


def test_wait_for_signal_compares_labelled_values_physically(
    dbc: Path, channel: str, peer: can.BusABC
) -> None:
    with CanDriver.from_dbc(dbc, bus=f"virtual:{channel}") as d:
        peer.send(can.Message(arbitration_id=961, data=bytes(8), is_extended_id=False))  # Off
        monitor = d.networks["can"].monitor
        assert monitor is not None and wait_until(lambda: monitor.frames_total == 1)
        below = call(d, "wait_for_signal", signal="ReqTorque", op="<", value=-100, timeout_ms=50)
        assert below.tool_call_result["met"] is True
        off = call(d, "wait_for_signal", signal="ReqTorque", op="==", value="Off", timeout_ms=50)
        assert off.tool_call_result["met"] is True
        zero = call(d, "wait_for_signal", signal="ReqTorque", op=">=", value="Zero", timeout_ms=50)
        assert zero.tool_call_result["met"] is False


# -- item 3: every frame takes its share of the budget ---------------------------------------


@pytest.mark.slow
def test_restarting_a_periodic_send_takes_budget_for_its_first_frame(
    channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand", "LightStatus"], max_frames_per_second=1)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        results = []
        started = time.monotonic()
        while time.monotonic() - started < 0.5:
            results.append(
                call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=60_000)
            )
            results.append(call(d, "send_message", message="LightStatus", signals={}))
        limited = [r for r in results[1:] if code(r) == "RATE_LIMITED"]
        assert results[0].call_executed and len(limited) == len(results) - 1
    assert len(recv_all(peer, timeout_s=0.2)) == 1  # one frame in 0.5 s at 1 frame/s


# -- item 4: the audit log -------------------------------------------------------------------


@pytest.mark.parametrize("where", ["missing-dir/sends.jsonl", "."])
def test_an_audit_log_that_cannot_be_written_is_refused_at_construction(
    tmp_path: Path, where: str
) -> None:
    with pytest.raises(ValueError, match="audit_log"):
        SendPolicy(allow_messages=["ClimateCommand"], audit_log=tmp_path / where)


def test_an_audit_log_lost_before_a_send_refuses_it_and_sends_nothing(
    tmp_path: Path, channel: str, peer: can.BusABC
) -> None:
    audit = tmp_path / "sends.jsonl"
    policy = SendPolicy(allow_messages=["ClimateCommand"], audit_log=audit)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        audit.unlink(missing_ok=True)
        audit.mkdir()  # the log's path is now a directory: it cannot be opened
        r = call(d, "send_message", message="ClimateCommand", signals={})
        assert code(r) == "AUDIT_FAILED" and r.call_failed
        periodic = call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=100)
        assert code(periodic) == "AUDIT_FAILED"
    assert recv_all(peer, timeout_s=0.2) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_frame_that_went_out_is_reported_sent_when_its_audit_line_fails(
    channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"], audit_log="/dev/full")  # disk full
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        r = call(d, "send_message", message="ClimateCommand", signals={})
    assert r.call_executed, r.call_detail
    assert r.tool_call_result["sent"] is True
    assert "audit log could not be written" in r.tool_call_result["audit_error"]
    assert len(recv_all(peer, timeout_s=0.2)) == 1
