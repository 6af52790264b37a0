"""How each signal of any database moves: from the vehicle model where it is a quantity the
model computes, otherwise as a signal of its kind would (smooth bounded walks, flags that
toggle now and then, enumerations through their labels, constants that stay).

A `Motion` is a pure function of the vehicle's state (its time included), so the same seed
gives the same values however the frames are scheduled. Values are physical (or labels);
`firmware_sim.live_plan` brings them onto the signal's range and resolution.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

from firmware_sim.model import VehicleState
from firmware_sim.signal_kinds import (
    Kind,
    SignalKind,
    lever_labels,
    raw_bounds,
    signal_range,
    tokens_of,
)

__all__ = [
    "Motion",
    "SteadyAt",
    "Walk",
    "body_of",
    "motion_for",
    "steady_at",
    "steady_until",
    "steady_values",
]

SignalValue = float | int | str
Motion = Callable[[VehicleState], SignalValue | None]
"""A signal's value (physical or a label) in a state; None: its initial value."""

_STEADY_MARGIN_S: Final = 1e-6  # far wider than a float's error on the times of a drive

_WHEEL_RADIUS_M: Final = 0.32
_BLINK_S: Final = 0.66  # a turn signal lamp: on and off 1.5 times a second
_BODY_CYCLE_S: Final = 60.0
# the small differences between the wheels of a real car (tyre wear, pressure)
_WHEEL_SKEW: Final = {"fl": 0.004, "fr": -0.003, "rl": 0.002, "rr": -0.002}
_DOOR_OPEN_S: Final = {  # (from, to) seconds into each body cycle, while parked
    "fl": (0.4, 2.6),
    "fr": (0.8, 2.2),
    "rl": (1.0, 2.0),
    "rr": (1.2, 2.4),
    "trunk": (0.6, 1.6),
}


@dataclass(frozen=True, slots=True)
class Body:
    """Doors, turn signal and lights as the signals show them."""

    doors: dict[str, bool]
    turn: str  # Off, Left, Right, Hazard
    low_beam: bool
    high_beam: bool


def body_of(state: VehicleState) -> Body:
    """The body as the model has it; during the default drive a routine adds what a driver
    does (doors opened while parked, indicators before bends, headlights on, a flash of the
    high beam), so that every body signal shows life."""
    doors = {
        "fl": state.doors["front_left"],
        "fr": state.doors["front_right"],
        "rl": state.doors["rear_left"],
        "rr": state.doors["rear_right"],
        "trunk": state.doors["tailgate"],
    }
    turn = state.turn_indicator
    low = state.headlights in ("LowBeam", "HighBeam")
    high = state.headlights == "HighBeam"
    if state.default_drive:
        t = state.time_s % _BODY_CYCLE_S
        for door, (start, end) in _DOOR_OPEN_S.items():
            doors[door] = doors[door] or start <= t < end
        if turn == "Off":
            turn = "Left" if 6.0 <= t % 30.0 < 9.0 else "Right" if 13.0 <= t % 30.0 < 16 else "Off"
        low = low or t >= 4.0
        high = high or 12.0 <= t < 13.5
    return Body(doors, turn, low, high)


def _wheel_kmh(state: VehicleState, corner: str | None) -> float:
    skew = _WHEEL_SKEW.get(corner or "", 0.0)
    # in a bend the outer wheels run faster than the inner ones
    side = 1.0 if corner in ("fr", "rr") else -1.0 if corner in ("fl", "rl") else 0.0
    bend = side * state.steering_angle_deg * 0.0008
    return max(0.0, state.vehicle_speed_kmh * (1.0 + skew + bend))


def _gear(state: VehicleState, lo: float) -> float:
    if state.current_gear == 11:  # reverse
        return -1.0 if lo < 0 else 0.0
    return float(state.current_gear)


def _quantity(
    kind: SignalKind, lo: float, hi: float, rng: random.Random
) -> Callable[[VehicleState], float] | None:
    """The model's value of a quantity, in the model's unit."""
    name, corner = kind.quantity, kind.corner
    ambient_phase = rng.uniform(0.0, 2 * math.pi)
    # a quantity the state holds as it is: read by attrgetter (no Python call each time)
    # a quantity the state holds as it is is read by attrgetter: no Python call each time
    table: dict[str, Callable[[VehicleState], float]] = {
        "vehicle_speed": attrgetter("vehicle_speed_kmh"),
        "wheel_speed": lambda s: _wheel_kmh(s, corner),
        "engine_speed": attrgetter("engine_speed_rpm"),
        "accelerator": attrgetter("throttle_pct"),
        "brake_pressure": lambda s: 25.0 if s.brake else 0.0,
        "brake_pedal_position": lambda s: 30.0 if s.brake else 0.0,
        "steering_angle": attrgetter("steering_angle_deg"),
        "yaw_rate": attrgetter("yaw_rate_dps"),
        "longitudinal_accel": attrgetter("accel_mps2"),
        "lateral_accel": lambda s: s.vehicle_speed_kmh / 3.6 * math.radians(s.yaw_rate_dps),
        "gear": lambda s: _gear(s, lo),
        "coolant_temp": attrgetter("coolant_temp_c"),
        "oil_temp": lambda s: s.outside_temp_c + (s.coolant_temp_c - s.outside_temp_c) * 0.85,
        "transmission_temp": lambda s: s.transmission_temp_c + (s.engine_load_pct - 18) * 0.05,
        "intake_temp": attrgetter("intake_air_temp_c"),
        # the model's air is still; a thermometer in the wind is not
        "ambient_temp": lambda s: s.outside_temp_c + 0.8 * math.sin(s.time_s / 5.0 + ambient_phase),
        "battery_voltage": (
            attrgetter("pack_voltage_v") if hi >= 60.0 else attrgetter("module_voltage_v")
        ),
        "battery_current": attrgetter("pack_current_a"),
        "state_of_charge": attrgetter("soc_pct"),
        # the sender in the tank sloshes as the car speeds up and slows down
        "fuel_level": lambda s: s.fuel_level_pct + 1.5 * s.accel_mps2,
        "odometer": attrgetter("odometer_km"),
    }
    return table.get(name or "")


def _flag_values(signal: Any) -> tuple[float, float]:
    """(off, on) physical values of a flag: raw 0 and 1, or its two labels' raws."""
    keys = sorted(int(k) for k in (signal.choices or {}))
    off_raw, on_raw = (keys[0], keys[1]) if len(keys) == 2 else (0, 1)
    lo, hi = raw_bounds(signal)
    if not lo <= on_raw <= hi:
        on_raw = hi
    scale, offset = float(signal.scale), float(signal.offset)
    return off_raw * scale + offset, on_raw * scale + offset


def _label_for(signal: Any, words: tuple[str, ...]) -> str | None:
    """The first label of the signal that has one of `words` as a word."""
    for label in (signal.choices or {}).values():
        if set(tokens_of(str(label))) & set(words):
            return str(label)
    return None


def _body_motion(kind: SignalKind, signal: Any) -> Motion | None:
    off, on = _flag_values(signal)
    corner, name = kind.corner, kind.quantity

    def flag(test: Callable[[VehicleState], bool]) -> Motion:
        return lambda s: on if test(s) else off

    if name == "door_open":
        if corner in ("fl", "fr", "rl", "rr"):
            return flag(lambda s: body_of(s).doors[corner])
        return flag(lambda s: any(body_of(s).doors.values()))
    if name in ("high_beam", "low_beam", "headlight"):
        beam = "high_beam" if name == "high_beam" else "low_beam"
        return flag(lambda s: getattr(body_of(s), beam))
    if name == "turn_signal":
        if signal.choices and len(signal.choices) > 2:
            labels = {
                "Off": _label_for(signal, ("off", "none", "inactive", "idle", "aus")),
                "Left": _label_for(signal, ("left", "links", "li", "l")),
                "Right": _label_for(signal, ("right", "rechts", "re", "r")),
                "Hazard": _label_for(signal, ("hazard", "both", "warnblink")),
            }
            if len({v for v in labels.values() if v is not None}) < 2:
                return None  # labels that do not say left and right: an enumeration
            return lambda s: labels.get(body_of(s).turn)
        side = "Left" if corner in ("left", "fl", "rl") else "Right"
        sided = corner is not None

        def lamp(s: VehicleState) -> bool:
            turn = body_of(s).turn
            shown = turn == "Hazard" or (turn == side if sided else turn != "Off")
            return shown and s.time_s % (2 * _BLINK_S) < _BLINK_S

        return flag(lamp)
    if name in ("brake_pedal", "brake_light"):
        return flag(lambda s: s.brake)
    return None


def _model_motion(kind: SignalKind, signal: Any, rng: random.Random) -> Motion | None:
    if kind.quantity == "gear_lever":
        labels = lever_labels(signal)
        drive = labels.get("D") or next(iter(labels.values()))
        return lambda s: str(labels.get(s.gear_lever, drive))
    body = _body_motion(kind, signal)
    if body is not None:
        return body
    lo, hi = signal_range(signal)
    source = _quantity(kind, lo, hi, rng)
    if source is None:
        return None
    factor, offset = kind.factor, kind.offset
    if kind.quantity == "wheel_speed" and kind.dimension in ("angular_rate", "rpm"):
        # km/h -> the wheel's angular speed in degrees per second (or revolutions a minute)
        per_kmh = (
            1
            / 3.6
            / _WHEEL_RADIUS_M
            * (60 / (2 * math.pi) if kind.dimension == "rpm" else 180 / math.pi)
        )
        factor = per_kmh * (factor if kind.dimension == "angular_rate" else 1.0)
    percent = ("accelerator", "brake_pedal_position", "state_of_charge", "fuel_level")
    if kind.quantity in percent and kind.dimension == "" and hi <= 1.5:
        factor = 0.01  # a fraction, not a percentage
    if kind.quantity == "fuel_level" and kind.dimension == "volume":
        factor = 0.5  # percent of a 50 l tank
    return lambda s: source(s) * factor + offset


def _walk(signal: Any, rng: random.Random) -> Motion:
    """A smooth bounded walk around the signal's initial value: three slow sines of random
    periods, over a band of the range wide enough to show at the signal's resolution."""
    lo, hi = signal_range(signal)
    step = abs(float(signal.scale)) or 1.0
    if signal.is_float:
        step = 0.01
        lo, hi = max(lo, -100.0), min(hi, 100.0)
    span = hi - lo
    width = min(span, max(0.2 * span if span <= 4096 * step else 400 * step, 6 * step))
    start = _initial_physical(signal)
    center = min(max(start, lo + width / 2), hi - width / 2)
    waves = [
        (rng.uniform(4.0, 25.0), rng.uniform(0, 2 * math.pi), rng.uniform(0.5, 1.0))
        for _ in range(3)
    ]
    return Walk(center, width / 2, tuple(waves))


_TWO_PI: Final = 2 * math.pi


class Walk:
    """Three sines of `waves` (period, phase, weight), summed and stretched over the band of
    `half` either side of `center`: a pure function of the time alone. Its parameters are
    open, so that `firmware_sim.walk_bank` computes many walks at once, exactly as here."""

    __slots__ = ("center", "half", "total", "waves")

    def __init__(
        self, center: float, half: float, waves: tuple[tuple[float, float, float], ...]
    ) -> None:
        self.center, self.half, self.waves = center, half, waves
        self.total = sum(w for _, _, w in waves)

    def __call__(self, s: VehicleState) -> float:
        return self.value_at(s.time_s)

    def value_at(self, t: float) -> float:
        (p1, f1, w1), (p2, f2, w2), (p3, f3, w3) = self.waves
        sin = math.sin
        # summed by `sum`, whose float sum differs between Python versions from a + b + c
        mix = sum(
            (
                w1 * sin(_TWO_PI * t / p1 + f1),
                w2 * sin(_TWO_PI * t / p2 + f2),
                w3 * sin(_TWO_PI * t / p3 + f3),
            )
        )
        # three sines add up to their peak rarely: stretched, so the walk spans its band
        return self.center + self.half * max(-1.0, min(1.0, 1.6 * mix / self.total))


def _toggle(signal: Any, rng: random.Random) -> Motion:
    """A flag that comes on now and then: for one to four seconds in every six to fifteen."""
    off, on = _flag_values(signal)
    if _initial_physical(signal) == on:
        off, on = on, off
    cycle = rng.uniform(6.0, 15.0)
    length = rng.uniform(1.0, 4.0)
    first = rng.uniform(0.5, 8.0)
    return _Toggle(on, off, cycle, length, first)


class _Toggle:
    """On for `length` seconds in every `cycle`, from `first` on."""

    __slots__ = ("cycle", "first", "length", "off", "on")

    def __init__(self, on: float, off: float, cycle: float, length: float, first: float) -> None:
        self.on, self.off = on, off
        self.cycle, self.length, self.first = cycle, length, first

    def __call__(self, s: VehicleState) -> float:
        t = s.time_s - self.first
        return self.on if t >= 0.0 and t % self.cycle < self.length else self.off

    def steady_until(self, time_s: float) -> float:
        """Until when the flag keeps the value it has at `time_s` (a little before)."""
        t = time_s - self.first
        if t < 0.0:
            return self.first - _STEADY_MARGIN_S
        phase = t % self.cycle
        edge = self.length if phase < self.length else self.cycle
        return time_s - phase + edge - _STEADY_MARGIN_S

    def values(self) -> tuple[float, ...]:
        """Every value the flag shows."""
        return (self.off, self.on)

    def at(self, time_s: float) -> tuple[float, float]:
        """(the value at `time_s`, `steady_until(time_s)`) in one call."""
        t = time_s - self.first
        if t < 0.0:
            return self.off, self.first - _STEADY_MARGIN_S
        phase = t % self.cycle
        if phase < self.length:
            return self.on, time_s - phase + self.length - _STEADY_MARGIN_S
        return self.off, time_s - phase + self.cycle - _STEADY_MARGIN_S


def _enumerate(signal: Any, rng: random.Random) -> Motion | None:
    """An enumeration stepping through its labels (those its range allows), a few seconds
    on each."""
    lo, hi = signal_range(signal)
    raw_lo, raw_hi = raw_bounds(signal)
    scale, offset = float(signal.scale), float(signal.offset)
    labels = [
        str(label)
        for raw, label in sorted((signal.choices or {}).items(), key=lambda kv: int(kv[0]))
        if raw_lo <= int(raw) <= raw_hi and lo <= int(raw) * scale + offset <= hi
    ]
    if len(labels) < 2:
        return None
    dwell = rng.uniform(1.5, 4.0)
    shift = rng.uniform(0.0, dwell)
    return _Enumerate(labels, dwell, shift)


class _Enumerate:
    """`labels` in turn, `dwell` seconds each, `shift` seconds in at time 0."""

    __slots__ = ("dwell", "labels", "shift")

    def __init__(self, labels: list[str], dwell: float, shift: float) -> None:
        self.labels, self.dwell, self.shift = labels, dwell, shift

    def __call__(self, s: VehicleState) -> str:
        return self.labels[int((s.time_s + self.shift) / self.dwell) % len(self.labels)]

    def steady_until(self, time_s: float) -> float:
        """Until when the label of `time_s` is shown (a little before)."""
        step = math.floor((time_s + self.shift) / self.dwell) + 1
        return step * self.dwell - self.shift - _STEADY_MARGIN_S

    def values(self) -> tuple[str, ...]:
        """Every label shown."""
        return tuple(self.labels)

    def at(self, time_s: float) -> tuple[str, float]:
        """(the label at `time_s`, `steady_until(time_s)`) in one call."""
        dwell, shift = self.dwell, self.shift
        steps = (time_s + shift) / dwell
        label = self.labels[int(steps) % len(self.labels)]
        return label, (math.floor(steps) + 1) * dwell - shift - _STEADY_MARGIN_S


class _Constant:
    """The same value at every moment."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, s: VehicleState) -> float:
        return self.value

    def steady_until(self, time_s: float) -> float:
        return math.inf

    def values(self) -> tuple[float, ...]:
        return (self.value,)

    def at(self, time_s: float) -> tuple[float, float]:
        return self.value, math.inf


SteadyAt = Callable[[float], tuple[SignalValue, float]]
"""A steady motion's value at a time and until when it stays (`steady_at`)."""


def steady_until(motion: Motion) -> Callable[[float], float] | None:
    """For a motion that changes only at moments known in advance (flags that toggle,
    labels in turn, constants): from a time, until when its value stays as it is then.
    None for a motion that follows the model or moves all the time."""
    found: Callable[[float], float] | None = getattr(motion, "steady_until", None)
    return found


def steady_at(motion: Motion) -> SteadyAt | None:
    """For such a motion (`steady_until`), its value at a time and until when it stays, in
    one call: it depends on the time alone. None for any other motion."""
    found: SteadyAt | None = getattr(motion, "at", None)
    return found


def steady_values(motion: Motion) -> tuple[SignalValue, ...]:
    """Every value such a motion (`steady_at`) takes, () for any other."""
    found: Callable[[], tuple[SignalValue, ...]] | None = getattr(motion, "values", None)
    return found() if found is not None else ()


def _initial_physical(signal: Any) -> float:
    lo, hi = signal_range(signal)
    if signal.raw_initial is not None:
        value = float(signal.raw_initial) * float(signal.scale) + float(signal.offset)
        if lo <= value <= hi:
            return value
    return 0.0 if lo <= 0.0 <= hi else lo


def motion_for(signal: Any, kind: SignalKind, rng: random.Random) -> Motion | None:
    """How `signal` of kind `kind` moves; None for a signal that keeps its initial value
    (counters, checksums and multiplexers are written by the plan itself)."""
    if kind.kind in (Kind.COUNTER, Kind.CHECKSUM, Kind.MULTIPLEXER):
        return None
    if kind.kind is Kind.CONSTANT:
        if kind.constant_raw is None:
            return None
        return _Constant(kind.constant_raw * float(signal.scale) + float(signal.offset))
    if kind.kind is Kind.QUANTITY:
        found = _model_motion(kind, signal, rng)
        if found is not None:
            return found
    if kind.kind is Kind.FLAG or (kind.kind is Kind.QUANTITY and int(signal.length) == 1):
        return _toggle(signal, rng)
    if signal.choices and len(signal.choices) >= 2:
        enum = _enumerate(signal, rng)
        if enum is not None:
            return enum
    return _walk(signal, rng)
