"""A generated drive as a bare car with an OBD port, and moments a person marked in it.

`with_obd(drive)` takes the drive's reference module off the bus (a bare car has none) and
puts a tester on it instead: mode 01 requests on 0x7DF at a few per second per PID, and the
engine ECU's answers on 0x7E8 a few milliseconds later, computed from the vehicle's own speed
and engine speed (`Drive.motion`, the truth both generators keep) with the standard's
formulas (SPEED in whole km/h, RPM in quarter rpm). `multi=True` asks five PIDs in one
request, so the answers span two frames (first frame, the tester's flow control on 0x7E0,
a consecutive frame), as ISO 15765-2 carries them.

`marked_events(drive, rng)` makes the moments a person would mark from the truth: a few
flags and states that change now and then (brake, turn signal, door, gear first, by name),
each change marked late or early by a human's 0.1 to 0.5 s, and for each the signals that
change at the same moments, within the marks' own 0.5 s (twins: no one can tell them apart
by marking).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import cantools
import numpy as np
import numpy.typing as npt

from benchmarks.drives import GNSS_DBC, Drive, TruthSignal

__all__ = ["MarkedEvent", "marked_events", "with_obd"]

F64 = npt.NDArray[np.float64]
REQUEST, RESPONSE, PHYSICAL = 0x7DF, 0x7E8, 0x7E0
_PAD = 0x55


def _speed(v: float) -> bytes:
    return bytes([int(min(max(round(v), 0), 255))])


def _rpm(v: float) -> bytes:
    return int(min(max(round(v * 4), 0), 0xFFFF)).to_bytes(2, "big")


def _frame(payload: bytes) -> bytes:
    return payload.ljust(8, bytes([_PAD]))


def with_obd(
    drive: Drive,
    *,
    seed: int = 0,
    rate_hz: float = 5.0,
    multi: bool = False,
) -> Drive:
    """`drive` without its reference module, with OBD-II polling added (see the module's
    docstring); its `reference_signal` is SPEED and `speed_unit` in km/h."""
    rng = np.random.default_rng(seed + 4099)
    motion = drive.motion
    t_m, speed, rpm = motion["t"], motion["speed_kmh"], motion["rpm"]
    end = float(drive.t[-1])

    def at(series: F64, ts: float) -> float:
        return float(np.interp(ts, t_m, series))

    rows: list[tuple[float, int, bytes]] = []
    # the tester's requests, one PID after the other (or five at once), with its jitter
    pids = [0x0D, 0x0C]
    step = 1.0 / (rate_hz * (1 if multi else len(pids)))
    ts = float(rng.uniform(0, step))
    k = 0
    while ts < end - 0.1:
        latency = float(rng.uniform(0.004, 0.035))
        answer_t = ts + latency
        if multi:
            ask = [0x0D, 0x0C, 0x05, 0x11, 0x04]
            rows.append((ts, REQUEST, _frame(bytes([len(ask) + 1, 0x01, *ask]))))
            body = (
                bytes([0x41, 0x0D])
                + _speed(at(speed, answer_t))
                + bytes([0x0C])
                + _rpm(at(rpm, answer_t))
                + bytes([0x05, 130, 0x11, 40, 0x04, 60])
            )
            rows.append((answer_t, RESPONSE, bytes([0x10, len(body)]) + body[:6]))
            fc_t = answer_t + float(rng.uniform(0.001, 0.005))
            rows.append((fc_t, PHYSICAL, _frame(bytes([0x30, 0x00, 0x00]))))
            rest = body[6:]
            rows.append((fc_t + 0.001, RESPONSE, _frame(bytes([0x21]) + rest)))
        else:
            pid = pids[k % len(pids)]
            rows.append((ts, REQUEST, _frame(bytes([0x02, 0x01, pid]))))
            value = _speed(at(speed, answer_t)) if pid == 0x0D else _rpm(at(rpm, answer_t))
            body = bytes([0x41, pid]) + value
            rows.append((answer_t, RESPONSE, _frame(bytes([len(body)]) + body)))
        k += 1
        ts += step * float(rng.uniform(0.9, 1.1))
    module: Any = cantools.database.load_string(drive.reference_dbc)
    reference_ids = {int(m.frame_id) for m in module.messages}
    keep = ~np.isin(drive.ids, list(reference_ids)) | drive.extended
    n = len(rows)
    t_all = np.r_[drive.t[keep], [r[0] for r in rows]]
    ids = np.r_[drive.ids[keep], np.array([r[1] for r in rows], np.int64)]
    ext = np.r_[drive.extended[keep], np.zeros(n, np.bool_)]
    lengths = np.r_[drive.length[keep], np.full(n, 8, np.int64)]
    extra = np.zeros((n, drive.data.shape[1]), np.uint8)
    for i, (_, _, payload) in enumerate(rows):
        extra[i, :8] = np.frombuffer(payload, np.uint8)
    data = np.concatenate([drive.data[keep], extra])
    order = np.argsort(t_all, kind="stable")
    per = 3.6 if drive.reference_dbc == GNSS_DBC else 1.0  # the GNSS speed is in m/s
    return replace(
        drive,
        t=t_all[order],
        ids=ids[order],
        extended=ext[order],
        length=lengths[order],
        data=data[order],
        speed_unit={k: v * per for k, v in drive.speed_unit.items()},
        reference_signal="SPEED",
    )


# -- marked events ------------------------------------------------------------------------


@dataclass
class MarkedEvent:
    """Marks of one event made from the truth: the signal that changed, and its twins."""

    name: str
    times: list[float]
    signal: TruthSignal
    twins: list[TruthSignal]


_PREFERRED = re.compile(r"brake|brk|turn|blink|indic|door|gear|belt|light|lamp", re.I)


def _values(drive: Drive, t: TruthSignal) -> tuple[F64, npt.NDArray[np.int64]]:
    rows = np.flatnonzero((drive.ids == t.frame_id) & (drive.extended == t.extended))
    bits = np.unpackbits(drive.data[rows], axis=1, bitorder="little")
    weights = np.left_shift(np.int64(1), np.arange(len(t.chain), dtype=np.int64))
    raw = bits[:, list(t.chain)].astype(np.int64) @ weights
    return drive.t[rows], raw


def _changes(drive: Drive, t: TruthSignal) -> tuple[F64, npt.NDArray[np.int64]]:
    """When the signal's value changed, and what it changed to."""
    times, raw = _values(drive, t)
    moved = np.flatnonzero(raw[1:] != raw[:-1]) + 1
    return times[moved], raw[moved]


def _same_moments(a: F64, b: F64, within: float = 0.5) -> bool:
    if not len(a) or len(a) != len(b):
        return False
    return bool(np.all(np.abs(a - b) <= within))


def marked_events(
    drive: Drive,
    rng: np.random.Generator,
    *,
    signals: int = 2,
    min_changes: int = 4,
    max_changes: int = 40,
    skip_ids: set[int] | None = None,
) -> list[MarkedEvent]:
    """Events to mark (see the module's docstring): up to `signals` flags or states that
    changed between `min_changes` and `max_changes` times, at least 3 s apart; a flag gives
    an "on" and an "off" event, a state one "changed" event. Each mark comes 0.1 to 0.5 s
    after the change (or, one time in four, before it)."""
    skipped = skip_ids or set()
    movable = [
        t
        for t in drive.truth
        if t.observable and t.role not in ("counter", "checksum") and t.frame_id not in skipped
    ]
    changes = {id(t): _changes(drive, t) for t in movable}
    usable = []
    for t in movable:
        if t.role not in ("flag", "state"):
            continue
        times, _ = changes[id(t)]
        if min_changes <= len(times) <= max_changes and np.all(np.diff(times) >= 3.0):
            usable.append(t)
    usable.sort(key=lambda t: (not _PREFERRED.search(t.name), t.message, t.name))
    preferred = [t for t in usable if _PREFERRED.search(t.name)]
    others = [t for t in usable if not _PREFERRED.search(t.name)]
    rng.shuffle(others)
    chosen = (preferred + others)[:signals]
    out: list[MarkedEvent] = []
    for t in chosen:
        times, to = changes[id(t)]
        twins = [o for o in movable if o is not t and _same_moments(changes[id(o)][0], times)]
        late = rng.random(len(times)) < 0.75
        jitter = rng.uniform(0.1, 0.5, len(times)) * np.where(late, 1.0, -1.0)
        marked = times + jitter
        if t.role == "flag":
            on = to != 0
            out.append(MarkedEvent(f"{t.name} on", marked[on].tolist(), t, twins))
            out.append(MarkedEvent(f"{t.name} off", marked[~on].tolist(), t, twins))
        else:
            out.append(MarkedEvent(f"{t.name} changed", marked.tolist(), t, twins))
    return [e for e in out if e.times]
