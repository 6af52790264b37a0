"""The OBD-II responder over ISO-TP on the vehicle's bus, as a scan tool sees it."""

from __future__ import annotations

import time

import pytest

import can
from firmware_sim.model import VehicleModel
from firmware_sim.obd import DEFAULT_VIN, decode_dtc
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.database.database import CanDatabase
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.sim.conftest import DEMO, ObdTester, collect, drain, latest

pytestmark = pytest.mark.usefixtures("no_thread_leaks")


def rpm(answer: bytes | None) -> float:
    assert answer is not None and answer[:2] == b"\x41\x0c", answer
    return (256 * answer[2] + answer[3]) / 4


def dtcs(answer: bytes | None, service: int) -> list[str]:
    assert answer is not None and answer[0] == service + 0x40, answer
    return [decode_dtc(answer[i : i + 2]) for i in range(2, 2 + 2 * answer[1], 2)]


def test_mode01_agrees_with_the_dbc_signals_on_the_bus(
    demo_db: CanDatabase, channel: str, peer: can.BusABC, tester: ObdTester
) -> None:
    model = VehicleModel(seed=5, driving=False, coolant_c=85.0)
    with VirtualVehicle(DEMO, channel=channel, model=model) as car:
        car.set_gear("D")
        car.set_throttle(60)
        assert wait_until(lambda: car.state.vehicle_speed_kmh > 15)
        car.set_throttle(10)  # roughly holds the speed: both views see nearly the same car
        drain(peer)
        engine = latest(peer, demo_db, "EngineData")
        dynamics = latest(peer, demo_db, "VehicleDynamics")
        obd_rpm = rpm(tester.request(b"\x01\x0c"))
        speed = tester.request(b"\x01\x0d")
        coolant = tester.request(b"\x01\x05")
    assert isinstance(engine["EngineSpeed"], float)
    assert abs(obd_rpm - engine["EngineSpeed"]) < 150
    assert speed is not None and speed[:2] == b"\x41\x0d"
    assert isinstance(dynamics["VehicleSpeed"], float)
    assert abs(speed[2] - dynamics["VehicleSpeed"]) <= 3
    assert coolant is not None and coolant[:2] == b"\x41\x05"
    assert abs(coolant[2] - 40 - engine["CoolantTemp"]) <= 1


def test_functional_request_on_7df_is_answered_on_7e8(
    channel: str, peer: can.BusABC, tester: ObdTester
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False):
        drain(peer)
        answer = tester.functional(b"\x01\x0c")
        assert 700 < rpm(answer) < 900
        frames = [peer.recv(1.0) for _ in range(50)]
    replies = [m for m in frames if m is not None and m.arbitration_id == 0x7E8]
    assert replies and replies[0].data[:3] == bytes([0x04, 0x41, 0x0C])
    assert len(replies[0].data) == 8  # padded, as ISO 15765-4 requires


def test_vin_arrives_as_a_multi_frame_answer(
    channel: str, peer: can.BusABC, tester: ObdTester
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False):
        drain(peer)
        answer = tester.request(b"\x09\x02")
        functional = tester.functional(b"\x09\x02")
        frames = collect(peer, 0.05)  # what queued up while the answers came
    assert answer == b"\x49\x02\x01" + DEFAULT_VIN.encode()
    assert functional == answer
    first = next(m for m in frames if m.arbitration_id == 0x7E8)
    assert first.data[0] >> 4 == 1 and first.data[1] == 20  # first frame of 20 bytes
    consecutive = [m.data[0] for m in frames if m.arbitration_id == 0x7E8][1:3]
    assert consecutive == [0x21, 0x22]


def test_overheat_dtc_over_mode_03_and_cleared_by_mode_04(channel: str, tester: ObdTester) -> None:
    model = VehicleModel(seed=6, driving=False, coolant_c=90.0)
    with VirtualVehicle(DEMO, channel=channel, model=model) as car:
        assert dtcs(tester.request(b"\x03"), 0x03) == []
        car.inject_fault("overheat")
        assert wait_until(lambda: car.state.coolant_temp_c > 123, timeout_s=10)
        assert car.state.stored_dtcs == ("P0217",)
        coolant = tester.request(b"\x01\x05")
        assert coolant is not None and coolant[2] - 40 > 120
        status = tester.request(b"\x01\x01")
        assert status is not None and status[2] == 0x81  # MIL on, one code
        assert dtcs(tester.request(b"\x03"), 0x03) == ["P0217"]
        assert dtcs(tester.request(b"\x07"), 0x07) == ["P0217"]

        distance = tester.request(b"\x01\x31")
        assert tester.request(b"\x04") == b"\x44"
        assert dtcs(tester.request(b"\x0a"), 0x0A) == ["P0217"]  # permanent stays
        # the coolant is still at 132 degC: the ECU's next check sets the code again
        assert wait_until(lambda: dtcs(tester.request(b"\x03"), 0x03) == ["P0217"])
        assert dtcs(tester.request(b"\x07"), 0x07) == ["P0217"]
        status = tester.request(b"\x01\x01")
        assert status is not None and status[2] == 0x81
        assert distance is not None and tester.request(b"\x01\x31") == b"\x41\x31\x00\x00"


def test_unsupported_pid_negative_when_physical_silent_when_functional(
    channel: str, tester: ObdTester
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False) as car:
        assert tester.request(b"\x01\x02") == b"\x7f\x01\x12"
        assert tester.request(b"\x22\xf1\x00") == b"\x7f\x22\x31"
        assert tester.functional(b"\x01\x02", timeout_s=0.3) is None
        obd = car.obd
        assert obd is not None and obd.requests == 3


def test_the_self_test_says_response_pending_until_it_is_done(
    channel: str, tester: ObdTester
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False) as car:
        assert car.obd is not None
        routine_s, pending_every_s = 0.5, 0.2
        car.obd.routine_s, car.obd.pending_every_s = routine_s, pending_every_s
        started = time.monotonic()
        assert tester.request(b"\x31\x01\x02\x03") == b"\x7f\x31\x78"  # at once
        assert tester.request(b"\x22\xf1\x90") == b"\x7f\x22\x21"  # busy: repeat later
        answers = []
        while (answer := tester.receive(timeout_s=pending_every_s + BUSY_MARGIN_S)) is not None:
            answers.append(answer)
            if answer[:1] == b"\x71":
                break
        assert answers[-1] == b"\x71\x01\x02\x03\x00"  # then the answer, when done
        assert 0.45 < time.monotonic() - started < routine_s + BUSY_MARGIN_S
        assert answers[:-1] and set(answers[:-1]) == {b"\x7f\x31\x78"}  # repeated meanwhile
        assert tester.request(b"\x22\xf1\x90") == b"\x62\xf1\x90" + DEFAULT_VIN.encode()
