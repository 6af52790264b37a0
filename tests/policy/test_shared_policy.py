"""One SendPolicy governs CAN frames, serial commands and diagnostic services: each has its
own rules, and consent, rate limits, dry runs and the audit log behave the same for all."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from hwbridge import SendPolicy, ToolError
from hwbridge.policy import CommandRequest, SendRequest, ServiceRequest

FRAME = SendRequest("raw", 0x123, b"\x01", tool="send_frame")
SET_VOLTS = CommandRequest("VOLT 5", command="set_voltage", arguments={"volts": 5})
CLEAR = ServiceRequest("obd_clear_dtcs", b"\x04")


def refusal(policy: SendPolicy, request: Any) -> str | None:
    try:
        policy.check(request)
    except ToolError as exc:
        return exc.code
    return None


def test_the_default_refuses_every_kind_of_action_and_lets_queries_through() -> None:
    policy = SendPolicy()
    assert refusal(policy, FRAME) == "SEND_NOT_ALLOWED"
    assert refusal(policy, SET_VOLTS) == "SEND_NOT_ALLOWED"
    assert refusal(policy, CLEAR) == "SEND_NOT_ALLOWED"
    assert refusal(policy, CommandRequest("MEAS:VOLT?")) == "SEND_NOT_ALLOWED"  # raw line
    query = CommandRequest("MEAS:VOLT?", command="measure_voltage", changes_state=False)
    assert refusal(policy, query) is None
    assert not policy.allows_commands and not policy.allows_sending


def test_commands_by_name_or_glob_within_their_limits() -> None:
    policy = SendPolicy(
        allow_commands=["set_voltage", "output*"], command_limits={"set_voltage.volts": (0, 12)}
    )
    assert refusal(policy, SET_VOLTS) is None
    too_high = CommandRequest("VOLT 30", command="set_voltage", arguments={"volts": 30})
    assert refusal(policy, too_high) == "OUT_OF_RANGE"
    assert refusal(policy, CommandRequest("OUTP ON", command="output_on")) is None
    assert refusal(policy, CommandRequest("CURR 3", command="set_current")) == "SEND_NOT_ALLOWED"
    with pytest.raises(ValueError, match="command_limits"):
        SendPolicy(command_limits={"volts": (0, 12)})


@pytest.mark.parametrize(
    "line", ["MEAS:VOLT?\nOUTP ON", "VOLT 5\rOUTP ON", "VOLT 5\x00", "VOLT 5;\x1bOUTP ON"]
)
def test_a_line_that_would_carry_a_second_command_is_refused_even_for_a_query(line: str) -> None:
    policy = SendPolicy(allow_commands=["*"], allow_raw_lines=[".*"])
    for request in (
        CommandRequest(line, command="measure_voltage", changes_state=False),
        CommandRequest(line, command="set_voltage"),
        CommandRequest(line),
    ):
        assert refusal(policy, request) == "SEND_NOT_ALLOWED", request


def test_raw_lines_need_an_allow_pattern_and_no_deny_pattern() -> None:
    policy = SendPolicy(allow_raw_lines=[r"^MEAS:", r"^\*IDN\?$"], deny_raw_lines=[r"CURR"])
    assert refusal(policy, CommandRequest("MEAS:VOLT?")) is None
    assert refusal(policy, CommandRequest("*IDN?")) is None
    assert refusal(policy, CommandRequest("MEAS:CURR?")) == "SEND_NOT_ALLOWED"
    assert refusal(policy, CommandRequest("OUTP ON")) == "SEND_NOT_ALLOWED"
    with pytest.raises(ValueError, match="allow_raw_lines"):
        SendPolicy(allow_raw_lines=["(unclosed"])


def test_services_are_refused_unless_named() -> None:
    policy = SendPolicy(allow_services=["uds_0x2E"])
    assert refusal(policy, ServiceRequest("uds_0x2E", b"\x2e\xf1\x90")) is None
    assert refusal(policy, CLEAR) == "SEND_NOT_ALLOWED"
    assert SendPolicy(allow_services=["obd_*"]).allows_service("obd_clear_dtcs")


@pytest.mark.parametrize("request_", [FRAME, SET_VOLTS, CLEAR], ids=["frame", "command", "service"])
@pytest.mark.parametrize("answer", [False, None, "yes", 1, "raise"])
def test_consent_is_the_same_for_every_kind(request_: Any, answer: object) -> None:
    asked: list[Any] = []

    def consent(request: Any) -> object:
        asked.append(request)
        if answer == "raise":
            raise RuntimeError("no terminal")
        return answer

    policy = SendPolicy(
        allow_raw_frames=True,
        allow_commands=["set_voltage"],
        allow_services=["obd_clear_dtcs"],
        require_consent=True,
        consent=consent,
    )
    assert refusal(policy, request_) == "CONSENT_DENIED"
    assert asked == [request_]
    approving = SendPolicy(
        allow_raw_frames=True,
        allow_commands=["set_voltage"],
        allow_services=["obd_clear_dtcs"],
        require_consent=True,
        consent=lambda request: True,
    )
    assert refusal(approving, request_) is None


def test_commands_and_services_share_one_rate_that_holds_under_a_flood() -> None:
    policy = SendPolicy(
        allow_commands=["set_voltage"], allow_services=["obd_clear_dtcs"], max_commands_per_second=4
    )
    passed: list[bool] = []
    lock = threading.Lock()

    def flood(request: Any) -> None:
        for _ in range(25):
            ok = refusal(policy, request) is None
            with lock:
                passed.append(ok)

    threads = [threading.Thread(target=flood, args=(r,)) for r in (SET_VOLTS, CLEAR) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(passed) == 200
    assert 4 <= sum(passed) <= 6  # the one-second burst and a little refill


def test_every_action_and_refusal_is_audited_in_one_format(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_commands=["set_voltage"], audit_log=log)
    policy.check(SET_VOLTS)
    policy.audit(SET_VOLTS, outcome="sent")
    assert refusal(policy, CLEAR) == "SEND_NOT_ALLOWED"
    assert refusal(policy, FRAME) == "SEND_NOT_ALLOWED"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["kind"], e["outcome"], e.get("code")) for e in entries] == [
        ("command", "sent", None),
        ("service", "refused", "SEND_NOT_ALLOWED"),
        ("raw", "refused", "SEND_NOT_ALLOWED"),
    ]
    assert entries[0]["line"] == "VOLT 5" and entries[0]["arguments"] == {"volts": 5}
    with pytest.raises(ValueError, match="cannot be written"):
        SendPolicy(audit_log=tmp_path / "missing" / "audit.jsonl")


def test_describe_shows_every_part() -> None:
    described = SendPolicy(
        allow_messages=["ClimateCommand"], allow_commands=["set_*"], allow_services=["uds_0x2E"]
    ).describe()
    assert described["allow_messages"] == ["ClimateCommand"]
    assert described["allow_commands"] == ["set_*"]
    assert described["allow_services"] == ["uds_0x2E"]
    assert described["read_only"] is False
