"""Diagnostics that change things (issue 38, item 1): sessions, security access, writes,
routines, resets and DID scans, against the simulated engine ECU, with a second listener on
the bus counting what really went out."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cantools
import pytest

import can
from firmware_sim import demo_security_key
from firmware_sim.clock import SimulatedClock
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.core.aio import CURRENT_JOB, CallJob
from hwbridge.obd import ObdDriver
from hwbridge.policy import SendPolicy
from tests.conftest import wait_until
from tests.sim.conftest import DEMO

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("no_thread_leaks")]

CHANGING = ["uds_0x10", "uds_0x27", "uds_0x2E", "uds_0x31", "uds_0x11"]
ENGINE_REQUESTS = (0x7E0, 0x7DF)


def allowing(**extra: Any) -> SendPolicy:
    return SendPolicy(allow_services=CHANGING, max_commands_per_second=100, **extra)


def demo_key(seed: bytes, level: int, ecu: str) -> bytes:
    """The user's key function: the simulator's demo algorithm, in hwbridge's signature."""
    return demo_security_key(seed, level)


class Bench:
    """A parked simulated car on a simulated clock, and a listener on its bus."""

    def __init__(self) -> None:
        self.channel = f"uds38-{uuid.uuid4().hex[:10]}"
        self.clock = SimulatedClock()
        self.car = VirtualVehicle(DEMO, channel=self.channel, drive=False, clock=self.clock)
        self.listener = can.Bus(interface="virtual", channel=self.channel)
        self.frames: list[can.Message] = []
        self.drivers: list[ObdDriver] = []

    def open(self, policy: SendPolicy | None = None, **options: Any) -> ObdDriver:
        driver = ObdDriver.from_can(bus=f"virtual:{self.channel}", policy=policy, **options)
        self.drivers.append(driver)
        return driver

    def requests(self) -> list[bytes]:
        """The start of every diagnostic request that reached the bus so far (single frames
        whole, first frames' first bytes), from the listener."""
        while (msg := self.listener.recv(0)) is not None:
            self.frames.append(msg)
        out = []
        for msg in self.frames:
            if msg.arbitration_id not in ENGINE_REQUESTS or not msg.data:
                continue
            kind = msg.data[0] >> 4
            if kind == 0:
                out.append(bytes(msg.data[1 : 1 + (msg.data[0] & 0x0F)]))
            elif kind == 1:
                out.append(bytes(msg.data[2:8]))
        return out

    def engine_speed(self) -> float:
        """The mean EngineSpeed of the EngineData frames the listener got since last asked."""
        db = cantools.database.load_file(str(DEMO))
        assert isinstance(db, cantools.database.can.Database)
        message = db.get_message_by_name("EngineData")
        speeds = []
        while (msg := self.listener.recv(0)) is not None:
            self.frames.append(msg)
            if msg.arbitration_id == message.frame_id:
                decoded = message.decode(bytes(msg.data))
                assert isinstance(decoded, dict)
                speed = decoded["EngineSpeed"]
                assert isinstance(speed, int | float)
                speeds.append(float(speed))
        return sum(speeds[-50:]) / len(speeds[-50:])

    def close(self) -> None:
        for driver in self.drivers:
            driver.close()
        self.listener.shutdown()
        self.car.stop()


@pytest.fixture
def bench() -> Iterator[Bench]:
    made = Bench()
    made.car.start()
    try:
        yield made
    finally:
        made.close()


def run(driver: ObdDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def changing(request: bytes) -> bool:
    """A request of the services that must not reach the bus under the default policy."""
    sid = request[0]
    if sid == 0x10:
        return len(request) < 2 or request[1] & 0x7F != 0x01
    return sid in (0x27, 0x2E, 0x31, 0x11)


def test_default_policy_lets_none_of_them_reach_the_bus(bench: Bench) -> None:
    driver = bench.open(security_key=demo_key)
    offered = {t.name for t in driver.list_tools()}
    assert offered.isdisjoint(
        {"uds_session", "uds_unlock", "uds_write_did", "uds_routine", "uds_reset"}
    )
    assert "uds_scan_dids" in offered  # it only reads
    calls: list[tuple[str, dict[str, Any]]] = [
        ("uds_session", {"ecu": "engine", "session": "extended"}),
        ("uds_session", {"ecu": "0x7E0", "session": "3"}),
        ("uds_session", {"ecu": "7E8", "session": "0x02"}),
        ("uds_unlock", {"ecu": "engine", "level": 1}),
        ("uds_write_did", {"ecu": "engine", "did": "0101", "value": "03B6"}),
        ("uds_routine", {"ecu": "engine", "routine": "0203", "action": "start"}),
        ("uds_reset", {"ecu": "engine", "kind": "hard"}),
    ]
    raw = ["10 03", "1003", "10 83", "10 02", "10 43", "27 01", "27 02 00 00 00 00",
           "2E 01 01 03 B6", "2e010103b6", "31 01 02 03", "31 81 02 03", "11 01", "11 81",
           " 11\t03 ", "2E F1 90" + " 41" * 20]  # fmt: skip
    calls += [("uds_request", {"ecu": "engine", "request": r}) for r in raw]
    for tool, arguments in calls:
        answer = run(driver, tool, **arguments)
        assert answer.call_failed, (tool, arguments)
        detail = answer.call_detail or ""
        assert detail.startswith(("SEND_NOT_ALLOWED", "INVALID_VALUE")), detail
    run(driver, "uds_read_did", ecu="engine", did="F186")  # the bus works: reads go out
    sent = bench.requests()
    assert b"\x22\xf1\x86" in sent
    assert [r.hex() for r in sent if changing(r)] == []
    assert run(driver, "uds_read_did", ecu="engine", did="0101").tool_call_result["raw"] == "03 20"


def test_unlock_write_and_the_engine_follows(
    bench: Bench, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seeds: list[bytes] = []
    keys: list[bytes] = []

    def key(seed: bytes, level: int, ecu: str) -> bytes:
        seeds.append(seed)
        keys.append(demo_key(seed, level, ecu))
        assert ecu == "engine" and level == 1
        return keys[-1]

    audit = tmp_path / "audit.jsonl"
    driver = bench.open(allowing(audit_log=audit), security_key=key, tester_present_s=0.05)
    bench.clock.advance(1.0)
    assert 770 < bench.engine_speed() < 830  # idling at 800 rpm
    results = [run(driver, "uds_session", ecu="engine", session="extended").tool_call_result]
    assert results[0]["state"]["session"] == "extended"
    locked = run(driver, "uds_write_did", ecu="engine", did="0101", value="03B6")
    assert locked.call_detail is not None and "securityAccessDenied (0x33)" in locked.call_detail
    unlocked = run(driver, "uds_unlock", ecu="engine", level=1)
    assert unlocked.call_executed, unlocked.call_detail
    results.append(unlocked.tool_call_result)
    assert results[-1]["unlocked"] is True
    assert results[-1]["state"]["security"] == "unlocked (level 1)"
    written = run(driver, "uds_write_did", ecu="engine", did="0101", value="03B6")
    results.append(written.tool_call_result)
    assert written.tool_call_result["written"] is True
    for _ in range(3):  # 3 s of the car's time, the session kept by tester present
        seen = len([r for r in bench.requests() if r == b"\x3e\x80"])
        assert wait_until(lambda n=seen: bench.requests().count(b"\x3e\x80") > n)  # type: ignore[misc]
        bench.clock.advance(1.0)
    assert 920 < bench.engine_speed() < 980  # the engine follows its new idle target
    assert run(driver, "uds_read_did", ecu="engine", did="0101").tool_call_result["raw"] == "03 B6"

    # the seed and the key are nowhere the model, a log or the audit can see
    assert len(seeds) == 1
    secrets = [s.hex() for s in seeds + keys] + [s.hex(" ").upper() for s in seeds + keys]
    shown = json.dumps(results) + driver.get_driver_system_message()
    shown += json.dumps([t.model_dump() for t in driver.list_tools()], default=str)
    ours = [r for r in caplog.records if r.name != "isotp"]  # "isotp": the simulator's stacks
    shown += "\n".join(r.getMessage() for r in ours)
    lines = audit.read_text()
    assert not any(secret.lower() in (shown + lines).lower() for secret in secrets)
    entries = [json.loads(line) for line in lines.splitlines()]
    key_line = next(e for e in entries if e.get("data", "").startswith("27 02"))
    assert key_line["data"] == "27 02" and key_line["secret"] == "key sent"
    assert [e["service"] for e in entries if e["outcome"] == "sent"] == [
        "uds_0x10", "uds_0x2E", "uds_0x27", "uds_0x27", "uds_0x2E"
    ]  # fmt: skip


def test_a_refused_key_is_named_and_never_retried(bench: Bench) -> None:
    def wrong(seed: bytes, level: int, ecu: str) -> bytes:
        return bytes(b ^ 0xFF for b in seed)

    driver = bench.open(allowing(), security_key=wrong)
    run(driver, "uds_session", ecu="engine", session="extended")
    names = []
    for _ in range(4):
        answer = run(driver, "uds_unlock", ecu="engine", level=1)
        assert answer.call_failed and answer.call_detail is not None
        names.append(answer.call_detail)
    assert "invalidKey (0x35)" in names[0] and "invalidKey (0x35)" in names[1]
    assert "exceedNumberOfAttempts (0x36)" in names[2]
    assert "requiredTimeDelayNotExpired (0x37)" in names[3] and "No key was sent" in names[3]
    security = [r[:2].hex() for r in bench.requests() if r[0] == 0x27]
    assert security == ["2701", "2702"] * 3 + ["2701"]  # one seed, one key a call; no retry


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda seed, level, ecu: (_ for _ in ()).throw(ValueError(seed.hex())),
                     id="raises"),
        pytest.param(lambda seed, level, ecu: seed[:3], id="too-short"),
        pytest.param(lambda seed, level, ecu: seed + b"\x00", id="too-long"),
        pytest.param(lambda seed, level, ecu: seed.hex(), id="not-bytes"),
    ],
)  # fmt: skip
def test_a_key_function_that_fails_sends_nothing_after_the_seed(
    bench: Bench, broken: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    driver = bench.open(allowing(), security_key=broken)
    run(driver, "uds_session", ecu="engine", session="extended")
    answer = run(driver, "uds_unlock", ecu="engine", level=1)
    assert answer.call_failed and answer.call_detail is not None
    assert answer.call_detail.startswith("KEY_FUNCTION_FAILED")
    assert "no key was sent" in answer.call_detail
    sent = bench.requests()
    seed_at = sent.index(b"\x27\x01")
    assert [r.hex() for r in sent[seed_at + 1 :] if r[:1] != b"\x3e"] == []
    seed = next(m for m in bench.frames if m.arbitration_id == 0x7E8 and m.data[1] == 0x67)
    secret = bytes(seed.data[3:7]).hex()
    ours = [r for r in caplog.records if r.name != "isotp"]
    assert secret not in answer.call_detail.lower()
    assert not any(secret in r.getMessage().lower() for r in ours)


def test_without_a_key_function_unlock_is_not_offered(bench: Bench) -> None:
    driver = bench.open(allowing())
    assert "uds_unlock" not in {t.name for t in driver.list_tools()}
    assert "uds_write_did" in {t.name for t in driver.list_tools()}
    answer = run(driver, "uds_unlock", ecu="engine", level=1)
    assert answer.call_detail is not None and answer.call_detail.startswith("NO_SECURITY_KEY")
    assert "no security key function" in driver.get_driver_system_message().lower()
    raw = run(driver, "uds_request", ecu="engine", request="27 01")
    assert raw.call_detail is not None and "uds_unlock" in raw.call_detail
    assert [r for r in bench.requests() if r[0] == 0x27] == []


def test_the_session_is_kept_and_closing_returns_to_default(bench: Bench) -> None:
    driver = bench.open(allowing(), tester_present_s=0.05)
    run(driver, "uds_session", ecu="engine", session="extended")
    for _ in range(4):  # 8 s of the car's time: S3 is 5 s
        seen = bench.requests().count(b"\x3e\x80")
        assert wait_until(lambda n=seen: bench.requests().count(b"\x3e\x80") > n)  # type: ignore[misc]
        bench.clock.advance(2.0)
    assert run(driver, "uds_read_did", ecu="engine", did="F186").tool_call_result["value"] == (
        "extended"
    )
    driver.close()
    assert bench.requests()[-1] == b"\x10\x01"
    other = bench.open()
    assert run(other, "uds_read_did", ecu="engine", did="F186").tool_call_result["value"] == (
        "default"
    )


def test_a_dropped_session_is_reported_not_assumed(bench: Bench) -> None:
    driver = bench.open(allowing(), security_key=demo_key, tester_present_s=4.0)
    run(driver, "uds_session", ecu="engine", session="extended")
    bench.clock.advance(6.0)  # no tester present in time: S3 ends the session
    answer = run(driver, "uds_write_did", ecu="engine", did="0101", value="03B6")
    assert answer.call_detail is not None
    assert "serviceNotSupportedInActiveSession (0x7F)" in answer.call_detail
    assert "the extended session ended" in answer.call_detail
    assert "default session (F186)" in answer.call_detail
    # a reset ends it too, and says so
    run(driver, "uds_session", ecu="engine", session="extended")
    reset = run(driver, "uds_reset", ecu="engine", kind="hard").tool_call_result
    assert reset["state"]["session"] == "default"
    assert "reset (hard)" in reset["state"]["note"]
    bench.clock.advance(0.3)  # the ECU reboots
    assert run(driver, "uds_read_did", ecu="engine", did="F186").tool_call_result["value"] == (
        "default"
    )


def test_routine_start_and_result(bench: Bench) -> None:
    driver = bench.open(allowing())
    started = run(driver, "uds_routine", ecu="engine", routine="0203", action="start")
    assert started.tool_call_result["status_record"] == "00"
    early = run(driver, "uds_routine", ecu="engine", routine="0x0203", action="result")
    assert early.tool_call_result["status_record"] == "01"  # in progress
    bench.clock.advance(2.0)
    done = run(driver, "uds_routine", ecu="engine", routine="0203", action="result")
    assert done.tool_call_result["status_record"] == "00"  # passed
    stop = run(driver, "uds_routine", ecu="engine", routine="0203", action="stop")
    assert stop.call_detail is not None and "requestSequenceError (0x24)" in stop.call_detail
    reset = run(driver, "uds_reset", ecu="engine", kind="soft")  # default session: refused
    assert reset.call_detail is not None and "(0x7F)" in reset.call_detail


def test_dry_run_and_consent_send_nothing(bench: Bench, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    dry = bench.open(allowing(dry_run=True, audit_log=audit), security_key=demo_key)
    result = run(dry, "uds_write_did", ecu="engine", did="0101", value="03 B6")
    assert result.tool_call_result == {"sent": False, "dry_run": True, "request": "2E 01 01 03 B6"}
    assert run(dry, "uds_unlock", ecu="engine", level=1).tool_call_result["dry_run"] is True
    asked: list[Any] = []
    denied = bench.open(allowing(require_consent=True, consent=asked.append))
    refused = run(denied, "uds_session", ecu="engine", session="extended")
    assert refused.call_detail is not None and refused.call_detail.startswith("CONSENT_DENIED")
    assert [a.describe()["data"] for a in asked] == ["10 03"]
    assert [r.hex() for r in bench.requests() if changing(r)] == []
    assert all(json.loads(line)["dry_run"] for line in audit.read_text().splitlines())


def test_scan_finds_the_identification_dids(bench: Bench) -> None:
    driver = bench.open()
    scan = run(driver, "uds_scan_dids", ecu="engine", start="F180", end="F19F").tool_call_result
    found = {d["did"]: d for d in scan["answered"]}
    assert {"F180", "F187", "F18C", "F190", "F19E"} <= set(found)
    assert found["F190"]["length"] == 17 and found["F190"]["name"] == "VIN"
    assert scan["complete"] and scan["asked"] == 32
    assert scan["not_supported"] == 32 - len(found)
    reads = [r for r in bench.requests() if r[0] == 0x22]
    assert len(reads) == 32 == len(set(reads))  # one request per DID
    too_many = run(driver, "uds_scan_dids", ecu="engine", start="F100", end="F200")
    assert too_many.call_detail is not None and "at most 256 DIDs" in too_many.call_detail
    assert len([r for r in bench.requests() if r[0] == 0x22]) == 32


def test_a_cancelled_scan_stops_within_the_frame_budget(bench: Bench) -> None:
    driver = bench.open(SendPolicy(max_frames_per_second=10))
    job = CallJob()
    job.begin(mutating=False)
    token = CURRENT_JOB.set(job)
    try:
        threading.Timer(0.6, job.cancel).start()
        started = time.monotonic()
        scan = run(driver, "uds_scan_dids", ecu="engine", start="0100", end="01FF")
        took = time.monotonic() - started
    finally:
        CURRENT_JOB.reset(token)
    result = scan.tool_call_result
    assert result["complete"] is False and "cancelled" in result["stopped"]
    assert took < 2.0
    # the policy's 10 frames a second: a burst of 10, then 10 a second; never 256 at once
    assert 10 <= result["asked"] <= 10 + 10 * took


def test_the_same_tools_over_an_elm327(bench: Bench) -> None:
    from tests.obd.conftest import patient_elm

    with patient_elm(bench.channel) as elm:
        driver = ObdDriver.from_elm327(elm.port_name, allowing(), security_key=demo_key)
        with driver:
            run(driver, "uds_session", ecu="engine", session="extended")
            unlocked = run(driver, "uds_unlock", ecu="engine", level=1)
            assert unlocked.call_executed and unlocked.tool_call_result["unlocked"] is True
            written = run(driver, "uds_write_did", ecu="engine", did="0101", value="0384")
            assert written.tool_call_result["written"] is True
            read = run(driver, "uds_read_did", ecu="engine", did="0101").tool_call_result
            assert read["raw"] == "03 84"
        assert bench.requests()[-1] == b"\x10\x01"  # closing returned it to the default session
