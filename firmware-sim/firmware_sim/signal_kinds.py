"""What kind of signal a database signal is, read from its name, unit, comment, value table
and J1939 SPN: a quantity the vehicle model computes, or a counter, a checksum, a constant, a
flag, an enumeration or a plain value.

The words are data (`signal_vocabulary.toml`, copied from hwbridge's search vocabulary, never
imported from it): the simulator stays an independent witness of hwbridge's discovery.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, Final

__all__ = [
    "Kind",
    "SignalKind",
    "classify",
    "concepts_of",
    "lever_labels",
    "raw_bounds",
    "reaches_its_range",
    "signal_range",
    "tokens_of",
]


class Kind(StrEnum):
    COUNTER = "counter"
    CHECKSUM = "checksum"
    MULTIPLEXER = "multiplexer"
    CONSTANT = "constant"
    QUANTITY = "quantity"
    FLAG = "flag"
    ENUM = "enum"
    VALUE = "value"


@dataclass(frozen=True, slots=True)
class SignalKind:
    """How a signal moves: its `kind`, and for a model quantity which one, on which corner
    (fl, fr, rl, rr, or left/right for turn signals) and how the model's unit converts."""

    kind: Kind
    quantity: str | None = None
    corner: str | None = None
    factor: float = 1.0
    offset: float = 0.0
    dimension: str = ""
    constant_raw: int | None = None


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    all: frozenset[str]
    none: frozenset[str]
    units: frozenset[str]
    flag: bool | None
    typical: tuple[float, float] | None
    choices: str | None
    spns: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    words: dict[str, frozenset[str]]  # word or phrase -> concepts
    units: dict[str, tuple[str, float, float]]
    rules: tuple[_Rule, ...]
    by_spn: dict[int, _Rule]


_CAMEL: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_UMLAUTS: Final = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_COUNTER_WORDS: Final = frozenset({"counter", "cnt", "ctr", "bz", "alive", "rc", "sqc", "seq"})
_CHECKSUM_WORDS: Final = frozenset({"checksum", "crc", "chksum", "chksm", "cksum", "cs", "chk"})
_UNUSED_WORDS: Final = frozenset({"reserved", "unused", "spare", "padding", "filler", "reserve"})
_SET_ME: Final = re.compile(r"^set_?me_?(x)?([0-9a-f]+)", re.IGNORECASE)
_LEVER: Final = {
    "P": ("p", "park", "parking"),
    "R": ("r", "reverse", "rev"),
    "N": ("n", "neutral"),
    "D": ("d", "drive", "dr"),
}


@cache
def _vocabulary() -> _Vocabulary:
    text = resources.files("firmware_sim").joinpath("signal_vocabulary.toml").read_text("utf-8")
    data = tomllib.loads(text)
    words: dict[str, set[str]] = {}
    for concept, spellings in data["concepts"].items():
        for spelling in spellings:
            words.setdefault(spelling, set()).add(concept)
    for word, concepts in data["compounds"].items():
        words.setdefault(word, set()).update(concepts)
    units = {k: (str(v[0]), float(v[1]), float(v[2])) for k, v in data["units"].items()}
    rules = tuple(
        _Rule(
            name=r["name"],
            all=frozenset(r.get("all", ())),
            none=frozenset(r.get("none", ())),
            units=frozenset(r.get("units", ("",))),
            flag=r.get("flag"),
            typical=(float(r["typical"][0]), float(r["typical"][1])) if "typical" in r else None,
            choices=r.get("choices"),
            spns=frozenset(int(s) for s in r.get("spn", ())),
        )
        for r in data["quantity"]
    )
    by_spn = {spn: rule for rule in reversed(rules) for spn in rule.spns}
    return _Vocabulary({k: frozenset(v) for k, v in words.items()}, units, rules, by_spn)


def tokens_of(text: str) -> list[str]:
    """`WhlFl_W_Meas` -> ["whl", "fl", "w", "meas"]: words split at separators, case changes
    and digits, lowercase, umlauts written out."""
    out: list[str] = []
    for part in re.split(r"[^0-9A-Za-zÄÖÜäöüß]+", text):
        out += [t.lower().translate(_UMLAUTS) for t in _CAMEL.findall(part.translate(_UMLAUTS))]
    return out


def concepts_of(tokens: list[str]) -> set[str]:
    """The concepts of a token list: each word, each pair written apart or together."""
    words = _vocabulary().words
    found: set[str] = set()
    for i, token in enumerate(tokens):
        found |= words.get(token, frozenset())
        if i + 1 < len(tokens):
            pair = tokens[i + 1]
            found |= words.get(f"{token} {pair}", frozenset())
            found |= words.get(token + pair, frozenset())
    return found


def raw_bounds(signal: Any) -> tuple[int, int]:
    """The raw values the signal's bits can carry."""
    n = int(signal.length)
    if signal.is_signed:
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def signal_range(signal: Any) -> tuple[float, float]:
    """The physical values a frame may carry: what the bits fit, within the DBC minimum and
    maximum where given (cantools checks each on its own). A DBC range no raw value reaches
    (a database mistake) is ignored: then only the bits bound the value."""
    if signal.is_float:
        lo, hi = (-3.0e38, 3.0e38) if int(signal.length) == 32 else (-1.0e300, 1.0e300)
    else:
        scale, offset = float(signal.scale), float(signal.offset)
        lo, hi = (r * scale + offset for r in raw_bounds(signal))
        lo, hi = min(lo, hi), max(lo, hi)
    low = max(lo, float(signal.minimum)) if signal.minimum is not None else lo
    high = min(hi, float(signal.maximum)) if signal.maximum is not None else hi
    return (low, high) if low <= high else (lo, hi)


def reaches_its_range(signal: Any) -> bool:
    """Whether some raw value of the signal lies within its DBC minimum and maximum."""
    if signal.is_float:
        return True
    scale, offset = float(signal.scale), float(signal.offset)
    lo, hi = (r * scale + offset for r in raw_bounds(signal))
    lo, hi = min(lo, hi), max(lo, hi)
    low = max(lo, float(signal.minimum)) if signal.minimum is not None else lo
    high = min(hi, float(signal.maximum)) if signal.maximum is not None else hi
    return low <= high


def _unit(signal: Any) -> tuple[str, float, float]:
    text = (signal.unit or "").strip().lower().replace(" ", "")
    text = text.removeprefix("unit_")
    if not text:
        return "", 1.0, 0.0
    return _vocabulary().units.get(text, ("other", 1.0, 0.0))


def _is_flag(signal: Any) -> bool:
    if int(signal.length) == 1:
        return True
    labels = signal.choices or {}
    return len(labels) == 2 and int(signal.length) <= 2


def lever_labels(signal: Any) -> dict[str, Any]:
    """Gear lever positions (P, R, N, D) -> the signal's label for each it has."""
    found: dict[str, Any] = {}
    for label in (signal.choices or {}).values():
        words = tokens_of(str(label)) or [str(label).lower()]
        for lever, spellings in _LEVER.items():
            if lever not in found and any(w in spellings for w in words[:2]):
                found[lever] = label
    return found if "D" in found and len(found) >= 2 else {}


def _spn(signal: Any) -> int | None:
    attributes = getattr(getattr(signal, "dbc", None), "attributes", None) or {}
    spn = attributes.get("SPN")
    value = getattr(spn, "value", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _corner(concepts: set[str]) -> str | None:
    front, rear = "front" in concepts, "rear" in concepts
    left, right = "left" in concepts, "right" in concepts
    if front != rear and left != right:
        return ("f" if front else "r") + ("l" if left else "r")
    if "driver" in concepts and not rear:
        return "fl"
    if "passenger" in concepts and not rear:
        return "fr"
    if left != right:
        return "left" if left else "right"
    return None


def _set_me(signal: Any) -> int | None:
    """opendbc's `SET_ME_X80` / `SET_ME_1`: the raw value the name asks for, if it fits."""
    match = _SET_ME.match(signal.name)
    if match is None:
        return None
    digits = match.group(2)
    try:
        raw = int(digits, 16) if match.group(1) or not digits.isdigit() else int(digits)
    except ValueError:
        return None
    lo, hi = raw_bounds(signal)
    return raw if lo <= raw <= hi else None


def _fits(rule: _Rule, signal: Any, factor: float, offset: float) -> bool:
    """Whether the model's usual span of `rule`, in the signal's unit, shows in its range at
    its resolution (a speed in a 0..1 field, or in a window of a few km/h, would sit still
    at its limit)."""
    if rule.typical is None:
        return True
    lo, hi = signal_range(signal)
    a, b = (v * factor + offset for v in rule.typical)
    a, b = min(a, b), max(a, b)
    step = abs(float(signal.scale)) or 1.0
    if rule.name == "wheel_speed" and factor != 1.0:  # km/h as a wheel's angular speed
        return True
    # the range must show a good part of the model's usual span, in several steps
    return min(b, hi) - max(a, lo) >= max(3 * step, 0.25 * (b - a))


def _match(rule: _Rule, concepts: set[str], signal: Any, dimension: str, flag: bool) -> bool:
    if not rule.all <= concepts or rule.none & concepts:
        return False
    if dimension not in rule.units:
        return False
    if rule.flag is not None and rule.flag != flag:
        return False
    return not (rule.choices == "lever" and not lever_labels(signal))


def _quantity(signal: Any, concepts: set[str], flag: bool) -> SignalKind | None:
    vocabulary = _vocabulary()
    dimension, factor, offset = _unit(signal)
    spn = _spn(signal)
    candidates = [vocabulary.by_spn[spn]] if spn in vocabulary.by_spn else []
    candidates += [r for r in vocabulary.rules if _match(r, concepts, signal, dimension, flag)]
    for rule in candidates:
        if rule.choices == "lever" and not lever_labels(signal):
            continue
        if _fits(rule, signal, factor, offset):
            return SignalKind(
                Kind.QUANTITY, rule.name, _corner(concepts), factor, offset, dimension
            )
    return None


def classify(signal: Any) -> SignalKind:
    """The kind of a cantools signal (see the module docstring)."""
    if signal.is_multiplexer:
        return SignalKind(Kind.MULTIPLEXER)
    tokens = tokens_of(signal.name)
    if tokens and (tokens[-1] in _COUNTER_WORDS or "counter" in tokens or "alive" in tokens):
        return SignalKind(Kind.COUNTER)
    if tokens and (tokens[-1] in _CHECKSUM_WORDS or {"checksum", "crc", "chksum"} & set(tokens)):
        return SignalKind(Kind.CHECKSUM)
    constant = _set_me(signal)
    lo, hi = signal_range(signal)
    if constant is not None:
        return SignalKind(Kind.CONSTANT, constant_raw=constant)
    if (
        lo == hi
        or not reaches_its_range(signal)
        or not math.isfinite(float(signal.scale))
        or float(signal.scale) == 0.0
        or set(tokens) & _UNUSED_WORDS
    ):
        return SignalKind(Kind.CONSTANT)
    flag = _is_flag(signal)
    concepts = concepts_of(tokens)
    found = None
    if "fault" not in concepts:
        found = _quantity(signal, concepts, flag)
        if found is None and signal.comment:
            found = _quantity(signal, concepts | concepts_of(tokens_of(signal.comment)), flag)
    if found is not None:
        return found
    if flag:
        return SignalKind(Kind.FLAG)
    if len(signal.choices or {}) >= 3:
        return SignalKind(Kind.ENUM)
    return SignalKind(Kind.VALUE)
