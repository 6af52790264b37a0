"""A second drive generator, written apart from `benchmarks/drives.py`, for held-out figures.

Discovery was tuned on the drives of `benchmarks/drives.py`; a method tuned to one generator
is not yet a method. This one shares nothing with it but the scoring (`drives.score` and
`drives.message_truth`, which records the bits of each signal that moved: the measurement)
and the cars' checksum algorithms (`benchmarks/car_checksums.py`, the truth
about those cars). It has its own driving model, its own way of filling signals, its own
encoder (numpy bit insertion, checked against cantools in the tests) and its own reference:

- a route of manoeuvres (parking with reversing, town, motorway, queues, stop-start with the
  engine off at long stops), jerk-limited, an automatic gearbox with shift hysteresis,
  road curvature in clothoids (steering angle and rate follow it), turn signals set before
  turns and blinking at 1.5 Hz, a 12 V battery whose voltage and current follow the
  alternator, engine starts and electrical loads, a traction battery that sags and
  regenerates, temperatures and a fuel level that move a step now and then, doors, belts
  and the gear selector changing a few times a minute;
- every signal as a sensor reports it: its own lag and filter, sampled and held at its
  ECU's rate (not the message's), noise, and quantisation coarser than the DBC's step
  for some; messages with jitter, a few lost frames (counters skip as real ones do),
  some sent only every half second or second, unused bits filled with zeros or ones;
- the reference a user would give: a navigation module (`NAV_DBC`, 8 bytes, Motorola,
  km/h at 5 Hz, 0.35 s late) whose DBC describes only part of its frame.

`HELD_OUT` is the fixed list of opendbc files held out from tuning: none of them is in
`bench_discovery.CARS`, and the method was never adjusted on their drives' failures.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.car_checksums import CHECKSUMS, NIBBLE_CHECKSUMS
from benchmarks.drives import Drive, TruthSignal, load_dbc, message_truth, signal_chain


def load_dbc_text(text: str) -> Any:
    import cantools

    return cantools.database.load_string(text)


__all__ = ["HELD_OUT", "NAV_DBC", "NAV_ID", "generate_heldout"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

# (file, how its checksums are computed; None: not known, such fields stay still)
HELD_OUT: list[tuple[str, str | None]] = [
    ("toyota_2017_ref_pt.dbc", None),
    ("toyota_iQ_2009_can.dbc", "toyota"),
    ("tesla_model3_vehicle.dbc", "tesla"),
    ("tesla_powertrain.dbc", "tesla"),
    ("chrysler_pacifica_2017_hybrid_private_fusion.dbc", "chrysler"),
    ("vw_mlb.dbc", None),
    ("mazda_3_2019.dbc", None),
    ("mg.dbc", None),
    ("ford_cgea1_2_ptcan_2011.dbc", None),
    ("ford_cgea1_2_bodycan_2011.dbc", None),
    ("rivian_primary_actuator.dbc", None),
    ("volvo_v40_2017_pt.dbc", None),
    ("luxgen_s5_2015.dbc", None),
    ("opel_omega_2001.dbc", None),
]

NAV_ID = 0x6F1
NAV_DBC = f"""VERSION ""

NS_ :

BS_:

BU_: NAV

BO_ {NAV_ID} NAV_Motion: 8 NAV
 SG_ VehSpd : 7|16@0+ (0.01,0) [0|655.35] "km/h" NAV
 SG_ Heading : 23|12@0+ (0.1,0) [0|409.5] "deg" NAV
 SG_ FixType : 27|3@0+ (1,0) [0|7] "" NAV
 SG_ Sats : 39|6@0+ (1,0) [0|63] "" NAV

"""
"""The navigation module: its DBC leaves bits 24, 40-63 and two bits of byte 4 out."""

DT = 0.01


# -- the vehicle ---------------------------------------------------------------------------


class Route:
    """What the car does, sampled every 10 ms."""

    def __init__(self, seconds: float, rng: np.random.Generator) -> None:
        n = int(seconds / DT) + 2
        self.n = n
        self.t = np.arange(n) * DT
        want = np.zeros(n)  # wanted speed, km/h (negative: reversing)
        kind = np.zeros(n, np.int64)  # 0 stop, 1 park, 2 town, 3 motorway
        i = 0
        plan = ["park", "stop", "town", "stop", "motorway", "town", "stop", "park"]
        k = 0
        while i < n:
            what = plan[k % len(plan)] if rng.random() < 0.7 else str(rng.choice(plan))
            k += 1
            if what == "stop":
                span = int(rng.uniform(4, 25) / DT)
                want[i : i + span] = 0.0
                kind[i : i + span] = 0
            elif what == "park":
                span = int(rng.uniform(8, 20) / DT)
                pieces = np.repeat(rng.choice([-6.0, 0.0, 5.0, -3.0, 4.0], 4), span // 4 + 1)
                want[i : i + span] = pieces[:span][: n - i]
                kind[i : i + span] = 1
            elif what == "town":
                span = int(rng.uniform(15, 40) / DT)
                steps = np.repeat(rng.uniform(15, 55, 5), span // 5 + 1)[:span]
                steps[rng.random(len(steps)) < 0.0] = 0
                want[i : i + span] = steps[: n - i]
                kind[i : i + span] = 2
            else:
                span = int(rng.uniform(20, 45) / DT)
                want[i : i + span] = rng.uniform(85, 130) + 8 * np.sin(
                    np.arange(min(span, n - i)) * DT / rng.uniform(5, 12)
                )
                kind[i : i + span] = 3
            i += span
        v = np.zeros(n)  # km/h, signed
        a = 0.0  # m/s^2
        for j in range(1, n):  # jerk-limited tracking of the wanted speed
            err = (want[j] - v[j - 1]) / 3.6
            target = float(np.clip(0.6 * err, -6.5, 2.8))
            a += float(np.clip(target - a, -8 * DT, 8 * DT))  # jerk <= 8 m/s^3
            v[j] = v[j - 1] + a * DT * 3.6
            if want[j] == 0 and abs(v[j]) < 0.3:
                v[j], a = 0.0, 0.0
        self.v = v
        self.speed = np.abs(v)  # km/h
        self.reverse = v < -0.05
        self.accel = np.gradient(v / 3.6, DT)
        self.kind = kind
        self._engine(rng)
        self._steering(rng)
        self._electrics(rng)
        self._body(rng)

    def _engine(self, rng: np.random.Generator) -> None:
        n, speed = self.n, self.speed
        still = speed < 0.1
        # stop-start: the engine goes off after 3 s stopped in town, back on when moving
        run = np.ones(n, np.bool_)
        stopped_for = 0.0
        for j in range(n):
            stopped_for = stopped_for + DT if still[j] else 0.0
            run[j] = not (stopped_for > 3.0 and self.kind[j] == 0)
        starts = np.flatnonzero(run[1:] & ~run[:-1]) + 1
        self.engine_on = run
        self.cranking = np.zeros(n, np.bool_)
        for s in starts:
            self.cranking[s : s + int(0.6 / DT)] = True
        gear = np.ones(n, np.int64)  # 1..8, with hysteresis
        up = np.array([18, 32, 48, 62, 78, 95, 112])
        for j in range(1, n):
            g = gear[j - 1]
            if g < 8 and speed[j] > up[g - 1]:
                g += 1
            elif g > 1 and speed[j] < up[g - 2] - 8:
                g -= 1
            gear[j] = g
        self.gear = gear
        ratio = np.array([4.7, 3.1, 2.1, 1.7, 1.3, 1.0, 0.84, 0.67])[gear - 1] * 3.2
        wheel_rps = speed / 3.6 / (2 * math.pi * 0.33)
        rpm = np.maximum(wheel_rps * ratio * 60, 700 + 120 * (self.kind == 1))
        rpm += _wander(rng, n, 0.4, 15.0)
        self.rpm = np.where(run, rpm, 0.0)
        self.rpm[self.cranking] = 250.0
        pedal = np.clip(self.accel * 22 + 6 * (speed > 1), 0, 100)
        self.throttle = _lowpass(pedal, 0.15) * run
        self.brake = _lowpass(np.clip(-self.accel * 18, 0, 100), 0.1) + 25 * (still & run)
        self.torque = (self.throttle * 3.2 - 20) * run  # Nm, negative when coasting
        self.coolant = 35 + 55 * (1 - np.exp(-self.t / 240))
        self.oil = 30 + 50 * (1 - np.exp(-self.t / 420))

    def _steering(self, rng: np.random.Generator) -> None:
        n = self.n
        curvature = np.zeros(n)  # 1/m, clothoids between straights and arcs
        j = 0
        while j < n:
            straight = int(rng.uniform(3, 12) / DT)
            j += straight
            ramp, hold = int(rng.uniform(1.0, 3.0) / DT), int(rng.uniform(1, 6) / DT)
            k = float(rng.choice([-1, 1]) * rng.uniform(0.005, 0.08))
            if j >= n:
                break
            shape = np.concatenate(
                [np.linspace(0, k, ramp), np.full(hold, k), np.linspace(k, 0, ramp)]
            )
            end = min(n, j + len(shape))
            curvature[j:end] = shape[: end - j]
            j = end
        slow = self.speed < 25
        turn = curvature * np.where(slow, 3.0, 1.0)
        parking = (self.kind == 1) * _wander(rng, n, 3.0, 420.0)
        self.steer = np.degrees(np.arctan(turn * 2.8)) * 15.5 + parking  # wheel angle, deg
        self.steer += _wander(rng, n, 0.5, 1.5)
        self.steer_rate = np.gradient(_lowpass(self.steer, 0.05), DT)
        self.yaw = self.speed / 3.6 * curvature * (180 / math.pi)  # deg/s
        self.lat = (self.speed / 3.6) ** 2 * curvature  # m/s^2
        # turn signals: set a second or two before a curve at town speeds, off after it
        lever = np.zeros(n, np.int64)  # 0 off, 1 left, 2 right
        edges = np.flatnonzero((np.abs(curvature[1:]) > 0.004) & (np.abs(curvature[:-1]) <= 0.004))
        for e in edges:
            if self.speed[e] < 70 and rng.random() < 0.8:
                a, b = max(0, e - int(rng.uniform(1, 3) / DT)), e + int(rng.uniform(2, 6) / DT)
                lever[a:b] = 1 if curvature[e + 1] > 0 else 2
        self.lever = lever
        blink = (np.floor(self.t / (1 / 1.5 / 2)) % 2 == 0).astype(np.int64)
        self.lamp_left = (lever == 1) * blink
        self.lamp_right = (lever == 2) * blink

    def _electrics(self, rng: np.random.Generator) -> None:
        n = self.n
        loads = _steps(rng, self.t, 20.0, [0.0, 6.0, 12.0, 25.0])  # A: fan, lights, heater
        charging = self.engine_on & ~self.cranking
        current = np.where(charging, -(8 + 0.004 * self.rpm) + loads * 0.3, 6 + loads)
        current[self.cranking] = -0.0 + 280.0  # the starter draws, battery discharging
        self.battery_current = _lowpass(current, 0.02) + rng.normal(0, 0.4, n)  # A, + out
        volts = np.where(charging, 14.3 - 0.01 * loads, 12.55 - 0.02 * loads)
        volts[self.cranking] = 10.2
        self.battery_voltage = _lowpass(volts, 0.3) + rng.normal(0, 0.03, n)
        # traction battery (electric cars): regeneration when braking
        power = (self.accel * 1500 * self.speed / 3.6 + 300 * self.speed / 3.6) / 1000  # kW
        hv_current = power * 1000 / 380 + rng.normal(0, 0.8, n)
        self.hv_current = _lowpass(hv_current, 0.05)
        self.hv_voltage = 392 - 0.05 * self.hv_current + rng.normal(0, 0.2, n)
        self.soc = 72 - np.cumsum(np.maximum(power, -5)) * DT / 3600 / 75 * 100

    def _body(self, rng: np.random.Generator) -> None:
        n = self.n
        self.ambient = 14 + np.round(_wander(rng, n, 60, 1.5) * 2) / 2
        self.fuel = 46 - np.floor(self.t / rng.uniform(25, 45))  # litres, a step now and then
        self.odometer = 48213.0 + np.cumsum(self.speed / 3.6 * DT) / 1000  # km
        still = self.speed < 0.1
        door = np.zeros(n, np.int64)
        for e in np.flatnonzero(still[1:] & ~still[:-1])[::2]:
            if rng.random() < 0.5:
                door[e + 50 : e + 50 + int(rng.uniform(2, 6) / DT)] = 1
        self.door = door
        self.belt = 1 - door
        self.selector = np.where(self.reverse, 2, np.where(still, 0, 3))  # P R N D: 0 2 1 3
        self.wiper = _steps(rng, self.t, 25.0, [0, 0, 1, 2])


def _lowpass(x: F64, tau: float) -> F64:
    """First-order lag of `tau` seconds."""
    if tau <= 0:
        return x.copy()
    alpha = DT / (tau + DT)
    out = np.empty_like(x, dtype=np.float64)
    acc = float(x[0])
    for j in range(len(x)):
        acc += alpha * (float(x[j]) - acc)
        out[j] = acc
    return out


def _wander(rng: np.random.Generator, n: int, seconds: float, amplitude: float) -> F64:
    """A smooth random wander (random walk through a lag), about `amplitude` at most."""
    walk = np.cumsum(rng.normal(size=n))
    walk -= np.linspace(walk[0], walk[-1], n)
    smooth = _fast_lowpass(walk, seconds)
    peak = float(np.max(np.abs(smooth))) or 1.0
    out: F64 = smooth / peak * amplitude
    return out


def _fast_lowpass(x: F64, tau: float) -> F64:
    width = max(1, int(tau / DT))
    kernel = np.exp(-np.arange(4 * width) / width)
    kernel /= kernel.sum()
    out: F64 = np.convolve(np.r_[np.full(len(kernel), x[0]), x], kernel)[
        len(kernel) : len(kernel) + len(x)
    ]
    return out


def _steps(
    rng: np.random.Generator, t: npt.NDArray[Any], mean_s: float, levels: list[float]
) -> F64:
    """A level that changes every `mean_s` seconds or so (a few times a minute)."""
    out = np.zeros(len(t))
    j = 0
    while j < len(t):
        span = max(1, int(rng.exponential(mean_s) / DT))
        out[j : j + span] = rng.choice(levels)
        j += span
    return out


# -- signals as sensors report them --------------------------------------------------------

_SPEED_UNIT = {"km/h": 1.0, "kph": 1.0, "kmh": 1.0, "m/s": 3.6, "mph": 1.609344}


def _unit(signal: Any) -> str:
    return (signal.unit or "").strip().lower()


def _bits_range(signal: Any) -> tuple[int, int]:
    n = int(signal.length)
    if signal.is_signed:
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def _raw_range(signal: Any) -> tuple[int, int]:
    """What the bits carry, narrowed to the DBC's range when that range is a real one."""
    lo, hi = _bits_range(signal)
    lo, hi = max(lo, -(1 << 50)), min(hi, 1 << 50)
    mn, mx = signal.minimum, signal.maximum
    scale = float(signal.scale) or 1.0
    if mn is not None and mx is not None and float(mx) > float(mn):
        a = math.floor((float(mn) - float(signal.offset)) / scale)
        b = math.ceil((float(mx) - float(signal.offset)) / scale)
        a, b = min(a, b), max(a, b)
        if lo <= a < b <= hi:
            return a, b
    return lo, hi


def _is_counter(signal: Any) -> bool:
    name = signal.name.lower()
    return int(signal.length) <= 8 and bool(
        re.search(r"(counter|_cnt$|^cnt|alive|rolling|msgcnt|zaehler|_ctr$|^bz$|_bz$)", name)
    )


def _is_checksum(signal: Any) -> bool:
    return bool(re.search(r"(checksum|crc|chksum|chksm|chks)", signal.name, re.I))


def _physical_of(signal: Any, route: Route, rng: np.random.Generator) -> tuple[str, F64] | None:
    """(role, a physical quantity over the route) for the signals a name and unit tell."""
    name, unit = signal.name, _unit(signal)
    low = name.lower()
    length = int(signal.length)
    speedy = re.search(r"sp(ee)?d|spd|velo|whl|wheel|geschw|vs", low)
    if unit in _SPEED_UNIT and speedy and length >= 8:
        per = _SPEED_UNIT[unit]
        wheel = route.speed * (1 + rng.normal(0, 0.006)) + _wander(rng, route.n, 0.3, 0.15)
        return "speed", np.maximum(wheel, 0) / per
    if re.search(r"rpm|engspd|eng_?speed|n_?mot|engine_?speed|motor_?speed", low) or unit == "rpm":
        return "value", route.rpm * (1.0 if length > 10 else 0.5)
    if re.search(r"turn|blink|indicat|lever|stalk", low):
        if length == 1:
            return "flag", (route.lamp_right if "right" in low or "_r" in low else route.lamp_left)
        return "state", route.lever.astype(np.float64)
    if re.search(r"steer|strg|str_?whl|sas|lenk|swa", low) or "deg/s" in unit:
        if "/s" in unit or re.search(r"rate|spd|speed|vel", low):
            return "value", route.steer_rate
        if "deg" in unit or "angle" in low or "ang" in low:
            return "value", route.steer
    if re.search(r"yaw", low):
        return "value", route.yaw
    if re.search(r"lat.*acc|acc.*lat|ay\b", low):
        return "value", route.lat
    if re.search(r"(long.*acc|acc.*long|accel|ax\b)", low) and ("m/s" in unit or unit == "g"):
        return "value", route.accel / (9.81 if unit == "g" else 1.0)
    if re.search(r"volt|_u_|batt.*_u|ubat|vbat", low) or unit in ("v", "volt", "volts"):
        if re.search(r"hv|pack|trac|bms|dc", low) or _max_physical(signal) > 100:
            return "value", route.hv_voltage
        return "value", route.battery_voltage
    if re.search(r"curr|_i_|ampere|ibat", low) or unit in ("a", "amp", "amps"):
        if re.search(r"hv|pack|trac|bms|dc", low) or _max_physical(signal) > 600:
            return "value", route.hv_current
        return "value", route.battery_current
    if re.search(r"soc|charge_?state|state_?of_?charge", low):
        return "value", route.soc
    if re.search(r"torq|trq|moment", low):
        return "value", route.torque
    if re.search(r"pedal|throttle|accel_?pos|apedpos|gas", low) and length > 2:
        return "value", route.throttle
    if re.search(r"brake|brk|brems", low) and length > 2:
        return "value", route.brake
    if re.search(r"brake|brk", low) and length == 1:
        return "flag", (route.brake > 20).astype(np.float64)
    if re.search(r"cool|oil.*temp|temp.*oil", low):
        return "value", route.oil if "oil" in low else route.coolant
    if re.search(r"amb|outside|out_?temp|ext.*temp", low):
        return "value", route.ambient
    if re.search(r"fuel.*(lev|lvl)|tank", low):
        return "value", route.fuel
    if re.search(r"odo|mileage|distance", low):
        return "value", route.odometer
    if re.search(r"gear|prnd|selector|shift|gang", low) and length <= 4:
        return "state", (route.gear if "gear" in low else route.selector).astype(np.float64)
    if re.search(r"door|tuer|trunk|hood|ajar", low) and length <= 2:
        return "flag", route.door.astype(np.float64)
    if re.search(r"belt|gurt", low) and length <= 2:
        return "flag", route.belt.astype(np.float64)
    if re.search(r"wip", low) and length <= 4:
        return "state", route.wiper
    return None


def _max_physical(signal: Any) -> float:
    lo, hi = _raw_range(signal)
    return max(
        abs(lo * float(signal.scale) + float(signal.offset)),
        abs(hi * float(signal.scale) + float(signal.offset)),
    )


def _sensor(
    physical: F64, route: Route, rng: np.random.Generator, times: F64, *, signal: Any, role: str
) -> I64:
    """Raw values at `times` of a quantity as an ECU reports it: a lag, a filter, its own
    sampling rate (held between samples), noise, and a quantisation of its own."""
    lag = float(rng.uniform(0.0, 0.3))
    tau = float(rng.choice([0.0, 0.02, 0.1]))
    x = _fast_lowpass(physical, tau) if tau and role not in {"state", "flag"} else physical
    scale = float(signal.scale) or 1.0
    if role in ("value", "speed"):
        x = x + rng.normal(0, abs(scale) * float(rng.choice([0.0, 0.3, 1.0, 3.0])), len(x))
    rate = float(rng.choice([0.01, 0.02, 0.05, 0.1]))  # the ECU's own sampling period
    sample_t = np.floor(np.maximum(times - lag, 0) / rate) * rate
    idx = np.minimum((sample_t / DT).astype(np.int64), route.n - 1)
    value = x[idx]
    raw = (value - float(signal.offset)) / scale
    if role in ("value", "speed"):
        q = int(rng.choice([1, 1, 1, 2, 4, 5, 10]))  # a sensor coarser than the DBC's step
        raw = np.round(raw / q) * q
    lo, hi = _raw_range(signal)
    return np.clip(np.round(raw), lo, hi).astype(np.int64)


def _anything(signal: Any, rng: np.random.Generator, times: F64, route: Route) -> tuple[str, I64]:
    """A signal neither name nor unit explains: one of the behaviours real ones show."""
    lo, hi = _raw_range(signal)
    n = len(times)
    span = hi - lo
    length = int(signal.length)
    pick = rng.random()
    if pick < 0.25 or span < 1:
        return "constant", np.full(n, int(rng.integers(lo, hi + 1)) if span >= 1 else lo)
    keys = sorted(int(k) for k in (signal.choices or {}) if lo <= int(k) <= hi)
    if length == 1:
        every = float(rng.choice([4.0, 15.0, 40.0]))  # a few times a minute, or rarely
        on = _steps(rng, route.t, every, [0.0, 1.0])[_index(times, route)]
        return "flag", on.astype(np.int64)
    if len(keys) >= 2 or length <= 3 or pick < 0.45:
        levels = keys if len(keys) >= 2 else list(range(lo, min(hi, lo + 7) + 1))
        chosen = [float(v) for v in rng.choice(levels, size=min(len(levels), 3), replace=False)]
        every = float(rng.choice([5.0, 12.0, 30.0]))
        state = _steps(rng, route.t, every, chosen)[_index(times, route)]
        return "state", state.astype(np.int64)
    centre = lo + span * rng.uniform(0.2, 0.8)
    amp = max(2.0, span * rng.uniform(0.02, 0.3))
    style = rng.random()
    if style < 0.4:  # a slow wander with sensor noise
        x = centre + _wander(rng, route.n, rng.uniform(2, 20), amp)
        x += rng.normal(0, rng.choice([0.0, 0.4, 1.5]), route.n)
    elif style < 0.7:  # moves with the drive: a setpoint following speed or load
        base = route.speed / 130 if rng.random() < 0.5 else route.throttle / 100
        x = centre + (base - 0.5) * amp * 2
    else:  # held, then ramps to a new level, a few times a minute
        held = _steps(rng, route.t, rng.uniform(8, 30), list(centre + rng.uniform(-amp, amp, 4)))
        x = _lowpass(held, rng.uniform(0.2, 2.0))
    raw = np.clip(np.round(x[_index(times, route)]), lo, hi).astype(np.int64)
    return "value", raw


def _index(times: F64, route: Route) -> I64:
    out: I64 = np.minimum((times / DT).astype(np.int64), route.n - 1)
    return out


# -- messages and frames -------------------------------------------------------------------


def _usable(message: Any) -> bool:
    if message.is_multiplexed() or not message.signals or not 1 <= message.length <= 64:
        return False
    seen: set[int] = set()
    for s in message.signals:
        if s.is_float or int(s.length) > 62:
            return False
        chain = signal_chain(s)
        if min(chain) < 0 or max(chain) >= message.length * 8 or seen & set(chain):
            return False
        seen |= set(chain)
    return True


def _place(payload: npt.NDArray[np.uint8], chain: tuple[int, ...], raw: I64) -> None:
    """Write `raw` (two's complement when negative) into every row's `chain` of bits."""
    unsigned = raw & ((1 << len(chain)) - 1) if len(chain) < 63 else raw
    for k, pos in enumerate(chain):
        bit = ((unsigned >> k) & 1).astype(np.uint8)
        byte, shift = pos // 8, pos % 8
        payload[:, byte] = (payload[:, byte] & np.uint8(~(1 << shift) & 0xFF)) | (bit << shift)


def _frame_times(
    rng: np.random.Generator, seconds: float, period: float
) -> tuple[F64, npt.NDArray[np.bool_]]:
    """Send times with jitter, and which frames were lost on the way (not in the capture)."""
    t = np.arange(rng.uniform(0, period), seconds, period)
    t = t + rng.normal(0, period * 0.03, len(t)) + rng.exponential(period * 0.01, len(t))
    t = np.clip(t, 0, seconds)
    lost = rng.random(len(t)) < 0.002
    return np.sort(t), lost


def _message_frames(
    message: Any,
    route: Route,
    rng: np.random.Generator,
    seconds: float,
    car: str | None,
) -> tuple[F64, npt.NDArray[np.uint8], list[TruthSignal]]:
    period_ms = message.cycle_time or int(rng.choice([10, 20, 20, 40, 50, 100, 100, 200]))
    if rng.random() < 0.1:
        period_ms = int(rng.choice([500, 1000]))  # a message sent rarely
    times, lost = _frame_times(rng, seconds, period_ms / 1000)
    n = len(times)
    payload = np.full(
        (n, message.length), 0xFF if rng.random() < 0.25 else 0x00, np.uint8
    )  # unused bits: zeros, or ones on some ECUs
    roles: dict[str, str] = {}
    checksum = None
    for signal in message.signals:
        chain = signal_chain(signal)
        lo, hi = _raw_range(signal)
        if _is_checksum(signal):
            width = 4 if car in NIBBLE_CHECKSUMS else 8
            named = (
                signal.name.endswith("Checksum") if car == "tesla" else signal.name == "CHECKSUM"
            )
            if car in CHECKSUMS and named and int(signal.length) == width and checksum is None:
                roles[signal.name], checksum = "checksum", signal
                _place(payload, chain, np.zeros(n, np.int64))
                continue
            roles[signal.name] = "constant"
            _place(payload, chain, np.zeros(n, np.int64))
            continue
        if _is_counter(signal):
            modulo = 1 << int(signal.length)
            sent = np.cumsum(np.ones(n, np.int64)) + int(rng.integers(0, modulo))
            roles[signal.name] = "counter"
            _place(payload, chain, sent % modulo)  # lost frames: the counter skips a value
            continue
        got = _physical_of(signal, route, rng) if rng.random() > 0.12 else None
        if got is None:
            role, raw = _anything(signal, rng, times, route)
        else:
            role, physical = got
            if role in ("flag", "state"):  # its own ECU's lag and sampling, as values
                lag = float(rng.uniform(0.0, 0.3))
                rate = float(rng.choice([0.01, 0.02, 0.05, 0.1]))
                sampled = np.floor(np.maximum(times - lag, 0) / rate) * rate
                raw = np.clip(physical[_index(sampled, route)], lo, hi).astype(np.int64)
                if role == "flag" and int(signal.length) > 1:
                    role = "state"
            else:
                raw = _sensor(physical, route, rng, times, signal=signal, role=role)
        roles[signal.name] = role
        _place(payload, chain, raw)
    if checksum is not None:
        algorithm = CHECKSUMS[str(car)]
        chain = signal_chain(checksum)
        mask = (1 << int(checksum.length)) - 1
        sums = np.array(
            [
                algorithm(int(message.frame_id), bytes(row), int(checksum.start)) & mask
                for row in payload
            ],
            np.int64,
        )
        _place(payload, chain, sums)
    keep = ~lost
    times, payload = times[keep], payload[keep]
    return times, payload, message_truth(message, roles, payload, car)


def _nav_frames(
    route: Route, seconds: float, rng: np.random.Generator
) -> tuple[F64, npt.NDArray[np.uint8]]:
    """The navigation module at 5 Hz: speed 0.35 s late with its own noise, a heading, the
    fix and satellites changing now and then; the bits its DBC leaves out stay still."""
    times = np.arange(0.13, seconds, 0.2)
    idx = np.minimum(((times - 0.35).clip(0) / DT).astype(np.int64), route.n - 1)
    speed = np.maximum(route.speed[idx] + rng.normal(0, 0.15, len(times)), 0)
    heading = (180 + np.cumsum(route.yaw[idx]) * 0.2) % 360
    payload = np.zeros((len(times), 8), np.uint8)
    payload[:, 6] = 0xA5  # a byte the DBC does not describe, always the same
    nav = load_dbc_text(NAV_DBC).get_message_by_name("NAV_Motion")
    sats = 9 + (_steps(rng, route.t, 20.0, [0.0, 1.0, 2.0, 3.0])[idx]).astype(np.int64)
    raws = {
        "VehSpd": np.round(speed / 0.01).astype(np.int64),
        "Heading": np.round(heading / 0.1).astype(np.int64),
        "FixType": np.full(len(times), 3, np.int64),
        "Sats": sats,
    }
    for signal in nav.signals:
        _place(payload, signal_chain(signal), raws[signal.name])
    return times, payload


def generate_heldout(
    dbc: str | Path,
    seconds: float = 120.0,
    *,
    car: str | None = None,
    seed: int = 0,
    max_messages: int = 40,
) -> Drive:
    """A drive of `seconds` over the usable messages of `dbc` (at most `max_messages`),
    with the navigation module of `NAV_DBC` beside them (its id moved when the car uses
    it)."""
    rng = np.random.default_rng(seed + 7919)
    db = load_dbc(dbc)
    route = Route(seconds, rng)
    messages = [m for m in db.messages if _usable(m)]
    if len(messages) > max_messages:
        picked = rng.choice(len(messages), size=max_messages, replace=False)
        messages = [messages[i] for i in sorted(picked)]
    columns: list[tuple[F64, int, bool, npt.NDArray[np.uint8]]] = []
    truth: list[TruthSignal] = []
    speeds: dict[str, float] = {}
    for message in messages:
        times, payload, t = _message_frames(message, route, rng, seconds, car)
        columns.append((times, int(message.frame_id), bool(message.is_extended_frame), payload))
        truth += t
        for s in t:
            if s.role == "speed":
                speeds[f"{s.message}.{s.name}"] = _SPEED_UNIT[s.unit.strip().lower()]
    if any(not m.is_extended_frame and m.frame_id == NAV_ID for m in db.messages):
        raise ValueError(f"{dbc}: the car uses the navigation module's id 0x{NAV_ID:X}")
    nav_t, nav_payload = _nav_frames(route, seconds, rng)
    columns.append((nav_t, NAV_ID, False, nav_payload))
    total = sum(len(c[0]) for c in columns)
    width = max(8, *(c[3].shape[1] for c in columns))
    t_all = np.zeros(total)
    ids = np.zeros(total, np.int64)
    ext = np.zeros(total, np.bool_)
    lengths = np.zeros(total, np.int64)
    data = np.zeros((total, width), np.uint8)
    at = 0
    for times, aid, extended, payload in columns:
        k = len(times)
        t_all[at : at + k], ids[at : at + k], ext[at : at + k] = times, aid, extended
        lengths[at : at + k] = payload.shape[1]
        data[at : at + k, : payload.shape[1]] = payload
        at += k
    order = np.argsort(t_all, kind="stable")
    return Drive(
        name=Path(dbc).stem,
        t=t_all[order],
        ids=ids[order],
        extended=ext[order],
        length=lengths[order],
        data=data[order],
        truth=truth,
        reference_dbc=NAV_DBC,
        speed_unit=speeds,
        reference_signal="VehSpd",
        motion={"t": route.t, "speed_kmh": route.speed, "rpm": route.rpm},
    )
