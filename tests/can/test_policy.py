"""SendPolicy refuses by default, enforces limits and rates, and records what it let through."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hwbridge import ToolError
from hwbridge.can.policy import SendPolicy, SendRequest


def message(name: str = "ClimateCommand", **signals: object) -> SendRequest:
    return SendRequest("message", 0x350, b"\x01\x02", message=name, signals=signals)


def code_of(policy: SendPolicy, request: SendRequest) -> str | None:
    try:
        policy.check(request)
    except ToolError as exc:
        return exc.code
    return None


def test_default_policy_is_read_only() -> None:
    policy = SendPolicy()
    assert not policy.allows_sending
    assert code_of(policy, message()) == "SEND_NOT_ALLOWED"
    assert code_of(policy, SendRequest("raw", 0x100, b"\x00")) == "SEND_NOT_ALLOWED"
    assert policy.describe()["read_only"] is True


def test_allow_list_with_globs_and_raw_frames() -> None:
    policy = SendPolicy(allow_messages=["Climate*"], max_frames_per_second=1000)
    assert code_of(policy, message("ClimateCommand")) is None
    assert code_of(policy, message("BrakeCommand")) == "SEND_NOT_ALLOWED"
    assert code_of(policy, SendRequest("raw", 0x100, b"")) == "SEND_NOT_ALLOWED"
    raw = SendPolicy(allow_raw_frames=True, allow_ids=[0x100], max_frames_per_second=1000)
    assert code_of(raw, SendRequest("raw", 0x100, b"")) is None
    assert code_of(raw, SendRequest("raw", 0x101, b"")) == "SEND_NOT_ALLOWED"


def test_signal_limits_narrow_the_range() -> None:
    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
        max_frames_per_second=1000,
    )
    assert code_of(policy, message(CabinSetpoint=22)) is None
    assert code_of(policy, message(CabinSetpoint=27.5)) == "OUT_OF_RANGE"
    with pytest.raises(ToolError, match="between 18 and 26"):
        policy.check(message(CabinSetpoint=10))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"allow_messages": "ClimateCommand"},
        {"signal_limits": {"CabinSetpoint": (1, 2)}},
        {"signal_limits": {"A.B": (3, 2)}},
        {"max_frames_per_second": 0},
    ],
)
def test_bad_configuration_is_refused(kwargs: dict) -> None:
    with pytest.raises((TypeError, ValueError)):
        SendPolicy(**kwargs)


def test_rate_limit_holds_under_a_threaded_flood() -> None:
    start = time.monotonic()
    policy = SendPolicy(allow_messages=["*"], max_frames_per_second=50)
    allowed = 0
    lock = threading.Lock()
    stop = start + 0.6

    def flood() -> None:
        nonlocal allowed
        while time.monotonic() < stop:
            if code_of(policy, message()) is None:
                with lock:
                    allowed += 1

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    # a one-second burst plus the rate over the elapsed time, never more
    assert allowed <= 50 + 50 * elapsed + 1
    assert allowed >= 50  # the burst itself went through
    # the bucket is empty: of a few immediate sends, at most one finds a refilled token
    errors = []
    for _ in range(3):
        try:
            policy.check(message())
        except ToolError as exc:
            errors.append(exc)
    assert len(errors) >= 2
    assert all(e.code == "RATE_LIMITED" and e.retryable for e in errors)


def test_periodic_sends_share_the_rate_budget() -> None:
    policy = SendPolicy(allow_messages=["*"], max_frames_per_second=20)
    assert code_of(policy, SendRequest("periodic", 1, b"", message="A", period_ms=100)) is None
    assert code_of(policy, SendRequest("periodic", 2, b"", message="B", period_ms=100)) is None
    # 10 + 10 frames/s used up: a third is refused, and says which period would fit
    with pytest.raises(ToolError, match="exceeds") as err:
        policy.check(SendRequest("periodic", 3, b"", message="C", period_ms=100))
    assert err.value.code == "RATE_LIMITED"
    policy.release_periodic("A")
    assert code_of(policy, SendRequest("periodic", 3, b"", message="C", period_ms=100)) is None
    # restarting the same message replaces its own budget
    assert code_of(policy, SendRequest("periodic", 2, b"", message="B", period_ms=100)) is None


def test_consent_denied_is_a_failure() -> None:
    asked: list[SendRequest] = []

    def deny(request: SendRequest) -> bool:
        asked.append(request)
        return False

    no = SendPolicy(allow_messages=["*"], require_consent=True, consent=deny)
    assert code_of(no, message()) == "CONSENT_DENIED"
    assert asked and asked[0].message == "ClimateCommand"
    nobody = SendPolicy(allow_messages=["*"], require_consent=True)
    assert code_of(nobody, message()) == "CONSENT_DENIED"
    yes = SendPolicy(allow_messages=["*"], require_consent=True, consent=lambda r: True)
    assert code_of(yes, message()) is None


def test_audit_log_records_refusals_as_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_messages=["ClimateCommand"], audit_log=log)
    policy.check(message(CabinSetpoint=21))
    policy.audit(message(CabinSetpoint=21), outcome="sent")
    with pytest.raises(ToolError):
        policy.check(message("Brake"))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["outcome"] for e in entries] == ["sent", "refused"]
    assert entries[0]["frame"] == {"id": "0x350", "extended": False, "data": "01 02"}
    assert entries[0]["signals"] == {"CabinSetpoint": 21}
    assert entries[1]["code"] == "SEND_NOT_ALLOWED"
