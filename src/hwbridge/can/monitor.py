"""BusMonitor: what the read tools look at instead of the bus.

It keeps the latest frame per arbitration ID (and per multiplexer value when told how to
find it), per-ID counts, error frames, and a bounded history for captures. The receive
path only stores the `can.Message` python-can already built: no copy, no decode. Decoding
happens later, on demand, in the tools. One writer (the adapter's receive thread) and any
number of readers: readers only use operations that are atomic under the GIL (dict.get,
dict.copy, list(deque)), so the writer never takes a lock.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Protocol

import can

__all__ = [
    "BusMonitor",
    "FrameRecord",
    "IdStats",
    "KeyFn",
    "MonitorStats",
    "MuxExtractor",
    "estimate_frame_time_s",
]

MuxExtractor = Callable[[bytearray], Hashable]
"""Reads a multiplexer value from a frame's data (may raise on short frames: ignored)."""

KeyFn = Callable[[int, bytearray], Hashable | None]
"""(arbitration_id, data) -> multiplexer key, or None when the frame is not multiplexed."""

DEFAULT_HISTORY_S = 30.0
DEFAULT_MAX_FRAMES = 100_000
"""30 s at 3,300 frames/s, above the 1,000-2,600 frames/s of real passenger-car buses."""

_TRIM_EVERY = 4096  # frames between time-based trims on the receive path (power of two)

_STUFFING = 0.1
"""Expected stuff bits per stuffable bit for ordinary payloads (8-byte standard frame at
1 Mbit/s: ~121 bits, ~8,300 frames/s). The worst case is ~0.24."""


def estimate_frame_time_s(
    length: int,
    *,
    extended: bool,
    fd: bool = False,
    bitrate_switch: bool = False,
    bitrate: float,
    data_bitrate: float | None = None,
) -> float:
    """Seconds one frame occupies the wire, including typical bit stuffing."""
    payload = 8 * length
    if not fd:
        # SOF..CRC delimiter is stuffable; ACK, EOF and intermission are not.
        stuffable = (54 if extended else 34) + payload
        return (stuffable * (1.0 + _STUFFING) + 13) / bitrate
    arbitration = (32 if extended else 13) + 5  # SOF, ID, RRS/IDE/FDF/res/BRS
    crc = 21 if length > 16 else 17
    data_phase = (1 + 4 + payload + 4) * (1.0 + _STUFFING) + crc + crc // 4 + 1
    tail = 12  # ACK slot/delimiter, EOF, intermission
    fast = data_bitrate if (bitrate_switch and data_bitrate) else bitrate
    return (arbitration * (1.0 + _STUFFING) + tail) / bitrate + data_phase / fast


class FrameRecord(NamedTuple):
    """One received frame, detached from python-can (bytes, not a mutable bytearray)."""

    timestamp: float
    arbitration_id: int
    data: bytes
    is_extended_id: bool
    is_fd: bool = False
    bitrate_switch: bool = False
    is_remote_frame: bool = False
    is_error_frame: bool = False
    dlc: int = 0

    @classmethod
    def from_message(cls, msg: can.Message) -> FrameRecord:
        return cls(
            float(msg.timestamp),
            int(msg.arbitration_id),
            bytes(msg.data or b""),
            bool(msg.is_extended_id),
            bool(msg.is_fd),
            bool(msg.bitrate_switch),
            bool(msg.is_remote_frame),
            bool(msg.is_error_frame),
            int(msg.dlc),
        )

    def to_message(self) -> can.Message:
        return can.Message(
            timestamp=self.timestamp,
            arbitration_id=self.arbitration_id,
            data=self.data,
            is_extended_id=self.is_extended_id,
            is_fd=self.is_fd,
            bitrate_switch=self.bitrate_switch,
            is_remote_frame=self.is_remote_frame,
            is_error_frame=self.is_error_frame,
            dlc=self.dlc,
        )


@dataclass(frozen=True, slots=True)
class IdStats:
    """Per arbitration ID: how often, how regularly, how recently."""

    arbitration_id: int
    count: int
    first_timestamp: float
    last_timestamp: float
    mean_period_s: float | None


@dataclass(frozen=True, slots=True)
class MonitorStats:
    """Bus-wide figures; `frames_per_s` and `bus_load_percent` cover the last `window_s`."""

    frames_total: int
    error_frames: int
    frames_per_s: float
    window_s: float
    bus_load_percent: float | None
    history_frames: int
    history_capacity: int
    ids: dict[int, IdStats]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _ListenerHost(Protocol):
    def add_listener(self, callback: Callable[[can.Message], object], /) -> None: ...
    def remove_listener(self, callback: Callable[[can.Message], object], /) -> None: ...


def _timestamp(msg: can.Message) -> float:
    return float(msg.timestamp)


class _Waiter:
    """One `wait_for` call; evaluated on the writer thread, woken through its own Event."""

    __slots__ = ("arbitration_id", "error", "event", "key", "predicate", "result")

    def __init__(
        self,
        arbitration_id: int | None,
        key: Hashable | None,
        predicate: Callable[[FrameRecord], bool] | None,
    ) -> None:
        self.arbitration_id = arbitration_id
        self.key = key
        self.predicate = predicate
        self.event = threading.Event()
        self.result: FrameRecord | None = None
        self.error: BaseException | None = None

    def offer(self, msg: can.Message, key: Hashable | None) -> None:
        if self.event.is_set():
            return
        if self.arbitration_id is not None and msg.arbitration_id != self.arbitration_id:
            return
        if self.key is not None and key != self.key:
            return
        if msg.is_error_frame and self.arbitration_id is not None:
            return
        record = FrameRecord.from_message(msg)
        try:
            matched = self.predicate is None or self.predicate(record)
        except Exception as exc:
            self.error = exc
            self.event.set()
            return
        if matched:
            self.result = record
            self.event.set()


class BusMonitor:
    """Latest frame per ID, counts, rates and a bounded history, fed by one listener.

    `mux` makes `latest(id, key=...)` answer per multiplexer value: either a mapping
    {arbitration_id: extractor(data) -> value} (only those IDs pay for it) or a function
    key_fn(arbitration_id, data) -> value or None. History keeps at most `max_frames`
    frames and, trimmed as it goes, about `history_s` seconds.
    """

    on_message: Callable[[can.Message], None]
    """The listener to register with an adapter (picked once for the configured mode)."""

    def __init__(
        self,
        *,
        history_s: float = DEFAULT_HISTORY_S,
        max_frames: int = DEFAULT_MAX_FRAMES,
        mux: Mapping[int, MuxExtractor] | KeyFn | None = None,
        bitrate: float | None = None,
        data_bitrate: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if history_s <= 0 or max_frames <= 0:
            raise ValueError("history_s and max_frames must be positive")
        self.history_s = float(history_s)
        self.max_frames = int(max_frames)
        self.bitrate = bitrate
        self.data_bitrate = data_bitrate
        self._clock = clock
        self._history: deque[can.Message] = deque(maxlen=self.max_frames)
        self._latest: dict[int, can.Message] = {}
        self._latest_keyed: dict[tuple[int, Hashable], can.Message] = {}
        self._counts: dict[int, int] = {}
        self._first: dict[int, float] = {}
        self._total = 0
        self._errors = 0
        self._waiters: tuple[_Waiter, ...] = ()
        self._waiters_lock = threading.Lock()
        self._mux_get: Callable[[int], MuxExtractor | None] | None = None
        self._key_fn: KeyFn | None = None
        if mux is None:
            self.on_message = self._ingest
        elif isinstance(mux, Mapping):
            self._mux_get = dict(mux).get
            self.on_message = self._ingest_keyed
        elif callable(mux):
            self._key_fn = mux
            self.on_message = self._ingest_keyed
        else:
            raise TypeError("mux must be a mapping of extractors, a key function, or None")

    # -- receive path (writer thread) ---------------------------------------------------

    def _ingest(self, msg: can.Message) -> None:
        self._history.append(msg)
        self._total = total = self._total + 1
        if not total % _TRIM_EVERY:
            self._trim(msg.timestamp)
        if msg.is_error_frame or msg.is_remote_frame:
            self._ingest_special(msg)
        else:
            aid = msg.arbitration_id
            self._latest[aid] = msg
            counts = self._counts
            seen = counts.get(aid)
            if seen is None:
                counts[aid] = 1
                self._first[aid] = msg.timestamp
            else:
                counts[aid] = seen + 1
        if self._waiters:
            self._offer(msg, None)

    def _ingest_keyed(self, msg: can.Message) -> None:
        self._history.append(msg)
        self._total = total = self._total + 1
        if not total % _TRIM_EVERY:
            self._trim(msg.timestamp)
        if msg.is_error_frame or msg.is_remote_frame:
            self._ingest_special(msg)
            key = None
        else:
            aid = msg.arbitration_id
            self._latest[aid] = msg
            counts = self._counts
            seen = counts.get(aid)
            if seen is None:
                counts[aid] = 1
                self._first[aid] = msg.timestamp
            else:
                counts[aid] = seen + 1
            key = self._key_of(aid, msg.data)
            if key is not None:
                self._latest_keyed[(aid, key)] = msg
        if self._waiters:
            self._offer(msg, key)

    def _key_of(self, aid: int, data: bytearray) -> Hashable | None:
        try:
            if self._mux_get is not None:
                extractor = self._mux_get(aid)
                return None if extractor is None else extractor(data)
            assert self._key_fn is not None
            return self._key_fn(aid, data)
        except Exception:
            return None  # e.g. a frame too short for its multiplexer

    def _ingest_special(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self._errors += 1
            return
        aid = msg.arbitration_id  # remote frame: counted, but carries no data to keep
        seen = self._counts.get(aid)
        if seen is None:
            self._counts[aid] = 1
            self._first[aid] = msg.timestamp
        else:
            self._counts[aid] = seen + 1

    def _trim(self, newest: float) -> None:
        cutoff = newest - self.history_s
        history = self._history
        while history and history[0].timestamp < cutoff:
            history.popleft()

    def _offer(self, msg: can.Message, key: Hashable | None) -> None:
        for waiter in self._waiters:
            waiter.offer(msg, key)

    # -- wiring -------------------------------------------------------------------------

    def attach(self, adapter: _ListenerHost) -> None:
        """Register this monitor's listener with an adapter."""
        adapter.add_listener(self.on_message)

    def detach(self, adapter: _ListenerHost) -> None:
        adapter.remove_listener(self.on_message)

    # -- readers ------------------------------------------------------------------------

    @property
    def frames_total(self) -> int:
        return self._total

    @property
    def error_frames(self) -> int:
        return self._errors

    def now(self) -> float:
        """The monitor's clock, in the same time base as frame timestamps."""
        return self._clock()

    def latest(self, arbitration_id: int, key: Hashable | None = None) -> FrameRecord | None:
        """The newest data frame with this ID (and multiplexer value `key`, if given)."""
        if key is None:
            msg = self._latest.get(arbitration_id)
        else:
            msg = self._latest_keyed.get((arbitration_id, key))
        return None if msg is None else FrameRecord.from_message(msg)

    def latest_frames(self) -> dict[int, FrameRecord]:
        """The newest data frame of every ID seen."""
        return {aid: FrameRecord.from_message(m) for aid, m in self._latest.copy().items()}

    def keys_seen(self, arbitration_id: int) -> list[Hashable]:
        """Multiplexer values seen for this ID, in first-seen order."""
        return [key for aid, key in self._latest_keyed.copy() if aid == arbitration_id]

    def ids_seen(self) -> list[int]:
        return sorted(self._counts.copy())

    def history(
        self,
        since_s: float | None = None,
        *,
        start: float | None = None,
        end: float | None = None,
        ids: Iterable[int] | None = None,
        limit: int | None = None,
    ) -> list[FrameRecord]:
        """Frames from the last `since_s` seconds (or from `start` to `end`), oldest first.

        `ids` filters by arbitration ID; `limit` keeps the most recent frames only.
        """
        frames = list(self._history)
        if start is None and since_s is not None:
            start = self._clock() - since_s
        lo = 0 if start is None else bisect_left(frames, start, key=_timestamp)
        hi = len(frames) if end is None else bisect_right(frames, end, key=_timestamp)
        selected = frames[lo:hi]
        if ids is not None:
            wanted = frozenset(ids)
            selected = [m for m in selected if m.arbitration_id in wanted]
        if limit is not None:
            selected = selected[-limit:] if limit > 0 else []
        return [FrameRecord.from_message(m) for m in selected]

    def wait_for(
        self,
        match: int | Callable[[FrameRecord], bool] | None = None,
        predicate: Callable[[FrameRecord], bool] | None = None,
        *,
        timeout_s: float,
        key: Hashable | None = None,
        accept_latest: bool = False,
    ) -> FrameRecord | None:
        """The next frame matching `match` (an arbitration ID, a predicate, or None for any
        frame), `predicate` and multiplexer `key`; None after `timeout_s`.

        Predicates run on the receive thread, so keep them short; an exception there is
        re-raised here. `accept_latest` returns an already-received match at once.
        """
        if not timeout_s >= 0:
            raise ValueError("timeout_s must be a non-negative number")
        arbitration_id: int | None = None
        if callable(match):
            if predicate is not None:
                raise ValueError("give the predicate once")
            predicate = match
        elif match is not None:
            arbitration_id = int(match)
        if key is not None and arbitration_id is None:
            raise ValueError("a multiplexer key needs an arbitration_id")
        waiter = _Waiter(arbitration_id, key, predicate)
        with self._waiters_lock:
            self._waiters = (*self._waiters, waiter)
        try:
            if accept_latest and arbitration_id is not None:
                if key is None:
                    current = self._latest.get(arbitration_id)
                else:
                    current = self._latest_keyed.get((arbitration_id, key))
                if current is not None:
                    waiter.offer(current, key)
            waiter.event.wait(timeout_s)
        finally:
            with self._waiters_lock:
                self._waiters = tuple(w for w in self._waiters if w is not waiter)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def stats(
        self,
        window_s: float = 1.0,
        *,
        bitrate: float | None = None,
        data_bitrate: float | None = None,
    ) -> MonitorStats:
        """Totals, per-ID counts and periods, and rate and bus load over the last window."""
        if not window_s > 0:
            raise ValueError("window_s must be positive")
        frames = list(self._history)
        counts = self._counts.copy()
        first = self._first.copy()
        latest = self._latest.copy()
        lo = bisect_left(frames, self._clock() - window_s, key=_timestamp)
        recent = frames[lo:]
        rate = bitrate if bitrate is not None else self.bitrate
        fast = data_bitrate if data_bitrate is not None else self.data_bitrate
        load = None
        if rate:
            busy = sum(
                estimate_frame_time_s(
                    len(m.data) if not m.is_remote_frame else 0,
                    extended=bool(m.is_extended_id),
                    fd=bool(m.is_fd),
                    bitrate_switch=bool(m.bitrate_switch),
                    bitrate=rate,
                    data_bitrate=fast,
                )
                for m in recent
            )
            load = 100.0 * busy / window_s
        ids: dict[int, IdStats] = {}
        for aid, count in sorted(counts.items()):
            first_ts = first.get(aid, 0.0)
            last = latest.get(aid)
            last_ts = float(last.timestamp) if last is not None else first_ts
            period = (last_ts - first_ts) / (count - 1) if count > 1 else None
            ids[aid] = IdStats(aid, count, float(first_ts), last_ts, period)
        return MonitorStats(
            frames_total=self._total,
            error_frames=self._errors,
            frames_per_s=len(recent) / window_s,
            window_s=window_s,
            bus_load_percent=load,
            history_frames=len(frames),
            history_capacity=self.max_frames,
            ids=ids,
        )

    def clear(self) -> None:
        """Forget everything seen so far (waiters keep waiting)."""
        self._history.clear()
        self._latest.clear()
        self._latest_keyed.clear()
        self._counts.clear()
        self._first.clear()
        self._total = 0
        self._errors = 0
