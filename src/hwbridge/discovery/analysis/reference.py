"""The part of the bus that is already known: a reference database.

Its messages are decoded, not rediscovered: no field is looked for in the frames of a message
it describes (not even in bits its signals leave out), and its signals, decoded over the same
frames (`signals`), are what the discovered fields are correlated with. Frames match messages
as everywhere in hwbridge: 11- and 29-bit ids kept apart, J1939 messages by PGN whatever the
source address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hwbridge.can.database.database import CanDatabase
from hwbridge.discovery.analysis.correlate import Series
from hwbridge.discovery.bits import ByteOrder, bit_matrix, cantools_chain, to_signed, values
from hwbridge.discovery.frames import FrameKey, FrameSet

__all__ = ["Reference", "ReferenceSignal", "known_database", "load_reference"]

B = npt.NDArray[np.bool_]
ReferenceSpec = str | Path | CanDatabase | Any


@dataclass(frozen=True, slots=True)
class ReferenceSignal:
    """A reference signal's values over a capture."""

    message: str
    signal: str
    unit: str | None
    series: Series


def load_reference(reference: ReferenceSpec | Sequence[ReferenceSpec] | None) -> Reference:
    """A `Reference` from DBC paths, `CanDatabase`s or cantools databases (or none)."""
    if reference is None:
        return Reference(())
    items: Sequence[ReferenceSpec]
    if isinstance(reference, str | Path | CanDatabase) or hasattr(reference, "messages"):
        items = [reference]
    else:
        items = list(reference)
    dbs: list[CanDatabase] = []
    for item in items:
        if isinstance(item, CanDatabase):
            dbs.append(item)
        elif isinstance(item, str | Path):
            dbs.append(CanDatabase.load(item))
        elif hasattr(item, "messages"):
            dbs.append(CanDatabase.from_cantools(item))
        else:
            raise TypeError(f"a reference is a DBC path or a database, not {type(item).__name__}")
    return Reference(tuple(dbs))


def known_database(reference: ReferenceSpec | Sequence[ReferenceSpec] | None) -> CanDatabase:
    """The references as one database, for a live bus (whose driver reads one): each
    message of a later one is added when its id is not described yet and its name not used
    (the first wins, as in `Reference`). None: an empty database."""
    databases = load_reference(reference).databases
    if not databases:
        return CanDatabase.empty()
    known = databases[0]
    for db in databases[1:]:
        names = set(known.message_names)
        added = []
        for m in db.messages:
            if m.name in names or known.message_for_frame(m.frame_id, m.is_extended_frame):
                continue
            added.append(m)
            names.add(m.name)
        if added:
            known = known.with_messages(added)
    return known


def _chain(signal: Any) -> tuple[int, ...]:
    order: ByteOrder = "big_endian" if signal.byte_order == "big_endian" else "little_endian"
    return cantools_chain(int(signal.start), int(signal.length), order)


class Reference:
    """One or more databases describing the known part of a bus (first one wins)."""

    def __init__(self, databases: tuple[CanDatabase, ...]) -> None:
        self.databases = databases

    def __bool__(self) -> bool:
        return bool(self.databases)

    def message(self, key: FrameKey) -> Any | None:
        for db in self.databases:
            found = db.message_for_frame(key[0], key[1])
            if found is not None:
                return found
        return None

    def signals(self, frames: FrameSet) -> list[ReferenceSignal]:
        """Every signal of the message `frames` belong to, decoded (physical values)."""
        message = self.message(frames.key)
        if message is None or not len(frames):
            return []
        bits = bit_matrix(frames.data)
        nbits = bits.shape[1]
        mux = next(
            (s for s in message.signals if s.is_multiplexer and s.multiplexer_signal is None),
            None,
        )
        mux_raw = None
        if mux is not None and max(_chain(mux)) < nbits:
            mux_raw = values(bits, _chain(mux))
        out: list[ReferenceSignal] = []
        for signal in message.signals:
            chain = _chain(signal)
            if max(chain) >= nbits or min(chain) < 0 or len(chain) > 63:
                continue
            rows: npt.NDArray[np.bool_] | slice = slice(None)
            if signal.multiplexer_ids and mux_raw is not None:
                rows = np.isin(mux_raw, list(signal.multiplexer_ids))
            raw = values(bits[rows], chain)
            physical = _physical(signal, raw)
            if physical is None or len(physical) < 2:
                continue
            out.append(
                ReferenceSignal(
                    str(message.name),
                    str(signal.name),
                    signal.unit or None,
                    Series(frames.t[rows], physical),
                )
            )
        return out


def _physical(signal: Any, raw: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
    length = int(signal.length)
    if signal.is_float:
        if length == 32:
            return raw.astype(np.uint32).view(np.float32).astype(np.float64)
        if length == 64:
            return None  # a 64-bit float does not fit the 63-bit reader
        return None
    number = to_signed(raw, length) if signal.is_signed else raw
    return number.astype(np.float64) * float(signal.scale) + float(signal.offset)
