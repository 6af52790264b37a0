"""BusMonitor: what the read tools look at instead of the bus.

It keeps the latest frame per frame id (and per multiplexer value when told how to find
it), per-id counts, error frames, and a bounded history for captures. A frame id is the
pair (arbitration id, extended): the 29-bit frame 0x00000100 is never the 11-bit 0x100.

Memory is bounded whatever the bus carries. Per-id state is kept for every id the database
knows and for at most `max_unknown_ids` others; frames of further ids are still counted
and kept in the history, and how many distinct ids were dropped is estimated. The history
is a ring of fixed 24-byte records (timestamp, id, flags, length, first 8 data bytes) in
one bytearray, so a kept classic frame costs 24 bytes instead of a `can.Message`; CAN-FD
payloads longer than 8 bytes spill to a side store that the ring bounds too.

One writer (the adapter's receive thread) and any number of readers: the writer never takes
a lock, and readers only use operations that are atomic under the GIL (dict.get, dict.copy,
bytes(bytearray)), checking a sequence number around the copy of the ring.
"""

from __future__ import annotations

import struct
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

import can
from hwbridge.can.transport.distinct import DistinctCounter

__all__ = [
    "BusMonitor",
    "FrameIdDict",
    "FrameKey",
    "FrameRecord",
    "IdStats",
    "KeyFn",
    "MonitorStats",
    "MuxExtractor",
    "estimate_frame_time_s",
    "frame_id_text",
    "frame_key",
]

MuxExtractor = Callable[[bytearray], Hashable]
"""Reads a multiplexer value from a frame's data (may raise on short frames: ignored)."""

KeyFn = Callable[[int, bytearray], Hashable | None]
"""(arbitration_id, data) -> multiplexer key, or None when the frame is not multiplexed."""

FrameKey = tuple[int, bool]
"""(arbitration_id, is_extended_id): what tells two frames apart on a bus."""

DEFAULT_HISTORY_S = 30.0
DEFAULT_MAX_FRAMES = 250_000
"""30 s of a fully loaded 1 Mbit/s bus (8,300 frames/s): 6 MB of history at most."""
DEFAULT_MAX_UNKNOWN_IDS = 2048
MAX_VARIANTS = 256
"""Ids tracked per database message matched other than by its own id (J1939 by PGN: 256
source addresses); more count against the unknown ids' bound."""
"""Ids outside the database with their own latest frame and counts (an 11-bit bus has 2,048)."""

_MAX_MUX_KEYS = 65_536  # (id, multiplexer value) pairs with their own latest frame
_MAX_STANDARD_ID = 0x7FF
_EXT_KEY = 1 << 31  # internal int key of a frame id: extended ids carry this bit
_ID_MASK = _EXT_KEY - 1

_RECORD = struct.Struct("<dIBBBB8s")  # timestamp, id, flags, fd, brs, dlc, data[:8]
_SIZE = _RECORD.size  # 24 bytes
_PACK = _RECORD.pack_into
_INITIAL_RECORDS = 4096  # the ring grows by doubling up to max_frames
_F_EXTENDED = 1
_F_REMOTE = 2
_F_ERROR = 4

_STUFFING = 0.1
"""Expected stuff bits per stuffable bit for ordinary payloads (8-byte standard frame at
1 Mbit/s: ~121 bits, ~8,300 frames/s). The worst case is ~0.24."""

V = TypeVar("V")


def frame_key(frame_id: int | FrameKey, extended: bool | None = None) -> FrameKey:
    """(id, extended) for a frame id given as a pair or as a bare number.

    A bare number is the 11-bit id when it fits 11 bits and the 29-bit id otherwise (as
    python-can and cantools write ids); name a 29-bit id below 0x800 with `extended=True`.
    """
    if isinstance(frame_id, tuple):
        aid, ext = frame_id
        return int(aid), bool(ext)
    aid = int(frame_id)
    return aid, (aid > _MAX_STANDARD_ID if extended is None else bool(extended))


def frame_id_text(arbitration_id: int, extended: bool) -> str:
    """0x100 for an 11-bit id, 0x00000100 for a 29-bit one (as candump writes them)."""
    return f"0x{arbitration_id:08X}" if extended else f"0x{arbitration_id:03X}"


def _packed(key: FrameKey) -> int:
    return key[0] | _EXT_KEY if key[1] else key[0]


def _unpacked(key: int) -> FrameKey:
    return key & _ID_MASK, bool(key & _EXT_KEY)


class FrameIdDict(dict[FrameKey, V]):
    """A dict keyed by (arbitration_id, is_extended_id) that also takes a bare id for
    indexing and `in` (the 11-bit id when it fits 11 bits, else the 29-bit one)."""

    def __getitem__(self, key: int | FrameKey) -> V:
        return super().__getitem__(frame_key(key))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, int | tuple):
            return super().__contains__(frame_key(key))
        return False


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

    @property
    def frame_id(self) -> FrameKey:
        """(arbitration_id, is_extended_id)."""
        return self.arbitration_id, self.is_extended_id

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
    """Per frame id: how often, how regularly, how recently."""

    arbitration_id: int
    count: int
    first_timestamp: float
    last_timestamp: float
    mean_period_s: float | None
    is_extended_id: bool = False


@dataclass(frozen=True, slots=True)
class MonitorStats:
    """Bus-wide figures; `frames_per_s` and `bus_load_percent` cover the last `window_s`.

    `ids` holds every tracked frame id. Ids past `max_unknown_ids` that the database does
    not know are not tracked: `unknown_ids_dropped` estimates how many distinct ones there
    were (exact for small counts), `frames_of_dropped_ids` counts their frames exactly.
    """

    frames_total: int
    error_frames: int
    frames_per_s: float
    window_s: float
    bus_load_percent: float | None
    history_frames: int
    history_capacity: int
    ids: FrameIdDict[IdStats]
    unknown_ids_tracked: int = 0
    unknown_ids_dropped: int = 0
    frames_of_dropped_ids: int = 0
    max_unknown_ids: int = DEFAULT_MAX_UNKNOWN_IDS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _ListenerHost(Protocol):
    def add_listener(self, callback: Callable[[can.Message], object], /) -> None: ...
    def remove_listener(self, callback: Callable[[can.Message], object], /) -> None: ...


_TIMESTAMP = struct.Struct("<d")


@dataclass(frozen=True, slots=True)
class _Ring:
    """A consistent copy of the history: the records with lo <= seq < hi."""

    data: bytes
    lo: int
    hi: int
    capacity: int
    spilled: dict[int, bytes] = field(default_factory=dict)

    def timestamp(self, seq: int) -> float:
        ts: float = _TIMESTAMP.unpack_from(self.data, (seq % self.capacity) * _SIZE)[0]
        return ts

    def index(self, t: float, *, after: bool = False) -> int:
        """The first seq whose timestamp is >= t (> t with `after`); timestamps ascend."""
        bisect = bisect_right if after else bisect_left
        return self.lo + bisect(range(self.lo, self.hi), t, key=self.timestamp)

    def fields(self, lo: int, hi: int) -> Iterator[tuple[int, tuple[Any, ...]]]:
        cap = self.capacity
        seq = lo
        while seq < hi:
            start = seq % cap
            count = min(hi - seq, cap - start)
            chunk = self.data[start * _SIZE : (start + count) * _SIZE]
            for values in _RECORD.iter_unpack(chunk):
                yield seq, values
                seq += 1

    def record(self, seq: int, values: tuple[Any, ...]) -> FrameRecord:
        ts, aid, flags, fd, brs, dlc, raw = values
        if flags & _F_REMOTE:
            data = b""
        elif self.spilled and seq in self.spilled:
            data = self.spilled[seq]
        else:
            data = raw[:dlc]
        return FrameRecord(
            ts,
            aid,
            data,
            bool(flags & _F_EXTENDED),
            bool(fd),
            bool(brs),
            bool(flags & _F_REMOTE),
            bool(flags & _F_ERROR),
            dlc,
        )


class _Waiter:
    """One `wait_for` call; evaluated on the writer thread, woken through its own Event."""

    __slots__ = ("error", "event", "frame", "key", "predicate", "result")

    def __init__(
        self,
        frame: FrameKey | None,
        key: Hashable | None,
        predicate: Callable[[FrameRecord], bool] | None,
    ) -> None:
        self.frame = frame
        self.key = key
        self.predicate = predicate
        self.event = threading.Event()
        self.result: FrameRecord | None = None
        self.error: BaseException | None = None

    def offer(self, msg: can.Message, key: Hashable | None) -> None:
        if self.event.is_set():
            return
        if self.frame is not None:
            if msg.is_error_frame or msg.arbitration_id != self.frame[0]:
                return
            if bool(msg.is_extended_id) != self.frame[1]:
                return
        if self.key is not None and key != self.key:
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
    """Latest frame per frame id, counts, rates and a bounded history, fed by one listener.

    `mux` makes `latest(id, key=...)` answer per multiplexer value: either a mapping
    {frame id: extractor(data) -> value} (only those ids pay for it; a frame id is an int or
    an (id, extended) pair) or a function key_fn(arbitration_id, data) -> value or None.
    History keeps at most `max_frames` frames and, when read, the last `history_s` seconds.
    `known(arbitration_id, extended)` says which ids the database has: those are always
    tracked, at most `max_unknown_ids` others are (every id counts as unknown without it).
    """

    on_message: Callable[[can.Message], None]
    """The listener to register with an adapter (picked once for the configured mode)."""

    def __init__(
        self,
        *,
        history_s: float = DEFAULT_HISTORY_S,
        max_frames: int = DEFAULT_MAX_FRAMES,
        mux: Mapping[int, MuxExtractor] | Mapping[FrameKey, MuxExtractor] | KeyFn | None = None,
        bitrate: float | None = None,
        data_bitrate: float | None = None,
        clock: Callable[[], float] = time.time,
        known: Callable[[int, bool], object] | None = None,
        max_unknown_ids: int = DEFAULT_MAX_UNKNOWN_IDS,
    ) -> None:
        if history_s <= 0 or max_frames <= 0:
            raise ValueError("history_s and max_frames must be positive")
        if max_unknown_ids < 0:
            raise ValueError("max_unknown_ids must not be negative")
        self.history_s = float(history_s)
        self.max_frames = int(max_frames)
        self.max_unknown_ids = int(max_unknown_ids)
        self.bitrate = bitrate
        self.data_bitrate = data_bitrate
        self._clock = clock
        self._known = known
        self._variants: dict[Hashable, int] = {}  # ids tracked per owner (see _first_frame)
        # the ring: record `seq` lives at (seq % slots) * 24, growing up to `slots` records;
        # one slot more than max_frames, for the record being written while a reader copies
        self._slots = self.max_frames + 1
        self._buf = bytearray(min(self._slots, _INITIAL_RECORDS) * _SIZE)
        self._end = len(self._buf)
        self._full = self._slots * _SIZE
        self._off = 0
        self._seq = 0  # records ever written; frames_total counts from `_base`
        self._base = 0
        self._spilled: dict[int, bytes] = {}  # seq -> payload of frames longer than 8 bytes
        # per frame id (int key, bit 31 = extended): [count, first timestamp, latest data msg]
        self._ids: dict[int, list[Any]] = {}
        self._latest_keyed: dict[tuple[int, Hashable], can.Message] = {}
        self._errors = 0
        self._unknown_tracked = 0
        self._dropped_frames = 0
        self._dropped = DistinctCounter()
        self._waiters: tuple[_Waiter, ...] = ()
        self._waiters_lock = threading.Lock()
        self._mux_get: Callable[[int], MuxExtractor | None] | None = None
        self._key_fn: KeyFn | None = None
        if mux is None:
            self.on_message = self._ingest
        elif isinstance(mux, Mapping):
            extractors = {_packed(frame_key(k)): fn for k, fn in mux.items()}
            self._mux_get = extractors.get
            self.on_message = self._ingest_keyed
        elif callable(mux):
            self._key_fn = mux
            self.on_message = self._ingest_keyed
        else:
            raise TypeError("mux must be a mapping of extractors, a key function, or None")

    # -- receive path (writer thread) ---------------------------------------------------

    def _ingest(self, msg: can.Message) -> None:
        if msg.is_error_frame or msg.is_remote_frame:
            self._ingest_special(msg)
            return
        aid = msg.arbitration_id
        ext = msg.is_extended_id
        dlc = msg.dlc
        seq = self._seq
        off = self._off
        try:
            _PACK(
                self._buf, off, msg.timestamp, aid, ext, msg.is_fd, msg.bitrate_switch, dlc,
                msg.data,
            )  # fmt: skip
        except (struct.error, TypeError, ValueError):
            self._write_odd(msg, seq, off)
        if dlc > 8:
            self._spill(seq, msg)
        off += _SIZE
        self._off = off if off < self._end else self._next_lap(off)
        self._seq = seq + 1
        key = aid | _EXT_KEY if ext else aid
        state = self._ids.get(key)
        if state is None:
            self._first_frame(key, msg, msg)
        else:
            state[0] += 1
            state[2] = msg
        if self._waiters:
            self._offer(msg, None)

    def _ingest_keyed(self, msg: can.Message) -> None:
        if msg.is_error_frame or msg.is_remote_frame:
            self._ingest_special(msg)
            return
        aid = msg.arbitration_id
        ext = msg.is_extended_id
        dlc = msg.dlc
        seq = self._seq
        off = self._off
        try:
            _PACK(
                self._buf, off, msg.timestamp, aid, ext, msg.is_fd, msg.bitrate_switch, dlc,
                msg.data,
            )  # fmt: skip
        except (struct.error, TypeError, ValueError):
            self._write_odd(msg, seq, off)
        if dlc > 8:
            self._spill(seq, msg)
        off += _SIZE
        self._off = off if off < self._end else self._next_lap(off)
        self._seq = seq + 1
        key = aid | _EXT_KEY if ext else aid
        state = self._ids.get(key)
        if state is None:
            if not self._first_frame(key, msg, msg):
                if self._waiters:
                    self._offer(msg, None)
                return
        else:
            state[0] += 1
            state[2] = msg
        mux_key = self._key_of(key, aid, msg.data)
        if mux_key is not None:
            keyed = (key, mux_key)
            latest = self._latest_keyed
            if keyed in latest or len(latest) < _MAX_MUX_KEYS:
                latest[keyed] = msg
        if self._waiters:
            self._offer(msg, mux_key)

    def _key_of(self, key: int, aid: int, data: bytearray) -> Hashable | None:
        try:
            if self._mux_get is not None:
                extractor = self._mux_get(key)
                return None if extractor is None else extractor(data)
            assert self._key_fn is not None
            return self._key_fn(aid, data)
        except Exception:
            return None  # e.g. a frame too short for its multiplexer

    def _ingest_special(self, msg: can.Message) -> None:
        """Error and remote frames: in the history; remote ones counted per id."""
        seq = self._seq
        off = self._off
        self._write_odd(msg, seq, off)
        if len(msg.data or b"") > 8:
            self._spill(seq, msg)
        off += _SIZE
        self._off = off if off < self._end else self._next_lap(off)
        self._seq = seq + 1
        if msg.is_error_frame:
            self._errors += 1
        else:  # remote frame: counted, but carries no data to keep
            key = _packed(frame_key(int(msg.arbitration_id), bool(msg.is_extended_id)))
            state = self._ids.get(key)
            if state is None:
                self._first_frame(key, msg, None)
            else:
                state[0] += 1
        if self._waiters:
            self._offer(msg, None)

    def assembled(self, msg: can.Message) -> None:
        """A message put together from several frames (the J1939 transport protocol): it
        becomes the latest of its id and wakes waiters, but never enters the history, which
        holds the frames that carried it. Called on the receive thread, like `on_message`."""
        key = msg.arbitration_id | _EXT_KEY if msg.is_extended_id else msg.arbitration_id
        state = self._ids.get(key)
        if state is None:
            if not self._first_frame(key, msg, msg):
                return
        else:
            state[0] += 1
            state[2] = msg
        if self._waiters:
            self._offer(msg, None)

    def _write_odd(self, msg: can.Message, seq: int, off: int) -> None:
        """The record of a frame the fast path cannot pack (special flags, odd values)."""
        flags = _F_EXTENDED if msg.is_extended_id else 0
        if msg.is_remote_frame:
            flags |= _F_REMOTE
        if msg.is_error_frame:
            flags |= _F_ERROR
        data = bytes(msg.data or b"")
        _PACK(
            self._buf,
            off,
            float(msg.timestamp or 0.0),
            int(msg.arbitration_id or 0) & 0xFFFFFFFF,
            flags,
            bool(msg.is_fd),
            bool(msg.bitrate_switch),
            min(max(int(msg.dlc or 0), 0), 255),
            data[:8],
        )

    def _spill(self, seq: int, msg: can.Message) -> None:
        """Keep a payload longer than 8 bytes beside the ring; forget overwritten ones."""
        spilled = self._spilled
        spilled[seq] = bytes(msg.data)
        stale = seq - self._slots
        while spilled:
            oldest = next(iter(spilled))
            if oldest > stale:
                break
            del spilled[oldest]

    def _next_lap(self, off: int) -> int:
        """Grow the ring (doubling, up to max_frames records) or wrap to its start."""
        buf = self._buf
        if len(buf) < self._full:
            buf.extend(bytes(min(len(buf), self._full - len(buf))))
            self._end = len(buf)
            return off
        return 0

    def _first_frame(self, key: int, msg: can.Message, latest: can.Message | None) -> bool:
        """Start tracking a new frame id, unless it is one unknown id too many (False).

        `known(id, extended)` says what an id is: True, an id of the database itself
        (always tracked); another truthy value, the owner of an id the database matches
        another way (a J1939 message by PGN, whatever its source address): up to
        MAX_VARIANTS ids per owner are tracked, the rest count as unknown ids; falsy,
        unknown. So no flood of ids, invented or PGN-matched, grows the per-id state.
        """
        owner = self._owner(key)
        if owner is not True:
            if owner and self._variants.get(owner, 0) < MAX_VARIANTS:
                self._variants[owner] = self._variants.get(owner, 0) + 1
            elif self._unknown_tracked >= self.max_unknown_ids:
                self._dropped_frames += 1
                self._dropped.add(key)
                return False
            else:
                self._unknown_tracked += 1
        self._ids[key] = [1, msg.timestamp, latest]
        return True

    def _owner(self, key: int) -> object:
        if self._known is None:
            return False
        aid, ext = _unpacked(key)
        try:
            owner = self._known(aid, ext)
        except Exception:
            return False
        if owner is True or not owner:
            return owner
        return owner if isinstance(owner, Hashable) else False

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
        return self._seq - self._base

    @property
    def error_frames(self) -> int:
        return self._errors

    def now(self) -> float:
        """The monitor's clock, in the same time base as frame timestamps."""
        return self._clock()

    def latest(
        self,
        arbitration_id: int | FrameKey,
        key: Hashable | None = None,
        *,
        extended: bool | None = None,
    ) -> FrameRecord | None:
        """The newest data frame with this frame id (and multiplexer value `key`, if given).

        A bare id is the 11-bit one when it fits 11 bits; name a 29-bit id below 0x800 with
        `extended=True` or as the pair (id, True).
        """
        packed = _packed(frame_key(arbitration_id, extended))
        msg: can.Message | None
        if key is None:
            state = self._ids.get(packed)
            msg = None if state is None else state[2]
        else:
            msg = self._latest_keyed.get((packed, key))
        return None if msg is None else FrameRecord.from_message(msg)

    def latest_frames(self) -> FrameIdDict[FrameRecord]:
        """The newest data frame of every tracked frame id."""
        out: FrameIdDict[FrameRecord] = FrameIdDict()
        for packed, state in sorted(self._ids.copy().items()):
            msg = state[2]
            if msg is not None:
                out[_unpacked(packed)] = FrameRecord.from_message(msg)
        return out

    def keys_seen(
        self, arbitration_id: int | FrameKey, *, extended: bool | None = None
    ) -> list[Hashable]:
        """Multiplexer values seen for this frame id, in first-seen order."""
        packed = _packed(frame_key(arbitration_id, extended))
        return [key for k, key in self._latest_keyed.copy() if k == packed]

    def frame_ids(self) -> list[FrameKey]:
        """Every tracked frame id as (arbitration_id, is_extended_id), sorted."""
        return sorted(_unpacked(k) for k in self._ids.copy())

    def ids_seen(self) -> list[int]:
        """Tracked arbitration ids as numbers, sorted; `frame_ids` tells 11 from 29 bits."""
        return sorted({k & _ID_MASK for k in self._ids.copy()})

    def _ring(self) -> _Ring:
        first = self._seq
        spilled = self._spilled.copy()
        data = bytes(self._buf)
        last = self._seq
        # a record the writer is packing right now may already overwrite `last - slots`
        lo = min(max(self._base, last + 1 - self._slots, 0), first)
        return _Ring(data, lo, first, self._slots, spilled)

    def _recent(self, ring: _Ring) -> int:
        """The first seq within `history_s` of the newest frame."""
        if ring.hi <= ring.lo:
            return ring.lo
        return ring.index(ring.timestamp(ring.hi - 1) - self.history_s)

    def history(
        self,
        since_s: float | None = None,
        *,
        start: float | None = None,
        end: float | None = None,
        ids: Iterable[int | FrameKey] | None = None,
        limit: int | None = None,
    ) -> list[FrameRecord]:
        """Frames from the last `since_s` seconds (or from `start` to `end`), oldest first.

        `ids` filters by frame id (a bare id as in `latest`); `limit` keeps the most recent
        frames only.
        """
        ring = self._ring()
        if start is None and since_s is not None:
            start = self._clock() - since_s
        lo = self._recent(ring)
        if start is not None:
            lo = max(lo, ring.index(start))
        hi = ring.hi if end is None else max(lo, ring.index(end, after=True))
        if limit is not None and limit <= 0:
            return []
        if ids is None:
            if limit is not None:
                lo = max(lo, hi - limit)
            return [ring.record(seq, values) for seq, values in ring.fields(lo, hi)]
        wanted = {frame_key(i) for i in ids}
        selected = [
            ring.record(seq, values)
            for seq, values in ring.fields(lo, hi)
            if (values[1], bool(values[2] & _F_EXTENDED)) in wanted
        ]
        return selected[-limit:] if limit is not None else selected

    def wait_for(
        self,
        match: int | FrameKey | Callable[[FrameRecord], bool] | None = None,
        predicate: Callable[[FrameRecord], bool] | None = None,
        *,
        timeout_s: float,
        key: Hashable | None = None,
        accept_latest: bool = False,
        extended: bool | None = None,
    ) -> FrameRecord | None:
        """The next frame matching `match` (a frame id as in `latest`, a predicate, or None
        for any frame), `predicate` and multiplexer `key`; None after `timeout_s`.

        Predicates run on the receive thread, so keep them short; an exception there is
        re-raised here. `accept_latest` returns an already-received match at once.
        """
        if not timeout_s >= 0:
            raise ValueError("timeout_s must be a non-negative number")
        frame: FrameKey | None = None
        if callable(match):
            if predicate is not None:
                raise ValueError("give the predicate once")
            predicate = match
        elif match is not None:
            frame = frame_key(match, extended)
        if key is not None and frame is None:
            raise ValueError("a multiplexer key needs an arbitration_id")
        waiter = _Waiter(frame, key, predicate)
        with self._waiters_lock:
            self._waiters = (*self._waiters, waiter)
        try:
            if accept_latest and frame is not None:
                packed = _packed(frame)
                current: can.Message | None
                if key is None:
                    state = self._ids.get(packed)
                    current = None if state is None else state[2]
                else:
                    current = self._latest_keyed.get((packed, key))
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
        """Totals, per-id counts and periods, and rate and bus load over the last window."""
        if not window_s > 0:
            raise ValueError("window_s must be positive")
        ring = self._ring()
        lo = ring.index(self._clock() - window_s)
        rate = bitrate if bitrate is not None else self.bitrate
        fast = data_bitrate if data_bitrate is not None else self.data_bitrate
        load = None
        if rate:
            cost: dict[tuple[int, int, int, int], float] = {}
            busy = 0.0
            for _, (_, _, flags, fd, brs, dlc, _) in ring.fields(lo, ring.hi):
                length = 0 if flags & _F_REMOTE else (dlc if fd or dlc <= 8 else 8)
                shape = (length, flags & _F_EXTENDED, fd, brs)
                seconds = cost.get(shape)
                if seconds is None:
                    seconds = cost[shape] = estimate_frame_time_s(
                        length,
                        extended=bool(shape[1]),
                        fd=bool(fd),
                        bitrate_switch=bool(brs),
                        bitrate=rate,
                        data_bitrate=fast,
                    )
                busy += seconds
            load = 100.0 * busy / window_s
        ids: FrameIdDict[IdStats] = FrameIdDict()
        for packed, state in sorted(self._ids.copy().items()):
            count, first_ts, last = state
            aid, ext = _unpacked(packed)
            last_ts = float(last.timestamp) if last is not None else float(first_ts)
            period = (last_ts - first_ts) / (count - 1) if count > 1 else None
            ids[aid, ext] = IdStats(aid, count, float(first_ts), last_ts, period, ext)
        return MonitorStats(
            frames_total=self.frames_total,
            error_frames=self._errors,
            frames_per_s=(ring.hi - lo) / window_s,
            window_s=window_s,
            bus_load_percent=load,
            history_frames=ring.hi - self._recent(ring),
            history_capacity=self.max_frames,
            ids=ids,
            unknown_ids_tracked=self._unknown_tracked,
            unknown_ids_dropped=self._dropped.estimate() if self._dropped_frames else 0,
            frames_of_dropped_ids=self._dropped_frames,
            max_unknown_ids=self.max_unknown_ids,
        )

    def clear(self) -> None:
        """Forget everything seen so far (waiters keep waiting)."""
        self._base = self._seq
        self._ids.clear()
        self._latest_keyed.clear()
        self._errors = 0
        self._unknown_tracked = 0
        self._dropped_frames = 0
        self._dropped.clear()
