"""The behaviour model stepped by hand: physics, drive cycle, climate, battery, diagnostics."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_sim.model import IDLE_RPM, ClimateRequest, VehicleModel


def parked(ambient_c: float | None = None, coolant_c: float | None = None) -> VehicleModel:
    """A model with the drive cycle off, so only the test works the controls."""
    return VehicleModel(seed=3, driving=False, ambient_c=ambient_c, coolant_c=coolant_c)


def test_starts_parked_at_idle_and_rpm_follows_throttle() -> None:
    model = parked()
    state = model.advance(2.0)
    assert state.gear_lever == "P" and state.current_gear == 0
    assert state.engine_state == "Running"
    assert state.engine_speed_rpm == pytest.approx(IDLE_RPM, abs=30)
    assert state.vehicle_speed_kmh == 0.0

    model.set_throttle(50)
    revved = model.advance(2.0)
    assert revved.engine_speed_rpm > 2500
    assert revved.engine_load_pct > state.engine_load_pct
    assert revved.vehicle_speed_kmh == 0.0  # in P the wheels do not turn

    model.set_throttle(0)
    assert model.advance(3.0).engine_speed_rpm == pytest.approx(IDLE_RPM, abs=30)


def test_speed_integrates_throttle_minus_drag_and_brakes_to_a_stop() -> None:
    model = parked()
    model.set_gear("D")
    model.set_throttle(40)
    speeds = [model.advance(1.0).vehicle_speed_kmh for _ in range(10)]
    assert all(b > a for a, b in itertools.pairwise(speeds))
    assert 30 < speeds[-1] < 100
    assert model.snapshot().accel_mps2 > 0

    model.set_throttle(0)
    coasting = model.advance(2.0)
    assert 0 < coasting.vehicle_speed_kmh < speeds[-1]  # drag slows it
    assert coasting.accel_mps2 < 0

    model.set_brake(True)
    stopped = model.advance(15.0)
    assert stopped.vehicle_speed_kmh == 0.0
    assert stopped.accel_mps2 == 0.0
    assert stopped.odometer_km > VehicleModel(seed=3).snapshot().odometer_km


def test_gear_follows_speed_in_drive() -> None:
    model = parked()
    assert model.snapshot().current_gear == 0
    model.set_gear("d")
    assert model.advance(0.1).current_gear == 1
    model.set_throttle(60)
    gears = []
    for _ in range(40):
        state = model.advance(0.5)
        gears.append(state.current_gear)
        if state.vehicle_speed_kmh > 70:
            break
    assert gears == sorted(gears)  # only upshifts while accelerating
    assert max(gears) >= 4
    model.set_throttle(0)
    model.set_brake(True)
    assert model.advance(20.0).current_gear == 1
    model.set_gear("R")
    assert model.advance(0.1).current_gear == 11
    with pytest.raises(ValueError, match="P, R, N, D, S, L"):
        model.set_gear("X")


def test_coolant_warms_up_towards_ninety() -> None:
    model = parked(ambient_c=15.0)
    start = model.snapshot().coolant_temp_c
    assert start == pytest.approx(15.0)
    after_minute = model.advance(60.0, dt=0.05).coolant_temp_c
    assert after_minute > start + 15
    warm = model.advance(600.0, dt=0.05).coolant_temp_c
    assert 88 <= warm <= 95


def test_state_of_charge_drains_and_cells_are_plausible() -> None:
    model = parked()
    first = model.snapshot()
    later = model.advance(120.0, dt=0.05)
    assert later.soc_pct < first.soc_pct - 0.5
    assert later.pack_current_a > 0  # discharging
    assert len(later.cell_voltages) == 16
    assert all(2.5 < v < 4.3 for v in later.cell_voltages)
    assert later.pack_voltage_v == pytest.approx(sum(later.cell_voltages))
    assert 40 < later.pack_voltage_v < 60  # a 48 V class pack


def test_setpoint_moves_cabin_temperature() -> None:
    model = parked(ambient_c=15.0)
    cabin = model.snapshot().cabin_temp_c
    model.set_climate(ClimateRequest(setpoint_c=26.0, fan_level=7, ac=True))
    state = model.advance(0.1)
    assert state.active_setpoint_c == 26.0
    assert state.fan_level_actual == 7
    later = model.advance(60.0, dt=0.05)
    assert cabin < later.cabin_temp_c < 26.0
    assert later.cabin_temp_c > cabin + 2

    model.set_climate(ClimateRequest(setpoint_c=18.0, fan_level=7, ac=True))
    cooled = model.advance(30.0, dt=0.05)
    assert cooled.cabin_temp_c < later.cabin_temp_c
    assert cooled.ac_active and cooled.compressor_power_w > 0

    model.set_climate(ClimateRequest(setpoint_c=40.0, fan_level=0))
    off = model.advance(0.1)
    assert off.active_setpoint_c == 30.0  # clamped to what the HVAC unit accepts
    assert not off.ac_active and off.compressor_power_w == 0


def test_default_drive_cycle_goes_to_sixty_and_back() -> None:
    model = VehicleModel(seed=1)
    assert model.snapshot().gear_lever == "P"
    phases, levers, top = set(), set(), 0.0
    for _ in range(60 * 20):
        state = model.advance(0.05, dt=0.05)
        phases.add(state.drive_phase)
        levers.add(state.gear_lever)
        top = max(top, state.vehicle_speed_kmh)
    assert phases == {"park", "ready", "accelerate", "cruise", "brake", "stop"}
    assert levers == {"P", "D"}
    assert 58 <= top <= 65


def test_pause_and_resume_driving() -> None:
    model = VehicleModel(seed=1)
    model.advance(15.0)
    assert model.snapshot().vehicle_speed_kmh > 10
    model.pause_driving()
    paused = model.advance(0.1)
    assert paused.drive_phase == "manual" and paused.throttle_pct == 0
    model.resume_driving()
    assert model.advance(0.1).drive_phase in ("accelerate", "cruise")


def test_same_seed_same_states_other_seed_other_vehicle() -> None:
    a, b, c = VehicleModel(seed=7), VehicleModel(seed=7), VehicleModel(seed=8)
    for model in (a, b, c):
        model.advance(20.0)
    assert a.snapshot() == b.snapshot()
    assert a.snapshot().outside_temp_c != c.snapshot().outside_temp_c


def test_overheat_stores_p0217_with_mil_and_mode04_semantics() -> None:
    model = parked(coolant_c=90.0)
    assert model.snapshot().stored_dtcs == ()
    model.set_overheat(True)
    hot = model.advance(10.0)
    assert hot.coolant_temp_c > 120
    assert hot.engine_state == "Fault"
    assert hot.stored_dtcs == ("P0217",)
    assert hot.pending_dtcs == ("P0217",)
    assert hot.permanent_dtcs == ("P0217",)
    assert hot.mil

    assert hot.freeze_dtc == "P0217"
    assert hot.freeze_frame is not None and 120 < hot.freeze_frame.coolant_temp_c < 123

    model.clear_dtcs()
    cleared = model.snapshot()
    assert cleared.stored_dtcs == () and cleared.pending_dtcs == () and not cleared.mil
    assert cleared.freeze_frame is None and cleared.distance_since_clear_km == 0
    assert cleared.permanent_dtcs == ("P0217",)  # mode 04 does not clear permanent codes

    # the fault persists: the ECU's next check finds it again, as a real ECU would
    again = model.advance(0.05)
    assert again.coolant_temp_c > 120
    assert again.stored_dtcs == ("P0217",) and again.pending_dtcs == ("P0217",) and again.mil
    assert again.freeze_dtc == "P0217"

    model.set_overheat(False)
    cooled = model.advance(30.0)
    assert cooled.coolant_temp_c < 100
    assert cooled.engine_state == "Running"
    model.clear_dtcs()
    assert model.advance(1.0).stored_dtcs == ()  # repaired: cleared for good


def test_body_controls_and_validation() -> None:
    model = parked()
    model.set_door("Front Left", True)
    model.set_lock("locked")
    model.set_lights(headlights="lowbeam", turn="Hazard", fog=True)
    state = model.advance(0.1)
    assert state.doors["front_left"] and not state.doors["hood"]
    assert state.lock_state == "Locked"
    assert (state.headlights, state.turn_indicator, state.fog_lights) == (
        "LowBeam",
        "Hazard",
        True,
    )
    with pytest.raises(ValueError, match="front_left"):
        model.set_door("sunroof", True)
    with pytest.raises(ValueError, match="Unlocked"):
        model.set_lock("open")
    assert dataclasses.is_dataclass(state)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    steps=st.lists(
        st.tuples(
            st.floats(0.001, 0.2),
            st.sampled_from(["drive", "throttle", "brake", "ac", "coast"]),
            st.floats(0.0, 100.0),
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_the_cells_are_each_rounded_to_the_millivolt_at_every_step(
    seed: int, steps: list[tuple[float, str, float]]
) -> None:
    """The cells are only rounded again when one of them can change (`_update_cells`):
    they are what rounding every one of them afresh gives, at every step."""
    model = VehicleModel(seed)
    for dt, control, amount in steps:
        if control == "throttle":
            model.set_throttle(amount)
        elif control == "brake":
            model.set_brake(amount > 50.0)
        elif control == "ac":
            model.set_climate(ClimateRequest(setpoint_c=16.0, ac=True, fan_level=7))
        elif control == "coast":
            model.pause_driving()
        for _ in range(1 + int(amount) % 20):
            model.step(dt)
            ocv = 3.0 + 0.006 * model.soc
            fresh = tuple(
                round(ocv - model.current * 0.004 + offset, 3) for offset in model.cell_offsets
            )
            assert model.cells == fresh


@settings(max_examples=500, deadline=None)
@given(
    volts=st.floats(-1e12, 1e12)
    | st.floats(2.9, 3.7)
    | st.integers(-(10**7), 10**7).map(lambda k: (k + 0.5) / 1000)  # halfway, as near as a double
    | st.sampled_from([0.0, -0.0, 0.0004, -0.0004, 0.0005, -0.0005, 3.2995, 1e9, -1e9])
)
def test_a_cell_is_rounded_to_the_millivolt_as_round_rounds_it(volts: float) -> None:
    from firmware_sim.model import _to_millivolt

    assert repr(_to_millivolt(volts)) == repr(round(volts, 3))
