"""From model state to frames: which DBC signal carries which quantity, and E2E fields.

`SIGNALS` maps the signal names of `dbc/demo_vehicle.dbc` to functions of a `VehicleState`
(a key may also be `Message.Signal` to target one message). `MessagePlan` turns one periodic
message of any database into frames: mapped signals get the model's value (clamped into the
signal's range, labels only where the database defines them), the others keep their DBC
initial value, a multiplexed message cycles through its multiplexer values, and a rolling
counter and an XOR checksum are kept correct through hwbridge's own `counter_and_checksum`.
All encoding goes through `CanDatabase.encode`.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import can
from firmware_sim.model import CELLS, ClimateRequest, VehicleState
from hwbridge.can.database.bits import insert
from hwbridge.can.database.database import CanDatabase, EncodedFrame, JsonValue, SignalSpec
from hwbridge.can.tools.sending import FrameHook, counter_and_checksum
from hwbridge.core.models import ToolError

__all__ = [
    "SIGNALS",
    "MessagePlan",
    "SignalValue",
    "climate_request",
    "out_of_range_raw",
]

log = logging.getLogger(__name__)

SignalValue = float | int | str
_COUNTER = re.compile(r"(counter|alive)$|^rc$", re.IGNORECASE)
_CHECKSUM = re.compile(r"(checksum|crc\d*|chksum)$", re.IGNORECASE)


def _bit(flag: bool) -> int:
    return 1 if flag else 0


def _moving(s: VehicleState) -> bool:
    return s.vehicle_speed_kmh > 5.0


def _lead_distance(s: VehicleState) -> float:
    """A car ahead at about two seconds' headway, breathing in and out slowly."""
    return 8.0 + 2.0 * s.vehicle_speed_kmh / 3.6 + 4.0 * math.sin(s.time_s / 6.0)


def _cell(index: int) -> Callable[[VehicleState], SignalValue]:
    return lambda s: s.cell_voltages[index]


def _build_signals() -> dict[str, Callable[[VehicleState], SignalValue]]:
    table: dict[str, Callable[[VehicleState], SignalValue]] = {
        # EngineData
        "EngineSpeed": lambda s: s.engine_speed_rpm,
        "ThrottlePosition": lambda s: s.throttle_pct,
        "CoolantTemp": lambda s: s.coolant_temp_c,
        "EngineLoad": lambda s: s.engine_load_pct,
        "EngineState": lambda s: s.engine_state,
        # VehicleDynamics
        "VehicleSpeed": lambda s: s.vehicle_speed_kmh,
        "LongitudinalAccel": lambda s: s.accel_mps2,
        "YawRate": lambda s: s.yaw_rate_dps,
        "SteeringAngle": lambda s: s.steering_angle_deg,
        "BrakePedal": lambda s: _bit(s.brake),
        # TransmissionStatus
        "GearLever": lambda s: s.gear_lever,
        "CurrentGear": lambda s: s.current_gear,
        "TransmissionTemp": lambda s: s.transmission_temp_c,
        "ShiftInProgress": lambda s: _bit(s.shifting),
        "ConverterLockup": lambda s: _bit(s.converter_locked),
        # DoorStatus
        "DoorFrontLeft": lambda s: _bit(s.doors["front_left"]),
        "DoorFrontRight": lambda s: _bit(s.doors["front_right"]),
        "DoorRearLeft": lambda s: _bit(s.doors["rear_left"]),
        "DoorRearRight": lambda s: _bit(s.doors["rear_right"]),
        "Tailgate": lambda s: _bit(s.doors["tailgate"]),
        "Hood": lambda s: _bit(s.doors["hood"]),
        "LockState": lambda s: s.lock_state,
        # LightStatus
        "HeadlightMode": lambda s: s.headlights,
        "TurnIndicator": lambda s: s.turn_indicator,
        "BrakeLight": lambda s: _bit(s.brake),
        "FogLights": lambda s: _bit(s.fog_lights),
        "InteriorLight": lambda s: s.interior_light,
        # ClimateCommand (the head unit's current request)
        "CabinSetpoint": lambda s: s.climate_request.setpoint_c,
        "FanLevel": lambda s: s.climate_request.fan_level,
        "AcRequest": lambda s: _bit(s.climate_request.ac),
        "Recirculation": lambda s: _bit(s.climate_request.recirculation),
        "AirDistribution": lambda s: s.climate_request.air_distribution,
        "RearDefrost": lambda s: _bit(s.climate_request.rear_defrost),
        # ClimateStatus
        "CabinTemp": lambda s: s.cabin_temp_c,
        "OutsideTemp": lambda s: s.outside_temp_c,
        "ActiveSetpoint": lambda s: s.active_setpoint_c,
        "FanLevelActual": lambda s: s.fan_level_actual,
        "AcActive": lambda s: _bit(s.ac_active),
        "CompressorPower": lambda s: s.compressor_power_w,
        # BatteryCells (the cell voltages are added below) and BatteryPack
        "ModuleTemp": lambda s: s.module_temp_c,
        "PackVoltage": lambda s: s.pack_voltage_v,
        "PackCurrent": lambda s: s.pack_current_a,
        "StateOfCharge": lambda s: s.soc_pct,
        "MaxCellTemp": lambda s: s.max_cell_temp_c,
        # AdasObjects: one car ahead while moving
        "ObjectCount": lambda s: _bit(_moving(s)),
        "Obj1Distance": lambda s: _lead_distance(s) if _moving(s) else 0.0,
        "Obj1RelSpeed": lambda s: math.cos(s.time_s / 6.0) * 0.7 if _moving(s) else 0.0,
        "Obj1Class": lambda s: "Car" if _moving(s) else "None",
        "Obj1Confidence": lambda s: 90 if _moving(s) else 0,
        "RoadCurvature": lambda s: (
            math.radians(s.yaw_rate_dps) / (s.vehicle_speed_kmh / 3.6) if _moving(s) else 0.0
        ),
        # EEC1 (J1939)
        "EngSpeed": lambda s: s.engine_speed_rpm,
        "ActualEngPercentTorque": lambda s: s.engine_torque_pct,
        "DriversDemandEngPercentTorque": lambda s: s.throttle_pct,
        "EngDemandPercentTorque": lambda s: s.engine_torque_pct,
    }
    for index in range(CELLS):
        table[f"Cell{index + 1:02d}Voltage"] = _cell(index)
    return table


SIGNALS: Final[Mapping[str, Callable[[VehicleState], SignalValue]]] = _build_signals()


def _plain(value: JsonValue) -> JsonValue:
    """A decoded value without its label (`{"value": 8, "label": "Auto"}` -> 8)."""
    return value.get("value") if isinstance(value, dict) else value


def climate_request(signals: Mapping[str, JsonValue], current: ClimateRequest) -> ClimateRequest:
    """The request a decoded ClimateCommand makes; signals it lacks keep `current`."""

    def number(name: str, default: float) -> float:
        value = _plain(signals.get(name))
        return float(value) if isinstance(value, int | float) else default

    return ClimateRequest(
        setpoint_c=number("CabinSetpoint", current.setpoint_c),
        fan_level=round(number("FanLevel", current.fan_level)),
        ac=bool(number("AcRequest", current.ac)),
        recirculation=bool(number("Recirculation", current.recirculation)),
        air_distribution=round(number("AirDistribution", current.air_distribution)),
        rear_defrost=bool(number("RearDefrost", current.rear_defrost)),
    )


def out_of_range_raw(spec: SignalSpec) -> int | float | None:
    """A raw value the signal's bits can carry but its DBC range forbids, or None."""
    if spec.minimum is None or spec.maximum is None:
        return None
    span = spec.maximum - spec.minimum
    for physical in (spec.maximum + span, spec.minimum - span):
        wanted = min(max(physical, spec.fit_low), spec.fit_high)
        raw: int | float = (wanted - spec.offset) / spec.scale
        if not spec.is_float:
            raw = min(max(round(raw), int(spec.raw_min)), int(spec.raw_max))
        value = spec.physical(raw)
        if value > spec.maximum or value < spec.minimum:
            return raw
    return None


def _coerce(spec: SignalSpec, value: SignalValue) -> SignalValue | None:
    """`value` made acceptable to the signal: a known label, or a number in range."""
    if isinstance(value, str):
        return value if value.lower() in spec.labels else None
    if not math.isfinite(value):
        return None
    value = min(max(value, spec.low), spec.high)
    if spec.is_float:
        return value
    # on the signal's resolution already, so encoding has nothing to round or report
    return spec.physical(
        min(max(round((value - spec.offset) / spec.scale), spec.raw_min), spec.raw_max)
    )


class MessagePlan:
    """How one periodic message is sent: period, signal sources, mux cycle, E2E fields."""

    def __init__(
        self,
        db: CanDatabase,
        message: Any,
        signals: Mapping[str, Callable[[VehicleState], SignalValue]] = SIGNALS,
    ) -> None:
        self.db = db
        self.message = message
        self.name: str = message.name
        self.period_s = float(message.cycle_time) / 1000.0
        specs = db.signals(message)
        self.specs: dict[str, SignalSpec] = {s.name: s for s in specs}
        counter = next((s.name for s in specs if _COUNTER.search(s.name)), None)
        checksum = next((s.name for s in specs if _CHECKSUM.search(s.name)), None)
        self._hook: FrameHook | None = None
        self._sent = 0  # frames built so far: the hook's sequence number
        if counter or checksum:
            self._hook = counter_and_checksum(counter, checksum)(db, message)
        self._mux = next(
            (s.name for s in specs if s.is_multiplexer and s.multiplexer_signal is None), None
        )
        mux_ids = {i for s in specs if s.multiplexer_signal == self._mux for i in s.multiplexer_ids}
        self._mux_values = tuple(sorted(mux_ids)) if self._mux else ()
        self._mux_index = 0
        skip = {counter, checksum, self._mux}
        self._sources: list[tuple[SignalSpec, Callable[[VehicleState], SignalValue]]] = []
        for spec in specs:
            source = signals.get(spec.qualified) or signals.get(spec.name)
            if source is not None and spec.name not in skip:
                self._sources.append((spec, source))
        self._warned = False
        self._last_key: tuple[tuple[str, object], ...] | None = None
        self._last: EncodedFrame | None = None

    def frame(
        self, state: VehicleState, out_of_range: Mapping[str, int | float] | None = None
    ) -> can.Message:
        """The next frame of this message for `state`; `out_of_range` forces raw values."""
        values: dict[str, object] = {}
        mux_value: int | None = None
        if self._mux_values and self._mux is not None:
            mux_value = self._mux_values[self._mux_index]
            self._mux_index = (self._mux_index + 1) % len(self._mux_values)
            values[self._mux] = mux_value
        for spec, source in self._sources:
            if spec.multiplexer_signal is not None and (
                spec.multiplexer_signal != self._mux or mux_value not in spec.multiplexer_ids
            ):
                continue
            value = _coerce(spec, source(state))
            if value is not None:
                values[spec.name] = value
        key = tuple(values.items())
        encoded = self._last
        if encoded is None or key != self._last_key:  # slow-changing messages skip encoding
            encoded = self._last = self._encode(values, mux_value)
            self._last_key = key
        payload = bytearray(encoded.data)
        for name, raw in (out_of_range or {}).items():
            if name in encoded.signals:  # present in this frame (its mux branch)
                insert(self.specs[name].signal, raw, payload)
        msg = can.Message(
            arbitration_id=encoded.arbitration_id,
            is_extended_id=encoded.is_extended,
            is_fd=encoded.is_fd,
            bitrate_switch=encoded.is_fd,
            data=payload,
        )
        if self._hook is not None:
            msg.data = bytearray(self._hook.apply(bytes(msg.data), self._sent))
            self._sent += 1
        return msg

    def _encode(self, values: dict[str, object], mux_value: int | None) -> EncodedFrame:
        try:
            return self.db.encode(self.message, values)
        except ToolError as exc:
            if not self._warned:
                log.warning("%s: sent with its initial values (%s)", self.name, exc)
                self._warned = True
            fallback = {self._mux: mux_value} if self._mux and mux_value is not None else {}
            return self.db.encode(self.message, fallback)
