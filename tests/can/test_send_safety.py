"""The send policy holds at its edges: labels, defaults, concurrency, budgets, consent, ids.

Each test puts a driver on a private virtual bus and counts what really reaches it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import can
from hwbridge import CanDriver, DriverResponse, SendPolicy
from tests.can.conftest import recv_all
from tests.can.test_driver import DEMO


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def code(r: DriverResponse) -> str:
    return (r.call_detail or "").split(":")[0]


def test_limits_hold_for_labels_numbers_with_labels_and_defaults(
    channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        signal_limits={"ClimateCommand.FanLevel": (0, 3)},
        max_frames_per_second=1000,
    )
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        attempts = [
            call(d, "send_message", message="ClimateCommand", signals={"FanLevel": 8}),
            call(d, "send_message", message="ClimateCommand", signals={"FanLevel": "Auto"}),
            call(d, "send_ClimateCommand", FanLevel="Auto"),
            call(
                d,
                "start_periodic",
                message="ClimateCommand",
                signals={"FanLevel": "Auto"},
                period_ms=100,
            ),
            call(d, "send_message", message="ClimateCommand", signals={}),  # FanLevel defaults to 8
            call(
                d, "send_message", message="ClimateCommand", signals={"FanLevel": 8}, dry_run=True
            ),
        ]
        assert [code(r) for r in attempts] == ["OUT_OF_RANGE"] * 6
        ok = call(d, "send_message", message="ClimateCommand", signals={"FanLevel": 2})
        assert ok.call_executed, ok.retry_prompt
    assert len(recv_all(peer, timeout_s=0.2)) == 1


def test_misspelt_limit_keys_are_refused_at_construction() -> None:
    policy = SendPolicy(
        allow_messages=["ClimateCommand"], signal_limits={"ClimateCommand.CabinSetPoint": (18, 26)}
    )
    with pytest.raises(ValueError, match=r"ClimateCommand\.CabinSetpoint"):
        CanDriver.from_dbc(DEMO, policy=policy)


def test_concurrent_starts_leave_one_task_that_stop_really_stops(
    channel: str, peer: can.BusABC
) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"], max_frames_per_second=20)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        barrier = threading.Barrier(8)

        def start() -> None:
            barrier.wait()
            call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=100)

        threads = [threading.Thread(target=start) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.3)
        assert call(d, "stop_periodic", message="ClimateCommand").call_executed
        recv_all(peer, timeout_s=0.2)  # drain what was sent while running
        assert recv_all(peer, timeout_s=0.6, max_s=1.0) == []  # nothing after the stop
        assert d.networks["can"].adapter.status().periodic_tasks == 0  # type: ignore[union-attr]


def test_one_rate_for_periodic_and_one_shot_sends(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand", "LightStatus"], max_frames_per_second=20)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        assert call(
            d, "start_periodic", message="ClimateCommand", signals={}, period_ms=100
        ).call_executed
        started = time.monotonic()
        while time.monotonic() - started < 1.5:
            call(d, "send_message", message="LightStatus", signals={})
        elapsed = time.monotonic() - started
        full = call(d, "start_periodic", message="LightStatus", signals={}, period_ms=50)
        assert code(full) == "RATE_LIMITED"  # 10 + 20 frames/s would exceed 20
    frames = recv_all(peer, timeout_s=0.2)
    one_shot = [f for f in frames if f.arbitration_id == 0x2A1]
    # the periodic send takes 10 of the 20 frames/s: one-shots get the other 10 (+ burst)
    assert len(one_shot) <= 10 * elapsed + 10 + 1


def test_consent_is_an_explicit_true_and_a_denied_start_reserves_nothing(
    channel: str, peer: can.BusABC
) -> None:
    answers = iter(["n", RuntimeError("dialog crashed"), False, True])

    def ask(request: Any) -> Any:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = SendPolicy(
        allow_messages=["ClimateCommand", "LightStatus"], max_frames_per_second=20,
        require_consent=True, consent=ask,
    )  # fmt: skip
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        assert (
            code(call(d, "send_message", message="ClimateCommand", signals={})) == "CONSENT_DENIED"
        )
        assert (
            code(call(d, "send_message", message="ClimateCommand", signals={})) == "CONSENT_DENIED"
        )
        denied = call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=50)
        assert code(denied) == "CONSENT_DENIED"
        # the denied start took no budget: a full-rate periodic send still fits
        assert call(
            d, "start_periodic", message="LightStatus", signals={}, period_ms=50
        ).call_executed
    assert {f.arbitration_id for f in recv_all(peer, timeout_s=0.2)} == {0x2A1}


def test_periodic_budgets_are_per_network(channel: str) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"], max_frames_per_second=20)
    with CanDriver.from_networks(
        {
            "a": {"dbc": DEMO, "bus": f"virtual:{channel}"},
            "b": {"dbc": DEMO, "bus": f"virtual:{channel}-b"},
        },
        policy=policy,
    ) as d:
        first = call(
            d, "start_periodic", network="a", message="ClimateCommand", signals={}, period_ms=50
        )
        assert first.call_executed
        second = call(
            d, "start_periodic", network="b", message="ClimateCommand", signals={}, period_ms=50
        )
        assert code(second) == "RATE_LIMITED"  # the policy's 20 frames/s are for both networks


def test_allowed_raw_ids_respect_the_frame_format(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(allow_raw_frames=True, allow_ids=[0x3C0], max_frames_per_second=100)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        assert call(d, "send_frame", id="0x3C0", data="01 02").call_executed
        extended = call(d, "send_frame", id="0x3C0", data="01 02", extended=True)
        assert code(extended) == "SEND_NOT_ALLOWED"  # 0x000003C0 29-bit is another frame
    frames = recv_all(peer, timeout_s=0.2)
    assert [(f.arbitration_id, f.is_extended_id) for f in frames] == [(0x3C0, False)]


def test_typed_tools_never_shadow_generic_tools(tmp_path: Any) -> None:
    dbc = tmp_path / "clash.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: A\n\n'
        'BO_ 256 signals: 8 A\n SG_ x : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BO_ 257 message: 8 A\n SG_ y : 0|8@1+ (1,0) [0|255] "" A\n'
    )
    with CanDriver.from_dbc(dbc) as d:
        names = [t.name for t in d.list_tools()]
        assert len(names) == len(set(names))
        read = next(t for t in d.list_tools() if t.name == "read_signals")
        assert "signals" in {p.name for p in read.parameters}


def test_a_send_that_went_out_is_never_reported_as_failed(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"])
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        r = d.process_llm_response(
            {"tool": "send_message", "arguments": {"message": "ClimateCommand", "signals": {}},
             "note": 10**30, "odd": "x\ud800y"}
        )  # fmt: skip
        assert r.call_executed, r.call_detail
    assert len(recv_all(peer, timeout_s=0.2)) == 1


def test_closed_driver_says_so() -> None:
    d = CanDriver.from_dbc(DEMO, bus="virtual:closed-test")
    d.close()
    d.close()  # twice is fine
    assert code(call(d, "read_signals", signals=["EngineSpeed"])) == "BUS_CLOSED"


def test_no_periodic_send_starts_on_a_closed_adapter(channel: str, peer: can.BusABC) -> None:
    from hwbridge.can.transport.adapter import PythonCanAdapter, build_message
    from hwbridge.core.models import ToolError

    adapter = PythonCanAdapter(f"virtual:{channel}")
    adapter.close()
    with pytest.raises(ToolError, match=r"BUS_CLOSED|BUS_DOWN"):
        adapter.send_periodic(build_message(0x100, b"\x01"), 0.01)
    assert recv_all(peer, timeout_s=0.2) == []
