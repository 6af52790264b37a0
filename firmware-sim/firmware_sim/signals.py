"""From model state to frames: which DBC signal carries which quantity, and E2E fields.

`SIGNALS` maps the signal names of `dbc/demo_vehicle.dbc` to functions of a `VehicleState`
(a key may also be `Message.Signal` to target one message). `MessagePlan` turns one periodic
message of any database into frames: mapped signals get the model's value (clamped into the
signal's range, labels only where the database defines them), the others keep their DBC
initial value, a multiplexed message cycles through its multiplexer values, and a rolling
counter and an XOR checksum are kept correct (`firmware_sim.e2e`).

Frames are encoded by cantools itself, never by hwbridge's codec: the simulator is an
independent witness of what hwbridge decodes (and of what its discovery finds).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import can
from firmware_sim.e2e import RollingE2E, write_raw
from firmware_sim.model import CELLS, ClimateRequest, VehicleState

__all__ = [
    "SIGNALS",
    "MessagePlan",
    "SignalValue",
    "climate_request",
    "coerce_value",
    "find_message",
    "find_signal",
    "initial_value",
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
        # GnssSpeed (dbc/gnss_module.dbc, with --gnss-can): a GNSS module on the bus
        "GnssSpeedKmh": lambda s: s.vehicle_speed_kmh,
        "GnssSatellites": lambda s: 12,
        "GnssFix": lambda s: "3D",
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


def _number(value: Any) -> float | None:
    """A decoded value as a number (cantools gives labelled values as NamedSignalValue)."""
    value = getattr(value, "value", value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def climate_request(signals: Mapping[str, Any], current: ClimateRequest) -> ClimateRequest:
    """The request a decoded ClimateCommand makes; signals it lacks keep `current`."""

    def number(name: str, default: float) -> float:
        value = _number(signals.get(name))
        return default if value is None else value

    return ClimateRequest(
        setpoint_c=number("CabinSetpoint", current.setpoint_c),
        fan_level=round(number("FanLevel", current.fan_level)),
        ac=bool(number("AcRequest", current.ac)),
        recirculation=bool(number("Recirculation", current.recirculation)),
        air_distribution=round(number("AirDistribution", current.air_distribution)),
        rear_defrost=bool(number("RearDefrost", current.rear_defrost)),
    )


def find_message(db: Any, name: str) -> Any:
    """A message of a cantools database by name (any case); ValueError if there is none."""
    text = name.strip()
    exact = [m for m in db.messages if m.name == text]
    if exact:
        return exact[0]
    folded = [m for m in db.messages if m.name.lower() == text.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ValueError(f"no message named {name!r}")


def find_signal(db: Any, name: str) -> tuple[Any, Any]:
    """(message, signal) by `Signal` or `Message.Signal`; ValueError when unknown or in
    several messages (naming them)."""
    text = name.strip()
    if "." in text:
        message_name, _, signal_name = text.rpartition(".")
        message = find_message(db, message_name)
        for signal in message.signals:
            if signal.name == signal_name:
                return message, signal
        raise ValueError(f"{message.name} has no signal {signal_name!r}")
    pairs = [(m, s) for m in db.messages for s in m.signals if s.name == text]
    if not pairs:
        raise ValueError(f"no signal named {name!r}")
    if len(pairs) > 1:
        listed = ", ".join(f"{m.name}.{s.name}" for m, s in pairs)
        raise ValueError(f"{text} is in {len(pairs)} messages; name one of {listed}")
    return pairs[0]


def _raw_bounds(signal: Any) -> tuple[int, int]:
    n = int(signal.length)
    if signal.is_signed:
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def _physical(signal: Any, raw: float) -> float:
    return raw * float(signal.scale) + float(signal.offset)


def _range(signal: Any) -> tuple[float, float]:
    """The physical values a frame may carry: the DBC range within what the bits fit."""
    lo, hi = (_physical(signal, r) for r in _raw_bounds(signal))
    lo, hi = min(lo, hi), max(lo, hi)
    if (
        signal.minimum is not None
        and signal.maximum is not None
        and signal.minimum < signal.maximum
    ):
        return max(lo, float(signal.minimum)), min(hi, float(signal.maximum))
    return lo, hi


def out_of_range_raw(signal: Any) -> int | None:
    """A raw value the signal's bits can carry but its DBC range forbids, or None."""
    if signal.minimum is None or signal.maximum is None or signal.minimum >= signal.maximum:
        return None
    lo, hi = _raw_bounds(signal)
    span = float(signal.maximum) - float(signal.minimum)
    for physical in (float(signal.maximum) + span, float(signal.minimum) - span):
        raw = min(max(round((physical - float(signal.offset)) / float(signal.scale)), lo), hi)
        value = _physical(signal, raw)
        if value > float(signal.maximum) or value < float(signal.minimum):
            return raw
    return None


def _coerce(
    signal: Any, value: SignalValue, bounds: tuple[float, float] | None = None
) -> SignalValue | None:
    """`value` made acceptable to the signal: a known label, or a number in range (`bounds`,
    by default the DBC range when it has one)."""
    if isinstance(value, str):
        labels = {str(v).lower(): str(v) for v in (signal.choices or {}).values()}
        return labels.get(value.lower())
    if not math.isfinite(value):
        return None
    lo, hi = bounds if bounds is not None else _range(signal)
    value = min(max(value, lo), hi)
    if signal.is_float:
        return value
    raw_lo, raw_hi = _raw_bounds(signal)
    raw = min(max(round((value - float(signal.offset)) / float(signal.scale)), raw_lo), raw_hi)
    # on the signal's resolution already, so cantools has nothing to round
    physical = _physical(signal, raw)
    if not lo <= physical <= hi:  # rounding stepped outside: step back in
        raw += 1 if physical < lo else -1
        physical = _physical(signal, raw)
    return int(physical) if float(physical).is_integer() else physical


def _initial(signal: Any) -> SignalValue:
    """What a signal no source fills is sent as: its DBC initial value, else 0, else the
    low end of its range."""
    if signal.raw_initial is not None:
        return _physical(signal, float(signal.raw_initial))
    lo, hi = _range(signal)
    return 0 if lo <= 0 <= hi else lo


def coerce_value(
    signal: Any, value: SignalValue, bounds: tuple[float, float] | None = None
) -> SignalValue | None:
    """`value` made acceptable to the signal: a known label, or a number on its resolution
    within `bounds` (default: its DBC range); None when it cannot be."""
    return _coerce(signal, value, bounds)


def initial_value(signal: Any) -> SignalValue:
    """The value a signal no source fills is sent with."""
    return _initial(signal)


class MessagePlan:
    """How one periodic message is sent: period, signal sources, mux cycle, E2E fields."""

    def __init__(
        self,
        db: Any,
        message: Any,
        signals: Mapping[str, Callable[[VehicleState], SignalValue]] = SIGNALS,
    ) -> None:
        self.db = db
        self.message = message
        self.name: str = message.name
        self.period_s = float(message.cycle_time) / 1000.0
        self.by_name: dict[str, Any] = {s.name: s for s in message.signals}
        names = list(self.by_name)
        counter = next((n for n in names if _COUNTER.search(n)), None)
        checksum = next((n for n in names if _CHECKSUM.search(n)), None)
        self._e2e: RollingE2E | None = None
        self._sent = 0  # frames built so far: the counter's sequence number
        if counter or checksum:
            self._e2e = RollingE2E(
                self.by_name.get(counter) if counter else None,
                self.by_name.get(checksum) if checksum else None,
            )
        self._mux = next(
            (s.name for s in message.signals if s.is_multiplexer and not s.multiplexer_ids),
            None,
        )
        mux_ids = {
            i
            for s in message.signals
            if s.multiplexer_signal == self._mux and s.multiplexer_ids
            for i in s.multiplexer_ids
        }
        self._mux_values = tuple(sorted(mux_ids)) if self._mux else ()
        self._mux_index = 0
        skip = {counter, checksum, self._mux}
        self._sources: list[tuple[Any, Callable[[VehicleState], SignalValue]]] = []
        for signal in message.signals:
            source = signals.get(f"{self.name}.{signal.name}") or signals.get(signal.name)
            if source is not None and signal.name not in skip:
                self._sources.append((signal, source))
        self._warned = False
        self._last_key: tuple[tuple[str, object], ...] | None = None
        self._last: bytes | None = None

    def _present(self, signal: Any, mux_value: int | None) -> bool:
        """Whether the signal is in a frame with this multiplexer value."""
        if not signal.multiplexer_ids or signal.multiplexer_signal is None:
            return True
        return signal.multiplexer_signal == self._mux and mux_value in signal.multiplexer_ids

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
        for signal, source in self._sources:
            if not self._present(signal, mux_value):
                continue
            value = _coerce(signal, source(state))
            if value is not None:
                values[signal.name] = value
        key = tuple(values.items())
        payload = self._last
        if payload is None or key != self._last_key:  # slow-changing messages skip encoding
            payload = self._last = self._encode(values, mux_value)
            self._last_key = key
        data = bytearray(payload)
        for name, raw in (out_of_range or {}).items():
            signal = self.by_name.get(name)
            if signal is not None and self._present(signal, mux_value):
                write_raw(data, signal, int(raw))
        if self._e2e is not None:
            data = bytearray(self._e2e.apply(bytes(data), self._sent))
            self._sent += 1
        is_fd = bool(self.message.is_fd) or len(data) > 8
        return can.Message(
            arbitration_id=int(self.message.frame_id),
            is_extended_id=bool(self.message.is_extended_frame),
            is_fd=is_fd,
            bitrate_switch=is_fd,
            data=data,
        )

    def _encode(self, values: dict[str, object], mux_value: int | None) -> bytes:
        """cantools' encoding of the frame: every signal of the active branch, those no
        source gave at their initial value."""
        full = {
            s.name: values.get(s.name, _initial(s))
            for s in self.message.signals
            if self._present(s, mux_value)
        }
        if self._mux is not None and mux_value is not None:
            full[self._mux] = mux_value
        try:
            return bytes(self.message.encode(full, padding=False, strict=True))
        except Exception as exc:  # a value cantools refuses: send the initial values
            if not self._warned:
                log.warning("%s: sent with its initial values (%s)", self.name, exc)
                self._warned = True
            fallback = {
                s.name: _initial(s) for s in self.message.signals if self._present(s, mux_value)
            }
            if self._mux is not None and mux_value is not None:
                fallback[self._mux] = mux_value
            return bytes(self.message.encode(fallback, padding=False, strict=False))
