"""The simulated vehicle on a clock the test advances: the same seed gives the same frames
with the same timestamps however loaded the machine is, exactly at the database's periods,
and the OBD-II ECUs answer from the same simulated moment."""

from __future__ import annotations

import itertools
import math
import threading
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from firmware_sim.clock import SIMULATED_EPOCH, RealClock, SimulatedClock
from firmware_sim.model import VehicleModel
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.database.database import CanDatabase
from tests.sim.conftest import DEMO, ObdTester, drain, signals

pytestmark = pytest.mark.usefixtures("no_thread_leaks")

Frame = tuple[float, int, bool, bytes]


def received(bus: can.BusABC) -> list[Frame]:
    """What `bus` has queued (the virtual bus delivers during `send`: after `advance`
    returns, every frame of the span is there)."""
    frames = []
    while (msg := bus.recv(0)) is not None:
        frames.append((msg.timestamp, msg.arbitration_id, msg.is_extended_id, bytes(msg.data)))
    return frames


def drive(seed: int, seconds: float, *, load: bool = False) -> list[Frame]:
    """`seconds` of the drive cycle on a simulated clock, as a second node receives it;
    with `load`, two threads spin beside it the whole time."""
    channel = f"clock-{uuid.uuid4().hex[:12]}"
    stop = threading.Event()
    spinners = [threading.Thread(target=_spin, args=(stop,)) for _ in range(2 if load else 0)]
    for spinner in spinners:
        spinner.start()
    clock = SimulatedClock()
    try:
        with (
            can.Bus(interface="virtual", channel=channel) as peer,
            VirtualVehicle(DEMO, channel=channel, seed=seed, clock=clock),
        ):
            frames: list[Frame] = []
            for _ in range(round(seconds / 0.25)):
                clock.advance(0.25)
                frames += received(peer)
            return frames
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()


def _spin(stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n = (n * 31 + 7) % 1_000_003


def test_the_same_seed_gives_the_same_frames_under_load() -> None:
    quiet = drive(seed=3, seconds=6.0)
    busy = drive(seed=3, seconds=6.0, load=True)
    assert len(quiet) > 1700  # 292 frames a second
    assert busy == quiet  # ids, data and timestamps, frame for frame
    assert drive(seed=4, seconds=6.0) != quiet


def test_frames_go_out_only_as_the_clock_advances_at_exact_periods(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    clock = SimulatedClock()
    with VirtualVehicle(DEMO, channel=channel, seed=1, clock=clock) as car:
        assert car.running
        assert peer.recv(0.2) is None  # nothing moves on its own
        clock.advance(0.9995)
        frames = received(peer)
        assert peer.recv(0.1) is None
    counts: Counter[int] = Counter(aid for _, aid, _, _ in frames)
    for message in demo_db.messages:
        period_s = message.cycle_time / 1000.0
        assert counts[message.frame_id] == math.floor(0.9995 / period_s) + 1, message.name
        stamps = [t for t, aid, _, _ in frames if aid == message.frame_id]
        assert stamps[0] == SIMULATED_EPOCH  # the first frame of each at time zero
        assert all(
            b - a == pytest.approx(period_s, abs=1e-6) for a, b in itertools.pairwise(stamps)
        )
    assert [t for t, *_ in frames] == sorted(t for t, *_ in frames)
    engine = [data for _, aid, _, data in frames if aid == 0x100]
    counters = [signals(demo_db, "EngineData", d)["RollingCounter"] for d in engine]
    assert all(b == (a + 1) % 16 for a, b in itertools.pairwise(counters))


def test_the_state_is_the_clocks_and_the_frames_carry_it(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    """Pulling away in first gear: after 3 simulated seconds the last EngineData frame says
    what the model says at that moment; the vehicle stands still while the clock does."""
    clock = SimulatedClock(epoch=1_000.0)
    model = VehicleModel(seed=2, driving=False)
    with VirtualVehicle(DEMO, channel=channel, model=model, clock=clock) as car:
        car.set_gear("D")
        car.set_throttle(40)
        clock.advance(3.0)
        state = car.state
        assert car.state == state  # the clock stood still: so did the vehicle
        frames = received(peer)
    last_t, _, _, last = [f for f in frames if f[1] == 0x100][-1]
    assert 1_002.99 - 1e-6 <= last_t <= 1_003.0 + 1e-6  # the 10 ms message: due at 3.0 s
    engine = signals(demo_db, "EngineData", last)
    assert engine["EngineSpeed"] == pytest.approx(state.engine_speed_rpm, rel=0.02)
    assert state.vehicle_speed_kmh > 5
    speed = [signals(demo_db, "VehicleDynamics", d)["VehicleSpeed"]
             for _, aid, _, d in frames if aid == 0x110]  # fmt: skip
    assert speed[0] == 0 and speed[-1] == pytest.approx(state.vehicle_speed_kmh, rel=0.02)


def test_obd_answers_come_from_the_simulated_moment(
    channel: str, peer: can.BusABC, tester: ObdTester
) -> None:
    clock = SimulatedClock()
    model = VehicleModel(seed=2, driving=False)
    with VirtualVehicle(DEMO, channel=channel, model=model, clock=clock) as car:
        car.set_gear("D")
        car.set_throttle(60)
        for _ in range(4):
            clock.advance(1.0)
            drain(peer)
            answer = tester.request(b"\x01\x0d")
            assert answer is not None and answer[:2] == b"\x41\x0d"
            assert answer[2] == round(car.state.vehicle_speed_kmh)  # PID 0D: whole km/h
            response = [m for m in iter(lambda: peer.recv(0), None) if m.arbitration_id == 0x7E8]
            assert [m.timestamp for m in response] == [clock.time()]


def test_a_clock_only_goes_forward() -> None:
    clock = SimulatedClock()
    for wrong in (-0.001, math.nan, -math.inf):
        with pytest.raises(ValueError, match="only goes forward"):
            clock.advance(wrong)
    clock.advance(0.0)
    assert clock.monotonic() == 0.0 and clock.time() == SIMULATED_EPOCH


@settings(max_examples=12, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=0.2), min_size=1, max_size=20))
def test_how_the_time_is_cut_does_not_change_what_is_sent(steps: list[float]) -> None:
    """Advancing in any steps sends the frames one advance over the same span sends."""
    total = 0.0
    for step in steps:  # added as the clock adds them
        total += step
    one, many = SimulatedClock(), SimulatedClock()
    ch1, ch2 = (f"cut-{uuid.uuid4().hex[:12]}" for _ in range(2))
    with (
        can.Bus(interface="virtual", channel=ch1) as p1,
        can.Bus(interface="virtual", channel=ch2) as p2,
        VirtualVehicle(DEMO, channel=ch1, seed=5, clock=one, obd=False),
        VirtualVehicle(DEMO, channel=ch2, seed=5, clock=many, obd=False),
    ):
        one.advance(total)
        for step in steps:
            many.advance(step)
        assert [f[1:] for f in received(p1)] == [f[1:] for f in received(p2)]
        assert one.monotonic() == pytest.approx(many.monotonic())


def test_the_real_clock_is_the_default_and_stamps_frames_as_they_go(
    channel: str, peer: can.BusABC
) -> None:
    with VirtualVehicle(DEMO, channel=channel, seed=1) as car:
        assert isinstance(car.clock, RealClock)
        msg = peer.recv(2.0)
        assert msg is not None
        assert abs(msg.timestamp - RealClock().time()) < 60  # a Unix time, not 0 or monotonic
