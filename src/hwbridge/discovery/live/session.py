"""A discovery session: the signals an LLM defined, and the database they grow.

The database a driver reads through is immutable; defining a signal builds a new one (the
base database's messages, each id with defined signals replaced by a message holding its
own signals and the defined ones) and publishes it whole, under the session's lock, through
`on_grow`. Every tool call therefore reads one consistent database, and definitions made by
several threads at once are applied one after the other.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hwbridge.can.database.database import CanDatabase
from hwbridge.core.models import ToolError
from hwbridge.discovery.bits import ByteOrder, cantools_chain
from hwbridge.discovery.frames import FrameKey, FrameSet, frame_key_text
from hwbridge.discovery.live import pages as layout
from hwbridge.discovery.report.draft import build_message, build_signal, dbc_text
from hwbridge.discovery.report.names import message_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MAX_DEFINED", "MAX_SNAPSHOTS", "DefinedSignal", "DiscoverySession", "Snapshot"]

MAX_DEFINED = 256
MAX_SNAPSHOTS = 8
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MAX_PHYSICAL = 1e300
UNIT = re.compile(
    r"^[ -!#-\[\]-~]*$"
)  # what a DBC unit string carries: ASCII, no quote or backslash


@dataclass(frozen=True, slots=True)
class DefinedSignal:
    """A signal defined at run time, as cantools would write it."""

    name: str
    frame_id: int
    extended: bool
    start_bit: int
    length: int
    byte_order: ByteOrder
    signed: bool
    scale: float
    offset: float
    unit: str
    is_float: bool = False  # an IEEE 754 float (32 or 64 bits)
    is_multiplexer: bool = False  # its raw value selects the page of the rest (cantools `M`)
    multiplexer_ids: tuple[int, ...] | None = None  # present only in these pages (`m3`)

    @property
    def key(self) -> FrameKey:
        return self.frame_id, self.extended

    @property
    def bits(self) -> tuple[int, ...]:
        return cantools_chain(self.start_bit, self.length, self.byte_order)

    def cantools(self, multiplexer: str | None = None) -> Any:
        """The cantools signal; `multiplexer` names the id's multiplexer (for a page's)."""
        return build_signal(
            self.name,
            start_bit=self.start_bit,
            length=self.length,
            byte_order=self.byte_order,
            signed=self.signed,
            scale=self.scale,
            offset=self.offset,
            unit=self.unit or None,
            comment="defined with define_signal",
            is_float=self.is_float,
            is_multiplexer=self.is_multiplexer,
            multiplexer_ids=self.multiplexer_ids,
            multiplexer_signal=multiplexer,
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A named recording: the frames of every id seen in it."""

    name: str
    framesets: dict[FrameKey, FrameSet]
    frames: int
    duration_ms: int


def _chain_ok(bits: tuple[int, ...], length_bytes: int) -> bool:
    return min(bits) >= 0 and max(bits) < length_bytes * 8


class DiscoverySession:
    """Defined signals over a base database; snapshots; thread-safe."""

    def __init__(
        self, base: CanDatabase, on_grow: Callable[[CanDatabase], None] | None = None
    ) -> None:
        self.base = base
        self._on_grow = on_grow
        self._lock = threading.Lock()
        self._defined: dict[str, DefinedSignal] = {}
        self._db = base
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()

    @property
    def database(self) -> CanDatabase:
        """The base database with every defined signal (the one reads go through)."""
        return self._db

    @property
    def defined(self) -> list[DefinedSignal]:
        with self._lock:
            return list(self._defined.values())

    def defined_bits(self) -> dict[FrameKey, npt.NDArray[np.bool_]]:
        """Per id the base database does not describe, the bits its defined signals cover
        (left out of the search: the rest of the id is still to be found)."""
        import numpy as np

        out: dict[FrameKey, npt.NDArray[np.bool_]] = {}
        for d in self.defined:
            if self.base.message_for_frame(*d.key) is not None:
                continue  # the base database's message: decoded, never searched
            mask = out.setdefault(d.key, np.zeros(64 * 8, np.bool_))
            mask[list(d.bits)] = True
        return out

    # -- defining -------------------------------------------------------------------------

    def define(self, signal: DefinedSignal, frame_length: int) -> CanDatabase:
        """Add (or replace, by name) a signal; the grown database. Raises ToolError
        INVALID_VALUE for a name, a place or bits the signal cannot have."""
        if not NAME.match(signal.name):
            raise ToolError(
                "INVALID_VALUE",
                f"{signal.name!r} is not a signal name: use letters, digits and underscores,"
                " starting with a letter, at most 64 characters",
            )
        if signal.scale == 0:
            raise ToolError("INVALID_VALUE", "scale must not be 0")
        span = abs(signal.scale) * 2.0 ** min(signal.length, 1024) + abs(signal.offset)
        if not math.isfinite(span) or span > _MAX_PHYSICAL:
            raise ToolError(
                "INVALID_VALUE",
                "scale and offset must be finite and keep the signal's values below 1e300",
            )
        if not UNIT.match(signal.unit):
            raise ToolError(
                "INVALID_VALUE",
                "a unit is printable ASCII without quotes or backslashes (km/h, degC, %)",
            )
        bits = self._check_bits(signal, frame_length)
        layout.check_alone(signal)
        with self._lock:
            self._check_name(signal)
            self._check_overlap(signal, set(bits))
            layout.check_pages(signal, self._defined, self.base.message_for_frame(*signal.key))
            if signal.name not in self._defined and len(self._defined) >= MAX_DEFINED:
                raise ToolError(
                    "INVALID_VALUE", f"at most {MAX_DEFINED} signals can be defined in a session"
                )
            defined = dict(self._defined)
            defined[signal.name] = signal
            grown = self._grow(defined, frame_length, signal.key)
            _check_decodes(grown, signal, frame_length)  # before anyone reads with it
            self._defined = defined
            self._db = grown
            if self._on_grow is not None:
                self._on_grow(grown)
        return grown

    def adopt(self, database: CanDatabase) -> list[str]:
        """Add the messages of `database` (a matched one) for ids the session's database does
        not describe and no signal was defined on, whose names it does not use; the names
        added. Their frames are decoded from then on, never searched."""
        with self._lock:
            defined = {d.key for d in self._defined.values()}
            names = set(self._db.message_names)
            added = []
            for m in database.messages:
                key = _own_key(m)
                if key in defined or m.name in names or self._db.message_for_frame(*key):
                    continue
                added.append(m)
                names.add(m.name)
            if not added:
                return []
            self.base = self.base.with_messages(added)
            grown = self._grow(self._defined, 8, (-1, False)) if self._defined else self.base
            self._db = grown
            if self._on_grow is not None:
                self._on_grow(grown)
        return [str(m.name) for m in added]

    def _check_bits(self, signal: DefinedSignal, frame_length: int) -> tuple[int, ...]:
        where = f"{signal.start_bit}|{signal.length}@{signal.byte_order}"
        try:
            bits = signal.bits
        except ValueError:
            bits = ()
        if not bits or not _chain_ok(bits, frame_length):
            raise ToolError(
                "INVALID_VALUE",
                f"{where} does not fit in the {frame_length}-byte frames of"
                f" {frame_key_text(signal.key)} (start_bit is the LSB for little_endian, the"
                " MSB for big_endian, as survey_bus gives it)",
            )
        return bits

    def _check_name(self, signal: DefinedSignal) -> None:
        for message in self.base.messages:
            for s in message.signals:
                if s.name == signal.name:
                    raise ToolError(
                        "INVALID_VALUE",
                        f"{signal.name} is already {message.name}.{s.name} in the database;"
                        " choose another name",
                    )

    def _check_overlap(self, signal: DefinedSignal, bits: set[int]) -> None:
        base = self.base.message_for_frame(*signal.key)
        if base is not None and _own_key(base) != signal.key:
            # the database reads these frames as another id's message (a J1939 PGN from
            # another sender): a message of their own would hide it
            raise ToolError(
                "INVALID_VALUE",
                f"frames of {frame_key_text(signal.key)} are {base.name} in the database (as "
                f"{frame_key_text(_own_key(base))}); define the signal on "
                f"{frame_key_text(_own_key(base))} so that both are read",
            )
        pages = signal.multiplexer_ids
        if base is not None:
            for s in base.signals:
                chain = cantools_chain(int(s.start), int(s.length), s.byte_order)
                theirs = None if s.multiplexer_ids is None else tuple(s.multiplexer_ids)
                if bits & set(chain) and layout.together(pages, theirs):
                    raise ToolError(
                        "INVALID_VALUE",
                        f"those bits overlap {base.name}.{s.name}, which the database already"
                        " explains" + layout.where(theirs),
                    )
        for other in self._defined.values():
            if (
                other.name != signal.name
                and other.key == signal.key
                and bits & set(other.bits)
                and layout.together(pages, other.multiplexer_ids)
            ):
                raise ToolError(
                    "INVALID_VALUE",
                    f"those bits overlap {other.name}, defined before"
                    + layout.where(other.multiplexer_ids)
                    + f"; define {other.name} again to change it",
                )

    def _grow(
        self, defined: dict[str, DefinedSignal], frame_length: int, changed: FrameKey
    ) -> CanDatabase:
        by_key: dict[FrameKey, list[DefinedSignal]] = {}
        for d in defined.values():
            by_key.setdefault(d.key, []).append(d)
        messages = []
        for key, signals in by_key.items():
            base = self.base.message_for_frame(*key)
            own = base if base is not None and _own_key(base) == key else None
            selector = layout.multiplexer_name(signals, own)
            built = [s.cantools(selector) for s in signals]
            if own is not None:
                messages.append(_merged(own, built))
            else:
                length = frame_length if key == changed else self._length_of(key, frame_length)
                messages.append(
                    build_message(
                        key[0],
                        key[1],
                        length,
                        built,
                        comment="signals defined with define_signal",
                    )
                )
        try:
            return self.base.with_messages(messages)
        except Exception as exc:  # cantools' own checks
            raise ToolError("INVALID_VALUE", f"the signal cannot be added: {exc}") from None

    def _length_of(self, key: FrameKey, default: int) -> int:
        found = self._db.message_for_frame(*key)
        return int(found.length) if found is not None else default

    def frame_length(self, key: FrameKey) -> int | None:
        """The length of frames of `key` the database knows (None: it does not)."""
        found = self._db.message_for_frame(*key)
        if found is not None and _own_key(found) == key:
            return int(found.length)
        return None

    def draft(self) -> str:
        """DBC text of every defined signal, in messages holding only those."""
        with self._lock:
            defined = list(self._defined.values())
        by_key: dict[FrameKey, list[DefinedSignal]] = {}
        for d in defined:
            by_key.setdefault(d.key, []).append(d)
        messages = []
        for key, signals in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            current = self._db.message_for_frame(*key)
            base = self.base.message_for_frame(*key)
            own = base if base is not None and _own_key(base) == key else None
            name = own.name if own is not None else None
            length = int(current.length) if current is not None else 8
            selector = layout.multiplexer_name(signals, own)
            # a page's signals need their multiplexer in the draft: the database's, if theirs
            inherited = layout.base_multiplexer(signals, own)
            messages.append(
                build_message(
                    key[0],
                    key[1],
                    length,
                    [*inherited, *(s.cantools(selector) for s in signals)],
                    name=name or message_name(*key),
                    comment="signals defined with define_signal",
                )
            )
        return dbc_text(messages)

    # -- snapshots ------------------------------------------------------------------------

    def keep(self, snapshot: Snapshot) -> str | None:
        """Keep a snapshot (a name again replaces it); the name of one dropped to make
        room, oldest first."""
        with self._lock:
            self._snapshots.pop(snapshot.name, None)
            self._snapshots[snapshot.name] = snapshot
            if len(self._snapshots) > MAX_SNAPSHOTS:
                dropped, _ = self._snapshots.popitem(last=False)
                return dropped
        return None

    def snapshot(self, name: str) -> Snapshot:
        with self._lock:
            found = self._snapshots.get(name)
            names = list(self._snapshots)
        if found is None:
            known = ", ".join(names) or "none yet (take one with snapshot_bus)"
            raise ToolError("UNKNOWN_SNAPSHOT", f"no snapshot named {name!r}; snapshots: {known}")
        return found


def _check_decodes(grown: CanDatabase, signal: DefinedSignal, frame_length: int) -> None:
    """INVALID_VALUE unless the grown database decodes a frame of the signal's message: a
    signal that cannot be read must never replace a database that could."""
    try:
        message = grown.message_for_frame(*signal.key)
        if message is None:
            raise LookupError("no message")
        grown.decode(message, bytes(frame_length))
        grown.resolve_signal(signal.name)
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(
            "INVALID_VALUE", f"the signal cannot be read with these numbers ({exc})"
        ) from None


def _own_key(message: Any) -> FrameKey:
    return int(message.frame_id), bool(message.is_extended_frame)


def _merged(base: Any, signals: list[Any]) -> Any:
    """`base` with the defined signals (cantools signals) added (its own kept as they are)."""
    from cantools.database.can import Message

    return Message(
        frame_id=base.frame_id,
        name=base.name,
        length=base.length,
        signals=[*base.signals, *signals],
        comment=base.comments,
        senders=base.senders,
        send_type=base.send_type,
        cycle_time=base.cycle_time,
        dbc_specifics=base.dbc,
        autosar_specifics=base.autosar,
        is_extended_frame=base.is_extended_frame,
        is_fd=base.is_fd,
        bus_name=base.bus_name,
        signal_groups=base.signal_groups,
        strict=False,
        protocol=base.protocol,
    )
