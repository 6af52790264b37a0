"""`CanDatabase`: a loaded CAN database, with lookups built for a live bus and an LLM.

It wraps a cantools `Database` and precomputes, once, everything that happens per frame or
per tool call: the message of an arbitration id (J1939 messages matched by PGN, whatever
the priority and source address of the frame) and lowercase name indexes. The per-signal
value specs (JSON-safe decoding, validated encoding) of a message are built the first time
it is used, and the search index on the first search, so loading a large database costs
little more than cantools' parse. What is built is never changed afterwards (built under a
lock, once), so one instance can be shared by every thread.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from hwbridge.can.database.catalog import (
    SignalIndex,
    describe_message,
    j1939_pgn,
    summarize_message,
)
from hwbridge.can.database.codec import DecodedFrame, EncodedFrame, MessageCodec
from hwbridge.can.database.loader import (
    FORMATS,
    DatabaseError,
    DatabaseImportWarning,
    DatabaseRepairWarning,
    load_database,
)
from hwbridge.can.database.repair import Repair
from hwbridge.can.database.values import JsonValue, SignalSpec
from hwbridge.core.models import ToolError

__all__ = [
    "FORMATS",
    "CanDatabase",
    "DatabaseError",
    "DatabaseImportWarning",
    "DatabaseRepairWarning",
    "DecodedFrame",
    "EncodedFrame",
    "JsonValue",
    "SignalSpec",
]

_MAX_SUGGESTED_NAME = 64  # longer unknown names get no fuzzy suggestions (bounded work)
_EXTENDED = 1 << 31  # dict key flag: extended and standard ids never collide
_ID_TEXT = re.compile(r"^(0x[0-9a-f]+|\d+)$", re.IGNORECASE)
_MAX_CHOICES_LISTED = 10


class CanDatabase:
    """A CAN database ready for a bus monitor and for tools; immutable and thread-safe."""

    __slots__ = (
        "_by_key",
        "_by_lower",
        "_by_name",
        "_by_pgn",
        "_by_pgn_source",
        "_codecs",
        "_db",
        "_index",
        "_lazy_lock",
        "_messages",
        "_path",
        "_renamed",
        "_repairs",
        "_signals_by_lower",
        "_signals_by_name",
    )
    _db: Any
    _path: str | None
    _repairs: tuple[Repair, ...]
    _renamed: Mapping[str, str]
    _messages: tuple[Any, ...]
    _by_name: dict[str, Any]
    _by_lower: dict[str, tuple[str, ...]]
    _by_key: dict[int, Any]
    _by_pgn: dict[int, Any]
    _by_pgn_source: dict[int, Any]
    # Built on first use, per message: a driver on a large database uses few of them.
    _codecs: dict[int, MessageCodec | None]
    # signal name (exact / lowercase) -> (message, signal name) pairs, in message order;
    # built on the first signal lookup
    _signals_by_name: dict[str, list[tuple[Any, str]]] | None
    _signals_by_lower: dict[str, list[tuple[Any, str]]] | None
    _index: SignalIndex | None  # built on the first search
    _lazy_lock: threading.RLock

    def __init__(
        self,
        db: Any,
        *,
        path: str | Path | None = None,
        repairs: Sequence[Repair] = (),
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "_db", db)
        set_(self, "_path", str(path) if path is not None else None)
        set_(self, "_repairs", tuple(repairs))
        aliases = MappingProxyType(dict(renamed or {}))
        set_(self, "_renamed", aliases)
        messages = tuple(db.messages)
        set_(self, "_messages", messages)

        by_name: dict[str, Any] = {}
        by_lower: dict[str, list[str]] = {}
        by_key: dict[int, Any] = {}
        by_pgn: dict[int, Any] = {}
        by_pgn_source: dict[int, Any] = {}
        for m in messages:
            if m.name not in by_name:
                by_name[m.name] = m
                by_lower.setdefault(m.name.lower(), []).append(m.name)
            key = m.frame_id | _EXTENDED if m.is_extended_frame else m.frame_id
            by_key.setdefault(key, m)
            if m.protocol == "j1939" and m.is_extended_frame:
                pgn = j1939_pgn(m.frame_id)
                by_pgn.setdefault(pgn, m)
                by_pgn_source.setdefault(pgn << 8 | (m.frame_id & 0xFF), m)
        set_(self, "_by_name", by_name)
        set_(self, "_by_lower", {k: tuple(v) for k, v in by_lower.items()})
        set_(self, "_by_key", by_key)
        set_(self, "_by_pgn", by_pgn)
        set_(self, "_by_pgn_source", by_pgn_source)
        set_(self, "_codecs", dict.fromkeys(map(id, messages)))
        set_(self, "_signals_by_name", None)
        set_(self, "_signals_by_lower", None)
        set_(self, "_index", None)
        set_(self, "_lazy_lock", threading.RLock())

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"CanDatabase is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"CanDatabase is immutable (cannot delete {name!r})")

    # -- construction --------------------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | Path, *, strict: bool = False, encoding: str | None = None
    ) -> CanDatabase:
        """Load a .dbc, .kcd, .sym or .arxml file.

        A DBC that cantools refuses is repaired in memory when the defect is a known one
        and loaded with a `DatabaseRepairWarning`; anything else raises `DatabaseError`
        naming the file, the line and the problem. `strict=True` also refuses overlapping
        signals, as cantools' strict mode does.
        """
        loaded = load_database(path, strict=strict, encoding=encoding)
        return cls(loaded.db, path=path, repairs=loaded.repairs, renamed=loaded.renamed)

    @classmethod
    def from_cantools(cls, db: Any, *, path: str | Path | None = None) -> CanDatabase:
        """Wrap a cantools `Database` that is already loaded (it must not change afterwards)."""
        return cls(db, path=path)

    @classmethod
    def empty(cls) -> CanDatabase:
        """A database with no message: a bus nothing is known about yet (discovery)."""
        from cantools.database.can import Database

        return cls(Database())

    def with_messages(self, messages: Sequence[Any]) -> CanDatabase:
        """A new database: this one's messages, each replaced by the given message with the
        same frame id (11/29 bits kept apart), and the others added at the end.

        This database is not changed (copy on write): signals defined at run time
        (discovery's `define_signal`) grow a driver's database by swapping in the new one,
        so every call sees one whole database. File, repairs and renamed names carry over.
        """
        from cantools.database.can import Database

        def key(m: Any) -> int:
            return int(m.frame_id) | _EXTENDED if m.is_extended_frame else int(m.frame_id)

        given = {key(m): m for m in messages}
        kept = [given.pop(key(m), m) for m in self._messages]
        db = Database(
            messages=[*kept, *given.values()],
            nodes=list(self._db.nodes),
            buses=list(self._db.buses),
            version=self._db.version,
            dbc_specifics=self._db.dbc,
            strict=False,
        )
        return type(self)(db, path=self._path, repairs=self._repairs, renamed=self._renamed)

    # -- what it holds -------------------------------------------------------------------

    @property
    def cantools(self) -> Any:
        """The wrapped cantools `Database` (read it; do not modify it)."""
        return self._db

    @property
    def path(self) -> str | None:
        return self._path

    @property
    def repairs(self) -> tuple[Repair, ...]:
        """What was repaired to load the file (empty when it loaded as it is)."""
        return self._repairs

    @property
    def renamed(self) -> Mapping[str, str]:
        """Identifiers renamed by a repair (original -> loaded); both are accepted."""
        return self._renamed

    @property
    def messages(self) -> tuple[Any, ...]:
        """The cantools messages, in file order."""
        return self._messages

    @property
    def message_names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._by_name

    def __repr__(self) -> str:
        where = f" {self._path!r}" if self._path else ""
        return f"<CanDatabase{where}: {len(self._messages)} messages>"

    # -- lookups -------------------------------------------------------------------------

    def message_for_frame(self, arbitration_id: int, is_extended: bool) -> Any | None:
        """The message a received frame belongs to, or None.

        Exact id first; then, for extended frames, J1939 messages by PGN (any priority,
        any source address; a message whose source address also matches is preferred).
        """
        key = arbitration_id | _EXTENDED if is_extended else arbitration_id
        message = self._by_key.get(key)
        if message is not None or not is_extended or not self._by_pgn:
            return message
        pgn = (arbitration_id >> 8) & 0x3FFFF
        if (pgn >> 8) & 0xFF < 240:
            pgn &= 0x3FF00
        found = self._by_pgn_source.get(pgn << 8 | (arbitration_id & 0xFF))
        return found if found is not None else self._by_pgn.get(pgn)

    def message(self, name: str | int) -> Any:
        """A message by name (any case, renamed or original), or by id (int, "0x1A0").

        Raises ToolError UNKNOWN_MESSAGE with the closest names.
        """
        if isinstance(name, int) and not isinstance(name, bool):
            found = self._by_id(name)
            if found is not None:
                return found
            raise ToolError("UNKNOWN_MESSAGE", f"no message has id 0x{name:X}")
        found = self._by_name.get(str(name))
        if found is not None:
            return found
        text = str(name).strip()
        text = self._renamed.get(text, text)
        found = self._by_name.get(text)
        if found is not None:
            return found
        lowered = self._by_lower.get(text.lower())
        if lowered is not None and len(lowered) == 1:
            return self._by_name[lowered[0]]
        if _ID_TEXT.match(text):
            found = self._by_id_text(text)
            if found is not None:
                return found
        return self._unknown_message(text)

    def _by_id(self, frame_id: int) -> Any | None:
        found = self._by_key.get(frame_id)
        return found if found is not None else self._by_key.get(frame_id | _EXTENDED)

    def _by_id_text(self, text: str) -> Any | None:
        """An id written as text; eight hex digits (0x00000100) name the 29-bit id only."""
        if text.lower().startswith("0x"):
            frame_id = int(text, 16)
            if len(text) == 10:
                return self._by_key.get(frame_id | _EXTENDED)
            return self._by_id(frame_id)
        return self._by_id(int(text))

    def _unknown_message(self, name: str) -> NoReturn:
        names = list(self._by_name)
        lowered = {n.lower(): n for n in names}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), lowered, n=5)]
        if len(close) < 5 and len(name) >= 3:
            close += [n for n in names if name.lower() in n.lower() and n not in close][
                : 5 - len(close)
            ]
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else "; list_messages shows the messages there are"
        )
        raise ToolError("UNKNOWN_MESSAGE", f"no message named {name!r}{hint}")

    def signals(self, message: str | int | Any) -> tuple[SignalSpec, ...]:
        """The value specs of a message's signals, in the message's order."""
        return tuple(self._codec(message).specs.values())

    def resolve_signal(self, name: str, *, suggest: bool = True) -> SignalSpec:
        """A signal by `Message.Signal` or by a bare name that occurs in one message only.

        Raises ToolError AMBIGUOUS_SIGNAL (listing the qualified names) or UNKNOWN_SIGNAL.
        """
        text = name.strip()
        by_name, by_lower = self._signal_names()
        if "." in text and text not in by_name:
            message_name, _, signal_name = text.rpartition(".")
            codec = self._codec(message_name)
            return codec.specs[codec.signal_name(signal_name)]
        text = self._renamed.get(text, text)
        pairs = by_name.get(text) or by_lower.get(text.lower())
        if pairs is None:
            # close names for a few unknown names of a call, and for names a human could write
            hits = (
                self._signal_index().search(text, limit=5)
                if suggest and len(text) <= _MAX_SUGGESTED_NAME
                else []
            )
            hint = (
                f"; did you mean {', '.join(s.qualified for s, _ in hits)}?"
                if hits
                else "; search_signals finds signals by the words of their names"
            )
            raise ToolError("UNKNOWN_SIGNAL", f"no signal named {name!r}{hint}")
        if len(pairs) > 1:
            listed = ", ".join(f"{m.name}.{s}" for m, s in pairs[:_MAX_CHOICES_LISTED])
            if len(pairs) > _MAX_CHOICES_LISTED:
                listed += f", ... ({len(pairs)} messages)"
            raise ToolError(
                "AMBIGUOUS_SIGNAL",
                f"{name} is in {len(pairs)} messages; name one of {listed}",
            )
        message, signal = pairs[0]
        return self._codec_of(message).specs[signal]

    def _signal_names(
        self,
    ) -> tuple[dict[str, list[tuple[Any, str]]], dict[str, list[tuple[Any, str]]]]:
        by_name, by_lower = self._signals_by_name, self._signals_by_lower
        if by_name is None or by_lower is None:
            with self._lazy_lock:
                by_name, by_lower = self._signals_by_name, self._signals_by_lower
                if by_name is None or by_lower is None:
                    by_name, by_lower = {}, {}
                    for m in self._messages:
                        for s in m.signals:
                            by_name.setdefault(s.name, []).append((m, s.name))
                            by_lower.setdefault(s.name.lower(), []).append((m, s.name))
                    object.__setattr__(self, "_signals_by_lower", by_lower)
                    object.__setattr__(self, "_signals_by_name", by_name)
        return by_name, by_lower

    def _signal_index(self) -> SignalIndex:
        index = self._index
        if index is None:
            with self._lazy_lock:
                index = self._index
                if index is None:
                    specs = [s for m in self._messages for s in self._codec_of(m).specs.values()]
                    index = SignalIndex(specs)
                    object.__setattr__(self, "_index", index)
        return index

    def _codec(self, message: str | int | Any) -> MessageCodec:
        if isinstance(message, str | int):
            message = self.message(message)
        if id(message) not in self._codecs:
            raise ToolError("UNKNOWN_MESSAGE", f"{message!r} is not a message of this database")
        return self._codec_of(message)

    def _codec_of(self, message: Any) -> MessageCodec:
        """The codec of one of this database's messages, built on its first use."""
        codec = self._codecs[id(message)]
        if codec is None:
            with self._lazy_lock:
                codec = self._codecs[id(message)]
                if codec is None:
                    muxes = {s.multiplexer_signal for s in message.signals}
                    specs = tuple(
                        SignalSpec.from_cantools(
                            s, message.name, is_multiplexer=s.is_multiplexer or s.name in muxes
                        )
                        for s in message.signals
                    )
                    codec = MessageCodec(message, specs, self._renamed)
                    self._codecs[id(message)] = codec
        return codec

    # -- values --------------------------------------------------------------------------

    def decode(self, message: str | int | Any, data: bytes) -> DecodedFrame:
        """Decode `data` as `message`; values are JSON-safe (labels as value/label dicts)."""
        return self._codec(message).decode(data)

    def decode_raw(self, message: str | int | Any, data: bytes) -> dict[str, int | float]:
        """The raw value of every signal `data` carries as `message` (its active branch)."""
        return self._codec(message).decode_raw(data)

    def decode_frame(
        self, arbitration_id: int, data: bytes, is_extended: bool = False
    ) -> DecodedFrame | None:
        """Decode a received frame, or None when no message of the database matches it."""
        message = self.message_for_frame(arbitration_id, is_extended)
        if message is None:
            return None
        return self._codec_of(message).decode(data)

    def encode(self, message: str | int | Any, values: Mapping[str, object]) -> EncodedFrame:
        """Validate `values` and encode a frame of `message`.

        Values are physical numbers or labels (any case); signals left out take the DBC
        start value (else 0, else the minimum) and are listed in `EncodedFrame.defaulted`.
        Raises ToolError UNKNOWN_MESSAGE, UNKNOWN_SIGNAL, OUT_OF_RANGE or INVALID_VALUE.
        """
        return self._codec(message).encode(values)

    # -- catalog -------------------------------------------------------------------------

    def list_messages(self, pattern: str | None = None) -> list[dict[str, Any]]:
        """Message summaries; `pattern` is a case-insensitive substring or glob (`*Speed*`)."""
        if not pattern or not pattern.strip():
            chosen: Sequence[Any] = self._messages
        else:
            p = pattern.strip().lower()
            if any(c in p for c in "*?["):
                chosen = [m for m in self._messages if fnmatch.fnmatchcase(m.name.lower(), p)]
            else:
                chosen = [m for m in self._messages if p in m.name.lower()]
            if not chosen and _ID_TEXT.match(p):
                found = self._by_id_text(p)
                chosen = [found] if found is not None else []
        return [summarize_message(m) for m in chosen]

    def describe_message(self, message: str | int | Any) -> dict[str, Any]:
        """Ids, timing, senders, comment and every signal (unit, range, labels, mux)."""
        codec = self._codec(message)
        return describe_message(codec.message, codec.specs.values())

    def search_signals(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Signals whose name, unit or comment match `query`; tolerant of case and typos."""
        return self.search_signals_counted(query, limit)[0]

    def search_signals_counted(
        self, query: str, limit: int = 10
    ) -> tuple[list[dict[str, Any]], int]:
        """`search_signals`, and how many signals matched in all (the best `limit` given)."""
        index = self._signal_index()
        found, total = index.search_counted(query, limit)
        return [index.result(s, how) for s, how in found], total
