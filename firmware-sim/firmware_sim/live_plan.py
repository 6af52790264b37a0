"""`LivePlan`: how one message of any database is sent, every signal moving as its kind would.

Each signal gets a `Motion` (`firmware_sim.motion`) from its kind (`firmware_sim.signal_kinds`);
a multiplexed message goes through its pages one frame after the other; counters count and
checksums check on every frame. The values are taken from the model at most every
`REFRESH_S` (or every frame of a slower message), the others every `SLOW_REFRESH_S` (a flag
or a label not before it can change), and encoded by cantools only when one of them changed
(`firmware_sim.raw_codec`); the frames in between send that payload as it is, or a copy with
their own counter and checksum written in place. That is what a frame costs: see
benchmarks/bench_sim_cost.py.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from cantools.database.can import Message as CantoolsMessage

import can
from firmware_sim.checksums import Checksum, checksum_for
from firmware_sim.e2e import BitSlot, positions, write_raw
from firmware_sim.model import VehicleState
from firmware_sim.motion import Motion, motion_for, steady_until
from firmware_sim.raw_codec import RawEncoder, RawValue
from firmware_sim.signal_kinds import (
    Kind,
    SignalKind,
    classify,
    raw_bounds,
    signal_range,
)
from firmware_sim.signals import SignalValue, coerce_value, initial_value

__all__ = ["REFRESH_S", "LivePlan", "encodable_signals", "message_signals", "packable"]

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
_Moving = tuple[str, Motion, _Fitting, Callable[[float], float] | None, bool]


class _Page:
    """What one multiplexer value of a message (or a plain message) carries."""

    __slots__ = ("checksum", "counters", "e2e", "fixed", "moving", "slow")

    def __init__(self) -> None:
        # name, motion, fit, until when its value is steady (None: not known), float or not
        self.moving: list[_Moving] = []  # from the model: every REFRESH_S
        self.slow: list[_Moving] = []  # by their kind: every SLOW_REFRESH_S
        self.fixed: dict[str, SignalValue] = {}
        self.counters: list[tuple[BitSlot, int, int]] = []  # slot, first raw, count of raws
        # slot, function, start bit, first raw and count of raws its range allows
        self.checksum: tuple[BitSlot, Checksum, int, int, int] | None = None
        self.e2e = False  # whether every frame writes a counter or a checksum


class _Values:
    """A page's values as last taken, their raws (None: `Message.encode` encodes them),
    the payload they make, and when they are next due."""

    __slots__ = ("body", "fast_due", "raws", "slow_due", "steady", "values")

    def __init__(self, values: dict[str, SignalValue], fast_due: float, slow_due: float) -> None:
        self.values = values
        self.raws: dict[str, RawValue] | None = None
        self.body = bytearray()
        self.fast_due = fast_due
        self.slow_due = slow_due
        self.steady: dict[str, float] = {}  # signal -> until when its value stays


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
        self._page_ids = self._pages()
        self._pages_carried = {page: self._carried(page) for page in self._page_ids}
        self._pages_by_id = {
            page: self._page(page, motions, checksum_scheme) for page in self._page_ids
        }
        self._page_index = 0
        self._cache: dict[int | None, _Values] = {}
        self._held: Mapping[str, SignalValue] = MappingProxyType({})
        self._sent = 0
        self._warned = False
        self._frame_id = int(message.frame_id)
        self._extended = bool(message.is_extended_frame)
        self._is_fd = bool(message.is_fd) or int(message.length) > 8
        self._buffer = bytearray(int(message.length))
        self._raw_encoder = RawEncoder(packed) if RawEncoder.handles(packed) else None

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
        self, page: int | None, motions: dict[str, Motion | None], scheme: str | None
    ) -> _Page:
        out = _Page()
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
                group = out.moving if kind is Kind.QUANTITY else out.slow
                until = steady_until(motion)
                fit = self._fits[name]
                # the fits of a steady motion's few values are kept; others rarely come again
                fitting = fit if until is not None else fit.fit
                group.append((name, motion, fitting, until, fit.is_float))
            else:
                out.fixed[signal.name] = self._fixed[signal.name]
        out.e2e = bool(out.counters) or out.checksum is not None
        return out

    # -- control ----------------------------------------------------------------------------

    def hold(self, values: Mapping[str, SignalValue]) -> None:
        """Hold these signals (of this message) at these values or labels until the next
        call; values outside a signal's range are brought into it."""
        self._held = MappingProxyType({k: v for k, v in values.items() if k in self.by_name})
        self._cache = {}

    @property
    def held(self) -> Mapping[str, SignalValue]:
        return self._held

    # -- frames -----------------------------------------------------------------------------

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
        pages = self._page_ids
        page = pages[self._page_index]
        self._page_index = (self._page_index + 1) % len(pages)
        content = self._pages_by_id[page]
        cached = self._cache.get(page)
        now = state.time_s
        if cached is None:
            cached = self._cache[page] = self._first(content, state)
        elif now >= cached.fast_due or now >= cached.slow_due:
            changed = False
            if now >= cached.fast_due:
                changed = self._update(cached, content.moving, state)
                cached.fast_due = now + self._refresh_s
            if now >= cached.slow_due:
                changed = self._update(cached, content.slow, state) or changed
                cached.slow_due = now + self._slow_s
            if changed or self._held:
                cached.body = bytearray(self._body(cached, content))
        if not (out_of_range or content.e2e):
            return cached.body  # nothing of this frame's own: the page's payload as it is
        data = self._buffer
        data[:] = cached.body
        if out_of_range:
            for name, raw in out_of_range.items():
                signal = self.by_name.get(name)
                if signal is not None and name in self._pages_carried[page]:
                    write_raw(data, signal, int(raw))
        sequence = self._sent
        self._sent = sequence + 1
        for slot, first, count in content.counters:
            slot.write(data, first + sequence % count)
        if content.checksum is not None:
            slot, function, start, first, count = content.checksum
            slot.write(data, 0)
            raw = function(self._frame_id, data, start)
            if not first <= raw < first + count:  # a range narrower than the bits: fold in
                raw = first + raw % count
            slot.write(data, raw)
        return data

    def _first(self, content: _Page, state: VehicleState) -> _Values:
        """A page's values and payload the first time it is sent (or after a hold)."""
        now = state.time_s
        fast_due = now + self._refresh_s if content.moving else math.inf
        # a page with nothing slow to refresh (its values held or fixed) is never refreshed:
        # the payload would come out the same
        slow_due = now + self._slow_s if content.slow else math.inf
        cached = _Values(dict(content.fixed), fast_due, slow_due)
        self._update(cached, content.moving, state)
        self._update(cached, content.slow, state)
        if self._raw_encoder is not None:
            try:
                cached.raws = self._raw_encoder.raws(cached.values)
            except Exception:  # Message.encode says what is wrong, and what is sent instead
                cached.raws = None
        cached.body = bytearray(self._body(cached, content))
        return cached

    def _update(
        self,
        cached: _Values,
        group: list[_Moving],
        state: VehicleState,
    ) -> bool:
        """Bring the values of `group` up to `state` (held values win); whether any changed.
        A motion whose value is known to stay until later is not asked again before then."""
        held = self._held
        fixed = self._fixed
        values, raws, steady = cached.values, cached.raws, cached.steady
        now = state.time_s
        changed = False
        for name, motion, fit, until, is_float in group:
            wanted = held.get(name) if held else None
            if wanted is None:
                if until is not None:
                    if now < steady.get(name, _NEVER):
                        continue
                    steady[name] = until(now)
                wanted = motion(state)
            value = fit(wanted) if wanted is not None else None
            if value is None:
                value = fixed[name]
            if value == values.get(name) and not is_float:
                continue  # the same value: the same raw (a float's -0.0 is not 0.0's bits)
            values[name] = value
            changed = True
            if raws is not None and self._raw_encoder is not None:
                try:
                    raws[name] = self._raw_encoder.raw(name, value)
                except Exception:  # Message.encode says what is wrong
                    cached.raws = raws = None
        return changed

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
