"""Drives generated from real cars' DBC files, with the truth kept beside them.

`generate(dbc, seconds, car=...)` simulates a drive (stop and go, turns, a warming engine)
and fills every periodic message of the DBC from it: speeds follow the vehicle (in the
signal's unit), engine speed follows the gears, angles and rates follow the turns, states
change now and then, counters count, and checksums are computed the way that car computes
them (`benchmarks.car_checksums`). Frames are encoded with cantools, so nothing here uses
hwbridge's codec. Some signals stay at one value all drive, as on a real bus; the truth says
which bits of each signal really moved.

Beside the car's frames a GNSS module sends its speed (`gnss_speed.Speed` in m/s, laid out
as CSS Electronics' CANmod.gps does), the reference a user would give discovery.

`score(report, drive)` measures a discovery report against the truth (see
benchmarks/README.md, bench_discovery).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cantools
import numpy as np
import numpy.typing as npt

from benchmarks.car_checksums import CHECKSUMS, NIBBLE_CHECKSUMS

__all__ = [
    "GNSS_DBC",
    "Drive",
    "Score",
    "TruthSignal",
    "capture_truth",
    "generate",
    "message_truth",
    "score",
    "signal_chain",
]

F64 = npt.NDArray[np.float64]

GNSS_ID = 0x7E5
GNSS_DBC = f"""VERSION ""

NS_ :

BS_:

BU_: GNSS

BO_ {GNSS_ID} gnss_speed: 5 GNSS
 SG_ Speed : 1|20@1+ (0.001,0) [0|1048.575] "m/s" GNSS
 SG_ SpeedAccuracy : 21|19@1+ (0.001,0) [0|524.287] "m/s" GNSS
 SG_ SpeedValid : 0|1@1+ (1,0) [0|1] "" GNSS

"""

_COUNTER = re.compile(
    r"(^|_)(counter|cnt|alive|bz|zaehler|rolling_?counter)$|counter$|^counter", re.I
)
_CHECKSUM = re.compile(r"(checksum|crc|chksum|chks)$", re.I)
_SPEED_UNITS = {"km/h": 1.0, "kph": 1.0, "kmh": 1.0, "m/s": 1 / 3.6, "mph": 1 / 1.609344}
_SPEED_NAME = re.compile(r"speed|spd|geschw|veloc|whl|wheel", re.I)
_RPM = re.compile(r"rpm|eng.*speed|drehzahl|n_mot", re.I)


def signal_chain(signal: Any) -> tuple[int, ...]:
    """Bit positions (byte*8+bit) of a cantools signal, least significant first."""
    start, length = int(signal.start), int(signal.length)
    if signal.byte_order == "little_endian":
        return tuple(range(start, start + length))
    out = [start]
    for _ in range(length - 1):
        pos = out[-1]
        out.append(pos - 1 if pos % 8 else pos + 15)
    return tuple(reversed(out))


@dataclass
class TruthSignal:
    """One signal of the truth, with what the drive showed of it."""

    message: str
    frame_id: int
    extended: bool
    name: str
    chain: tuple[int, ...]
    byte_order: str
    signed: bool
    scale: float
    offset: float
    unit: str
    role: str  # speed, counter, checksum, flag, state, value, constant
    seen: tuple[int, ...] = ()  # the chain from its lowest to its highest bit that flipped
    gapped: bool = False  # some bit inside `seen` never flipped: no one can tell the field
    sign_seen: bool = False  # its sign bit flipped (signedness can be told)
    checksum: str | None = None
    # some change of it moved two of its bits at once; a signal of two bits or more whose
    # every change moved one bit flips as separate flags do (counted apart in `Score`)
    together: bool = True

    @property
    def observable(self) -> bool:
        """Its moving bits form one run: what moved can be told as one field."""
        return bool(self.seen) and not self.gapped


@dataclass
class Drive:
    """Frames of a drive (numpy columns, time order) and the truth about them."""

    name: str
    t: F64
    ids: npt.NDArray[np.int64]
    extended: npt.NDArray[np.bool_]
    length: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]
    truth: list[TruthSignal]
    reference_dbc: str = GNSS_DBC
    speed_unit: dict[str, float] = field(
        default_factory=dict
    )  # signal -> reference unit per its unit
    reference_signal: str = "Speed"  # the reference's speed signal (speed_unit: its unit)
    motion: dict[str, npt.NDArray[Any]] = field(default_factory=dict)  # t, speed_kmh, rpm

    def frames(self) -> Iterable[tuple[float, int, bool, bytes]]:
        for i in range(len(self.t)):
            yield (
                float(self.t[i]),
                int(self.ids[i]),
                bool(self.extended[i]),
                bytes(self.data[i, : self.length[i]]),
            )

    def write(self, path: str | Path) -> Path:
        """Write the drive as a capture python-can reads (.blf, .asc, .log, ...)."""
        import can

        path = Path(path)
        with can.Logger(str(path)) as log:
            for ts, aid, ext, payload in self.frames():
                log.on_message_received(
                    can.Message(
                        timestamp=ts,
                        arbitration_id=aid,
                        is_extended_id=ext,
                        data=payload,
                        is_fd=len(payload) > 8,
                    )
                )
        return path


class _Vehicle:
    """The drive itself: speed, engine, steering, pedals, temperatures over time."""

    def __init__(self, seconds: float, rng: np.random.Generator, dt: float = 0.01) -> None:
        n = int(seconds / dt) + 1
        self.t = np.arange(n) * dt
        target = np.zeros(n)
        at = 0.0
        while at < seconds:  # phases: stop, accelerate to a cruise speed, hold, brake
            stop = rng.uniform(3, 10)
            cruise = rng.uniform(25, 125)
            hold = rng.uniform(8, 25)
            i0, i1, i2 = (int(x / dt) for x in (at + stop, at + stop + hold, at + stop + hold * 2))
            target[i0:i1] = cruise
            target[i1:i2] = cruise * rng.uniform(0.5, 1.1)
            at += stop + hold * 2
        speed = np.zeros(n)  # km/h, limited acceleration and braking
        for i in range(1, n):
            gap = target[i] - speed[i - 1]
            step = np.clip(gap * dt * 0.8, -9.0 * dt * 3.6, 3.0 * dt * 3.6)
            speed[i] = max(0.0, speed[i - 1] + step)
        self.speed = speed
        self.accel = np.gradient(speed / 3.6, dt)
        gear = np.clip(np.searchsorted([15, 30, 45, 65, 85], speed) + 1, 1, 6)
        ratio = np.array([3.5, 2.1, 1.4, 1.0, 0.8, 0.65])[gear - 1]
        self.rpm = np.maximum(750.0, speed / 3.6 / (2 * math.pi * 0.32) * ratio * 3.6 * 60)
        self.gear = gear
        self.steer = _smooth(rng, n, 400, 90.0) * (speed < 60) + _smooth(rng, n, 300, 8.0)
        self.steer_rate = np.gradient(self.steer, dt)
        self.yaw = self.steer * speed / 3.6 / 40.0
        pedal = np.convolve(self.accel, np.hanning(60) / np.hanning(60).sum(), mode="same")
        self.throttle = np.clip(pedal * 25, 0, 100)  # pedals move over about half a second
        self.brake = np.clip(-pedal * 20, 0, 100)
        self.coolant = 20 + 70 * (1 - np.exp(-self.t / 200))
        self.rng = rng


def _smooth(rng: np.random.Generator, n: int, width: int, amplitude: float) -> F64:
    """Band-limited noise: white noise through a moving average, scaled to `amplitude`."""
    raw = rng.normal(size=n + width)
    kernel = np.hanning(width)
    out = np.convolve(raw, kernel / kernel.sum(), mode="valid")[:n]
    peak = float(np.max(np.abs(out))) or 1.0
    return out / peak * amplitude


def _speed_factor(signal: Any) -> float | None:
    unit = (signal.unit or "").strip().lower()
    if unit in _SPEED_UNITS and _SPEED_NAME.search(signal.name) and int(signal.length) >= 8:
        return _SPEED_UNITS[unit]
    return None


def _raw_limits(signal: Any) -> tuple[int, int]:
    n = int(signal.length)
    if signal.is_signed:
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def _to_raw(signal: Any, physical: F64, *, bits_only: bool = False) -> npt.NDArray[np.int64]:
    """Raw values of `physical`, clipped to the DBC range (`bits_only`: to what the bits
    carry, for speeds whose DBC range is a placeholder such as [0|1])."""
    scale = float(signal.scale) or 1.0
    raw = np.round((physical - float(signal.offset)) / scale)
    lo, hi = _raw_limits(signal) if bits_only else _limits(signal)
    return np.clip(raw, lo, hi).astype(np.int64)


def _limits(signal: Any) -> tuple[int, int]:
    """The raw values the signal's bits and its DBC range both allow (the bits' own range
    when the DBC range does not fit them)."""
    lo, hi = _raw_limits(signal)
    lo, hi = max(lo, -(1 << 52)), min(hi, 1 << 52)  # exact in float64, whatever the width
    if signal.minimum is not None and signal.maximum is not None:
        scale = float(signal.scale) or 1.0
        a = round((float(signal.minimum) - float(signal.offset)) / scale)
        b = round((float(signal.maximum) - float(signal.offset)) / scale)
        a, b = max(lo, min(a, b)), min(hi, max(a, b))
        if a < b:
            return a, b
    return lo, hi


def _behaviour(
    signal: Any, v: _Vehicle, rng: np.random.Generator, times: F64, car: str | None
) -> tuple[str, npt.NDArray[np.int64] | None]:
    """(role, raw values at `times`); None for counters and checksums (filled per frame)."""
    n = len(times)
    idx = np.minimum((times / 0.01).astype(np.int64), len(v.t) - 1)
    name = signal.name
    if _COUNTER.search(name) and int(signal.length) <= 8:
        return "counter", None
    if _CHECKSUM.search(name):
        width = 4 if car in NIBBLE_CHECKSUMS else 8
        # as opendbc: the car's algorithm is the one of signals named CHECKSUM (Tesla:
        # ...Checksum); how the others are computed is not known
        named = name.endswith("Checksum") if car == "tesla" else name == "CHECKSUM"
        if car and named and int(signal.length) == width:
            return "checksum", None
        return "constant", np.full(n, 0, np.int64)  # how the car computes it is not known
    lo, hi = _limits(signal)
    if hi <= lo:
        return "constant", np.full(n, lo, np.int64)
    if rng.random() < 0.2:  # a signal that does not move during this drive
        return "constant", np.full(n, int(rng.integers(lo, hi + 1)), np.int64)
    factor = _speed_factor(signal)
    if factor is not None:
        wheel = 1 + rng.normal(0, 0.004)
        phys = v.speed[idx] * factor * wheel + rng.normal(0, 0.05, n) * factor
        return "speed", _to_raw(signal, np.maximum(phys, 0), bits_only=True)
    if int(signal.length) == 1:
        on = _events(rng, n, times)
        return "flag", on.astype(np.int64) * (-1 if signal.is_signed else 1)
    keys = sorted(int(k) for k in (signal.choices or {}) if lo <= int(k) <= hi)
    if len(keys) >= 2:  # the labels the bits can carry
        chosen = rng.choice(keys, size=min(len(keys), 4), replace=False)
        return "state", _states(rng, times, chosen)
    unit = (signal.unit or "").lower()
    gain = rng.uniform(0.8, 1.0)  # two signals from one quantity never move in lockstep
    if _RPM.search(name) and "rpm" in unit:
        return "value", _to_raw(signal, v.rpm[idx] * gain + rng.normal(0, 3, n))
    if re.search(r"steer|lenk|angle|winkel", name, re.I) and "deg" in unit:
        if "/s" in unit:  # a rate: how fast the wheel turns
            return "value", _to_raw(signal, v.steer_rate[idx] * gain + rng.normal(0, 0.5, n))
        return "value", _to_raw(signal, v.steer[idx] * gain + rng.normal(0, 0.05, n))
    if re.search(r"yaw|gier", name, re.I):
        return "value", _to_raw(signal, v.yaw[idx] * gain + rng.normal(0, 0.02, n))
    if re.search(r"accel|beschl", name, re.I) and ("m/s" in unit or unit == "g"):
        return "value", _to_raw(signal, v.accel[idx] * gain + rng.normal(0, 0.02, n))
    if re.search(r"temp", name, re.I):
        return "value", _to_raw(signal, v.coolant[idx] * rng.uniform(0.5, 1.0))
    if re.search(r"pedal|throttle|gas|brake", name, re.I) and int(signal.length) > 2:
        source = v.brake if re.search(r"brake|brems", name, re.I) else v.throttle
        level = source[idx] / 100 * (hi - lo) * 0.8 * gain + rng.normal(0, 0.3, n)
        return "value", np.clip(lo + np.round(level).astype(np.int64), lo, hi)
    # anything else: a slow random quantity over part of its range, with some noise
    span = hi - lo
    band = max(1.0, span * rng.uniform(0.05, 0.6))
    centre = lo + rng.uniform(band / 2, max(band / 2, span - band / 2))
    slow = _smooth(rng, len(v.t), int(rng.integers(200, 3000)), band / 2)[idx]
    sigma = float(rng.choice([0.0, 0.5, 2.0])) if span >= 64 else 0.0  # sensor noise
    noise = rng.normal(0, sigma, n)
    raw = np.round(centre + slow + noise)
    return "value", np.clip(raw, lo, hi).astype(np.int64)


def _events(rng: np.random.Generator, n: int, times: F64) -> npt.NDArray[np.bool_]:
    state = bool(rng.random() < 0.3)
    out = np.zeros(n, np.bool_)
    at = 0
    mean_s = rng.uniform(2, 20)
    while at < n:
        span = max(1, int(rng.exponential(mean_s) / max(float(np.median(np.diff(times))), 1e-3)))
        out[at : at + span] = state
        state = not state
        at += span
    return out


def _states(
    rng: np.random.Generator, times: F64, keys: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    out = np.zeros(len(times), np.int64)
    step = max(float(np.median(np.diff(times))), 1e-3)
    at = 0
    while at < len(times):
        span = max(1, int(rng.exponential(rng.uniform(3, 15)) / step))
        out[at : at + span] = rng.choice(keys)
        at += span
    return out


def _insert(payload: bytearray, chain: tuple[int, ...], raw: int) -> None:
    for k, pos in enumerate(chain):
        if raw >> k & 1:
            payload[pos // 8] |= 1 << (pos % 8)
        else:
            payload[pos // 8] &= ~(1 << (pos % 8)) & 0xFF


def _eligible(message: Any) -> bool:
    if message.is_multiplexed() or not message.signals or message.length > 64:
        return False
    if any(s.is_float or int(s.length) > 64 for s in message.signals):
        return False
    used: set[int] = set()
    for s in message.signals:
        chain = signal_chain(s)
        if used & set(chain) or max(chain) >= message.length * 8 or min(chain) < 0:
            return False
        used |= set(chain)
    return True


def load_dbc(path: str | Path) -> Any:
    """A cantools database; DBC files plain cantools refuses are read through hwbridge's
    repairs (loading only: encoding stays cantools')."""
    try:
        return cantools.database.load_file(str(path), strict=False)
    except Exception:
        import warnings

        from hwbridge.can.database.database import CanDatabase

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return CanDatabase.load(path).cantools


def _roles(
    message: Any,
    vehicle: _Vehicle,
    rng: np.random.Generator,
    times: F64,
    car: str | None,
) -> tuple[dict[str, str], dict[str, npt.NDArray[np.int64]], Any]:
    """Each signal's role and raw values; counters count; the checksum (if the car's
    algorithm is known) is returned to be computed per frame."""
    n = len(times)
    raws: dict[str, npt.NDArray[np.int64]] = {}
    roles: dict[str, str] = {}
    for signal in message.signals:
        role, raw = _behaviour(signal, vehicle, rng, times, car)
        roles[signal.name] = role
        if raw is not None:
            raws[signal.name] = raw
    for counter in (s for s in message.signals if roles[s.name] == "counter"):
        start = int(rng.integers(0, 1 << int(counter.length)))
        raw = (start + np.arange(n)) % (1 << int(counter.length))
        if counter.is_signed:  # the same bits, read in two's complement
            raw = np.where(
                raw >= 1 << (int(counter.length) - 1), raw - (1 << int(counter.length)), raw
            )
        raws[counter.name] = raw
    checksums = [s for s in message.signals if roles[s.name] == "checksum"]
    checksum = checksums[0] if checksums and car in CHECKSUMS else None
    for other in checksums:
        if other is not checksum:  # a second one, or no known algorithm: left at zero
            roles[other.name] = "constant"
            raws[other.name] = np.zeros(n, np.int64)
    if checksum is not None:
        raws[checksum.name] = np.zeros(n, np.int64)
    return roles, raws, checksum


def _encode(
    message: Any, raws: dict[str, npt.NDArray[np.int64]], checksum: Any, car: str | None
) -> npt.NDArray[np.uint8]:
    """Every frame of `message`, encoded by cantools, its checksum as the car computes it."""
    n = len(next(iter(raws.values())))
    payloads = np.zeros((n, message.length), np.uint8)
    chain = signal_chain(checksum) if checksum is not None else ()
    algorithm = CHECKSUMS[car] if checksum is not None and car else None
    for i in range(n):
        values = {name: int(raw[i]) for name, raw in raws.items()}
        data = bytearray(message.encode(values, scaling=False, padding=False, strict=False))
        if algorithm is not None:
            value = algorithm(message.frame_id, bytes(data), int(checksum.start))
            _insert(data, chain, value & ((1 << int(checksum.length)) - 1))
        payloads[i] = np.frombuffer(bytes(data), np.uint8)
    return payloads


def message_truth(
    message: Any, roles: dict[str, str], payloads: npt.NDArray[np.uint8], car: str | None
) -> list[TruthSignal]:
    """Each signal with the bits of it that moved in these frames."""
    bits = np.unpackbits(payloads, axis=1, bitorder="little")
    n = len(payloads)
    changed = bits[1:] != bits[:-1]
    flips = changed.any(axis=0) if n > 1 else np.zeros(bits.shape[1], bool)
    out = []
    for signal in message.signals:
        chain = signal_chain(signal)
        moved = [k for k, pos in enumerate(chain) if flips[pos]]
        positions = [chain[k] for k in moved]
        together = len(moved) < 2 or bool(np.any(changed[:, positions].sum(axis=1) >= 2))
        role = roles[signal.name]
        out.append(
            TruthSignal(
                message=message.name,
                frame_id=int(message.frame_id),
                extended=bool(message.is_extended_frame),
                name=signal.name,
                chain=chain,
                byte_order=signal.byte_order,
                signed=bool(signal.is_signed),
                scale=float(signal.scale),
                offset=float(signal.offset),
                unit=signal.unit or "",
                role=role,
                seen=chain[moved[0] : moved[-1] + 1] if moved else (),
                gapped=bool(moved) and len(moved) != moved[-1] - moved[0] + 1,
                sign_seen=bool(moved) and moved[-1] == len(chain) - 1,
                checksum=car if role == "checksum" else None,
                together=together,
            )
        )
    return out


def capture_truth(
    payloads: dict[tuple[int, bool], npt.NDArray[np.uint8]], databases: list[Any]
) -> list[TruthSignal]:
    """The truth about a real capture: each id's payloads (frames x bytes, time order) read
    with the databases that describe it (11- and 29-bit ids kept apart; a 29-bit id matches
    a message by its J1939 PGN and priority, whatever the source address)."""
    truth: list[TruthSignal] = []
    for (aid, extended), data in payloads.items():
        message = None
        for db in databases:
            for m in db.messages:
                if bool(m.is_extended_frame) != extended:
                    continue
                same = (
                    (int(m.frame_id) & 0x1FFFFF00) == (aid & 0x1FFFFF00)
                    if extended
                    else int(m.frame_id) == aid
                )
                if same:
                    message = m
        if message is None or data.shape[1] < message.length:
            continue
        roles = {
            s.name: "counter"
            if _COUNTER.search(s.name)
            else "checksum"
            if _CHECKSUM.search(s.name)
            else ("flag" if int(s.length) == 1 else "value")
            for s in message.signals
        }
        for t in message_truth(message, roles, data[:, : message.length], None):
            t.frame_id, t.extended = aid, extended
            truth.append(t)
    return truth


def _gnss_frames(
    vehicle: _Vehicle, seconds: float, rng: np.random.Generator
) -> list[tuple[float, int, bool, bytes]]:
    """The GNSS module's speed at 10 Hz, 0.2 s late and with its own noise."""
    gdb = cantools.database.load_string(GNSS_DBC)
    gm = gdb.get_message_by_name("gnss_speed")  # type: ignore[union-attr]
    times = np.arange(0.05, seconds, 0.1)
    idx = np.minimum((times / 0.01).astype(np.int64), len(vehicle.t) - 1)
    lagged = np.maximum(0, idx - 20)
    speed = np.maximum(vehicle.speed[lagged] / 3.6 + rng.normal(0, 0.03, len(times)), 0)
    rows = []
    for ts, value in zip(times, speed, strict=True):
        encoded = gm.encode({"Speed": value, "SpeedAccuracy": 0.2, "SpeedValid": 1})
        rows.append((float(ts), GNSS_ID, False, bytes(encoded)))
    return rows


def generate(
    dbc: str | Path,
    seconds: float = 120.0,
    *,
    car: str | None = None,
    seed: int = 0,
    max_messages: int = 40,
    gnss: bool = True,
) -> Drive:
    """A drive of `seconds` from the periodic messages of `dbc` (at most `max_messages`)."""
    rng = np.random.default_rng(seed)
    db = load_dbc(dbc)
    vehicle = _Vehicle(seconds, rng)
    messages = [m for m in db.messages if _eligible(m)]
    if len(messages) > max_messages:
        picked = rng.choice(len(messages), size=max_messages, replace=False)
        messages = [messages[i] for i in sorted(picked)]
    rows: list[tuple[float, int, bool, bytes]] = []
    truth: list[TruthSignal] = []
    speed_units: dict[str, float] = {}
    for message in messages:
        period = (message.cycle_time or int(rng.choice([10, 20, 20, 50, 100]))) / 1000.0
        phase = rng.uniform(0, period)
        times = np.maximum(
            np.arange(phase, seconds, period) + rng.normal(0, period * 0.01, 1)[0], 0
        )
        roles, raws, checksum = _roles(message, vehicle, rng, times, car)
        payloads = _encode(message, raws, checksum, car)
        rows += [
            (float(ts), int(message.frame_id), bool(message.is_extended_frame), bytes(p))
            for ts, p in zip(times, payloads, strict=True)
        ]
        truth += message_truth(message, roles, payloads, car)
        for signal in message.signals:
            factor = _speed_factor(signal) if roles[signal.name] == "speed" else None
            if factor is not None:
                speed_units[f"{message.name}.{signal.name}"] = 1 / factor / 3.6
    if gnss:
        rows += _gnss_frames(vehicle, seconds, rng)
    rows.sort(key=lambda r: r[0])
    width = max(8, *(len(r[3]) for r in rows))
    table = np.zeros((len(rows), width), np.uint8)
    for i, row in enumerate(rows):
        table[i, : len(row[3])] = np.frombuffer(row[3], np.uint8)
    return Drive(
        name=Path(dbc).stem,
        t=np.array([r[0] for r in rows]),
        ids=np.array([r[1] for r in rows], np.int64),
        extended=np.array([r[2] for r in rows], np.bool_),
        length=np.array([len(r[3]) for r in rows], np.int64),
        data=table,
        truth=truth,
        speed_unit=speed_units,
        motion={"t": vehicle.t, "speed_kmh": vehicle.speed, "rpm": vehicle.rpm},
    )


@dataclass
class Score:
    """What a report got right against a drive's truth."""

    observable: int = 0
    gapped: int = 0  # signals whose moving bits are not one run (left out of `observable`)
    exact: int = 0
    fields: int = 0
    inside: int = 0
    unjudged: int = 0
    counters: int = 0
    counters_found: int = 0
    checksums: int = 0
    checksums_found: int = 0
    checksums_alone: int = 0  # checksums of frames where nothing but a counter moved
    apart: int = 0  # observable signals whose every change moved one of their bits
    apart_exact: int = 0  # ... of them exact
    rediscovered: int = 0  # messages the reference describes that came back as found ones
    speeds: int = 0
    speeds_scaled: int = 0
    misses: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)
    roles: Counter[str] = field(default_factory=Counter)  # observable signals per role
    missed_roles: Counter[str] = field(default_factory=Counter)  # not exact, per role

    def add(self, other: Score) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            setattr(self, name, value + getattr(other, name))


def _one_byte(chain: tuple[int, ...]) -> bool:
    return len({p // 8 for p in chain}) == 1


def score(report: dict[str, Any], drive: Drive, *, skip: Iterable[int] = (GNSS_ID,)) -> Score:
    """Recovery of `report` (the `to_json()` document) against the truth of `drive`."""
    skipped = set(skip)
    found: dict[tuple[int, bool], list[dict[str, Any]]] = {}
    for m in report["messages"]:
        found.setdefault((m["id"], m["extended"]), []).extend(m["signals"])
    truth_by_key: dict[tuple[int, bool], list[TruthSignal]] = {}
    for t in drive.truth:
        truth_by_key.setdefault((t.frame_id, t.extended), []).append(t)
    out = Score()
    for key, truths in truth_by_key.items():
        if key[0] in skipped:
            continue
        fields = found.get(key, [])
        chains = {id(f): _field_chain(f) for f in fields}
        # a checksum over a frame in which only a counter moved is that counter plus a
        # constant: nothing can tell it from a second counter, so it is not observable
        moving = {t.name for t in truths if t.seen and t.role not in ("counter", "checksum")}
        for t in truths:
            if t.gapped and t.role != "checksum":
                out.gapped += 1
            if t.role == "checksum" and t.seen and not moving:
                out.checksums_alone += 1
                continue
            if not t.observable and not (t.role == "checksum" and t.seen):
                continue
            out.observable += 1
            want_signed = t.signed and t.sign_seen
            # a checksum is known by what it computes, so all its bits count
            want = t.chain if t.role == "checksum" else t.seen
            match = next((f for f in fields if chains[id(f)] == want), None)
            ok = match is not None and (
                match["signed"] == want_signed
                and (match["byte_order"] == t.byte_order or _one_byte(t.seen))
            )
            out.roles[t.role] += 1
            if not t.together:
                out.apart += 1
                out.apart_exact += ok
            if ok:
                out.exact += 1
            else:
                out.missed_roles[t.role] += 1
                out.misses.append(
                    f"{t.message}.{t.name} {t.byte_order[0]} seen={_span(t.seen)}"
                    f" signed={want_signed} got={_near(fields, chains, t)}"
                )
            if t.role == "counter":
                out.counters += 1
                if match is not None and match["kind"] == "counter":
                    out.counters_found += 1
            if t.role == "checksum":
                out.checksums += 1
                if match is not None and match["kind"] == "checksum":
                    out.checksums_found += 1
            name = f"{t.message}.{t.name}"
            if t.role == "speed" and name in drive.speed_unit and ok and match is not None:
                out.speeds += 1
                # the reference's unit per step of the bits that moved: a sensor coarser
                # than the DBC's step (every value even) leaves the lowest bits still, and
                # the field found is the moving bits, each step of it 2**k of the DBC's
                low = t.chain.index(t.seen[0])
                per_step = t.scale * 2**low * drive.speed_unit[name]
                ref = match.get("reference")
                if (
                    ref
                    and ref.get("signal") == drive.reference_signal
                    and abs(match["scale"] / per_step - 1) <= 0.02
                ):
                    out.speeds_scaled += 1
        _precision(out, key, fields, chains, truths)
    return out


def _precision(
    out: Score,
    key: tuple[int, bool],
    fields: list[dict[str, Any]],
    chains: dict[int, tuple[int, ...]],
    truths: list[TruthSignal],
) -> None:
    """Count the fields that lie inside one true signal."""
    for f in fields:
        if f["kind"] == "constant":
            continue
        bits = set(chains[id(f)])
        if not any(bits & set(t.chain) for t in truths):
            out.unjudged += 1  # bits no signal of the truth covers (it is incomplete)
            continue
        out.fields += 1
        if any(bits <= set(t.chain) for t in truths):
            out.inside += 1
        else:
            out.stray.append(f"0x{key[0]:X} {f['name']} {_span(chains[id(f)])}")


def _field_chain(f: dict[str, Any]) -> tuple[int, ...]:
    start, length = int(f["start_bit"]), int(f["length"])
    if f["byte_order"] == "little_endian":
        return tuple(range(start, start + length))
    out = [start]
    for _ in range(length - 1):
        pos = out[-1]
        out.append(pos - 1 if pos % 8 else pos + 15)
    return tuple(reversed(out))


def _span(chain: tuple[int, ...]) -> str:
    return f"{chain[0]}..{chain[-1]}" if chain else "-"


def _near(fields: list[dict[str, Any]], chains: dict[int, tuple[int, ...]], t: TruthSignal) -> str:
    hits = [f for f in fields if set(chains[id(f)]) & set(t.seen)]
    return (
        ", ".join(
            f"{_span(chains[id(f)])}{'s' if f['signed'] else ''}{f['byte_order'][0]}/{f['kind']}"
            for f in hits
        )
        or "nothing"
    )
