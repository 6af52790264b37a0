"""`LivePlan`: how one message of any database is sent, every signal moving as its kind would.

Each signal gets a `Motion` (`firmware_sim.motion`) from its kind (`firmware_sim.signal_kinds`);
a multiplexed message goes through its pages one frame after the other; counters count and
checksums check on every frame. The values are taken from the model at most every
`REFRESH_S` (or every frame of a slower message), the others every `SLOW_REFRESH_S` (a flag
or a label not before it can change: a heap of their times), and encoded by cantools only when
one of them changed (`firmware_sim.raw_codec`). The walks most signals make are computed for
all the messages refreshed at the same moments at once (`firmware_sim.walk_bank`), exactly as
one at a time. Between refreshes a plain message's frame (`out`) goes out as it is (`quiet`),
or with its own counter and checksum written in place (`restamp`). That is what a frame
costs: see benchmarks/bench_sim_cost.py.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from cantools.database.can import Message as CantoolsMessage

import can
from firmware_sim.checksums import Checksum, checksum_for, folds, xor_bytes
from firmware_sim.e2e import BitSlot, positions, write_raw
from firmware_sim.model import VehicleState
from firmware_sim.motion import (
    Motion,
    SteadyAt,
    Walk,
    motion_for,
    steady_at,
    steady_values,
)
from firmware_sim.raw_codec import RawEncoder, RawValue
from firmware_sim.signal_kinds import (
    Kind,
    SignalKind,
    classify,
    raw_bounds,
    signal_range,
)
from firmware_sim.signals import SignalValue, coerce_value, initial_value
from firmware_sim.walk_bank import WalkBank

__all__ = [
    "REFRESH_S",
    "SLOW_REFRESH_S",
    "LivePlan",
    "Moment",
    "encodable_signals",
    "message_signals",
    "packable",
]

log = logging.getLogger(__name__)

REFRESH_S: Final = 0.1
"""How often a fast message's model quantities are taken from the model (and encoded)."""
SLOW_REFRESH_S: Final = 0.5
"""How often the signals that move by their kind (walks of 4-25 s, flags on for a second or
more, labels held 1.5-4 s) are brought up to date."""


def message_signals(message: Any) -> list[str]:
    """The signals cantools' codec tree of a message encodes and decodes, every branch (a
    signal naming a multiplexer the database does not mark as one is in none)."""
    names: list[str] = []

    def walk(codec: Any) -> None:
        names.extend(s.name for s in codec["signals"])
        for branches in codec["multiplexers"].values():
            for branch in branches.values():
                walk(branch)

    walk(message._codecs)
    return names


def packable(message: Any) -> Any:
    """`message` as cantools can pack it. cantools compiles one format per message, and two
    signals of a plain message that share bits break it: every signal then goes in at other
    bits than the database's, some not at all (opendbc's vw_mqb `PLA_01`, whose brake torque
    and deceleration share bits 36-48, had its counter and checksum refused and its steering
    angle at bits 3-15). Such a message is packed as a copy that keeps the first of the
    signals that overlap, counters and checksums before the others: what the others would
    carry is in the bits of the one kept. A multiplexed message is its own: its pages share
    bits by design."""
    if message._codecs["multiplexers"]:
        return message
    bits = {s.name: frozenset(positions(s)) for s in message.signals}
    if sum(map(len, bits.values())) == len(frozenset().union(*bits.values())):
        return message  # no two share a bit (the common case: nothing classified)
    counts = [classify(s).kind in (Kind.COUNTER, Kind.CHECKSUM) for s in message.signals]
    ordered = [s for s, c in zip(message.signals, counts, strict=True) if c] + [
        s for s, c in zip(message.signals, counts, strict=True) if not c
    ]
    taken: set[int] = set()
    kept: set[str] = set()
    for signal in ordered:
        if not bits[signal.name] & taken:
            taken |= bits[signal.name]
            kept.add(signal.name)
    return CantoolsMessage(
        frame_id=message.frame_id,
        name=message.name,
        length=message.length,
        signals=[s for s in message.signals if s.name in kept],
        is_extended_frame=message.is_extended_frame,
        is_fd=message.is_fd,
        cycle_time=message.cycle_time,
        strict=False,
    )


def encodable_signals(message: Any) -> list[str]:
    """The signals of `message` that cantools can put into its frame with every bit set: a
    database mistake cantools loads without strict checks (bits beyond the frame) leaves a
    signal that only ever carries zero."""
    carried = message_signals(message)
    zeros: dict[str, int] = dict.fromkeys(carried, 0)
    for name, branches in _multiplexers(message._codecs):
        zeros[name] = next(iter(branches))
    out = []
    for name in carried:
        signal = message.get_signal_by_name(name)
        if signal.is_multiplexer:
            out.append(name)
            continue
        trial = dict(zeros)
        for parent, value in _selecting(message, signal):
            trial[parent] = value
        trial[name] = -1 if signal.is_signed else (1 << int(signal.length)) - 1
        try:
            message.encode(trial, scaling=False, padding=False, strict=False)
        except Exception:
            continue
        out.append(name)
    return out


def _multiplexers(codec: Any) -> list[tuple[str, Any]]:
    found = list(codec["multiplexers"].items())
    for branches in codec["multiplexers"].values():
        for branch in branches.values():
            found += _multiplexers(branch)
    return found


def _selecting(message: Any, signal: Any) -> list[tuple[str, int]]:
    """The multiplexer values that select `signal` (outermost first)."""
    chain: list[tuple[str, int]] = []
    while signal.multiplexer_signal is not None and signal.multiplexer_ids:
        chain.append((signal.multiplexer_signal, int(signal.multiplexer_ids[0])))
        signal = message.get_signal_by_name(signal.multiplexer_signal)
    return chain[::-1]


def _fixed_value(signal: Any, kind: SignalKind) -> SignalValue:
    """The value of a signal that does not move, made valid for its range."""
    if kind.constant_raw is not None:
        value: SignalValue = kind.constant_raw * float(signal.scale) + float(signal.offset)
    else:
        value = initial_value(signal)
    bounds = signal_range(signal)
    coerced = coerce_value(signal, value, bounds)
    if coerced is None:
        coerced = coerce_value(signal, bounds[0], bounds)
    return coerced if coerced is not None else 0


def _raw_span(signal: Any) -> tuple[int, int]:
    """(first raw, count of raws) of an unsigned field within its signal's range."""
    lo, hi = signal_range(signal)
    scale, offset = float(signal.scale) or 1.0, float(signal.offset)
    first = max(0, math.ceil((min(lo, hi) - offset) / scale - 1e-9))
    last = math.floor((max(lo, hi) - offset) / scale + 1e-9)
    return first, max(1, last - first + 1)


_MEMO_SIZE: Final = 64
_MISSING: Final = object()
_NEVER: Final = -math.inf


class _Fit:
    """Brings a value onto one signal's range and resolution (as `coerce_value` does, with
    everything it needs worked out once: this runs for every value the plan sends). The
    values of flags and labels come again and again: the fits of the first few are kept."""

    __slots__ = ("hi", "is_float", "labels", "lo", "memo", "offset", "raw_hi", "raw_lo", "scale")

    def __init__(self, signal: Any) -> None:
        self.lo, self.hi = signal_range(signal)
        self.scale, self.offset = float(signal.scale), float(signal.offset)
        self.raw_lo, self.raw_hi = raw_bounds(signal)
        self.is_float = bool(signal.is_float)
        self.labels = {str(v).lower(): str(v) for v in (signal.choices or {}).values()}
        # 1 and 1.0 fit alike on a scaled integer signal, not on a float one (int or float)
        self.memo: dict[SignalValue, SignalValue | None] | None = None if self.is_float else {}

    def __call__(self, value: SignalValue) -> SignalValue | None:
        memo = self.memo
        if memo is None:
            return self.fit(value)
        found = memo.get(value, _MISSING)
        if found is _MISSING:
            found = self.fit(value)
            if len(memo) < _MEMO_SIZE:
                memo[value] = found
        return found  # type: ignore[return-value]

    def fit(self, value: SignalValue) -> SignalValue | None:
        """`value` on the signal's range and resolution (None: no such label, not finite)."""
        if isinstance(value, str):
            return self.labels.get(value.lower())
        if not math.isfinite(value):
            return None
        lo, hi = self.lo, self.hi
        value = lo if value < lo else hi if value > hi else value
        if self.is_float:
            return value
        scale, offset = self.scale, self.offset
        raw = min(max(round((value - offset) / scale), self.raw_lo), self.raw_hi)
        physical = raw * scale + offset
        if not lo <= physical <= hi:  # rounding stepped outside: step back in
            raw += 1 if physical < lo else -1
            physical = raw * scale + offset
        return int(physical) if float(physical).is_integer() else physical


_Fitting = Callable[[SignalValue], SignalValue | None]
_ToRaw = Callable[[float], RawValue]
# name, motion, fit, whether a float, the raw of a number (its cantools conversion's; None:
# the message is not encoded from raws)
_Plain = tuple[str, Motion, _Fitting, bool, _ToRaw | None]
# name, its value and until when it stays (`steady_at`), the fits and raws of its values so
# far (`_known`), the fit, whether a float
_Steady = tuple[str, SteadyAt, dict[Any, tuple[Any, Any]], _Fitting, bool]
_FAILED: Final = object()  # a raw cantools refuses
# `LivePlan._xor_ready`: the payload in the buffer, its counter byte without the counter, its
# XOR without the counter and checksum; the counter byte, its bits per sequence number, how
# many, the checksum byte, the raw written per XOR (None: the XOR itself)
_XorReady = tuple[
    bytearray | None, int, int, int, tuple[int, ...], int, int, tuple[int, ...] | None
]
_NO_PAYLOAD: Final[_XorReady] = (None, 0, 0, 0, (0,), 1, 0, None)


# name, index in the bank's answers, the raw of a number, the walk and the fit (for
# `_update`, which asks them one by one)
_Banked = tuple[str, int, _ToRaw | None, Motion, _Fitting]


class _Group:
    """Signals brought up to date together (a page's model quantities, every `REFRESH_S`, or
    those that move by their kind, every `SLOW_REFRESH_S`): those that move all the time, those
    that say until when they stay as they are (`steady_at`), and walks a `WalkBank` computes
    with those of the other messages of the same period."""

    __slots__ = ("bank", "banked", "plain", "steady")

    def __init__(self, bank: WalkBank | None = None) -> None:
        self.plain: list[_Plain] = []
        self.steady: list[_Steady] = []
        self.bank = bank
        self.banked: list[_Banked] = []

    def __bool__(self) -> bool:
        return bool(self.plain or self.steady or self.banked)


class _Page:
    """What one multiplexer value of a message (or a plain message) carries."""

    __slots__ = ("checksum", "counters", "e2e", "fast", "fixed", "slow", "stamp")

    def __init__(self, banks: tuple[WalkBank, WalkBank] | None = None) -> None:
        fast, slow = banks if banks is not None else (None, None)
        self.fast = _Group(fast)  # from the model: every REFRESH_S
        self.slow = _Group(slow)  # by their kind: every SLOW_REFRESH_S
        self.fixed: dict[str, SignalValue] = {}
        self.counters: list[tuple[BitSlot, int, int]] = []  # slot, first raw, count of raws
        # slot, function, start bit, first raw and count of raws its range allows
        self.checksum: tuple[BitSlot, Checksum, int, int, int] | None = None
        self.e2e = False  # whether every frame writes a counter or a checksum
        # writes them into a payload, for a frame's sequence number (None: no e2e)
        self.stamp: Callable[[bytearray, int], None] | None = None


def _stamper(page: _Page, frame_id: int, size: int) -> Callable[[bytearray, int], None] | None:
    """What `_any_stamp` writes into a payload of `size` bytes for the frame of a sequence
    number, as one function with every position worked out (it runs for every frame of a
    message with a counter or a checksum): for one counter within a byte and a checksum that
    is a whole byte, or either alone (the shape of nearly every such message); None for any
    other shape."""
    counter: tuple[int, int, int, int, int, int] | None = None
    if len(page.counters) > 1:
        return None
    for slot, first, count in page.counters:
        if slot.run is None or slot.run[0] >= size:
            return None
        byte, shift, mask, kept = slot.run
        counter = (byte, shift, mask, kept, first, count)
    checksum = page.checksum
    if checksum is not None and (checksum[0].byte is None or checksum[0].byte >= size):
        return None
    # every position in one tuple (one object to read, not a cell each)
    if checksum is None:
        if counter is None:
            return None
        counting = counter

        def count_only(data: bytearray, sequence: int) -> None:
            c_byte, c_shift, c_mask, c_kept, c_first, c_count = counting
            data[c_byte] = (
                data[c_byte] & c_kept | ((c_first + sequence % c_count) & c_mask) << c_shift
            )

        return count_only
    slot, function, start, first, count = checksum
    byte = checksum[0].byte or 0  # a whole byte: checked above
    # every payload is `size` bytes (cantools encodes a message's length, as RawEncoder does)
    shifts = folds(size) if function is xor_bytes else None
    at = (counter is not None, *(counter or (0, 0, 0, 0xFF, 0, 1)), byte, first, first + count)
    summing = (shifts, function, frame_id, start, count)

    def stamp(data: bytearray, sequence: int) -> None:
        has_counter, c_byte, c_shift, c_mask, c_kept, c_first, c_count, byte, first, end = at
        if has_counter:
            data[c_byte] = (
                data[c_byte] & c_kept | ((c_first + sequence % c_count) & c_mask) << c_shift
            )
        data[byte] = 0
        shifts, function, frame_id, start, count = summing
        if shifts is not None:  # xor_bytes, written out
            raw = int.from_bytes(data, "little")
            for shift in shifts:
                raw ^= raw >> shift
            raw &= 0xFF
        else:
            raw = function(frame_id, data, start)
        if not first <= raw < end:  # a range narrower than the bits: fold in
            raw = first + raw % count
        data[byte] = raw & 0xFF

    return stamp


def _xor_shape(page: _Page, size: int) -> tuple[int, ...] | None:
    """For a page with one counter within a byte and a whole-byte XOR checksum in another
    byte: (counter byte, bits kept, first raw, count of raws, mask, shift, checksum byte,
    first raw, end, count of raws); None for any other page."""
    checksum = page.checksum
    if len(page.counters) != 1 or checksum is None:
        return None
    slot, first, count = page.counters[0]
    c_slot, function, _, c_first, c_count = checksum
    if slot.run is None or c_slot.byte is None or function is not xor_bytes:
        return None
    byte, shift, mask, kept = slot.run
    if byte == c_slot.byte or max(byte, c_slot.byte) >= size:
        return None
    return (byte, kept, first, count, mask, shift, c_slot.byte, c_first, c_first + c_count, c_count)


def _xor_at(
    shape: tuple[int, ...] | None,
) -> tuple[int, tuple[int, ...], int, tuple[int, ...] | None]:
    """`LivePlan._xor_at` of an `_xor_shape`: what each frame's counter and checksum are
    (the generic stamp's arithmetic, worked out for every value it can take)."""
    if shape is None:
        return 0, (0,), 0, None
    c_byte, _, c_first, c_count, c_mask, c_shift, byte, first, end, count = shape
    counters = tuple(((c_first + k) & c_mask) << c_shift for k in range(c_count))
    folded = None
    if not (first == 0 and end >= 256):  # a range narrower than the bits: fold in
        folded = tuple(
            (raw if first <= raw < end else first + raw % count) & 0xFF for raw in range(256)
        )
    return c_byte, counters, byte, folded


def _any_stamp(page: _Page, frame_id: int) -> Callable[[bytearray, int], None]:
    """Writes a page's counters and checksum, whatever their shape."""
    counters, checksum = tuple(page.counters), page.checksum

    def stamp(data: bytearray, sequence: int) -> None:
        for slot, first, count in counters:
            slot.write(data, first + sequence % count)
        if checksum is not None:
            slot, function, start, first, count = checksum
            slot.write(data, 0)
            raw = function(frame_id, data, start)
            if not first <= raw < first + count:  # a range narrower than the bits: fold in
                raw = first + raw % count
            slot.write(data, raw)

    return stamp


class _Values:
    """A page's values as last taken, their raws (None: `Message.encode` encodes them),
    the payload they make, and when they are next due."""

    __slots__ = (
        "asked",
        "body",
        "due",
        "fast_due",
        "heaps",
        "raws",
        "slow_due",
        "steady",
        "steady_due",
        "values",
    )

    def __init__(self, values: dict[str, SignalValue], fast_due: float, slow_due: float) -> None:
        self.values = values
        self.raws: dict[str, RawValue] | None = None
        self.body = bytearray()
        self.fast_due = fast_due
        self.slow_due = slow_due
        self.due = min(fast_due, slow_due)  # the sooner of the two
        self.steady: dict[str, float] = {}  # signal -> until when its value stays
        # the soonest of `steady` in the fast and in the slow group: none of that group's
        # steady signals is asked again before it
        self.steady_due = [_NEVER, _NEVER]
        # (until when, position) of the fast and the slow group's steady signals
        self.heaps: list[list[tuple[float, int]] | None] = [None, None]
        # what the motions of the fast and the slow group last wanted (`_bring`)
        self.asked: list[list[Any] | None] = [None, None]


class Moment:
    """The moment a frame is made at: the model's time, and its state then, taken only
    when a plan's values are due (`take`: a function that snapshots the model, or the
    state itself)."""

    __slots__ = ("_state", "_take", "time_s")

    def __init__(self, time_s: float, take: Callable[[], VehicleState] | VehicleState) -> None:
        self.time_s = time_s
        if isinstance(take, VehicleState):
            self._state: VehicleState | None = take
            self._take: Callable[[], VehicleState] | None = None
        else:
            self._state, self._take = None, take

    def state(self) -> VehicleState:
        state = self._state
        if state is None:
            assert self._take is not None
            state = self._state = self._take()
        return state


class LivePlan:
    """How one message is sent: its period, every signal's motion, pages, counter, checksum.

    `seed` makes the motions reproducible; `checksum_scheme` names a make whose checksums
    the database uses (`firmware_sim.checksums`), None for an XOR of every byte.
    """

    def __init__(
        self,
        message: Any,
        period_s: float,
        *,
        seed: int = 0,
        checksum_scheme: str | None = None,
        walks: tuple[WalkBank, WalkBank] | None = None,
    ) -> None:
        self.message = message
        self.name: str = message.name
        self.period_s = float(period_s)
        self.by_name: dict[str, Any] = {s.name: s for s in message.signals}
        # what cantools packs: the message, or a copy without the signals that overlap others
        self._packed = packed = packable(message)
        stuck = set(message_signals(message)) - set(encodable_signals(packed))
        self.kinds: dict[str, SignalKind] = {
            s.name: SignalKind(Kind.CONSTANT, constant_raw=0) if s.name in stuck else classify(s)
            for s in message.signals
        }
        rng = random.Random(f"{seed}:{int(message.frame_id)}:{message.name}")
        self._refresh_s = max(self.period_s, REFRESH_S)
        self._fits = {s.name: _Fit(s) for s in message.signals}
        self._slow_s = max(self.period_s, SLOW_REFRESH_S)
        self._mux_name: str | None = next(iter(packed._codecs["multiplexers"]), None)
        self._fixed = {s.name: _fixed_value(s, self.kinds[s.name]) for s in message.signals}
        motions = {s.name: motion_for(s, self.kinds[s.name], rng) for s in message.signals}
        self._raw_encoder = RawEncoder(packed) if RawEncoder.handles(packed) else None
        self._frame_id = int(message.frame_id)
        self._page_ids = self._pages()
        self._pages_carried = {page: self._carried(page) for page in self._page_ids}
        # the walks of a plain message go to the banks of its period's messages: their values
        # are brought up to date at the same moments (a multiplexed message's pages are not)
        banks = walks if len(self._page_ids) == 1 else None
        self._pages_by_id = {
            page: self._page(page, motions, checksum_scheme, banks) for page in self._page_ids
        }
        self._page_index = 0
        self._cache: dict[int | None, _Values] = {}
        # a plain message's one page (most messages): its values, and the page if every
        # frame writes a counter or a checksum
        self._only: _Values | None = None
        self._only_page = self._pages_by_id[self._page_ids[0]]
        self._one_stamp = self._only_page.stamp
        self.payload_at: Callable[[Moment, Mapping[str, int | float] | None], bytearray] = (
            self._one_page if len(self._page_ids) == 1 else self._next_page
        )
        """`payload` at a `Moment`: the state is taken only if a value is due."""
        self._held: Mapping[str, SignalValue] = MappingProxyType({})
        self._sent = 0
        self._warned = False
        self._extended = bool(message.is_extended_frame)
        self._is_fd = bool(message.is_fd) or int(message.length) > 8
        self._buffer = bytearray(int(message.length))
        self.out = self._empty_frame()
        """The frame `VirtualVehicle` sends this plan's payloads in, again and again
        (python-can's virtual bus sends a copy; a new frame for each would cost as much)."""
        self.quiet = _NEVER
        """Until when `out` holds the next frame's payload as it is, once `restamp` has
        written its counter and checksum (a plain message between its refreshes)."""
        # a counter and a whole-byte XOR checksum apart (most such messages): the checksum is
        # the XOR of the page's payload without them (worked out once a payload) and the
        # counter's bits (XOR is the same bit by bit, and the counter's bits are its own)
        self._xor = _xor_shape(self._only_page, int(message.length))
        # for the payload in hand: itself, its counter's byte without the counter, its XOR
        self._xor_ready: _XorReady = _NO_PAYLOAD
        # counter byte, its bits for each sequence number (modulo their count), checksum
        # byte, the raw written for each XOR when the range is narrower than 8 bits
        self._xor_at = _xor_at(self._xor)
        self.restamp: Callable[[], None] | None = (
            None
            if self._one_stamp is None
            else self._restamp_xor
            if self._xor is not None
            else self._restamp
        )
        """What writes a frame's own counter and checksum into `out` (None: it has none)."""

    # -- structure --------------------------------------------------------------------------

    def _pages(self) -> tuple[int | None, ...]:
        """The values of the message's multiplexer (cantools' own codec tree says which
        signals each carries), or (None,) for a plain message."""
        top = self._mux_name
        if top is None:
            return (None,)
        return tuple(sorted(self._packed._codecs["multiplexers"][top]))

    def _carried(self, page: int | None) -> dict[str, int | None]:
        """The signals a frame of `page` carries, as cantools encodes it: name -> the value
        it is held at when it is a multiplexer (None for the others). A nested multiplexer
        stays at its initial value, or at its first branch when that selects none."""
        carried: dict[str, int | None] = {}

        def walk(codec: Any, top_level: bool) -> None:
            for signal in codec["signals"]:
                carried[signal.name] = None
            for name, branches in codec["multiplexers"].items():
                choice: Any
                if top_level and name == self._mux_name:
                    choice = page
                else:
                    initial = self._fixed.get(name)
                    choice = initial if initial in branches else next(iter(branches))
                carried[name] = choice if isinstance(choice, int) else None
                if choice in branches:
                    walk(branches[choice], top_level=False)

        walk(self._packed._codecs, top_level=True)
        return carried

    def _page(
        self,
        page: int | None,
        motions: dict[str, Motion | None],
        scheme: str | None,
        banks: tuple[WalkBank, WalkBank] | None,
    ) -> _Page:
        out = _Page(banks)
        encoder = self._raw_encoder
        size = int(self.message.length)
        carried = self._carried(page)
        for name, mux_value in carried.items():
            signal = self.by_name[name]
            kind = self.kinds[name].kind
            motion = motions[name]
            if mux_value is not None:
                out.fixed[name] = mux_value
            elif kind is Kind.COUNTER:
                first, count = _raw_span(signal)
                out.counters.append((BitSlot(signal), first, count))
                out.fixed[signal.name] = self._fixed[signal.name]
            elif kind is Kind.CHECKSUM and out.checksum is None:
                function = checksum_for(scheme, signal, size)
                first, count = _raw_span(signal)
                out.checksum = (BitSlot(signal), function, int(signal.start), first, count)
                out.fixed[signal.name] = self._fixed[signal.name]
            elif motion is not None:
                group = out.fast if kind is Kind.QUANTITY else out.slow
                at = steady_at(motion)
                fit = self._fits[name]
                to_raw = encoder.numeric(name) if encoder is not None else None
                banked = None
                if group.bank is not None and isinstance(motion, Walk):
                    banked = group.bank.add(
                        motion, lo=fit.lo, hi=fit.hi, scale=fit.scale, offset=fit.offset,
                        raw_lo=fit.raw_lo, raw_hi=fit.raw_hi, is_float=fit.is_float,
                        to_raw=to_raw,
                    )  # fmt: skip
                if banked is not None:
                    index, bank_raw = banked  # the bank's raw is its conversion's
                    group.banked.append(
                        (name, index, None if bank_raw else to_raw, motion, fit.fit)
                    )
                elif at is None:
                    group.plain.append((name, motion, fit.fit, fit.is_float, to_raw))
                else:  # the fits (and raws) of a steady motion's few values, worked out once
                    known: dict[Any, tuple[Any, Any]] = {}
                    if not fit.is_float:
                        for value in steady_values(motion)[:_MEMO_SIZE]:
                            self._known(name, value, fit, known)
                    group.steady.append((name, at, known, fit, fit.is_float))
            else:
                out.fixed[signal.name] = self._fixed[signal.name]
        out.e2e = bool(out.counters) or out.checksum is not None
        if out.e2e:
            out.stamp = _stamper(out, self._frame_id, size) or _any_stamp(out, self._frame_id)
        return out

    # -- control ----------------------------------------------------------------------------

    def hold(self, values: Mapping[str, SignalValue]) -> None:
        """Hold these signals (of this message) at these values or labels until the next
        call; values outside a signal's range are brought into it."""
        self._held = MappingProxyType({k: v for k, v in values.items() if k in self.by_name})
        self._cache = {}
        self._only = None
        self.quiet = _NEVER

    @property
    def held(self) -> Mapping[str, SignalValue]:
        return self._held

    # -- frames -----------------------------------------------------------------------------

    def _empty_frame(self) -> can.Message:
        return can.Message(
            arbitration_id=self._frame_id,
            is_extended_id=self._extended,
            is_fd=self._is_fd,
            bitrate_switch=self._is_fd,
            data=bytearray(len(self._buffer)),
        )

    def frame(
        self, state: VehicleState, out_of_range: Mapping[str, int | float] | None = None
    ) -> can.Message:
        """The next frame of this message for `state`; `out_of_range` forces raw values."""
        return can.Message(
            arbitration_id=self._frame_id,
            is_extended_id=self._extended,
            is_fd=self._is_fd,
            bitrate_switch=self._is_fd,
            data=bytearray(self.payload(state, out_of_range)),
        )

    def payload(
        self, state: VehicleState, out_of_range: Mapping[str, int | float] | None = None
    ) -> bytearray:
        """The next frame's payload, in a buffer the plan keeps: valid until its next call
        (python-can's virtual bus copies a frame as it sends it); not to be changed."""
        return self.payload_at(Moment(state.time_s, state), out_of_range)

    def prepare(self, moment: Moment) -> None:
        """Bring a plain message's page up to `moment` if it is due, ahead of its frame (a
        sender refreshes the messages due at a moment together, then sends their frames):
        `out` then holds the payload as it is until `quiet` (or `restamp` writes it)."""
        cached = self._only
        if cached is None or moment.time_s < cached.due:
            return
        if self._held:
            self._refresh(cached, self._only_page, moment.state())
        else:  # `_refresh` when no value is held, written out
            state = moment.state()
            now, changed = state.time_s, False
            if now >= cached.fast_due:
                changed = self._bring(cached, self._only_page.fast, 0, state)
                cached.fast_due = now + self._refresh_s
            if now >= cached.slow_due:
                changed = self._bring(cached, self._only_page.slow, 1, state) or changed
                cached.slow_due = now + self._slow_s
            cached.due = min(cached.fast_due, cached.slow_due)
            if changed:
                self._encoded(cached, self._only_page)
        self.quiet = cached.due
        self.out.data = cached.body if self._one_stamp is None else self._buffer

    def _one_page(
        self, moment: Moment, out_of_range: Mapping[str, int | float] | None = None
    ) -> bytearray:
        """`payload_at` of a plain message between its refreshes (most frames): the page's
        payload as it is, or a copy with the frame's own counter and checksum."""
        cached = self._only
        if cached is None or out_of_range:
            self.quiet = _NEVER  # `out` holds what this frame has of its own
            return self._next_page(moment, out_of_range)
        if moment.time_s >= cached.due:
            self._refresh(cached, self._only_page, moment.state())
        # until the page is due again, `out` holds its payload (or `restamp` writes it)
        self.quiet = cached.due
        stamp = self._one_stamp
        if stamp is None:
            self.out.data = cached.body
            return cached.body
        data = self.out.data = self._buffer
        self._xor_ready = _NO_PAYLOAD  # the buffer is written another way
        data[:] = cached.body
        sequence = self._sent
        self._sent = sequence + 1
        stamp(data, sequence)
        return data

    def _restamp_xor(self) -> None:
        """`_restamp` of a page with a counter and a whole-byte XOR checksum apart. The
        buffer keeps the payload between frames: only the counter's and checksum's bytes
        change (`_xor_ready` is dropped whenever the buffer is written another way)."""
        body = self._only.body  # type: ignore[union-attr]
        ready = self._xor_ready
        if ready[0] is not body:
            ready = self._xor_payload(body)
        _, c_kept, base, c_byte, counters, count, byte, folded = ready
        sequence = self._sent
        self._sent = sequence + 1
        counter = counters[sequence % count]
        data = self._buffer
        data[c_byte] = c_kept | counter
        raw = base ^ counter  # below 256: the XOR of bytes
        data[byte] = raw if folded is None else folded[raw]

    def _xor_payload(self, body: bytearray) -> _XorReady:
        """A new payload in the buffer for `_restamp_xor`: it, its counter byte without the
        counter, its XOR without the counter and checksum, and where they go."""
        c_byte, kept, byte = self._xor[0], self._xor[1], self._xor[6]  # type: ignore[index]
        data = self._buffer
        data[:] = body
        data[c_byte] &= kept
        data[byte] = 0
        _, counters, _, folded = self._xor_at
        base = xor_bytes(self._frame_id, data, 0)
        ready = (body, data[c_byte], base, c_byte, counters, len(counters), byte, folded)
        self._xor_ready = ready
        return ready

    def _restamp(self) -> None:
        """`out`'s payload for the next frame of a plain message with a counter or checksum,
        between its refreshes (`quiet`): the page's payload with the frame's own written."""
        data = self._buffer
        self._xor_ready = _NO_PAYLOAD  # the buffer is written another way
        data[:] = self._only.body  # type: ignore[union-attr]
        sequence = self._sent
        self._sent = sequence + 1
        self._one_stamp(data, sequence)  # type: ignore[misc]

    def _next_page(
        self, moment: Moment, out_of_range: Mapping[str, int | float] | None = None
    ) -> bytearray:
        """`payload_at` in every case: the next page, its values brought up to date when
        due, the faults' raw values, counter and checksum."""
        pages = self._page_ids
        index = self._page_index
        page = pages[index]
        index += 1
        self._page_index = index if index < len(pages) else 0
        content = self._pages_by_id[page]
        cached = self._cache.get(page)
        if cached is None:
            cached = self._cache[page] = self._first(content, moment.state())
            if len(pages) == 1:
                self._only = cached
        elif moment.time_s >= cached.due:
            self._refresh(cached, content, moment.state())
        if not (out_of_range or content.e2e):
            return cached.body  # nothing of this frame's own: the page's payload as it is
        data = self._buffer
        self._xor_ready = _NO_PAYLOAD  # the buffer is written another way
        data[:] = cached.body
        if out_of_range:
            for name, raw in out_of_range.items():
                signal = self.by_name.get(name)
                if signal is not None and name in self._pages_carried[page]:
                    write_raw(data, signal, int(raw))
        return self._stamp(content, data)

    def _stamp(self, content: _Page, data: bytearray) -> bytearray:
        """Write this frame's counters and checksum into `data` (the page's payload)."""
        sequence = self._sent
        self._sent = sequence + 1
        assert content.stamp is not None
        content.stamp(data, sequence)
        return data

    def _refresh(self, cached: _Values, content: _Page, state: VehicleState) -> None:
        """Bring the values of a page that are due up to `state`, and its payload with them."""
        now = state.time_s
        changed = False
        held = bool(self._held)
        if now >= cached.fast_due:
            if held:
                changed = self._update(cached, content.fast, state)
            else:
                changed = self._bring(cached, content.fast, 0, state)
            cached.fast_due = now + self._refresh_s
        if now >= cached.slow_due:
            if held:
                changed = self._update(cached, content.slow, state) or changed
            else:
                changed = self._bring(cached, content.slow, 1, state) or changed
            cached.slow_due = now + self._slow_s
        cached.due = min(cached.fast_due, cached.slow_due)
        if held:
            cached.body = bytearray(self._body(cached, content))
        elif changed:
            self._encoded(cached, content)

    def _encoded(self, cached: _Values, content: _Page) -> None:
        """A page's new payload (`_body`, written out), in its buffer when cantools packs
        its raws (in place: the same length)."""
        raws, encoder = cached.raws, self._raw_encoder
        if raws is not None and encoder is not None:
            try:
                cached.body[:] = encoder.encode(raws)
                self._xor_ready = _NO_PAYLOAD  # a new payload in the same buffer
                return
            except Exception:  # Message.encode raises too, and says what is sent instead
                pass
        cached.body = bytearray(self._encode(cached.values, content))

    def _first(self, content: _Page, state: VehicleState) -> _Values:
        """A page's values and payload the first time it is sent (or after a hold)."""
        now = state.time_s
        fast_due = now + self._refresh_s if content.fast else math.inf
        # a page with nothing slow to refresh (its values held or fixed) is never refreshed:
        # the payload would come out the same
        slow_due = now + self._slow_s if content.slow else math.inf
        cached = _Values(dict(content.fixed), fast_due, slow_due)
        self._update(cached, content.fast, state)
        self._update(cached, content.slow, state)
        if self._raw_encoder is not None:
            try:
                cached.raws = self._raw_encoder.raws(cached.values)
            except Exception:  # Message.encode says what is wrong, and what is sent instead
                cached.raws = None
        cached.body = bytearray(self._body(cached, content))
        return cached

    def _bring(self, cached: _Values, group: _Group, which: int, state: VehicleState) -> bool:
        """What `_update` does when no value is held (nearly always; written for speed): the
        signals that move all the time are asked, the walks taken from their bank, those that
        say until when they stay asked once the soonest of them is due; whether any value
        changed."""
        fixed, encoder = self._fixed, self._raw_encoder
        values, raws = cached.values, cached.raws
        changed = False
        asked = cached.asked[which]  # what each motion last wanted (the same: the same value)
        if asked is None:
            asked = cached.asked[which] = [_MISSING] * len(group.plain)
        for k, (name, motion, fit, is_float, to_raw) in enumerate(group.plain):
            wanted = motion(state)
            if wanted == asked[k] and not is_float:
                continue  # fitted as before: the value it has
            asked[k] = wanted
            value = fit(wanted) if wanted is not None else None
            if value is None:
                value = fixed[name]
            if value == values.get(name) and not is_float:
                continue  # the same value: the same raw (a float's -0.0 is not 0.0's bits)
            values[name] = value
            changed = True
            if raws is not None and encoder is not None:
                try:
                    if to_raw is not None and not isinstance(value, str):
                        raws[name] = to_raw(value)
                    else:
                        raws[name] = encoder.raw(name, value)
                except Exception:  # Message.encode says what is wrong
                    cached.raws = raws = None
        now = state.time_s
        if group.banked:  # the walks, from their bank (`_bring_banked`, written out)
            fitted, bank_raws = group.bank.at(now)  # type: ignore[union-attr]
            for name, index, to_raw, _, _ in group.banked:
                physical = fitted[index]
                if physical == values.get(name):
                    continue  # the same value: the same raw
                value = int(physical) if physical.is_integer() else physical  # as the fit has it
                values[name] = value
                changed = True
                if raws is not None:
                    if to_raw is None:  # the bank's raw: its conversion's
                        raws[name] = bank_raws[index]
                        continue
                    try:
                        raws[name] = to_raw(value)
                    except Exception:  # Message.encode says what is wrong
                        cached.raws = raws = None
        if group.steady and now >= cached.steady_due[which]:
            changed = self._bring_steady(cached, group, which, now) or changed
        return changed

    def _bring_steady(self, cached: _Values, group: _Group, which: int, now: float) -> bool:
        """`_bring` for the signals that say until when they stay: those due (a heap of
        their times, each asked once); whether any changed."""
        values, raws, steady, entries = cached.values, cached.raws, cached.steady, group.steady
        heap = cached.heaps[which]
        if heap is None:  # from the times `_update` left
            heap = [(steady.get(entry[0], _NEVER), k) for k, entry in enumerate(entries)]
            heapq.heapify(heap)
            cached.heaps[which] = heap
        due = []
        while heap and now >= heap[0][0]:
            due.append(heapq.heappop(heap)[1])
        changed = False
        for k in due:  # the heap has their times from now on (`steady` only `_update`'s)
            name, at, known, fit, is_float = entries[k]
            wanted, until = at(now)
            heapq.heappush(heap, (until, k))
            found = known.get(wanted) if not is_float else None
            if found is None:
                found = self._known(name, wanted, fit, known if not is_float else None)
            value, raw = found
            if value == values.get(name) and not is_float:
                continue
            values[name] = value
            changed = True
            if raws is not None:
                if raw is _FAILED:  # Message.encode says what is wrong
                    cached.raws = raws = None
                else:
                    raws[name] = raw
        cached.steady_due[which] = heap[0][0] if heap else math.inf
        return changed

    def _known(
        self,
        name: str,
        wanted: SignalValue | None,
        fit: _Fitting,
        known: dict[Any, tuple[Any, Any]] | None,
    ) -> tuple[Any, Any]:
        """A steady signal's value for what its motion wants, and its raw (`_FAILED`: one
        cantools refuses), kept in `known` for the next time (a few values come again and
        again)."""
        value = fit(wanted) if wanted is not None else None
        if value is None:
            value = self._fixed[name]
        raw: Any = None
        if self._raw_encoder is not None:
            try:
                raw = self._raw_encoder.raw(name, value)
            except Exception:  # Message.encode says what is wrong
                raw = _FAILED
        found = (value, raw)
        if known is not None and len(known) < _MEMO_SIZE:
            known[wanted] = found
        return found

    def _update(self, cached: _Values, group: _Group, state: VehicleState) -> bool:
        """Bring the values of `group` up to `state` (held values win); whether any changed.
        A motion whose value is known to stay until later is not asked again before then."""
        changed = False
        for name, motion, fit, is_float, _ in group.plain:
            changed = self._take(cached, (name, motion, None, fit, is_float), state) or changed
        for name, _, _, walk, fit in group.banked:
            changed = self._take(cached, (name, walk, None, fit, False), state) or changed
        for name, at, _, fit, is_float in group.steady:
            changed = self._take(cached, (name, None, at, fit, is_float), state) or changed
        return changed

    def _take(
        self,
        cached: _Values,
        signal: tuple[str, Motion | None, SteadyAt | None, _Fitting, bool],
        state: VehicleState,
    ) -> bool:
        """Bring one signal's value up to `state` (`_update`); whether it changed."""
        name, motion, at, fit, is_float = signal
        held = self._held
        wanted = held.get(name) if held else None
        if wanted is None:
            if at is not None:
                if state.time_s < cached.steady.get(name, _NEVER):
                    return False
                wanted, cached.steady[name] = at(state.time_s)
            elif motion is not None:
                wanted = motion(state)
        value = fit(wanted) if wanted is not None else None
        if value is None:
            value = self._fixed[name]
        if value == cached.values.get(name) and not is_float:
            return False  # the same value: the same raw (a float's -0.0 is not 0.0's bits)
        cached.values[name] = value
        if cached.raws is not None and self._raw_encoder is not None:
            try:
                cached.raws[name] = self._raw_encoder.raw(name, value)
            except Exception:  # Message.encode says what is wrong
                cached.raws = None
        return True

    def _body(self, cached: _Values, content: _Page) -> bytes:
        """The payload of a page's values, counter and checksum not yet written."""
        if cached.raws is not None and self._raw_encoder is not None and not self._held:
            try:
                return self._raw_encoder.encode(cached.raws)
            except Exception:  # Message.encode raises too, and says what is sent instead
                pass
        return self._encode(cached.values, content)

    def _encode(self, values: dict[str, SignalValue], content: _Page) -> bytes:
        held = self._held
        if held:
            values = dict(values)
            for name, wanted in held.items():
                if name in content.fixed and self.kinds[name].kind is Kind.CONSTANT:
                    value = self._fits[name](wanted)
                    if value is not None:
                        values[name] = value
        try:
            return bytes(self._packed.encode(values, padding=False, strict=False))
        except Exception as exc:  # a value cantools refuses: send the fixed values
            if not self._warned:
                log.warning("%s: sent with its initial values (%s)", self.name, exc)
                self._warned = True
        fallback = {k: v for k, v in self._fixed.items() if k in values}
        for name, value in content.fixed.items():
            if self.kinds[name].kind is Kind.MULTIPLEXER or name == self._mux_name:
                fallback[name] = value
        for attempt in (fallback, dict.fromkeys(fallback, 0)):
            try:
                return bytes(self._packed.encode(attempt, padding=False, strict=False))
            except Exception:  # the next attempt is plainer
                continue
        return bytes(int(self.message.length))
