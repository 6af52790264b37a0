"""OBD-II as the reference: the mode 01 answers on a bus, decoded into reference signals.

A bare car has no database, but it has an OBD port: a tester asks for a PID (`7DF 02 01 0D`)
and the engine ECU answers (`7E8 03 41 0D 32`: 50 km/h). Those exchanges, in a capture or
in a live recording while `ObdPoller` asks, are decoded here (ISO 15765-2 single frames and
multi-frame answers alike, 11- and 29-bit ids) with hwbridge's PID table into one reference
signal per answering ECU and PID, named as python-OBD names them (`SPEED`, `RPM`,
`THROTTLE_POS`, `COOLANT_TEMP`, ...) in the PID's unit. They are reference signals like a
DBC's: `ObdReference` gives them to the survey and `correlate_signal`, and the OBD ids
themselves are decoded, never rediscovered.

An id in the OBD ranges counts as OBD only when its frames read as ISO-TP frames and its
answers as diagnostic answers (most ids in 0x7E0-0x7EF are, but a car may use one for
something else). Nothing an ECU says is more than a number here: only numeric PIDs become
series; everything is bounded (`MAX_OBD_FRAMES` frames kept, `MAX_SAMPLES` per series).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hwbridge.can.database.database import CanDatabase
from hwbridge.discovery.analysis.correlate import Series
from hwbridge.discovery.analysis.reference import Reference, ReferenceSignal
from hwbridge.discovery.frames import FrameKey, FrameSet
from hwbridge.discovery.report.models import Note
from hwbridge.obd.database.pids import PIDS, Pid, find_pid

__all__ = [
    "MAX_OBD_FRAMES",
    "OBD_REFERENCE",
    "ObdExchanges",
    "ObdFrames",
    "ObdReference",
    "is_obd_reference",
    "obd_name",
    "obd_notes",
    "obd_pid",
    "split_obd",
]

OBD_REFERENCE = "obd"
"""What `reference=` takes for OBD-II as the reference."""
MAX_OBD_FRAMES = 262_144
"""Frames of the OBD ids kept from one capture or recording (the rest counted)."""
MAX_SAMPLES = 65_536
"""Values kept per ECU and PID."""
VALID_SHARE = 0.8
"""Share of an id's frames that must read as ISO-TP frames for it to count as OBD."""
_PYTHON_OBD = {"AMBIENT_AIR_TEMP": "AMBIANT_AIR_TEMP"}  # python-OBD's own spelling
_MAX_ISOTP = 4095


def is_obd_reference(spec: object) -> bool:
    """Whether a `reference=` item asks for OBD-II (the string "obd", any case)."""
    return isinstance(spec, str) and spec.strip().lower() == OBD_REFERENCE


def split_obd(reference: Any) -> tuple[Any, bool]:
    """`reference` without "obd" (None when nothing else is left), and whether it was there."""
    if (
        reference is None
        or isinstance(reference, Path | CanDatabase)
        or hasattr(reference, "messages")
    ):
        return reference, False
    if isinstance(reference, str):
        return (None, True) if is_obd_reference(reference) else (reference, False)
    items = list(reference)
    rest = [r for r in items if not is_obd_reference(r)]
    return (rest or None), len(rest) != len(items)


def obd_notes(exchanges: ObdExchanges) -> list[Note]:
    """What a user needs to know about the OBD reference of a capture or recording."""
    notes = []
    if not exchanges.answers:
        notes.append(
            Note(
                message="*",
                text="OBD-II was the reference, but no OBD-II answer (0x7E8-0x7EF, 0x18DAF1xx)"
                " was found on the bus; nothing could be correlated with it",
            )
        )
    elif not any(exchanges.signals.values()):
        notes.append(
            Note(
                message="*",
                text="the OBD-II answers found carry no numeric mode 01 PID to correlate with",
            )
        )
    if exchanges.frames_not_kept:
        notes.append(
            Note(
                message="*",
                text=f"{exchanges.frames_not_kept} OBD-II frame(s) past the first"
                f" {MAX_OBD_FRAMES:,} were not decoded",
            )
        )
    return notes


def obd_name(pid: Pid) -> str:
    """python-OBD's name of a PID (`SPEED`, `RPM`, `AMBIANT_AIR_TEMP`)."""
    return _PYTHON_OBD.get(pid.name, pid.name)


def obd_pid(name: str) -> Pid | None:
    """The mode 01 PID a signal name means (python-OBD's names, hwbridge's, hex), if any;
    `OBD_7E8.SPEED` names one ECU's."""
    text = name.rsplit(".", 1)[-1]
    found = find_pid(text)
    return found if isinstance(found, Pid) else None


def _candidate(aid: npt.NDArray[np.int64], ext: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Ids in the OBD ranges: 7DF, 7E0-7EF; 18DB33F1, 18DAxxF1, 18DAF1xx."""
    short = ~ext & ((aid == 0x7DF) | ((aid >= 0x7E0) & (aid <= 0x7EF)))
    long = ext & (
        (aid == 0x18DB33F1)
        | ((aid & 0x1FFF00FF) == 0x18DA00F1)
        | ((aid & 0x1FFFFF00) == 0x18DAF100)
    )
    out: npt.NDArray[np.bool_] = short | long
    return out


def _candidate_id(aid: int, extended: bool) -> bool:
    """`_candidate` for one id."""
    if extended:
        return (
            aid == 0x18DB33F1
            or (aid & 0x1FFF00FF) == 0x18DA00F1
            or (aid & 0x1FFFFF00) == 0x18DAF100
        )
    return aid == 0x7DF or 0x7E0 <= aid <= 0x7EF


def _is_response(key: FrameKey) -> bool:
    aid, extended = key
    if extended:
        return (aid & 0x1FFFFF00) == 0x18DAF100
    return 0x7E8 <= aid <= 0x7EF


def _answered_by(request: FrameKey) -> FrameKey | None:
    """The response id of a physical request id (None: a functional request)."""
    aid, extended = request
    if extended:
        if aid == 0x18DB33F1:
            return None
        return 0x18DAF100 | ((aid >> 8) & 0xFF), True
    return None if aid == 0x7DF else (aid + 8, False)


def key_name(key: FrameKey) -> str:
    """OBD_7E8, OBD_18DAF110: how the report names an OBD id's frames and signals."""
    aid, extended = key
    return f"OBD_{aid:08X}" if extended else f"OBD_{aid:03X}"


@dataclass
class _Stream:
    """One id's frames in time order, and what reading them as ISO-TP found."""

    frames: int = 0
    valid: int = 0
    answers: int = 0  # complete payloads whose first byte is a diagnostic answer
    requests: int = 0  # complete payloads whose first byte is a diagnostic request
    flow_controls: int = 0  # the other side's flow control (a tester's, on a request id)
    samples: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)


@dataclass
class ObdExchanges:
    """What the OBD frames said: the ids that are OBD (by name), each answering ECU's
    numeric PIDs as reference signals, and how much was counted but not kept."""

    ids: dict[FrameKey, str] = field(default_factory=dict)
    signals: dict[FrameKey, list[ReferenceSignal]] = field(default_factory=dict)
    answers: int = 0
    frames_not_kept: int = 0

    def named(self, name: str) -> ReferenceSignal | None:
        """The series a signal name means (`SPEED`, `OBD_7E8.SPEED`, `0D`), the one with
        the most values when several ECUs answered it; None when none did."""
        pid = obd_pid(name)
        if pid is None:
            return None
        ecu = name.rsplit(".", 1)[0] if "." in name else None
        found = [
            s
            for signals in self.signals.values()
            for s in signals
            if s.signal == obd_name(pid) and (ecu is None or s.message == ecu)
        ]
        return max(found, key=lambda s: len(s.series.t), default=None)

    def names(self) -> list[str]:
        return sorted({s.signal for signals in self.signals.values() for s in signals})


class ObdFrames:
    """The frames of the OBD ids, kept raw (any length) from chunks of a capture or a
    recording, at most `max_frames`; `exchanges()` decodes them."""

    def __init__(self, max_frames: int = MAX_OBD_FRAMES) -> None:
        self.max_frames = max_frames
        self._t: list[npt.NDArray[np.float64]] = []
        self._keys: list[npt.NDArray[np.int64]] = []
        self._data: list[npt.NDArray[np.uint8]] = []
        self._lens: list[npt.NDArray[np.int64]] = []
        self.kept = 0
        self.not_kept = 0

    def add(
        self,
        t_s: npt.NDArray[np.float64],
        arbitration_id: npt.NDArray[np.integer],
        extended: npt.NDArray[np.bool_],
        length: npt.NDArray[np.integer],
        data: npt.NDArray[np.uint8],
    ) -> None:
        """Take a chunk (columns as `Collector.add` takes them); keeps the OBD ids' frames."""
        aid = arbitration_id.astype(np.int64)
        ext = extended.astype(np.bool_)
        mask = _candidate(aid, ext)
        if not mask.any():
            return
        rows = np.flatnonzero(mask)
        room = self.max_frames - self.kept
        if len(rows) > room:
            self.not_kept += len(rows) - max(room, 0)
            rows = rows[: max(room, 0)]
        if not len(rows):
            return
        payload = np.zeros((len(rows), 8), np.uint8)
        width = min(8, data.shape[1])
        payload[:, :width] = data[rows, :width]
        self._t.append(np.asarray(t_s, np.float64)[rows])
        self._keys.append(aid[rows] | (ext[rows].astype(np.int64) << 32))
        self._data.append(payload)
        self._lens.append(np.minimum(np.asarray(length, np.int64)[rows], 8))
        self.kept += len(rows)

    def add_frames(self, frames: Iterable[tuple[float, int, bool, bytes]]) -> None:
        """Take frames one by one: (timestamp s, id, extended, payload)."""
        picked = [f for f in frames if _candidate_id(f[1], f[2])]
        if not picked:
            return
        data = np.zeros((len(picked), 8), np.uint8)
        for row, (_, _, _, payload) in enumerate(picked):
            chunk = bytes(payload[:8])
            data[row, : len(chunk)] = np.frombuffer(chunk, np.uint8)
        self.add(
            np.array([f[0] for f in picked], np.float64),
            np.array([f[1] for f in picked], np.int64),
            np.array([f[2] for f in picked], np.bool_),
            np.array([min(len(f[3]), 8) for f in picked], np.int64),
            data,
        )

    def add_framesets(self, framesets: Mapping[FrameKey, FrameSet]) -> None:
        """Take the frames of the OBD ids among `framesets` (a live recording's: ISO
        15765-4 frames are 8 bytes, the length a FrameSet keeps)."""
        for key, fs in framesets.items():
            if _candidate_id(*key) and len(fs):
                n = len(fs)
                self.add(
                    fs.t,
                    np.full(n, key[0], np.int64),
                    np.full(n, key[1], np.bool_),
                    np.full(n, fs.length, np.int64),
                    fs.data,
                )

    def exchanges(self) -> ObdExchanges:
        """Decode what was kept (see the module's docstring)."""
        out = ObdExchanges(frames_not_kept=self.not_kept)
        if not self.kept:
            return out
        t = np.concatenate(self._t)
        keys = np.concatenate(self._keys)
        data = np.concatenate(self._data)
        lens = np.concatenate(self._lens)
        streams: dict[FrameKey, _Stream] = {}
        for packed in np.unique(keys):
            rows = np.flatnonzero(keys == packed)
            rows = rows[np.argsort(t[rows], kind="stable")]
            key = (int(packed) & 0x1FFFFFFF, bool(int(packed) >> 32))
            streams[key] = _read(t[rows], data[rows], lens[rows], _is_response(key))
        obd_responses = {
            k
            for k, s in streams.items()
            if _is_response(k) and s.answers and s.valid >= VALID_SHARE * s.frames
        }
        for key, stream in streams.items():
            if key in obd_responses:
                out.ids[key] = key_name(key)
                out.answers += stream.answers
                out.signals[key] = _signals(key, stream)
            elif not _is_response(key) and stream.valid >= VALID_SHARE * stream.frames:
                answered_by = _answered_by(key)
                paired = (
                    any(r[1] == key[1] for r in obd_responses)
                    if answered_by is None
                    else answered_by in obd_responses
                )
                if paired and (stream.requests or stream.flow_controls):
                    out.ids[key] = key_name(key)
        return out


def _read(
    t: npt.NDArray[np.float64],
    data: npt.NDArray[np.uint8],
    lens: npt.NDArray[np.int64],
    response: bool,
) -> _Stream:
    """ISO-TP frames in time order: reassembled payloads, mode 01 answers decoded."""
    stream = _Stream(frames=len(t))
    buf: bytearray | None = None
    expect = 0
    sn = 0
    for i in range(len(t)):
        n = int(lens[i])
        row = bytes(data[i, :n])
        if not row:
            buf = None
            continue
        pci, low = row[0] >> 4, row[0] & 0x0F
        if pci == 0:  # single frame
            if not 1 <= low <= n - 1:
                buf = None
                continue
            stream.valid += 1
            _complete(stream, float(t[i]), row[1 : 1 + low], response)
            buf = None
        elif pci == 1:  # first frame
            size = (low << 8) | row[1] if n >= 2 else 0
            if n < 8 or size < 8:
                buf = None
                continue
            stream.valid += 1
            buf, expect, sn = bytearray(row[2:]), min(size, _MAX_ISOTP), 1
        elif pci == 2:  # consecutive frame
            if buf is None or low != sn & 0x0F:
                buf = None
                continue
            stream.valid += 1
            buf += row[1:]
            sn += 1
            if len(buf) >= expect:
                _complete(stream, float(t[i]), bytes(buf[:expect]), response)
                buf = None
        elif pci == 3 and low <= 2:  # flow control (the other side's)
            stream.valid += 1
            stream.flow_controls += 1
        else:
            buf = None
    return stream


def _complete(stream: _Stream, t: float, payload: bytes, response: bool) -> None:
    if not payload:
        return
    service = payload[0]
    if not response:
        if 0x01 <= service <= 0x0A or 0x10 <= service <= 0x3E:
            stream.requests += 1
        return
    if not 0x40 <= service <= 0x7F:
        return
    stream.answers += 1
    if service != 0x41:
        return
    i = 1
    while i < len(payload):
        number = payload[i]
        pid = PIDS.get(number)
        if pid is None:
            return  # its length is not known: nothing after it can be read
        value = payload[i + 1 : i + 1 + pid.length]
        i += 1 + pid.length
        if len(value) < pid.length or number % 0x20 == 0:
            continue  # cut short, or a support bitmap
        number_value = _number(pid, value)
        if number_value is None:
            continue
        ts, vs = stream.samples.setdefault(number, ([], []))
        if len(ts) < MAX_SAMPLES:
            ts.append(t)
            vs.append(number_value)


def _number(pid: Pid, value: bytes) -> float | None:
    try:
        decoded: Any = pid.decode(value)
    except Exception:
        return None
    if isinstance(decoded, bool) or not isinstance(decoded, int | float):
        return None
    number = float(decoded)
    return number if np.isfinite(number) else None


def _signals(key: FrameKey, stream: _Stream) -> list[ReferenceSignal]:
    out = []
    for number, (ts, vs) in sorted(stream.samples.items()):
        pid = PIDS[number]
        t, v = np.array(ts), np.array(vs)
        order = np.argsort(t, kind="stable")
        series = Series(t[order], v[order])
        out.append(ReferenceSignal(key_name(key), obd_name(pid), pid.unit, series))
    return out


@dataclass(frozen=True, slots=True)
class _ObdMessage:
    """What the survey needs of a message the reference describes: its name."""

    name: str
    signals: tuple[Any, ...] = ()


class ObdReference(Reference):
    """A reference of databases (possibly none) and of the OBD exchanges on the bus: the
    OBD ids are described (decoded, never rediscovered), each answering ECU's PIDs are its
    signals. A database that describes an id first wins."""

    def __init__(self, databases: Sequence[CanDatabase], exchanges: ObdExchanges) -> None:
        super().__init__(tuple(databases))
        self.exchanges = exchanges

    def __bool__(self) -> bool:
        return True

    def message(self, key: FrameKey) -> Any | None:
        found = super().message(key)
        if found is not None:
            return found
        name = self.exchanges.ids.get(key)
        return None if name is None else _ObdMessage(name)

    def signals(self, frames: FrameSet) -> list[ReferenceSignal]:
        if super().message(frames.key) is None and frames.key in self.exchanges.ids:
            return list(self.exchanges.signals.get(frames.key, []))
        return super().signals(frames)
