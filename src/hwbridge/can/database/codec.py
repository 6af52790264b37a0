"""Encoding and decoding of one message, with validation before cantools sees the values.

cantools raises on a missing signal, a bad multiplexer value or an out-of-range number with
messages written for programmers; here every such case becomes a `ToolError` with a stable
code, omitted signals take their database default, and a multiplexed message gets its
multiplexer set from the signals given, so only that branch is encoded.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hwbridge.can.database.bits import bytes_needed, extract, insert
from hwbridge.can.database.values import JsonValue, SignalSpec, format_number
from hwbridge.core.models import ToolError

__all__ = ["DecodedFrame", "EncodedFrame", "MessageCodec"]

_MAX_LISTED_SIGNALS = 30


@dataclass(frozen=True, slots=True)
class DecodedFrame:
    """The signals of one frame as JSON values; `notes` say what could not be decoded."""

    message: str
    signals: dict[str, JsonValue]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe form for a tool result."""
        out: dict[str, Any] = {"message": self.message, "signals": dict(self.signals)}
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True, slots=True)
class EncodedFrame:
    """A frame ready for the bus, plus what was sent and which signals were defaulted."""

    message: str
    arbitration_id: int
    is_extended: bool
    is_fd: bool
    data: bytes
    signals: dict[str, JsonValue]
    defaulted: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    raw: Mapping[str, int | float] = field(default_factory=dict)  # what each signal encodes

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe form for a tool result (id in hex, data as hex bytes)."""
        width = 8 if self.is_extended else 3
        out: dict[str, Any] = {
            "message": self.message,
            "id": f"0x{self.arbitration_id:0{width}X}",
            "extended": self.is_extended,
            "fd": self.is_fd,
            "data": self.data.hex(" ").upper(),
            "signals": dict(self.signals),
            "defaulted": list(self.defaulted),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out


_IDS_SHOWN = 16
"""Multiplexer values a note or an error lists at most (a database may define thousands)."""


def _ids_text(ids: set[int] | tuple[int, ...]) -> str:
    listed = sorted(ids)
    text = ", ".join(str(i) for i in listed[:_IDS_SHOWN])
    if len(listed) > _IDS_SHOWN:
        text += f", ... ({len(listed)} values)"
    return text


class MessageCodec:
    """Encode/decode for one cantools message; immutable once built."""

    __slots__ = (
        "_by_lower",
        "_mux_ids",
        "_outside",
        "_use_bits",
        "aliases",
        "message",
        "name",
        "specs",
    )

    def __init__(
        self, message: Any, specs: tuple[SignalSpec, ...], aliases: Mapping[str, str]
    ) -> None:
        self.message = message
        self.name: str = message.name
        self.specs: dict[str, SignalSpec] = {s.name: s for s in specs}
        self.aliases = aliases
        self._by_lower: dict[str, str] = {}
        for s in specs:
            self._by_lower.setdefault(s.name.lower(), s.name)
        mux_ids: dict[str, set[int]] = {}
        for s in specs:
            if s.multiplexer_signal is not None:
                mux_ids.setdefault(s.multiplexer_signal, set()).update(s.multiplexer_ids)
        self._mux_ids: dict[str, frozenset[int]] = {k: frozenset(v) for k, v in mux_ids.items()}
        # Real DBCs put signals past the message length (left out of decoding, refused by
        # encoding), overlap them, or mark a multiplexer `m` instead of `M` (cantools then
        # drops its branches). Such messages go through `database_bits`, signal by signal.
        length = int(message.length)
        self._outside = frozenset(s.name for s in specs if bytes_needed(s.signal) > length)
        unflagged = any(not s.signal.is_multiplexer for s in specs if s.name in self._mux_ids)
        self._use_bits = bool(self._outside) or unflagged or not self._cantools_can_decode()

    # -- names ---------------------------------------------------------------------------

    def signal_name(self, key: str) -> str:
        """The signal `key` names in this message (exact, qualified, any case, or renamed)."""
        if key in self.specs:
            return key
        name = key.strip()
        prefix = f"{self.name}."
        if name.lower().startswith(prefix.lower()):
            name = name[len(prefix) :]
        name = self.aliases.get(name, name)
        if name in self.specs:
            return name
        found = self._by_lower.get(name.lower())
        if found is not None:
            return found
        names = list(self.specs)
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        listed = ", ".join(names[:_MAX_LISTED_SIGNALS])
        if len(names) > _MAX_LISTED_SIGNALS:
            listed += f", ... ({len(names)} signals)"
        raise ToolError(
            "UNKNOWN_SIGNAL",
            f"{self.name} has no signal {key!r}.{hint} Its signals: {listed}",
        )

    # -- decode --------------------------------------------------------------------------

    def decode(self, data: bytes) -> DecodedFrame:
        """Decode `data`; a short frame yields the signals it holds and a note."""
        notes: list[str] = []
        raw = self._raw(bytes(data), notes)
        signals: dict[str, JsonValue] = {}
        for name, spec in self.specs.items():
            value = raw.get(name)
            if value is None:
                continue  # not in this multiplexer branch, or beyond a short frame
            json_value, note = spec.to_json(value)
            signals[name] = json_value
            if note:
                notes.append(note)
        if self._outside:
            notes.append(
                f"{', '.join(sorted(self._outside))} lie beyond the {self.message.length} bytes"
                f" of {self.name} in the database and are not decoded"
            )
        if len(data) < self.message.length:
            notes.append(
                f"frame has {len(data)} bytes, {self.name} has {self.message.length};"
                " signals beyond the data are missing"
            )
        return DecodedFrame(self.name, signals, tuple(notes))

    def decode_raw(self, data: bytes) -> dict[str, int | float]:
        """The raw value of every signal `data` carries (its multiplexer branch only)."""
        raw = self._raw(bytes(data), [])
        return {n: v for n, v in raw.items() if n in self.specs and v is not None}

    def _raw(self, payload: bytes, notes: list[str]) -> Mapping[str, int | float]:
        raw: Mapping[str, int | float] | None = None
        if not self._use_bits:
            try:
                raw = self.message.decode(
                    payload,
                    decode_choices=False,
                    scaling=False,
                    allow_truncated=True,
                    allow_excess=True,
                )
            except Exception:  # a multiplexer value the database does not define
                raw = None
        if raw is None:
            raw = self._decode_bits(payload, notes)
        return raw

    # -- encode --------------------------------------------------------------------------

    def encode(self, values: Mapping[str, object]) -> EncodedFrame:
        """Validate `values` (physical numbers or labels), default the rest, encode."""
        if self.message.is_container:
            raise ToolError("UNSUPPORTED", f"{self.name} is a container message")
        given: dict[str, int | float] = {}
        notes: list[str] = []
        for key, value in values.items():
            name = self.signal_name(key)
            if name in self._outside:
                raise ToolError(
                    "INVALID_VALUE",
                    f"{name} lies beyond the {self.message.length} bytes of {self.name} in the"
                    " database and cannot be sent",
                )
            raw, note = self.specs[name].to_raw(value)
            given[name] = raw
            if note:
                notes.append(note)
        mux_values = self._multiplexer_values(given)
        raw_values: dict[str, int | float] = {}
        defaulted: list[str] = []
        for name, spec in self.specs.items():
            if not self._active(spec, mux_values):
                continue
            if name in self._outside:
                raw_values[name] = 0
                continue
            if name in given:
                raw_values[name] = given[name]
            elif name in mux_values:
                raw_values[name] = mux_values[name]
            else:
                raw_values[name] = spec.default_raw
                defaulted.append(name)
        data: bytes | None = None
        if not self._use_bits:
            try:
                data = self.message.encode(raw_values, scaling=False, padding=False, strict=False)
            except Exception:  # a branch whose layout cantools cannot compile
                data = None
        if data is None:
            data = self._encode_bits(raw_values, given)
        signals: dict[str, JsonValue] = {
            n: self.specs[n].to_json(r)[0] for n, r in raw_values.items() if n not in self._outside
        }
        return EncodedFrame(
            message=self.name,
            arbitration_id=int(self.message.frame_id),
            is_extended=bool(self.message.is_extended_frame),
            is_fd=bool(self.message.is_fd),
            data=bytes(data),
            signals=signals,
            defaulted=tuple(defaulted),
            notes=tuple(notes),
            raw={n: r for n, r in raw_values.items() if n not in self._outside},
        )

    def _cantools_can_decode(self) -> bool:
        try:
            self.message.decode(bytes(self.message.length), decode_choices=False, scaling=False)
        except Exception as exc:
            return "multiplexer" in str(exc)  # a bad layout, unless 0 is just no mux id
        return True

    def _encode_bits(
        self, raw_values: Mapping[str, int | float], given: Mapping[str, int | float]
    ) -> bytes:
        payload = bytearray(self.message.length)
        # overlapping signals: what the caller gave is written last, so it wins
        for name in sorted(raw_values, key=lambda n: n in given):
            if name not in self._outside:
                insert(self.specs[name].signal, raw_values[name], payload)
        return bytes(payload)

    def _decode_bits(self, payload: bytes, notes: list[str]) -> dict[str, int | float]:
        """Decode signal by signal; a multiplexer value with no branch yields a note."""
        raw: dict[str, int | float] = {}
        for name, spec in self.specs.items():
            if name not in self._outside:
                value = extract(spec.signal, payload)
                if value is not None:
                    raw[name] = value
        for mux, valid in self._mux_ids.items():
            value = raw.get(mux)
            if value is not None and value not in valid:
                notes.append(
                    f"{mux} = {format_number(value)} selects no signals in the database"
                    f" (known: {_ids_text(set(valid))})"
                )
        return {n: v for n, v in raw.items() if self._active(self.specs[n], raw)}

    def _active(self, spec: SignalSpec, mux_values: Mapping[str, int | float]) -> bool:
        while spec.multiplexer_signal is not None:
            if mux_values.get(spec.multiplexer_signal) not in spec.multiplexer_ids:
                return False
            spec = self.specs[spec.multiplexer_signal]
        return True

    def _multiplexer_values(self, given: Mapping[str, int | float]) -> dict[str, int | float]:
        """The value of every multiplexer: given, implied by the signals given, or default."""
        allowed: dict[str, set[int]] = {}
        wanted_by: dict[str, list[str]] = {}
        stack = list(given)
        seen = set(stack)
        while stack:
            spec = self.specs[stack.pop()]
            mux = spec.multiplexer_signal
            if mux is None:
                continue
            ids = set(spec.multiplexer_ids)
            allowed[mux] = allowed[mux] & ids if mux in allowed else ids
            wanted_by.setdefault(mux, []).append(spec.name)
            if mux not in seen:
                seen.add(mux)
                stack.append(mux)
        values: dict[str, int | float] = {}
        for mux, valid in self._mux_ids.items():
            if mux in given:
                value = given[mux]
                if value not in valid:
                    raise ToolError(
                        "INVALID_VALUE",
                        f"{mux} selects which signals {self.name} carries and takes one of"
                        f" {_ids_text(set(valid))}; got {format_number(value)}",
                    )
                if mux in allowed and value not in allowed[mux]:
                    raise ToolError("INVALID_VALUE", self._conflict(mux, value, wanted_by[mux]))
                values[mux] = value
            elif mux in allowed:
                if not allowed[mux]:
                    raise ToolError("INVALID_VALUE", self._conflict(mux, None, wanted_by[mux]))
                values[mux] = min(allowed[mux])
            else:
                default = self.specs[mux].default_raw
                values[mux] = default if default in valid else min(valid)
        return values

    def _conflict(self, mux: str, value: float | None, names: list[str]) -> str:
        parts = [
            f"{n} needs {mux} = {_ids_text(self.specs[n].multiplexer_ids)}"
            for n in names
            if self.specs[n].multiplexer_signal == mux
        ]
        if value is None:
            return f"these signals are never in the same {self.name} frame: " + "; ".join(parts)
        return f"{mux} is {format_number(value)} but " + "; ".join(parts)
