"""Holes an adversarial review found after issue 7's first fixes, each closed at its depth:
the rate budget is spent after consent, a pending consent holds nothing up, the user approves
the bytes that go out, raw frames of database messages meet their limits, unknown names and
PGN-matched ids cost bounded work and memory, and error codes say what happened."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge import CanDriver, SendPolicy, counter_and_checksum
from tests.can.conftest import recv_all
from tests.can.test_database_catalog import J1939_PDU1_PDU2
from tests.conftest import BUSY_MARGIN_S
from tests.shared_data import DATA, needs_shared

DEMO = "dbc/demo_vehicle.dbc"
CONSENT_TIMEOUT_S = 0.2
USER_AWAY_S = 20.0
"""How long a consent below takes to be answered when the user is away."""
pytestmark = pytest.mark.timeout(60)


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def code(r: Any) -> str:
    return (r.call_detail or "").split(":")[0]


def test_a_slow_consent_cannot_let_two_frames_out_within_one_token(
    channel: str, peer: can.BusABC
) -> None:
    def consent(request: Any) -> bool:
        if request.signals.get("CabinSetpoint") == 20:
            time.sleep(1.2)  # the user takes a while to click "yes"
        return True

    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        max_frames_per_second=1,
        require_consent=True,
        consent=consent,
    )
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        slow = threading.Thread(
            target=call, args=(d, "send_message"), kwargs={"message": "ClimateCommand",
                                                          "signals": {"CabinSetpoint": 20}},
        )  # fmt: skip
        slow.start()
        time.sleep(1.0)  # the scenario: a second send while the slow consent is still open
        call(d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 22})
        slow.join()
    stamps = [f.timestamp for f in recv_all(peer, timeout_s=0.2)]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(stamps)), stamps


def test_a_pending_consent_does_not_hold_up_stop_periodic(channel: str) -> None:
    slow = threading.Event()
    asking = threading.Event()
    answered = threading.Event()

    def consent(request: Any) -> bool:
        if slow.is_set():
            asking.set()
            answered.wait(USER_AWAY_S)  # the user answers once the test has seen the stop
        return True

    policy = SendPolicy(
        allow_messages=["*"], max_frames_per_second=50, require_consent=True, consent=consent
    )
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        started = call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=100)
        assert started.call_executed, started.retry_prompt
        slow.set()
        other = threading.Thread(
            target=call, args=(d, "start_periodic"),
            kwargs={"message": "DoorStatus", "signals": {}, "period_ms": 1000},
        )  # fmt: skip
        other.start()
        assert asking.wait(BUSY_MARGIN_S)  # the other start_periodic waits for its consent
        begun = time.monotonic()
        assert call(d, "stop_periodic", message="ClimateCommand").call_executed
        assert time.monotonic() - begun < USER_AWAY_S / 2  # held up, it would wait for the user
        answered.set()
        other.join()


def test_consent_that_times_out_refuses() -> None:
    back = threading.Event()

    def walked_away(request: Any) -> bool:
        back.wait(USER_AWAY_S)  # far longer than consent_timeout_s and a busy machine's margin
        return True

    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        require_consent=True,
        consent=walked_away,
        consent_timeout_s=CONSENT_TIMEOUT_S,
    )
    with CanDriver.from_dbc(DEMO, bus="virtual:consent-timeout", policy=policy) as d:
        begun = time.monotonic()
        r = call(d, "send_message", message="ClimateCommand", signals={})
        took = time.monotonic() - begun
        back.set()
        assert code(r) == "CONSENT_DENIED" and took < CONSENT_TIMEOUT_S + BUSY_MARGIN_S


def test_the_user_approves_the_bytes_that_go_out(channel: str, peer: can.BusABC) -> None:
    approved: list[bytes] = []

    def consent(request: Any) -> bool:
        approved.append(request.data)
        if request.signals.get("CabinSetpoint") == 20:
            time.sleep(0.5)  # meanwhile another send moves the rolling counter
        return True

    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        max_frames_per_second=100,
        require_consent=True,
        consent=consent,
    )
    hooks = {"ClimateCommand": counter_and_checksum("RollingCounter", "Checksum")}
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy, hooks=hooks) as d:
        results: dict[str, Any] = {}
        slow = threading.Thread(
            target=lambda: results.setdefault(
                "slow", call(d, "send_message", message="ClimateCommand",
                             signals={"CabinSetpoint": 20}),
            )
        )  # fmt: skip
        slow.start()
        time.sleep(0.1)  # the scenario: a second send while the first one's consent is open
        call(d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 22})
        slow.join()
    assert code(results["slow"]) == "CONSENT_STALE"
    on_wire = [bytes(f.data) for f in recv_all(peer, timeout_s=0.2)]
    assert on_wire and all(frame in approved for frame in on_wire)


def test_a_raw_frame_of_a_database_message_meets_its_limits(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(
        allow_raw_frames=True,
        allow_ids=[0x3C0],
        signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
    )
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        r = call(d, "send_frame", id="0x3C0", data="FF FF FF FF FF FF FF FF")
        assert code(r) == "OUT_OF_RANGE"
        assert "CabinSetpoint" in (r.retry_prompt or "")
    assert recv_all(peer, timeout_s=0.2) == []


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(DEMO, id="demo"),
        pytest.param(DATA / "opendbc" / "ford_lincoln_base_pt.dbc", id="ford", marks=needs_shared),
    ],
)
def test_many_unknown_names_cost_bounded_work(path: str | Path) -> None:
    names = [f"NoSuchSignal{i}" + "x" * 150 for i in range(50)]
    with CanDriver.from_dbc(path, bus="virtual:unknown-names") as d:
        begun = time.monotonic()
        r = call(d, "read_signals", signals=names, timeout_ms=0)
        assert time.monotonic() - begun < BUSY_MARGIN_S  # bounded work: milliseconds
    assert r.call_failed
    assert r.call_detail.startswith("UNKNOWN_SIGNAL: no signal named")
    assert "UNKNOWN_SIGNAL: UNKNOWN_SIGNAL" not in r.call_detail


@pytest.mark.parametrize(
    ("path", "name"),
    [
        pytest.param(DEMO, "RollingCounter", id="demo"),
        pytest.param(
            DATA / "css" / "OBD-v4.4.dbc",
            "S22F4PID26_OxySensor3_Volt",
            id="obd",
            marks=needs_shared,
        ),
    ],
)
def test_an_ambiguous_name_keeps_its_own_code(path: str | Path, name: str) -> None:
    with CanDriver.from_dbc(path, bus="virtual:ambiguous") as d:
        r = call(d, "read_signals", signals=[name], timeout_ms=0)
    assert code(r) == "AMBIGUOUS_SIGNAL"


def test_pgn_matched_ids_are_bounded_like_unknown_ones(tmp_path: Path) -> None:
    j1939 = tmp_path / "j1939.dbc"  # Message1 is PDU1: PF 0x34, PS a destination address
    j1939.write_text(J1939_PDU1_PDU2)
    with CanDriver.from_dbc(j1939, bus="virtual:pgn-flood", history_s=1.0) as d:
        monitor = next(iter(d.networks.values())).monitor
        assert monitor is not None
        for i in range(20_000):  # PDU1: destination, source and priority vary
            aid = ((i >> 16) & 7) << 26 | 0x15340000 | (i & 0xFFFF)
            monitor.on_message(can.Message(arbitration_id=aid, is_extended_id=True, data=bytes(8)))
        status = call(d, "bus_status").tool_call_result
    tracked = len(monitor.frame_ids())
    assert tracked <= 1 + 256 + monitor.max_unknown_ids  # its own id, 256 variants, unknown
    assert status["unknown_ids_dropped"] > 0
