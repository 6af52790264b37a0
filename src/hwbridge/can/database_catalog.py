"""What a database contains, as plain JSON: message summaries, descriptions, signal search.

Descriptions leave out empty fields so a large database stays small in a tool result.
`SignalIndex` is built once per database (lowercase and separator-free copies of every name,
unit and comment) so a search over thousands of signals is a few list scans, not a rebuild.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hwbridge.can.values import SignalSpec

__all__ = [
    "SignalIndex",
    "describe_message",
    "describe_signal",
    "id_text",
    "j1939_pgn",
    "summarize_message",
]

_SEPARATORS = re.compile(r"[\s_\-.]+")
_COMMENT_CHARS = 160


def id_text(frame_id: int, extended: bool) -> str:
    """`0x1A0` for a standard id, `0x18FEF100` for an extended one."""
    return f"0x{frame_id:08X}" if extended else f"0x{frame_id:03X}"


def j1939_pgn(frame_id: int) -> int:
    """The PGN of a 29-bit J1939 id: PDU1 formats (PF < 240) drop the destination byte."""
    pgn = (frame_id >> 8) & 0x3FFFF
    if (pgn >> 8) & 0xFF < 240:
        pgn &= 0x3FF00
    return pgn


def _comment(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def summarize_message(message: Any) -> dict[str, Any]:
    """One line of `list_messages`."""
    extended = bool(message.is_extended_frame)
    return {
        "name": message.name,
        "id": id_text(message.frame_id, extended),
        "extended": extended,
        "fd": bool(message.is_fd),
        "length": int(message.length),
        "signals": len(message.signals),
        "cycle_time_ms": message.cycle_time,
        "senders": list(message.senders),
    }


def describe_signal(spec: SignalSpec) -> dict[str, Any]:
    """A signal's unit, range, labels and multiplexing; absent fields are omitted."""
    out: dict[str, Any] = {"name": spec.name}
    if spec.unit:
        out["unit"] = spec.unit
    out["type"] = "integer" if spec.int_like else "number"
    out["minimum"] = _number(spec.low)
    out["maximum"] = _number(spec.high)
    if not spec.int_like:
        out["resolution"] = spec.scale
    out["bits"] = int(spec.signal.length)
    if spec.choices:
        out["choices"] = {str(raw): label for raw, label in spec.choices.items()}
    if spec.signal.raw_initial is not None:
        out["initial"] = spec.to_json(spec.signal.raw_initial)[0]
    if spec.is_multiplexer:
        out["multiplexer"] = True
    if spec.multiplexer_signal is not None:
        out["multiplexer_signal"] = spec.multiplexer_signal
        out["multiplexer_ids"] = list(spec.multiplexer_ids)
    if spec.signal.receivers:
        out["receivers"] = list(spec.signal.receivers)
    if spec.comment:
        out["comment"] = spec.comment
    return out


def describe_message(message: Any, specs: Iterable[SignalSpec]) -> dict[str, Any]:
    """Everything an LLM needs to read or send `message`."""
    out = summarize_message(message)
    if message.protocol == "j1939" and message.is_extended_frame:
        out["pgn"] = j1939_pgn(message.frame_id)
    comment = _comment(message.comment)
    if comment:
        out["comment"] = comment
    out["multiplexed"] = bool(message.is_multiplexed())
    out["signals"] = [describe_signal(s) for s in specs]
    return out


@dataclass(frozen=True, slots=True)
class _Entry:
    spec: SignalSpec
    name: str  # lowercase
    flat: str  # lowercase without separators: "engine_speed" -> "enginespeed"
    unit: str
    comment: str
    tokens: frozenset[str]  # the signal name split at separators and camelCase
    context: frozenset[str]  # the message name's and the comment's words


_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_VOWELS = re.compile(r"(?<!^)[aeiou]")


def _words(text: str) -> list[str]:
    """'Veh_V_ActlEng' -> ['veh', 'v', 'actl', 'eng']; 'vehicle speed' -> [...]."""
    return [w.lower() for part in _SEPARATORS.split(text) for w in _CAMEL.findall(part)]


def _forms(word: str) -> set[str]:
    """A query word and the abbreviations DBC authors write for it (speed: spd, spe)."""
    forms = {word}
    if len(word) >= 4:
        forms.add(word[:3])
        forms.add(word[:4])
        forms.add(_VOWELS.sub("", word))
    return forms


def _word_matches(word: str, vocabulary: frozenset[str]) -> tuple[set[str], set[str]]:
    """Tokens equal to `word`, and tokens that abbreviate it or are a typo away from it."""
    exact = {word} & vocabulary
    forms = _forms(word)
    near = {t for t in vocabulary if t in forms or (len(t) >= 3 and word.startswith(t))}
    if len(word) >= 4:
        near.update(difflib.get_close_matches(word, vocabulary, n=20, cutoff=0.8))
    return exact, near - exact


def _flat(text: str) -> str:
    return _SEPARATORS.sub("", text.lower())


class SignalIndex:
    """Signal search ranked exact > prefix > substring > unit/comment > fuzzy name."""

    __slots__ = ("_entries", "_flat_names", "_vocabulary")

    def __init__(self, specs: Sequence[SignalSpec]) -> None:
        self._entries = tuple(
            _Entry(
                s,
                s.name.lower(),
                _flat(s.name),
                (s.unit or "").lower(),
                (s.comment or "").lower(),
                frozenset(_words(s.name)),
                frozenset(_words(s.message) + _words(s.comment or "")),
            )
            for s in specs
        )
        vocabulary: set[str] = set()
        for e in self._entries:
            vocabulary |= e.tokens
        self._vocabulary = frozenset(vocabulary)
        names: dict[str, list[int]] = {}
        for i, e in enumerate(self._entries):
            names.setdefault(e.flat, []).append(i)
        self._flat_names = {k: tuple(v) for k, v in names.items()}

    def search(self, query: str, limit: int = 10) -> list[tuple[SignalSpec, str]]:
        """Up to `limit` (spec, how it matched) pairs, best first."""
        q = query.strip().lower()
        flat = _flat(q)
        if not flat or limit <= 0:
            return []
        words = [w for w in _SEPARATORS.split(q) if w]
        tiers: list[list[tuple[int, int]]] = [[] for _ in range(5)]
        for i, e in enumerate(self._entries):
            if e.flat == flat or e.name == q:
                tiers[0].append((len(e.name), i))
            elif e.flat.startswith(flat):
                tiers[1].append((len(e.name), i))
            elif flat in e.flat or (len(words) > 1 and all(w in e.flat for w in words)):
                tiers[2].append((len(e.name), i))
            elif e.unit and e.unit == q:
                tiers[3].append((len(e.name), i))
            elif e.comment and (q in e.comment or all(w in e.comment for w in words)):
                tiers[4].append((len(e.name), i))
        labels = ("exact", "prefix", "substring", "unit", "comment")
        found: list[tuple[SignalSpec, str]] = []
        taken: set[int] = set()
        for tier, label in zip(tiers, labels, strict=True):
            for _, i in sorted(tier):
                found.append((self._entries[i].spec, label))
                taken.add(i)
                if len(found) >= limit:
                    return found
        words = [w for w in _words(query) if len(w) >= 2]
        if len(words) > 1:
            # "vehicle speed" against Veh_V_ActlEng: every word scored on its own
            matches = [_word_matches(w, self._vocabulary) for w in words]
            scored = []
            for i, e in enumerate(self._entries):
                if i in taken:
                    continue
                in_name = 0
                total = 0
                for w, (exact, near) in zip(words, matches, strict=True):
                    if exact & e.tokens:
                        total, in_name = total + 3, in_name + 1
                    elif near & e.tokens or (e.unit and w == e.unit):
                        total, in_name = total + 2, in_name + 1
                    elif w in e.context:
                        total += 1
                if in_name and in_name * 2 >= len(words):
                    scored.append((-total, len(e.name), i))
            for _, _, i in sorted(scored):
                found.append((self._entries[i].spec, "words"))
                taken.add(i)
                if len(found) >= limit:
                    return found
        close = difflib.get_close_matches(flat, self._flat_names, n=limit, cutoff=0.75)
        for name in close:
            for i in self._flat_names[name]:
                if i not in taken:
                    found.append((self._entries[i].spec, "fuzzy"))
                    if len(found) >= limit:
                        return found
        return found

    def result(self, spec: SignalSpec, match: str) -> dict[str, Any]:
        """One search hit as JSON."""
        out: dict[str, Any] = {
            "signal": spec.name,
            "message": spec.message,
            "qualified": spec.qualified,
            "match": match,
        }
        if spec.unit:
            out["unit"] = spec.unit
        if spec.choices:
            out["labels"] = list(dict.fromkeys(spec.choices.values()))[:12]
        if spec.comment:
            text = spec.comment
            out["comment"] = (
                text if len(text) <= _COMMENT_CHARS else text[: _COMMENT_CHARS - 1] + "…"
            )
        return out
