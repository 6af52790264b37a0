"""A frame the transport cannot carry is refused, never reported as sent: the socketcand
protocol carries classic data frames only."""

from __future__ import annotations

import json

import pytest

import can
from firmware_sim.socketcand import SocketcandServer
from hwbridge import CanDriver, SendPolicy
from tests.can.conftest import recv_all

pytestmark = pytest.mark.timeout(30)


def test_an_fd_message_over_socketcand_is_refused_and_nothing_goes_out(
    socketcand: SocketcandServer, peer: can.BusABC
) -> None:
    policy = SendPolicy(allow_messages=["AdasObjects", "ClimateCommand"], allow_raw_frames=True)
    bus = f"socketcand://127.0.0.1:{socketcand.port}/vcan0"
    with CanDriver.from_dbc("dbc/demo_vehicle.dbc", bus=bus, policy=policy) as driver:
        # the FD message is no choice of send_message here: the model is told the choices
        fd = driver.process_llm_response(
            json.dumps({"tool": "send_message", "arguments": {"message": "AdasObjects"}})
        )
        assert fd.call_failed and not fd.call_executed
        assert "must be one of: ClimateCommand" in (fd.retry_prompt or "")
        # a frame that gets as far as the transport is refused there, not reported sent
        raw = driver.process_llm_response(
            json.dumps({"tool": "send_frame", "arguments": {"id": 0x123, "data": "00" * 12}})
        )
        assert raw.call_failed and not raw.call_executed
        assert (raw.call_detail or "").startswith("UNSUPPORTED")
        assert "classic data frames only" in (raw.retry_prompt or "")
        classic = driver.process_llm_response(
            json.dumps({"tool": "send_message", "arguments": {"message": "ClimateCommand"}})
        )
        assert classic.call_executed, classic.retry_prompt
    frames = recv_all(peer, timeout_s=0.3)
    assert [f.arbitration_id for f in frames] == [0x3C0]
