"""The frames of one id, kept for analysis in bounded memory, whatever the capture's size.

`Collector` takes frames in chunks (numpy columns, as the capture readers yield them, or a
live monitor's history) and keeps, per frame id, its timestamps and payloads. Every frame is
counted; past a budget the stored frames of an id are thinned in whole blocks of consecutive
frames, so what is kept still shows how the payload moves from one frame to the next
(counters, flips, wrap-arounds), only less of it. Ids past `max_ids` are not kept at all:
their frames and (estimated) number are reported as dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["Collector", "Dropped", "FrameKey", "FrameSet", "frame_key_text"]

FrameKey = tuple[int, bool]
"""(arbitration id, extended)."""

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

MAX_IDS = 4096
"""Frame ids analysed at most (an 11-bit bus has 2,048; J1939 buses a few hundred)."""
MAX_BYTES = 192 * 1024 * 1024
"""Payload, timestamps and bookkeeping of every stored frame together."""
MAX_ROWS_PER_ID = 1 << 16
"""Frames kept per id: 65,536 is 11 minutes of a 100 Hz message."""
BLOCK = 256
"""Frames are thinned in blocks this long, so consecutive frames stay consecutive."""
_EXT = np.int64(1) << np.int64(31)


def frame_key_text(key: FrameKey) -> str:
    """0x1A0 for an 11-bit id, 0x18FEF100 (eight digits) for a 29-bit one."""
    aid, extended = key
    return f"0x{aid:08X}" if extended else f"0x{aid:03X}"


@dataclass(frozen=True, slots=True, eq=False)
class FrameSet:
    """The stored frames of one id, oldest first.

    `cont[i]` says frame i directly follows frame i-1 (same capture, nothing thinned out
    between them); only such pairs count as transitions. `data` has `length` columns, the
    id's most common length; frames of other lengths are left out (`other_lengths`).
    """

    key: FrameKey
    t: F64
    data: U8
    cont: B
    length: int
    frames: int  # frames of this id seen in all
    period_ms: float | None
    other_lengths: int = 0

    def __len__(self) -> int:
        return len(self.t)

    @property
    def pairs(self) -> int:
        return int(self.cont.sum())


class _Hll:
    """How many distinct ids were dropped: a HyperLogLog sketch fed with numpy arrays."""

    def __init__(self, bits: int = 12) -> None:
        self.bits = bits
        self.registers = np.zeros(1 << bits, np.uint8)

    def add(self, keys: I64) -> None:
        if not len(keys):
            return
        z = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        index = (z >> np.uint64(64 - self.bits)).astype(np.int64)
        rest = z << np.uint64(self.bits)
        # rank = leading zeros of `rest` + 1, capped
        lz = np.full(len(rest), 64 - self.bits + 1, np.uint8)
        nonzero = rest != 0
        if nonzero.any():
            top = np.floor(np.log2(rest[nonzero].astype(np.float64))).astype(np.int64)
            lz[nonzero] = (64 - top).astype(np.uint8)
        np.maximum.at(self.registers, index, lz)

    def estimate(self) -> int:
        m = len(self.registers)
        zeros = int((self.registers == 0).sum())
        if zeros == m:
            return 0
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / float(np.sum(2.0 ** -self.registers.astype(np.float64)))
        if raw <= 2.5 * m and zeros:
            raw = m * float(np.log(m / zeros))
        return max(1, round(raw))


@dataclass
class Dropped:
    """What was not analysed, and why (reported with every result)."""

    ids: int = 0  # distinct ids past MAX_IDS (estimated within a few percent)
    frames_of_dropped_ids: int = 0
    thinned_ids: int = 0  # ids whose stored frames were thinned to stay in budget
    frames_not_stored: int = 0  # frames of kept ids that were counted but not stored
    frames_of_other_lengths: int = 0  # frames shorter or longer than their id's usual length
    payload_bytes_cut: int = 0  # frames longer than 64 bytes (cut to 64)
    frames_of_impossible_ids: int = 0  # 11-bit ids above 0x7FF, 29-bit ids above 0x1FFFFFFF

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass
class _IdState:
    seen: int = 0
    level: int = 0  # blocks kept: every 2**level-th
    last_kept: int = -2  # frame index of the last stored frame (-2: none, or a new segment)
    lengths: I64 = field(default_factory=lambda: np.zeros(65, np.int64))
    t: list[F64] = field(default_factory=list)
    data: list[U8] = field(default_factory=list)
    lens: list[U8] = field(default_factory=list)
    seq: list[I64] = field(default_factory=list)
    cont: list[B] = field(default_factory=list)
    rows: int = 0
    width: int = 0

    def nbytes(self) -> int:
        return self.rows * (8 + 8 + 2 + self.width)


class Collector:
    """Frames in, `FrameSet`s out; memory bounded by `max_bytes` and `max_ids`."""

    def __init__(
        self,
        *,
        max_ids: int = MAX_IDS,
        max_bytes: int = MAX_BYTES,
        max_rows_per_id: int = MAX_ROWS_PER_ID,
        block: int = BLOCK,
    ) -> None:
        self.max_ids = max_ids
        self.max_bytes = max_bytes
        self.max_rows = max_rows_per_id
        self.block = block
        self._states: dict[int, _IdState] = {}
        self._known = np.zeros(0, np.int64)  # sorted keys of kept ids
        self._hll = _Hll()
        self.dropped = Dropped()
        self.frames = 0
        self._bytes = 0

    # -- input ----------------------------------------------------------------------------

    def add(
        self,
        t_s: F64,
        arbitration_id: npt.NDArray[np.integer],
        extended: B,
        length: npt.NDArray[np.integer],
        data: U8,
    ) -> None:
        """Take a chunk of frames in time order (columns of equal length)."""
        impossible = np.where(extended, arbitration_id > 0x1FFFFFFF, arbitration_id > 0x7FF)
        if impossible.any():  # no bus carries them: counted, never analysed or drafted
            self.dropped.frames_of_impossible_ids += int(impossible.sum())
            keep = ~impossible
            t_s, arbitration_id, extended = t_s[keep], arbitration_id[keep], extended[keep]
            length, data = length[keep], data[keep]
        n = len(t_s)
        if n == 0:
            return
        self.frames += n
        if data.shape[1] > 64:
            self.dropped.payload_bytes_cut += int((length > 64).sum())
            data = data[:, :64]
            length = np.minimum(length, 64)
        keys = arbitration_id.astype(np.int64) | (extended.astype(np.int64) * _EXT)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], n]
        unique = sorted_keys[starts]
        known = self._is_known(unique)
        room = self.max_ids - len(self._states)
        new = np.flatnonzero(~known)
        admitted = new[:room] if room > 0 else new[:0]
        refused = new[len(admitted) :]
        if len(refused):
            frames_refused = int((ends[refused] - starts[refused]).sum())
            self.dropped.frames_of_dropped_ids += frames_refused
            self._hll.add(unique[refused])
        if len(admitted):
            for k in unique[admitted]:
                self._states[int(k)] = _IdState()
            self._known = np.sort(np.r_[self._known, unique[admitted]])
        keep = np.flatnonzero(known)
        for i in np.r_[keep, admitted]:
            rows = order[starts[i] : ends[i]]
            self._take(int(unique[i]), t_s[rows], length[rows], data[rows])
        self._enforce_budget()

    def add_frames(self, frames: Iterable[tuple[float, int, bool, bytes]]) -> None:
        """Take frames given one by one: (timestamp s, id, extended, payload)."""
        t: list[float] = []
        ids: list[int] = []
        ext: list[bool] = []
        payloads: list[bytes] = []
        for ts, aid, extended, payload in frames:
            t.append(ts)
            ids.append(aid)
            ext.append(extended)
            payloads.append(payload[:64])
        if not t:
            return
        width = max(8, *(len(p) for p in payloads))
        data = np.zeros((len(payloads), width), np.uint8)
        lengths = np.fromiter((len(p) for p in payloads), np.int64, len(payloads))
        for row, payload in enumerate(payloads):
            data[row, : len(payload)] = np.frombuffer(payload, np.uint8)
        self.add(
            np.asarray(t, np.float64),
            np.asarray(ids, np.int64),
            np.asarray(ext, np.bool_),
            lengths,
            data,
        )

    def end_segment(self) -> None:
        """The next frames come from another capture: no transition across the seam."""
        for state in self._states.values():
            state.last_kept = -2

    # -- output ---------------------------------------------------------------------------

    def keys(self) -> list[FrameKey]:
        return [_unpack(k) for k in sorted(self._states)]

    def frameset(self, key: FrameKey) -> FrameSet | None:
        state = self._states.get(_pack(key))
        if state is None or not state.rows:
            return None
        length = int(np.argmax(state.lengths))
        t = np.concatenate(state.t)
        data = _stack(state.data, max(length, 1))
        cont = np.concatenate(state.cont)
        good = np.concatenate(state.lens) == length
        if not good.all():
            # frames of another length are left out (their bytes mean something else, or
            # are cut), and a frame left out breaks the chain of transitions around it
            cont = cont & np.r_[False, good[:-1]]
            keep = np.flatnonzero(good)
            t, data, cont = t[keep], data[keep], cont[keep]
        period = _period_ms(t, cont)
        return FrameSet(
            key=key,
            t=t,
            data=data,
            cont=cont,
            length=length,
            frames=state.seen,
            period_ms=period,
            other_lengths=int(state.lengths.sum() - state.lengths[length]),
        )

    def framesets(self) -> dict[FrameKey, FrameSet]:
        out: dict[FrameKey, FrameSet] = {}
        for key in self.keys():
            fs = self.frameset(key)
            if fs is not None:
                out[key] = fs
        return out

    def report_dropped(self) -> Dropped:
        """What was dropped so far (distinct dropped ids estimated)."""
        self.dropped.ids = self._hll.estimate() if self.dropped.frames_of_dropped_ids else 0
        self.dropped.frames_of_other_lengths = sum(
            int(s.lengths.sum() - s.lengths[int(np.argmax(s.lengths))])
            for s in self._states.values()
        )
        self.dropped.thinned_ids = sum(1 for s in self._states.values() if s.level)
        return self.dropped

    # -- inside ---------------------------------------------------------------------------

    def _is_known(self, unique: I64) -> B:
        if not len(self._known):
            return np.zeros(len(unique), np.bool_)
        at = np.searchsorted(self._known, unique)
        at = np.minimum(at, len(self._known) - 1)
        found: B = self._known[at] == unique
        return found

    def _take(self, key: int, t: F64, length: npt.NDArray[np.integer], data: U8) -> None:
        state = self._states[key]
        m = len(t)
        seq = state.seen + np.arange(m, dtype=np.int64)
        state.seen += m
        state.lengths += np.bincount(np.minimum(length, 64).astype(np.int64), minlength=65)[:65]
        keep = self._kept(seq, state.level)
        if not keep.all():
            self.dropped.frames_not_stored += int(m - keep.sum())
            seq, t, data, length = seq[keep], t[keep], data[keep], length[keep]
        if not len(seq):
            return
        data = np.ascontiguousarray(data[:, : max(1, int(length.max()))])
        prev = np.r_[state.last_kept, seq[:-1]]
        cont = seq == prev + 1
        state.last_kept = int(seq[-1])
        state.t.append(np.ascontiguousarray(t, np.float64))
        state.data.append(data)
        state.lens.append(np.minimum(length, 64).astype(np.uint8))
        state.seq.append(seq)
        state.cont.append(cont)
        before = state.nbytes()
        state.rows += len(seq)
        state.width = max(state.width, data.shape[1])
        self._bytes += state.nbytes() - before
        while state.rows > self.max_rows:
            self._thin(state)

    def _kept(self, seq: I64, level: int) -> B:
        if level == 0:
            return np.ones(len(seq), np.bool_)
        mask: B = ((seq // self.block) % (1 << level)) == 0
        return mask

    def _thin(self, state: _IdState) -> None:
        """Keep every other stored block of this id from now on (and of what is stored)."""
        before = state.nbytes()
        state.level += 1
        seq = np.concatenate(state.seq)
        keep = self._kept(seq, state.level)
        self.dropped.frames_not_stored += int(len(seq) - keep.sum())
        t = np.concatenate(state.t)[keep]
        data = _stack(state.data, state.width)[keep]
        lens = np.concatenate(state.lens)[keep]
        cont = np.concatenate(state.cont)[keep]
        seq = seq[keep]
        cont &= np.r_[False, seq[1:] == seq[:-1] + 1]
        if (
            len(seq)
            and state.last_kept >= 0
            and not self._kept(np.array([state.last_kept]), state.level)[0]
        ):
            state.last_kept = -2
        state.t, state.data, state.lens = [t], [data], [lens]
        state.seq, state.cont = [seq], [cont]
        state.rows = len(seq)
        self._bytes += state.nbytes() - before

    def _enforce_budget(self) -> None:
        while self._bytes > self.max_bytes and self._states:
            biggest = max(self._states.values(), key=lambda s: s.nbytes())
            if biggest.rows <= self.block:
                break
            self._thin(biggest)


def _pack(key: FrameKey) -> int:
    return key[0] | (1 << 31) if key[1] else key[0]


def _unpack(key: int) -> FrameKey:
    return key & 0x7FFFFFFF, bool(key >> 31)


def _stack(chunks: list[U8], width: int) -> U8:
    """Chunks of payloads (of any widths) as one array `width` bytes wide."""
    out = np.zeros((sum(len(c) for c in chunks), width), np.uint8)
    row = 0
    for chunk in chunks:
        w = min(chunk.shape[1], width)
        out[row : row + len(chunk), :w] = chunk[:, :w]
        row += len(chunk)
    return out


def _period_ms(t: F64, cont: B) -> float | None:
    if len(t) < 2:
        return None
    gaps = np.diff(t)[cont[1:]]
    gaps = gaps[gaps > 0]  # time that goes backwards (merged or broken logs) is no period
    if not len(gaps):
        return None
    return float(np.median(gaps) * 1000.0)
