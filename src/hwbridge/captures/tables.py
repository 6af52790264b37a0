"""Which table each frame goes to: the messages of several databases, matched as CanDriver does.

A frame belongs to the first database (in the order given) whose `CanDatabase.message_for_frame`
knows it: exact id first, then J1939 messages by PGN whatever the priority and source address.
Matching is done once per distinct id of a chunk, never per frame.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from hwbridge.can.io.frames import FrameChunk
from hwbridge.captures.bridge import CanDatabase
from hwbridge.captures.message_decoder import MessagePlan

__all__ = ["MessageTables", "Routed", "frame_keys", "key_text"]

_EXTENDED = np.uint32(1 << 31)
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


def frame_keys(chunk: FrameChunk) -> npt.NDArray[np.uint32]:
    """One integer per frame: the id, with bit 31 set for 29-bit ids."""
    return chunk.arbitration_id | (chunk.extended.astype(np.uint32) << np.uint32(31))


def key_text(key: int) -> str:
    """0x1A0 for an 11-bit id, 0x18F00400 for a 29-bit one."""
    if key & (1 << 31):
        return f"0x{key & 0x1FFFFFFF:08X}"
    return f"0x{key:03X}"


@dataclass(frozen=True, slots=True)
class Routed:
    """A chunk split by table: row indices per table, and the ids no database knows."""

    groups: list[tuple[int, npt.NDArray[np.intp]]]
    unknown: dict[int, int]  # key -> frames
    decoded: int


RESERVED_TABLES = ("j1939_dm",)
"""Tables hwbridge writes itself: a message of that name gets its database's name added."""


class MessageTables:
    """The tables of a dataset (one per message) and the routing of frames to them."""

    def __init__(self, databases: Sequence[CanDatabase], *, isotp: bool = False) -> None:
        if not databases:
            raise ValueError("decoding needs at least one database")
        self.databases = tuple(databases)
        self.plans: list[MessagePlan] = []
        self._by_message: dict[int, int] = {}
        taken: set[str] = set(RESERVED_TABLES)
        for db in self.databases:
            stem = _NOT_IDENTIFIER.sub("_", Path(db.path).stem) if db.path else "db"
            for message in db.messages:
                if message.is_container or id(message) in self._by_message:
                    continue
                name = str(message.name)
                if name.lower() in taken:
                    name = f"{message.name}__{stem}"
                n = 2
                while name.lower() in taken:
                    name = f"{message.name}__{stem}_{n}"
                    n += 1
                taken.add(name.lower())
                self._by_message[id(message)] = len(self.plans)
                self.plans.append(
                    MessagePlan(
                        name,
                        message,
                        db.signals(message),
                        database=Path(db.path).name if db.path else "",
                    )
                )
        self._cache: dict[int, int] = {}
        self.describes_j1939 = any(p.message.protocol == "j1939" for p in self.plans)
        """Whether a database describes J1939 messages (J1939 decoding is then on by default)."""
        self.spn_names = _spn_names(self.plans)
        self.isotp_keys: frozenset[int] = frozenset()
        if isotp:
            self.isotp_keys = frozenset(
                int(p.message.frame_id) | (int(bool(p.message.is_extended_frame)) << 31)
                for p in self.plans
                if p.length > 8 and not p.message.is_fd
            )

    def table_of(self, key: int) -> int:
        """The table index of frames with this key, or -1."""
        found = self._cache.get(key)
        if found is not None:
            return found
        extended = bool(key & (1 << 31))
        arbitration_id = key & 0x1FFFFFFF
        found = -1
        for db in self.databases:
            message = db.message_for_frame(arbitration_id, extended)
            if message is not None:
                found = self._by_message.get(id(message), -1)
                break
        self._cache[key] = found
        return found

    def route(self, chunk: FrameChunk) -> Routed:
        if not len(chunk):
            return Routed([], {}, 0)
        keys = frame_keys(chunk)
        unique, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        tables = np.array([self.table_of(int(k)) for k in unique.tolist()], np.int64)
        unknown = {int(k): int(c) for k, c, t in zip(unique, counts, tables, strict=True) if t < 0}
        row_table = tables[inverse]
        if len(self.plans) < 2**15:  # numpy sorts 16-bit integers by radix: linear time
            row_table = row_table.astype(np.int16)
        order = np.argsort(row_table, kind="stable")
        sorted_tables = row_table[order]
        cuts = np.flatnonzero(np.diff(sorted_tables)) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(order)]])
        groups: list[tuple[int, npt.NDArray[np.intp]]] = []
        decoded = 0
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            table = int(sorted_tables[start])
            if table >= 0:
                groups.append((table, order[start:end]))
                decoded += end - start
        return Routed(groups, unknown, decoded)


def _spn_names(plans: Sequence[MessagePlan]) -> dict[int, str]:
    """SPN -> the name of the first signal whose `SPN` attribute (J1939 DBCs) is that number."""
    names: dict[int, str] = {}
    for plan in plans:
        for signal in plan.message.signals:
            attributes = getattr(getattr(signal, "dbc", None), "attributes", None) or {}
            spn = getattr(attributes.get("SPN"), "value", None)
            if isinstance(spn, int) and spn > 0:
                names.setdefault(spn, str(signal.name))
    return names
