"""`LivePlan`: how one message of any database is sent, every signal moving as its kind would.

Each signal gets a `Motion` (`firmware_sim.motion`) from its kind (`firmware_sim.signal_kinds`);
a multiplexed message goes through its pages one frame after the other; counters count and
checksums check on every frame. The values are taken from the model at most every
`REFRESH_S` (or every frame of a slower message) and encoded by cantools then; the frames in
between reuse that payload with their own counter and checksum, which keeps a 300-message bus
about as cheap as sending pre-encoded frames.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import can
from firmware_sim.checksums import Checksum, checksum_for
from firmware_sim.e2e import BitSlot, write_raw
from firmware_sim.model import VehicleState
from firmware_sim.motion import Motion, motion_for
from firmware_sim.signal_kinds import Kind, SignalKind, classify, signal_range
from firmware_sim.signals import SignalValue, coerce_value, initial_value

__all__ = ["REFRESH_S", "LivePlan"]

log = logging.getLogger(__name__)

REFRESH_S: Final = 0.1
"""How often a fast message's values are taken from the model (and encoded)."""


def _fixed_value(signal: Any, kind: SignalKind) -> SignalValue:
    """The value of a signal that does not move, made valid for its range."""
    if kind.constant_raw is not None:
        value: SignalValue = kind.constant_raw * float(signal.scale) + float(signal.offset)
    else:
        value = initial_value(signal)
    coerced = coerce_value(signal, value)
    if coerced is None:
        lo, _ = signal_range(signal)
        coerced = coerce_value(signal, lo)
    return coerced if coerced is not None else 0


class _Page:
    """What one multiplexer value of a message (or a plain message) carries."""

    __slots__ = ("checksum", "counters", "fixed", "moving")

    def __init__(self) -> None:
        self.moving: list[tuple[Any, Motion]] = []
        self.fixed: dict[str, SignalValue] = {}
        self.counters: list[tuple[BitSlot, int, int]] = []  # slot, first raw, count of raws
        self.checksum: tuple[BitSlot, Checksum, int] | None = None


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
        self.kinds: dict[str, SignalKind] = {s.name: classify(s) for s in message.signals}
        rng = random.Random(f"{seed}:{int(message.frame_id)}:{message.name}")
        self._refresh_s = max(self.period_s, REFRESH_S)
        self._mux = next(
            (s for s in message.signals if s.is_multiplexer and s.multiplexer_signal is None),
            None,
        )
        self._mux_name = self._mux.name if self._mux is not None else None
        self._fixed = {s.name: _fixed_value(s, self.kinds[s.name]) for s in message.signals}
        motions = {s.name: motion_for(s, self.kinds[s.name], rng) for s in message.signals}
        self._page_ids = self._pages()
        self._pages_by_id = {
            page: self._page(page, motions, checksum_scheme) for page in self._page_ids
        }
        self._page_index = 0
        self._cache: dict[int | None, tuple[bytes, float]] = {}
        self._held: Mapping[str, SignalValue] = MappingProxyType({})
        self._sent = 0
        self._warned = False
        self._frame_id = int(message.frame_id)
        self._extended = bool(message.is_extended_frame)
        self._is_fd = bool(message.is_fd) or int(message.length) > 8

    # -- structure --------------------------------------------------------------------------

    def _pages(self) -> tuple[int | None, ...]:
        if self._mux is None:
            return (None,)
        ids = sorted(
            {
                i
                for s in self.message.signals
                if s.multiplexer_signal == self._mux.name and s.multiplexer_ids
                for i in s.multiplexer_ids
            }
        )
        if not ids:
            initial = self._fixed[self._mux.name]
            return (int(initial) if isinstance(initial, int | float) else 0,)
        return tuple(ids)

    def _present(self, signal: Any, page: int | None) -> bool:
        """Whether the signal is in a frame of this page (nested multiplexers stay at their
        initial value, so their branch is the one that value selects)."""
        parent_name = signal.multiplexer_signal
        if parent_name is None or not signal.multiplexer_ids:
            return True
        if self._mux is not None and parent_name == self._mux.name:
            return page in signal.multiplexer_ids
        parent = self.by_name.get(parent_name)
        if parent is None or not self._present(parent, page):
            return False
        return self._fixed[parent_name] in signal.multiplexer_ids

    def _page(
        self, page: int | None, motions: dict[str, Motion | None], scheme: str | None
    ) -> _Page:
        out = _Page()
        size = int(self.message.length)
        for signal in self.message.signals:
            if not self._present(signal, page):
                continue
            kind = self.kinds[signal.name].kind
            motion = motions[signal.name]
            if signal.name == self._mux_name:
                out.fixed[signal.name] = page if page is not None else 0
            elif kind is Kind.COUNTER:
                lo, hi = signal_range(signal)
                scale, offset = float(signal.scale) or 1.0, float(signal.offset)
                first = max(0, round((lo - offset) / scale))
                count = max(1, round((hi - offset) / scale) - first + 1)
                out.counters.append((BitSlot(signal), first, count))
                out.fixed[signal.name] = self._fixed[signal.name]
            elif kind is Kind.CHECKSUM and out.checksum is None:
                function = checksum_for(scheme, signal, size)
                out.checksum = (BitSlot(signal), function, int(signal.start))
                out.fixed[signal.name] = self._fixed[signal.name]
            elif motion is not None:
                out.moving.append((signal, motion))
            else:
                out.fixed[signal.name] = self._fixed[signal.name]
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
        pages = self._page_ids
        page = pages[self._page_index]
        self._page_index = (self._page_index + 1) % len(pages)
        content = self._pages_by_id[page]
        cached = self._cache.get(page)
        now = state.time_s
        if cached is None or now >= cached[1]:
            body = self._encode(state, page, content)
            self._cache[page] = (body, now + self._refresh_s)
        else:
            body = cached[0]
        data = bytearray(body)
        if out_of_range:
            for name, raw in out_of_range.items():
                signal = self.by_name.get(name)
                if signal is not None and self._present(signal, page):
                    write_raw(data, signal, int(raw))
        sequence = self._sent
        self._sent = sequence + 1
        for slot, first, count in content.counters:
            slot.write(data, first + sequence % count)
        if content.checksum is not None:
            slot, function, start = content.checksum
            slot.write(data, 0)
            slot.write(data, function(self._frame_id, bytes(data), start))
        return can.Message(
            arbitration_id=self._frame_id,
            is_extended_id=self._extended,
            is_fd=self._is_fd,
            bitrate_switch=self._is_fd,
            data=data,
        )

    def _encode(self, state: VehicleState, page: int | None, content: _Page) -> bytes:
        values: dict[str, SignalValue] = dict(content.fixed)
        held = self._held
        for signal, motion in content.moving:
            wanted = held.get(signal.name)
            if wanted is None:
                wanted = motion(state)
            value = coerce_value(signal, wanted) if wanted is not None else None
            values[signal.name] = value if value is not None else self._fixed[signal.name]
        for name, wanted in held.items():
            if name in content.fixed and self.kinds[name].kind is Kind.CONSTANT:
                value = coerce_value(self.by_name[name], wanted)
                if value is not None:
                    values[name] = value
        try:
            return bytes(self.message.encode(values, padding=False, strict=True))
        except Exception as exc:  # a value cantools refuses: send the fixed values
            if not self._warned:
                log.warning("%s: sent with its initial values (%s)", self.name, exc)
                self._warned = True
            fallback = {k: v for k, v in self._fixed.items() if k in values}
            mux = self._mux
            if mux is not None:
                fallback[mux.name] = values[mux.name]
            return bytes(self.message.encode(fallback, padding=False, strict=False))
