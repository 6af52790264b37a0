"""VirtualVehicle on a python-can virtual channel, seen from a second bus."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import can
from firmware_sim.clock import SimulatedClock
from firmware_sim.model import VehicleModel
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.database.database import CanDatabase
from tests.conftest import wait_until
from tests.sim.conftest import DEMO, collect, drain, latest, signals

pytestmark = pytest.mark.usefixtures("no_thread_leaks")


def xor(payload: bytes) -> int:
    value = 0
    for byte in payload:
        value ^= byte
    return value


def test_every_periodic_message_at_its_cycle_time_with_e2e(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    """On a simulated clock (tests/sim/test_clock.py): exactly one frame per cycle time."""
    clock = SimulatedClock()
    with VirtualVehicle(DEMO, channel=channel, seed=1, clock=clock) as car:
        assert set(car.periodic_messages) == {m.name for m in demo_db.messages if m.cycle_time}
        seconds = 0.9995  # frames at 0 ms, one cycle time, ... up to 999 ms
        clock.advance(seconds)
        frames = list(iter(lambda: peer.recv(0), None))
    counts: Counter[str] = Counter()
    for msg in frames:
        message = demo_db.message_for_frame(msg.arbitration_id, msg.is_extended_id)
        assert message is not None, hex(msg.arbitration_id)
        counts[message.name] += 1
    for message in demo_db.messages:
        assert counts[message.name] == seconds * 1000 // message.cycle_time + 1, message.name

    engine = [bytes(m.data) for m in frames if m.arbitration_id == 0x100]
    counters = [signals(demo_db, "EngineData", d)["RollingCounter"] for d in engine]
    assert all(b == (a + 1) % 16 for a, b in itertools.pairwise(counters))
    assert all(d[7] == xor(d[:7]) for d in engine)  # Checksum: XOR of bytes 0-6

    groups = [m.data[0] & 0x0F for m in frames if m.arbitration_id == 0x4F0]
    assert set(groups) == {0, 1, 2, 3}
    assert all(b == (a + 1) % 4 for a, b in itertools.pairwise(groups))

    adas = next(m for m in frames if m.arbitration_id == 0x500)
    assert adas.is_fd and len(adas.data) == 64
    eec1 = next(m for m in frames if m.is_extended_id)
    assert getattr(demo_db.message_for_frame(eec1.arbitration_id, True), "name", None) == "EEC1"


def test_frames_decode_within_range_and_match_the_state(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    clock = SimulatedClock()
    with VirtualVehicle(DEMO, channel=channel, seed=4, drive=False, clock=clock) as car:
        car.set_gear("N")
        car.set_throttle(30)
        while car.state.engine_speed_rpm <= 2000:
            assert clock.monotonic() < 10.0, "the engine never revved up"
            clock.advance(0.1)
        car.set_door("rear_left", True)
        car.set_lights(headlights="HighBeam")
        clock.advance(0.2)
        drain(peer)
        clock.advance(0.6)
        frames = list(iter(lambda: peer.recv(0), None))
        state = car.state
    decoded: dict[str, dict[str, Any]] = {}
    for msg in frames:
        d = demo_db.decode_frame(msg.arbitration_id, bytes(msg.data), msg.is_extended_id)
        assert d is not None
        decoded[d.message] = d.signals
        for name, value in d.signals.items():
            spec = next(s for s in demo_db.signals(d.message) if s.name == name)
            number = value["value"] if isinstance(value, dict) else value
            assert isinstance(number, int | float)
            if spec.minimum is not None and spec.maximum is not None and not spec.is_float:
                assert spec.minimum <= number <= spec.maximum, f"{d.message}.{name}={number}"
    engine = decoded["EngineData"]
    assert engine["EngineSpeed"] == pytest.approx(state.engine_speed_rpm, rel=0.05)
    assert engine["ThrottlePosition"] == pytest.approx(30, abs=0.4)
    assert engine["EngineState"] == {"value": 2, "label": "Running"}
    assert decoded["TransmissionStatus"]["GearLever"] == {"value": 2, "label": "N"}
    assert decoded["DoorStatus"]["DoorRearLeft"] == {"value": 1, "label": "Open"}
    assert decoded["LightStatus"]["HeadlightMode"] == {"value": 3, "label": "HighBeam"}
    assert decoded["EEC1"]["EngSpeed"] == pytest.approx(state.engine_speed_rpm, rel=0.05)
    assert decoded["BatteryPack"]["StateOfCharge"] == pytest.approx(state.soc_pct, abs=0.5)


def test_drive_cycle_moves_the_vehicle(demo_db: CanDatabase, channel: str) -> None:
    model = VehicleModel(seed=1)
    model.advance(4.5)  # near the end of the park phase
    clock = SimulatedClock()
    with VirtualVehicle(DEMO, channel=channel, model=model, clock=clock) as car:
        while car.state.vehicle_speed_kmh <= 5:
            assert clock.monotonic() < 8.0, "the drive cycle never pulled away"
            clock.advance(0.1)
        state = car.state
    assert state.gear_lever == "D" and state.current_gear >= 1
    assert state.drive_phase == "accelerate"


def test_climate_command_on_the_bus_moves_the_active_setpoint(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False) as car:
        assert latest(peer, demo_db, "ClimateStatus")["ActiveSetpoint"] == 21
        command = demo_db.encode(
            "ClimateCommand", {"CabinSetpoint": 25.5, "FanLevel": 5, "AcRequest": "On"}
        )
        peer.send(
            can.Message(
                arbitration_id=command.arbitration_id, data=command.data, is_extended_id=False
            )
        )
        assert wait_until(lambda: car.commands_received == 1)
        assert car.state.active_setpoint_c == 25.5
        drain(peer)
        status = latest(peer, demo_db, "ClimateStatus")
        assert status["ActiveSetpoint"] == 25.5
        assert status["FanLevelActual"] == 5
        assert status["AcActive"] == {"value": 1, "label": "On"}
        # the head unit's own periodic command now carries the new request too
        assert latest(peer, demo_db, "ClimateCommand")["CabinSetpoint"] == 25.5
        car.set_climate(fan_level=0)
        assert wait_until(lambda: not car.state.ac_active)  # no blower, no compressor
        assert (car.state.active_setpoint_c, car.state.fan_level_actual) == (25.5, 0)


def test_silence_stops_one_message_until_cleared(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    with VirtualVehicle(DEMO, channel=channel) as car:
        car.inject_fault("silence", message="EngineData")
        assert car.faults == ("silence:EngineData",)
        time.sleep(0.05)
        drain(peer)
        ids = {m.arbitration_id for m in collect(peer, 0.3)}
        assert 0x100 not in ids and 0x110 in ids
        car.clear_faults()
        assert latest(peer, demo_db, "EngineData")


def test_out_of_range_sends_a_raw_value_beyond_the_dbc_range(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    with VirtualVehicle(DEMO, channel=channel, drive=False) as car:
        car.inject_fault("out_of_range", signal="VehicleSpeed")
        drain(peer)
        speed = latest(peer, demo_db, "VehicleDynamics")["VehicleSpeed"]
        assert isinstance(speed, float) and speed > 300  # the DBC says 0..300 km/h
        car.clear_faults()
        drain(peer)
        assert latest(peer, demo_db, "VehicleDynamics")["VehicleSpeed"] == 0


def test_error_frames_reach_other_nodes(channel: str, peer: can.BusABC) -> None:
    with VirtualVehicle(DEMO, channel=channel) as car:
        car.inject_fault("error_frames")
        errors = [m for m in collect(peer, 0.5) if m.is_error_frame]
        assert len(errors) >= 3
        assert car.error_frames_sent >= len(errors)
        car.clear_faults()
        time.sleep(0.1)
        drain(peer)
        assert not any(m.is_error_frame for m in collect(peer, 0.2))


def test_fault_names_and_targets_are_checked(channel: str) -> None:
    car = VirtualVehicle(DEMO, channel=channel)
    with pytest.raises(ValueError, match="overheat, silence, out_of_range, error_frames"):
        car.inject_fault("meltdown")
    with pytest.raises(ValueError, match="message="):
        car.inject_fault("silence")
    with pytest.raises(ValueError, match="NoSuchMessage"):
        car.inject_fault("silence", message="NoSuchMessage")
    with pytest.raises(ValueError, match="signal="):
        car.inject_fault("out_of_range")
    with pytest.raises(ValueError, match="RollingCounter"):
        car.inject_fault("out_of_range", signal="RollingCounter")  # in two messages
    with pytest.raises(ValueError, match="within its range"):
        car.inject_fault("out_of_range", signal="EngineData.Checksum")
    assert car.faults == ()


def test_animate_false_sends_only_periodic_messages_at_initial_values(
    tmp_path: Path, channel: str, peer: can.BusABC
) -> None:
    """The demo model's way, kept for databases written for it (and on request): only
    messages with a cycle time, unnamed signals at their initial values. Any other database
    comes alive by default (tests/sim/test_any_database.py)."""
    dbc = tmp_path / "other.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: A\n\n'
        "BO_ 1537 Heartbeat: 2 A\n"
        ' SG_ Mode : 0|8@1+ (1,0) [0|10] "" A\n'
        ' SG_ Alive : 8|4@1+ (1,0) [0|15] "" A\n\n'
        "BO_ 1538 Quiet: 1 A\n"
        ' SG_ Flag : 0|1@1+ (1,0) [0|1] "" A\n\n'
        'BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;\n'
        'BA_DEF_ SG_ "GenSigStartValue" FLOAT 0 100;\n'
        'BA_DEF_DEF_ "GenMsgCycleTime" 0;\n'
        'BA_DEF_DEF_ "GenSigStartValue" 0;\n'
        'BA_ "GenMsgCycleTime" BO_ 1537 50;\n'
        'BA_ "GenSigStartValue" SG_ 1537 Mode 7;\n'
    )
    db = CanDatabase.load(dbc)
    with VirtualVehicle(db, channel=channel, animate=False) as car:
        assert car.periodic_messages == ("Heartbeat",)
        frames = collect(peer, 0.4)
    beats = [signals(db, "Heartbeat", m.data) for m in frames]
    assert len(beats) >= 4 and all(b["Mode"] == 7 for b in beats)
    alive = [b["Alive"] for b in beats]
    assert all(b == (a + 1) % 16 for a, b in itertools.pairwise(alive))
    assert {m.arbitration_id for m in frames} == {1537}


def test_start_stop_and_bad_input(channel: str) -> None:
    car = VirtualVehicle(DEMO, channel=channel)
    assert not car.running
    car.start()
    try:
        assert car.running
        with pytest.raises(RuntimeError, match="already started"):
            car.start()
    finally:
        car.stop()
    car.stop()  # idempotent
    assert not car.running
    with pytest.raises(ValueError, match="VIN"):
        VirtualVehicle(DEMO, channel=channel, vin="SHORT")


@pytest.mark.parametrize("database", ["demo", "opendbc"])
def test_frames_sent_counts_the_frames_on_the_bus(database: str, channel: str) -> None:
    """Per message, what `frames_sent` says is what a peer received: with a message silenced
    for a while, a raw value out of range, error frames, and after a stop and a new start."""
    from tests.shared_data import DATA, HAVE_SHARED

    if database == "opendbc" and not HAVE_SHARED:
        pytest.skip("../shared/data is not there")
    dbc: Any = DEMO if database == "demo" else DATA / "opendbc" / "ford_lincoln_base_pt.dbc"
    clock = SimulatedClock()
    received: Counter[int] = Counter()
    with can.Bus(interface="virtual", channel=channel) as peer:
        car = VirtualVehicle(dbc, channel=channel, clock=clock, obd=False)
        names = {int(m.frame_id): m.name for m in car.db.messages}

        def take() -> Counter[str]:
            now: Counter[str] = Counter()
            for frame in iter(lambda: peer.recv(0), None):
                if not frame.is_error_frame:
                    received[frame.arbitration_id] += 1
                    now[names[frame.arbitration_id]] += 1
            return now

        for _ in range(2):
            with car:
                clock.advance(0.7)
                silenced = take().most_common(1)[0][0]  # a message sent often
                signal = next(
                    s.name for m in car.db.messages for s in m.signals if m.name != silenced
                )
                car.inject_fault("silence", message=silenced)
                with contextlib.suppress(ValueError):  # a signal carrying any raw is in range
                    car.inject_fault("out_of_range", signal=signal)
                car.inject_fault("error_frames")
                clock.advance(0.5)
                assert take()[silenced] == 0
                car.clear_faults()
                clock.advance(0.4)
                assert take()[silenced] > 0
    sent = car.frames_sent
    assert {names[i]: n for i, n in received.items()} == {k: v for k, v in sent.items() if v}
