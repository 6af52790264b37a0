"""The simulated truck's physics: the car's drive cycle, seen through a diesel's numbers.

`TruckModel` reuses `firmware_sim.model.VehicleModel` for everything that moves (the drive
cycle, the 6-speed automatic, speed, brake, coolant warm-up and overheating) and maps it
onto a heavy-duty diesel: 600 rpm idle, up to about 1700 rpm under way, a 24 V system, oil
and transmission fluids, engine hours and revolutions that count up while the engine runs.
Fault conditions (`set_condition`) change what the sensors read: low oil pressure, a hot
transmission, a wheel speed sensor that takes ABS out. Like the car model it does no I/O,
is stepped by its caller and is not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from firmware_sim.model import IDLE_RPM, REVERSE_GEAR, VehicleModel

__all__ = ["CONDITIONS", "TRUCK_IDLE_RPM", "TruckModel", "TruckState"]

TRUCK_IDLE_RPM: Final = 600.0
_RPM_SCALE: Final = 0.8  # car rpm above idle -> diesel rpm above idle
_GEAR_RATIOS: Final = (3.51, 1.91, 1.43, 1.00, 0.75, 0.64)
_REVERSE_RATIO: Final = 4.80
_BRAKE_PEDAL_PCT: Final = 35.0
_START_HOURS: Final = 12_345.6
_AVERAGE_RPM: Final = 1150.0  # what the odometer of revolutions assumes for the past hours
CONDITIONS: Final = (
    "coolant_temp_high",
    "oil_pressure_low",
    "transmission_oil_temp_high",
    "wheel_speed_sensor",
)
"""Fault conditions the sensors show; other faults only raise their DTC."""


@dataclass(frozen=True, slots=True)
class TruckState:
    """One consistent snapshot of the truck in physical units; None: not available."""

    time_s: float
    drive_phase: str
    # engine
    engine_speed_rpm: float
    accelerator_pct: float
    drivers_demand_torque_pct: float
    actual_torque_pct: float
    engine_load_pct: float
    torque_mode: int  # SPN 899: 0 low idle governor, 1 accelerator pedal, 6 transmission
    controlling_address: int  # SPN 1483: the engine itself, the transmission while shifting
    coolant_temp_c: float
    fuel_temp_c: float
    oil_temp_c: float
    turbo_oil_temp_c: float
    intercooler_temp_c: float
    fuel_delivery_kpa: float
    oil_level_pct: float
    oil_pressure_kpa: float
    coolant_pressure_kpa: float
    coolant_level_pct: float
    engine_hours: float
    engine_revolutions: float
    # vehicle
    vehicle_speed_kmh: float
    brake_pedal_pct: float
    brake_switch: bool
    parking_brake: bool
    # transmission
    selected_gear: int  # negative reverse, 0 neutral or park
    current_gear: int
    gear_ratio: float | None
    transmission_oil_temp_c: float
    transmission_oil_pressure_kpa: float
    clutch_pressure_kpa: float
    transmission_oil_level_pct: float
    # brakes
    abs_fully_operational: bool
    abs_amber_warning: bool
    # electrical (24 V)
    battery_v: float
    charging_v: float
    keyswitch_v: float
    alternator_a: float
    net_battery_a: float
    # ambient, for what follows it
    outside_temp_c: float


def _j1939_gear(gear: int) -> int:
    """The car model's gear (0 neutral, 1-6, 11 reverse) as J1939 counts it."""
    return -1 if gear == REVERSE_GEAR else gear


class TruckModel:
    """The truck's physics; `step(dt)` advances it and `snapshot()` reads it."""

    def __init__(self, seed: int = 0, *, driving: bool = True, coolant_c: float = 80.0) -> None:
        self.car = VehicleModel(seed, coolant_c=coolant_c, driving=driving)
        self.hours = _START_HOURS + (seed % 97) * 10.0
        self.revolutions = self.hours * 60.0 * _AVERAGE_RPM
        self.conditions: set[str] = set()
        self._gear = 0
        self._last_gear = 0

    @property
    def driving(self) -> bool:
        return self.car.driving

    def set_condition(self, name: str, on: bool) -> None:
        """Start or end a fault condition (see `CONDITIONS`); others are ignored."""
        if name not in CONDITIONS:
            return
        if on:
            self.conditions.add(name)
        else:
            self.conditions.discard(name)
        if name == "coolant_temp_high":
            self.car.set_overheat(on)

    def step(self, dt: float) -> None:
        if dt <= 0.0:
            return
        self.car.step(dt)
        rpm = self._rpm(self.car.rpm)
        self.hours += dt / 3600.0
        self.revolutions += rpm / 60.0 * dt
        if self.car.gear != self._gear:
            self._last_gear, self._gear = self._gear, self.car.gear

    @staticmethod
    def _rpm(car_rpm: float) -> float:
        return max(TRUCK_IDLE_RPM + (car_rpm - IDLE_RPM) * _RPM_SCALE, 0.0)

    def snapshot(self) -> TruckState:
        car = self.car.snapshot()
        rpm = self._rpm(car.engine_speed_rpm)
        load = car.engine_load_pct
        coolant = car.coolant_temp_c
        outside = car.outside_temp_c
        oil = coolant + 3.0 + 6.0 * load / 100.0
        gear = _j1939_gear(car.current_gear)
        current = _j1939_gear(self._last_gear) if car.shifting else gear
        if car.current_gear == REVERSE_GEAR:
            ratio: float | None = _REVERSE_RATIO
        elif 1 <= car.current_gear <= len(_GEAR_RATIOS):
            ratio = _GEAR_RATIOS[car.current_gear - 1]
        else:
            ratio = None
        in_gear = car.gear_lever not in ("P", "N")
        conditions = self.conditions
        oil_pressure = 160.0 + (rpm - TRUCK_IDLE_RPM) * 0.18
        if "oil_pressure_low" in conditions:
            oil_pressure = 40.0
        trans_temp = car.transmission_temp_c
        if "transmission_oil_temp_high" in conditions:
            trans_temp = max(trans_temp, 130.0)
        sensor_fault = "wheel_speed_sensor" in conditions
        pedal = car.throttle_pct
        return TruckState(
            time_s=car.time_s,
            drive_phase=car.drive_phase,
            engine_speed_rpm=rpm,
            accelerator_pct=pedal,
            drivers_demand_torque_pct=pedal,
            actual_torque_pct=car.engine_torque_pct,
            engine_load_pct=load,
            torque_mode=6 if car.shifting else (1 if pedal > 0.0 else 0),
            controlling_address=0x03 if car.shifting else 0x00,
            coolant_temp_c=coolant,
            fuel_temp_c=outside + 0.35 * (coolant - outside),
            oil_temp_c=oil,
            turbo_oil_temp_c=oil + 4.0,
            intercooler_temp_c=outside + 10.0 + 0.2 * load,
            fuel_delivery_kpa=520.0,
            oil_level_pct=88.0,
            oil_pressure_kpa=oil_pressure,
            coolant_pressure_kpa=max(0.0, 30.0 + (coolant - 20.0) * 0.8),
            coolant_level_pct=96.0,
            engine_hours=self.hours,
            engine_revolutions=self.revolutions,
            vehicle_speed_kmh=car.vehicle_speed_kmh,
            brake_pedal_pct=_BRAKE_PEDAL_PCT if car.brake else 0.0,
            brake_switch=car.brake,
            parking_brake=car.gear_lever == "P" and car.vehicle_speed_kmh < 0.5,
            selected_gear=gear,
            current_gear=current,
            gear_ratio=ratio,
            transmission_oil_temp_c=trans_temp,
            transmission_oil_pressure_kpa=1100.0 if in_gear else 600.0,
            clutch_pressure_kpa=1400.0 if in_gear else 0.0,
            transmission_oil_level_pct=94.0,
            abs_fully_operational=not sensor_fault,
            abs_amber_warning=sensor_fault,
            battery_v=2.0 * car.module_voltage_v - 0.4,
            charging_v=2.0 * car.module_voltage_v,
            keyswitch_v=2.0 * car.module_voltage_v - 0.6,
            alternator_a=35.0 + 0.2 * load,
            net_battery_a=4.0,
            outside_temp_c=outside,
        )
