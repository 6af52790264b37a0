"""The behaviour of the simulated vehicle: plain physics stepped by the caller, no I/O.

`VehicleModel.step(dt)` advances engine, drivetrain, climate, battery and diagnostics by `dt`
seconds; `snapshot()` returns an immutable `VehicleState`. The model knows nothing about CAN
or DBC files, so it is unit-tested by stepping it by hand, and the same seed and the same
sequence of steps always give the same states. It is not thread-safe: `VirtualVehicle` owns
the lock.

The numbers are chosen to look plausible on a dashboard, not to be a validated vehicle model:
a petrol mild hybrid with a 6-speed automatic and a 16-cell 48 V battery.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

__all__ = [
    "DOORS",
    "GEAR_LEVERS",
    "IDLE_RPM",
    "ClimateRequest",
    "DriveCycle",
    "DriveCycleLike",
    "VehicleModel",
    "VehicleState",
]

IDLE_RPM: Final = 800.0
REDLINE_RPM: Final = 6500.0
GEAR_LEVERS: Final = ("P", "R", "N", "D", "S", "L")
DOORS: Final = ("front_left", "front_right", "rear_left", "rear_right", "tailgate", "hood")
LOCK_STATES: Final = ("Unlocked", "Locked", "DoubleLocked")
HEADLIGHT_MODES: Final = ("Off", "Parking", "LowBeam", "HighBeam", "Auto")
TURN_INDICATORS: Final = ("Off", "Left", "Right", "Hazard")
FAN_AUTO: Final = 8
CELLS: Final = 16
REVERSE_GEAR: Final = 11

_WHEEL_RADIUS_M = 0.32
_FINAL_DRIVE = 3.6
_GEAR_RATIOS = (3.5, 2.1, 1.4, 1.0, 0.8, 0.65)
_GEAR_ACCEL = (3.2, 2.6, 2.0, 1.5, 1.2, 1.0)  # m/s2 at full throttle in each gear
_UPSHIFT_KMH = (15.0, 30.0, 45.0, 65.0, 85.0)  # gear n -> n+1 above _UPSHIFT_KMH[n-1]
_DOWNSHIFT_MARGIN_KMH = 5.0
_SHIFT_S = 0.4
_BRAKE_DECEL = 3.5
_CREEP_ACCEL = 0.4
_CREEP_KMH = 6.0
_REVERSE_MAX_KMH = 15.0
_THERMOSTAT_C = 90.0
_OVERHEAT_RISE_C_PER_S = 10.0
_OVERHEAT_PEAK_C = 132.0
_COOLDOWN_C_PER_S = 2.0
_PENDING_C = 115.0  # P0217 becomes pending above this
_CONFIRMED_C = 120.0  # ... and stored with the MIL on above this
_REARM_C = 105.0  # the monitor reports again only after the engine was back below this
_DTC_OVERHEAT = "P0217"
_PACK_AH = 8.0
_TANK_L = 50.0
_CELL_OHM = 0.004
_CELL_HALF_STEP = 0.0005  # cells are rounded to the millivolt
_CELL_MARGIN = 1e-9
_NEAR_HALF = 0.5 - 1e-6  # a thousandth of a millivolt from halfway, or nearer


def _to_millivolt(volts: float) -> float:
    """`round(volts, 3)`, exactly, mostly without its decimal conversion (the cells are
    worked out every step). `round(x, 3)` is the double nearest x's decimal rounded half to
    even at three places, k/1000 for an integer k; k/1000.0 is that double (IEEE division of
    exact operands). Below a million volts the error of `volts * 1000.0` is under 1e-9, so
    when that is further than 1e-6 from halfway, `round` of it is that k. Nearer halfway,
    zero (whose sign `round` keeps) or larger: `round(volts, 3)` itself."""
    scaled = volts * 1000.0
    k = round(scaled) if -1e9 < scaled < 1e9 else 0
    if k and abs(scaled - k) < _NEAR_HALF:
        return k / 1000.0
    return round(volts, 3)


def _lag(value: float, target: float, dt: float, tau: float) -> float:
    """First-order approach of `value` to `target` with time constant `tau`."""
    return target + (value - target) * math.exp(-dt / tau)


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


@dataclass(frozen=True, slots=True)
class ClimateRequest:
    """What the head unit asks the HVAC for (the signals of a climate command)."""

    setpoint_c: float = 21.0
    fan_level: int = FAN_AUTO  # 0 off, 1-7, 8 auto
    ac: bool = False
    recirculation: bool = False
    air_distribution: int = 1
    rear_defrost: bool = False


@dataclass(frozen=True, slots=True)
class VehicleState:
    """One consistent snapshot of everything the vehicle reports, in physical units."""

    time_s: float
    # engine
    engine_speed_rpm: float
    throttle_pct: float
    engine_load_pct: float
    engine_torque_pct: float
    coolant_temp_c: float
    engine_state: str
    intake_air_temp_c: float
    fuel_level_pct: float
    run_time_s: float
    # motion
    vehicle_speed_kmh: float
    accel_mps2: float
    yaw_rate_dps: float
    steering_angle_deg: float
    brake: bool
    odometer_km: float
    # transmission
    gear_lever: str
    current_gear: int  # 0 neutral, 1-6 forward, 11 reverse
    transmission_temp_c: float
    shifting: bool
    converter_locked: bool
    # body
    doors: MappingProxyType[str, bool]
    lock_state: str
    headlights: str
    turn_indicator: str
    fog_lights: bool
    interior_light: str
    # climate
    climate_request: ClimateRequest
    cabin_temp_c: float
    outside_temp_c: float
    active_setpoint_c: float
    fan_level_actual: int
    ac_active: bool
    compressor_power_w: float
    # 48 V battery
    cell_voltages: tuple[float, ...]
    module_temp_c: float
    pack_voltage_v: float
    pack_current_a: float
    soc_pct: float
    max_cell_temp_c: float
    # 12 V system and diagnostics
    module_voltage_v: float
    mil: bool
    stored_dtcs: tuple[str, ...]
    pending_dtcs: tuple[str, ...]
    permanent_dtcs: tuple[str, ...]
    distance_since_clear_km: float
    distance_mil_on_km: float
    overheating: bool
    driving: bool
    drive_phase: str
    # the freeze frame the engine ECU stored with its first confirmed code (OBD mode 02)
    freeze_dtc: str | None = None
    freeze_frame: VehicleState | None = None
    # driving the built-in DriveCycle (not a scenario, not by hand)
    default_drive: bool = False
    # the engine speed the engine idles at (UDS DID 0x0101 writes it)
    idle_target_rpm: float = IDLE_RPM


@dataclass
class _Phase:
    name: str
    lever: str
    brake: bool
    duration_s: float | None  # None: until the phase's speed condition holds


class DriveCycle:
    """A gentle repeating drive: park, ready, accelerate to 60 km/h, cruise, brake, stop."""

    TARGET_KMH: Final = 60.0
    PHASES: Final = (
        _Phase("park", "P", False, 3.0),
        _Phase("ready", "D", True, 2.0),
        _Phase("accelerate", "D", False, None),
        _Phase("cruise", "D", False, 10.0),
        _Phase("brake", "D", True, None),
        _Phase("stop", "D", True, 3.0),
    )
    ACCEL_THROTTLE: Final = 45.0

    def __init__(self) -> None:
        self.index = 0
        self.elapsed_s = 0.0

    @property
    def phase(self) -> str:
        return self.PHASES[self.index].name

    def restart(self, speed_kmh: float, lever: str) -> None:
        """Resume from a phase that fits how the vehicle is moving now."""
        if speed_kmh >= self.TARGET_KMH:
            name = "cruise"
        elif speed_kmh >= 1.0:
            name = "accelerate"
        else:
            name = "park" if lever == "P" else "ready"
        self.index = next(i for i, p in enumerate(self.PHASES) if p.name == name)
        self.elapsed_s = 0.0

    def controls(self, dt: float, speed_kmh: float, gear: int) -> tuple[float, bool, str]:
        """Advance the cycle by `dt`; return (throttle %, brake, lever) for this step."""
        self.elapsed_s += dt
        phase = self.PHASES[self.index]
        done = (
            self.elapsed_s >= phase.duration_s
            if phase.duration_s is not None
            else (speed_kmh >= self.TARGET_KMH if phase.name == "accelerate" else speed_kmh <= 0.0)
        )
        if done:
            self.index = (self.index + 1) % len(self.PHASES)
            self.elapsed_s = 0.0
            phase = self.PHASES[self.index]
        throttle = 0.0
        if phase.name == "accelerate":
            throttle = self.ACCEL_THROTTLE
        elif phase.name == "cruise":
            v = speed_kmh / 3.6
            feed_forward = _drag(v) / _GEAR_ACCEL[max(gear, 1) - 1] * 100.0
            throttle = _clamp(feed_forward + 5.0 * (self.TARGET_KMH - speed_kmh), 0.0, 60.0)
        return throttle, phase.brake, phase.lever


class DriveCycleLike(Protocol):
    """What works the pedals in place of `DriveCycle` (a scenario's `ScenarioCycle`)."""

    @property
    def phase(self) -> str: ...

    def restart(self, speed_kmh: float, lever: str) -> None: ...

    def controls(self, dt: float, speed_kmh: float, gear: int) -> tuple[float, bool, str]: ...


def _drag(v_mps: float) -> float:
    """Rolling resistance and air drag as a deceleration (m/s2) at speed `v_mps`."""
    return 0.12 + 0.00045 * v_mps * v_mps if v_mps > 0.0 else 0.0


class VehicleModel:
    """The vehicle's physics; call `step(dt)` to advance it and `snapshot()` to read it.

    `seed` fixes the ambient temperature (unless `ambient_c` is given), the cells' spread
    and the sensor noise. The vehicle starts parked with the engine idling (at `idle_rpm`)
    and cold (coolant at ambient) unless `coolant_c` is given. `driving=True` lets `DriveCycle` work
    the pedals and the lever; any manual control (`set_throttle`, `set_brake`, `set_gear`)
    takes over from it.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        ambient_c: float | None = None,
        coolant_c: float | None = None,
        soc_pct: float = 80.0,
        fuel_pct: float = 68.0,
        driving: bool = True,
        idle_rpm: float = IDLE_RPM,
    ) -> None:
        self.seed = seed
        self.idle_rpm = _clamp(float(idle_rpm), 0.0, REDLINE_RPM)
        self.driving = driving
        rng = self._rng = random.Random(seed)
        self.outside_c = ambient_c if ambient_c is not None else 12.0 + rng.random() * 10
        self.time_s = 0.0
        self.cycle: DriveCycle | DriveCycleLike = DriveCycle()
        # controls
        self.throttle = 0.0
        self.brake = False
        self.lever = "P"
        # engine and motion
        self.rpm = self.idle_rpm
        self.load = 0.0
        self.coolant = coolant_c if coolant_c is not None else self.outside_c
        self.speed = 0.0  # m/s
        self.accel = 0.0
        self.odometer_km = 12_345.0 + rng.random() * 1000
        self.steering = 0.0
        self.yaw = 0.0
        self.gear = 0
        self.shift_timer = 0.0
        self.trans_temp = self.outside_c
        self.run_time = 0.0
        self.fuel_l = _clamp(fuel_pct, 0.0, 100.0) / 100.0 * _TANK_L
        # body
        self.doors = dict.fromkeys(DOORS, False)
        self.lock = "Unlocked"
        self.headlights = "Auto"
        self.turn = "Off"
        self.fog = False
        self.interior = "DoorControlled"
        # climate
        self.climate = ClimateRequest()
        self.cabin = self.outside_c + 4.0
        self.compressor_w = 0.0
        # battery
        self.soc = _clamp(soc_pct, 0.0, 100.0)
        self.current = 0.0
        self.cell_offsets = tuple(rng.uniform(-0.012, 0.012) for _ in range(CELLS))
        self.cells: tuple[float, ...] = ()
        # the cell voltages' `base` (`_update_cells`) between which they stay as they are
        self._cells_kept = (math.inf, -math.inf)
        self.battery_temp = self.outside_c + 3.0
        # diagnostics
        self.overheat = False
        self.stored: list[str] = []
        self.pending: list[str] = []
        self.permanent: list[str] = []
        self.overheat_latched = False
        self.freeze: tuple[str, VehicleState] | None = None
        self.distance_at_clear_km = self.odometer_km
        self.mil_distance_km = 0.0
        self._update_cells()

    # -- controls ------------------------------------------------------------------------

    def set_throttle(self, pct: float) -> None:
        self.driving = False
        self.throttle = _clamp(float(pct), 0.0, 100.0)

    def set_idle_rpm(self, rpm: float) -> None:
        """The speed the engine idles at from now on (it settles there in about a second)."""
        self.idle_rpm = _clamp(float(rpm), 0.0, REDLINE_RPM)

    def set_brake(self, on: bool) -> None:
        self.driving = False
        self.brake = bool(on)

    def set_gear(self, lever: str) -> None:
        label = lever.strip().upper()
        if label not in GEAR_LEVERS:
            raise ValueError(f"gear lever must be one of {', '.join(GEAR_LEVERS)}; got {lever!r}")
        self.driving = False
        self.lever = label

    def pause_driving(self) -> None:
        """Stop the drive cycle; the throttle is released and the vehicle coasts."""
        self.driving = False
        self.throttle = 0.0

    def resume_driving(self) -> None:
        self.cycle.restart(self.speed * 3.6, self.lever)
        self.driving = True

    def set_door(self, name: str, open_: bool) -> None:
        key = name.strip().lower().replace(" ", "_").replace("-", "_")
        if key not in self.doors:
            raise ValueError(f"door must be one of {', '.join(DOORS)}; got {name!r}")
        self.doors[key] = bool(open_)

    def set_lock(self, state: str) -> None:
        self.lock = _choose(state, LOCK_STATES, "lock state")

    def set_lights(
        self,
        headlights: str | None = None,
        turn: str | None = None,
        fog: bool | None = None,
    ) -> None:
        if headlights is not None:
            self.headlights = _choose(headlights, HEADLIGHT_MODES, "headlight mode")
        if turn is not None:
            self.turn = _choose(turn, TURN_INDICATORS, "turn indicator")
        if fog is not None:
            self.fog = bool(fog)

    def set_climate(self, request: ClimateRequest) -> None:
        """A climate command arrived; the HVAC regulates to it from now on."""
        self.climate = ClimateRequest(
            setpoint_c=_clamp(request.setpoint_c, 16.0, 30.0),
            fan_level=int(_clamp(request.fan_level, 0, FAN_AUTO)),
            ac=request.ac,
            recirculation=request.recirculation,
            air_distribution=int(_clamp(request.air_distribution, 0, 4)),
            rear_defrost=request.rear_defrost,
        )

    def set_overheat(self, on: bool) -> None:
        """The cooling fault: coolant climbs past 120 degC while on, recovers when off."""
        self.overheat = bool(on)

    def clear_dtcs(self) -> None:
        """What OBD mode 04 does: stored and pending codes, the freeze frame and the MIL go;
        permanent codes stay. The monitors start over, so a fault that persists is found
        again on the next check (the next step), as a real ECU finds it."""
        self.stored.clear()
        self.pending.clear()
        self.freeze = None
        self.overheat_latched = False
        self.distance_at_clear_km = self.odometer_km
        self.mil_distance_km = 0.0

    # -- time ----------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        """Advance by `dt` seconds (long steps are split so the physics stays stable)."""
        if dt <= 0.0:
            return
        steps = max(1, math.ceil(dt / 0.05))
        for _ in range(steps):
            self._step(dt / steps)

    def advance(self, seconds: float, dt: float = 0.01) -> VehicleState:
        """Step `seconds` in increments of `dt` and return the state at the end (tests)."""
        for _ in range(round(seconds / dt)):
            self.step(dt)
        return self.snapshot()

    def _step(self, dt: float) -> None:
        self.time_s += dt
        if self.driving:
            self.throttle, self.brake, self.lever = self.cycle.controls(
                dt, self.speed * 3.6, self.gear
            )
        self._step_transmission(dt)
        self._step_engine(dt)
        self._step_motion(dt)
        self._step_temperatures(dt)
        self._step_climate(dt)
        self._step_battery(dt)
        self._step_diagnostics()
        self._step_body()

    def _step_transmission(self, dt: float) -> None:
        kmh = self.speed * 3.6
        previous = self.gear
        if self.lever in ("P", "N"):
            self.gear = 0
        elif self.lever == "R":
            self.gear = REVERSE_GEAR
        else:
            top = 2 if self.lever == "L" else len(_GEAR_RATIOS)
            later = 1.3 if self.lever == "S" else 1.0
            gear = self.gear if 1 <= self.gear <= len(_GEAR_RATIOS) else 1
            if gear < top and kmh > _UPSHIFT_KMH[gear - 1] * later:
                gear += 1
            elif gear > 1 and kmh < _UPSHIFT_KMH[gear - 2] * later - _DOWNSHIFT_MARGIN_KMH:
                gear -= 1
            self.gear = min(gear, top)
        if 0 not in (previous, self.gear) and self.gear != previous:
            self.shift_timer = _SHIFT_S
        self.shift_timer = max(0.0, self.shift_timer - dt)

    def _converter_locked(self) -> bool:
        in_gear = 3 <= self.gear <= len(_GEAR_RATIOS)
        return in_gear and self.speed * 3.6 > 35.0 and self.shift_timer <= 0.0

    def _step_engine(self, dt: float) -> None:
        if self.gear == 0:
            target = self.idle_rpm + self.throttle / 100.0 * (REDLINE_RPM - self.idle_rpm) * 0.9
        else:
            ratio = 3.0 if self.gear == REVERSE_GEAR else _GEAR_RATIOS[self.gear - 1]
            wheel_rpm = self.speed / (2 * math.pi * _WHEEL_RADIUS_M) * 60.0
            coupled = wheel_rpm * ratio * _FINAL_DRIVE
            if self._converter_locked():
                target = max(coupled, self.idle_rpm)
            else:  # an open converter slips: the engine runs ahead of the wheels
                target = max(coupled + self.throttle * 8.0, self.idle_rpm + self.throttle * 17.0)
        target = min(target, REDLINE_RPM)
        tau = 0.25 if target > self.rpm else 0.4
        self.rpm = _lag(self.rpm, target, dt, tau) + self._rng.uniform(-3.0, 3.0)
        base = 18.0 + (4.0 if self.compressor_w > 0 else 0.0)
        self.load = _clamp(base + 0.78 * self.throttle, 0.0, 100.0)
        self.run_time += dt
        litres_per_s = (0.8 + self.rpm / 1000.0 * self.load / 100.0 * 6.0) / 3600.0
        self.fuel_l = max(0.0, self.fuel_l - litres_per_s * dt)

    def _step_motion(self, dt: float) -> None:
        kmh = self.speed * 3.6
        drive = 0.0
        if 1 <= self.gear <= len(_GEAR_RATIOS):
            drive = self.throttle / 100.0 * _GEAR_ACCEL[self.gear - 1]
            if not self.brake and kmh < _CREEP_KMH:
                drive = max(drive, _CREEP_ACCEL)
        elif self.gear == REVERSE_GEAR and kmh < _REVERSE_MAX_KMH:
            drive = self.throttle / 100.0 * 2.0 + (0.0 if self.brake else _CREEP_ACCEL)
        resist = _drag(self.speed)
        if self.brake:
            resist += _BRAKE_DECEL
        if self.lever == "P":
            resist += 5.0  # the parking pawl; the cycle never selects P while moving
        accel = drive - resist if self.speed > 0.0 else max(0.0, drive - resist)
        self.speed = max(0.0, self.speed + accel * dt)
        self.accel = accel if self.speed > 0.0 else 0.0
        self.odometer_km += self.speed * dt / 1000.0
        if self.stored:
            self.mil_distance_km += self.speed * dt / 1000.0
        bend = 8.0 * math.sin(2 * math.pi * self.time_s / 40.0)  # gentle bends of the road
        wanted = bend if self.speed > 1.0 else 0.0
        self.steering = _lag(self.steering, wanted, dt, 0.5) + self._rng.uniform(-0.05, 0.05)
        road_wheel = math.radians(self.steering / 15.0)
        self.yaw = math.degrees(self.speed * math.tan(road_wheel) / 2.8)

    def _step_temperatures(self, dt: float) -> None:
        target = _THERMOSTAT_C + self.load * 0.04
        if self.overheat:
            self.coolant = min(_OVERHEAT_PEAK_C, self.coolant + _OVERHEAT_RISE_C_PER_S * dt)
        elif self.coolant > target:
            self.coolant = max(target, self.coolant - _COOLDOWN_C_PER_S * dt)
        elif self.coolant < target - 2.0:
            warming = 0.3 + self.rpm / 4000.0 * 0.5 * (0.5 + self.load / 100.0)
            self.coolant = min(target, self.coolant + warming * dt)
        else:  # the thermostat holds it
            self.coolant = _lag(self.coolant, target, dt, 10.0)
        self.trans_temp = _lag(self.trans_temp, 80.0, dt, 300.0)

    def _step_climate(self, dt: float) -> None:
        request = self.climate
        error = request.setpoint_c - self.cabin
        if request.fan_level == 0:
            strength = 0.0
        elif request.fan_level == FAN_AUTO:
            strength = min(1.0, 0.3 + abs(error) / 5.0)
        else:
            strength = request.fan_level / 7.0
        self.cabin += (error * strength / 40.0 + (self.outside_c - self.cabin) / 1200.0) * dt
        ac_on = request.ac and request.fan_level != 0
        if ac_on:
            demand = 400.0 + 250.0 * max(0.0, -error) + 30.0 * max(0.0, self.outside_c - 20.0)
            self.compressor_w = _clamp(demand, 0.0, 6000.0)
        else:
            self.compressor_w = 0.0

    def _step_battery(self, dt: float) -> None:
        pack_v = sum(self.cells)
        current = 12.0 + self.compressor_w / pack_v  # DC-DC to the 12 V net, compressor
        if self.throttle > 20.0 and self.speed > 0.0:
            current += self.throttle * 0.6  # electric boost
        if self.brake and self.speed > 0.5 and self.soc < 95.0:
            current -= 60.0 * min(1.0, self.speed / 5.0)  # regeneration
        elif self.soc < 30.0:
            current -= 25.0  # the belt generator charges
        self.current = current
        self.soc = _clamp(self.soc - current * dt / (_PACK_AH * 3600.0) * 100.0, 0.0, 100.0)
        self.battery_temp = _lag(
            self.battery_temp, self.outside_c + 3.0 + abs(current) * 0.15, dt, 200.0
        )
        self._update_cells()

    def _update_cells(self) -> None:
        ocv = 3.0 + 0.006 * self.soc  # a flat LFP-like curve, 3.0 V empty to 3.6 V full
        base = ocv - self.current * _CELL_OHM  # each cell is this plus its offset, in mV
        low, high = self._cells_kept
        if low < base < high:
            return  # every cell rounds to the millivolt it has
        offsets = self.cell_offsets
        cells = self.cells = tuple([_to_millivolt(base + offset) for offset in offsets])
        # `round(x, 3)` is the double nearest the decimal x rounds to: the same for every x
        # within half a step of it (less a margin far wider than a double's error near 3 V),
        # so the same for every cell while `base` stays where all of them do
        if all(cells):  # but zero keeps the sign of what was rounded: -0.0 or 0.0
            pairs = list(zip(cells, offsets, strict=True))
            self._cells_kept = (
                max(c - _CELL_HALF_STEP + _CELL_MARGIN - o for c, o in pairs),
                min(c + _CELL_HALF_STEP - _CELL_MARGIN - o for c, o in pairs),
            )
        else:
            self._cells_kept = (math.inf, -math.inf)

    def _step_diagnostics(self) -> None:
        if self.coolant < _REARM_C:
            self.overheat_latched = False
        elif not self.overheat_latched:
            if self.coolant > _PENDING_C and _DTC_OVERHEAT not in self.pending:
                self.pending.append(_DTC_OVERHEAT)
            if self.coolant > _CONFIRMED_C:
                for codes in (self.stored, self.permanent):
                    if _DTC_OVERHEAT not in codes:
                        codes.append(_DTC_OVERHEAT)
                if self.freeze is None:  # the first confirmed code takes the freeze frame
                    self.freeze = (_DTC_OVERHEAT, self.snapshot())
                self.overheat_latched = True

    def _step_body(self) -> None:
        if self.speed * 3.6 > 15.0 and self.lock == "Unlocked":
            self.lock = "Locked"  # speed-dependent auto lock

    # -- reading -------------------------------------------------------------------------

    def snapshot(self) -> VehicleState:
        climate = self.climate
        running = self.coolant <= _CONFIRMED_C
        return VehicleState(
            time_s=self.time_s,
            engine_speed_rpm=self.rpm,
            throttle_pct=self.throttle,
            engine_load_pct=self.load,
            engine_torque_pct=_clamp(self.load - 8.0, 0.0, 100.0),
            coolant_temp_c=self.coolant,
            engine_state="Running" if running else "Fault",
            intake_air_temp_c=self.outside_c + 4.0 + max(0.0, self.coolant - 20.0) * 0.08,
            fuel_level_pct=self.fuel_l / _TANK_L * 100.0,
            run_time_s=self.run_time,
            vehicle_speed_kmh=self.speed * 3.6,
            accel_mps2=self.accel,
            yaw_rate_dps=self.yaw,
            steering_angle_deg=self.steering,
            brake=self.brake,
            odometer_km=self.odometer_km,
            gear_lever=self.lever,
            current_gear=self.gear,
            transmission_temp_c=self.trans_temp,
            shifting=self.shift_timer > 0.0,
            converter_locked=self._converter_locked(),
            doors=MappingProxyType(dict(self.doors)),
            lock_state=self.lock,
            headlights=self.headlights,
            turn_indicator=self.turn,
            fog_lights=self.fog,
            interior_light=self.interior,
            climate_request=climate,
            cabin_temp_c=self.cabin,
            outside_temp_c=self.outside_c,
            active_setpoint_c=climate.setpoint_c,
            fan_level_actual=climate.fan_level,
            ac_active=self.compressor_w > 0.0,
            compressor_power_w=self.compressor_w,
            cell_voltages=self.cells,
            module_temp_c=self.battery_temp,
            pack_voltage_v=sum(self.cells),
            pack_current_a=self.current,
            soc_pct=self.soc,
            max_cell_temp_c=self.battery_temp + 2.0,
            module_voltage_v=14.2 - self.load * 0.004,
            mil=bool(self.stored),
            stored_dtcs=tuple(self.stored),
            pending_dtcs=tuple(self.pending),
            permanent_dtcs=tuple(self.permanent),
            distance_since_clear_km=self.odometer_km - self.distance_at_clear_km,
            distance_mil_on_km=self.mil_distance_km,
            overheating=self.overheat,
            driving=self.driving,
            drive_phase=self.cycle.phase if self.driving else "manual",
            freeze_dtc=self.freeze[0] if self.freeze else None,
            freeze_frame=self.freeze[1] if self.freeze else None,
            default_drive=self.driving and isinstance(self.cycle, DriveCycle),
            idle_target_rpm=self.idle_rpm,
        )


def _choose(value: str, options: tuple[str, ...], what: str) -> str:
    for option in options:
        if option.lower() == value.strip().lower():
            return option
    raise ValueError(f"{what} must be one of {', '.join(options)}; got {value!r}")
