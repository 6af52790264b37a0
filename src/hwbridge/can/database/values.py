"""Signal values between the bus and JSON: raw <-> physical, labels, bounds and defaults.

cantools hands back `NamedSignalValue` objects, floats such as 0.30000000000000004 and NaN;
none of that belongs in a tool result. `SignalSpec` precomputes, once per signal, what is
needed to turn a raw value into a plain JSON value and to turn what an LLM sent (a number,
a numeric string, a label in any case, a decoded `{"value", "label"}` dict) into a raw value,
rejecting anything outside what the signal can carry with a message that says what would fit.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from types import MappingProxyType
from typing import Any, TypeAlias

from hwbridge.core.models import ToolError

__all__ = ["JsonValue", "SignalSpec", "format_number"]

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

_FLOAT_MAX = {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}
_MAX_LISTED_LABELS = 24
_F32 = struct.Struct("<f")


def format_number(value: float) -> str:
    """A number as a person writes it: 16 not 16.0, 0.1 not 0.1000000000000000055."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.10g}"


@functools.lru_cache(maxsize=1024)
def _decimals(x: float) -> int:
    """How many decimals `x` has as written in the database (0.0625 -> 4)."""
    try:
        exponent = Decimal(repr(float(x))).normalize().as_tuple().exponent
    except InvalidOperation:  # pragma: no cover - repr of a finite float is always a Decimal
        return 15
    return max(0, -exponent) if isinstance(exponent, int) else 15


def _shortest_float32(value: float) -> float:
    """The shortest decimal that is the same float32 (0.01, not 0.009999999776482582)."""
    if not math.isfinite(value):
        return float(value)
    exact = _F32.unpack(_F32.pack(value))[0]
    for digits in range(6, 10):
        candidate = float(f"{value:.{digits}g}")
        if _F32.unpack(_F32.pack(candidate))[0] == exact:
            return candidate
    return float(value)


def _choices_in_range(
    choices: Mapping[int, object] | None,
    raw_min: float,
    raw_max: float,
    length: int,
    is_float: bool,
) -> dict[int, str]:
    """Labels by raw value, with keys written in the other signedness wrapped into range.

    DBCs write `VAL_ ... -2 "NoData"` for an unsigned 48-bit signal meaning 0xFFFFFFFFFFFE;
    a label whose value the signal cannot carry can never be on the bus and is dropped.
    """
    out: dict[int, str] = {}
    for key, label in sorted((choices or {}).items()):
        raw = int(key)
        if not is_float and not raw_min <= raw <= raw_max:
            raw += (1 << length) if raw < 0 else -(1 << length)
        if is_float or raw_min <= raw <= raw_max:
            out.setdefault(raw, str(label))
    return dict(sorted(out.items()))


def _parse_number(text: str) -> object:
    """'21.5' -> 21.5, '0x1F' -> 31; anything else is returned as it is (and refused)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return int(text.strip(), 0)
    except ValueError:
        return text


def _is_integral(x: float) -> bool:
    return isinstance(x, int) or (math.isfinite(x) and float(x).is_integer())


@dataclass(frozen=True, slots=True, eq=False)
class SignalSpec:
    """Everything about one signal that decoding, encoding and describing need, precomputed."""

    name: str
    message: str
    signal: Any  # the cantools Signal, for layout; never mutated
    unit: str | None
    comment: str | None
    scale: float
    offset: float
    is_float: bool
    int_like: bool  # integer raw with integral scale and offset: physical values are ints
    ndigits: int  # decimals that raw * scale + offset can have
    raw_min: float
    raw_max: float
    minimum: float | None  # the database's range, None when unset (0..0 or min >= max)
    maximum: float | None
    fit_low: float  # what the bits can carry, in physical units
    fit_high: float
    low: float  # the range an encoded number must fall in: database range within what fits
    high: float
    choices: Mapping[int, str]  # raw value -> label
    labels: Mapping[str, int]  # lowercase label -> raw value, where the case tells none apart
    exact_labels: Mapping[str, int]  # label as the database spells it -> raw value
    default_raw: float  # what an omitted signal is sent as
    is_multiplexer: bool
    multiplexer_signal: str | None
    multiplexer_ids: tuple[int, ...]

    @property
    def qualified(self) -> str:
        return f"{self.message}.{self.name}"

    @classmethod
    def from_cantools(
        cls, signal: Any, message: str, *, is_multiplexer: bool | None = None
    ) -> SignalSpec:
        """Build the spec of a cantools `Signal` belonging to message `message`.

        `is_multiplexer` overrides cantools' flag, which misses multiplexers that a DBC
        marks only through `SG_MUL_VAL_` entries.
        """
        scale = signal.conversion.scale
        offset = signal.conversion.offset
        is_float = bool(signal.is_float)
        length = int(signal.length)
        if is_float:
            limit = _FLOAT_MAX.get(length, _FLOAT_MAX[64])
            raw_min, raw_max = -limit, limit
        elif signal.is_signed:
            raw_min, raw_max = -(1 << (length - 1)), (1 << (length - 1)) - 1
        else:
            raw_min, raw_max = 0, (1 << length) - 1
        int_like = not is_float and _is_integral(scale) and _is_integral(offset)
        if int_like:
            scale, offset = int(scale), int(offset)
        ends = sorted((raw_min * scale + offset, raw_max * scale + offset))
        fit_low, fit_high = float(ends[0]), float(ends[1])
        low, high = fit_low, fit_high
        minimum, maximum = signal.minimum, signal.maximum
        if minimum is None or maximum is None or not minimum < maximum:
            minimum = maximum = None
        elif minimum <= high and maximum >= low:
            low, high = max(low, float(minimum)), min(high, float(maximum))
        choices = _choices_in_range(signal.choices, raw_min, raw_max, length, is_float)
        exact: dict[str, int] = {}
        spellings: dict[str, set[str]] = {}
        for raw, label in choices.items():
            exact.setdefault(label.strip(), raw)
            spellings.setdefault(label.strip().lower(), set()).add(label.strip())
        # any case finds a label, unless two labels differ only by case (opendbc's Ford has
        # "Return_to_Park" 26 and "Return_To_Park" 21): those are found as spelled only
        labels = {
            lower: exact[next(iter(spelled))]
            for lower, spelled in spellings.items()
            if len(spelled) == 1
        }
        comment = signal.comment
        spec = cls(
            name=signal.name,
            message=message,
            signal=signal,
            unit=signal.unit or None,
            comment=comment if isinstance(comment, str) and comment else None,
            scale=scale,
            offset=offset,
            is_float=is_float,
            int_like=int_like,
            ndigits=max(_decimals(scale), _decimals(offset)),
            raw_min=raw_min,
            raw_max=raw_max,
            minimum=minimum,
            maximum=maximum,
            fit_low=fit_low,
            fit_high=fit_high,
            low=low,
            high=high,
            choices=MappingProxyType(choices),
            labels=MappingProxyType(labels),
            exact_labels=MappingProxyType(exact),
            default_raw=0,
            is_multiplexer=bool(
                signal.is_multiplexer if is_multiplexer is None else is_multiplexer
            ),
            multiplexer_signal=signal.multiplexer_signal,
            multiplexer_ids=tuple(signal.multiplexer_ids or ()),
        )
        object.__setattr__(spec, "default_raw", spec._pick_default(signal.raw_initial))
        return spec

    def raw_of_label(self, text: str) -> int | None:
        """The raw value of label `text`: as the database spells it, else in any case when
        that names one label only; None when it is no label."""
        found = self.exact_labels.get(text.strip())
        return found if found is not None else self.labels.get(text.strip().lower())

    # -- raw -> JSON ---------------------------------------------------------------------

    def physical(self, raw: float) -> int | float:
        """The physical value of `raw`, exact to the decimals the scaling allows."""
        if self.int_like:
            return int(raw) * int(self.scale) + int(self.offset)
        if self.is_float:
            if self.signal.length == 32:
                raw = _shortest_float32(raw)
            return float(raw * self.scale + self.offset)
        return round(float(raw * self.scale + self.offset), self.ndigits)

    def to_json(self, raw: float) -> tuple[JsonValue, str | None]:
        """The JSON value of `raw`, and a note when it had to be replaced by None.

        "value" is always the physical value. A labelled value is {"value": ..., "label":
        ...}, plus "raw" when scale or offset make the raw value differ (raw 0 of a
        (1,-125) torque labelled Off is {"value": -125, "raw": 0, "label": "Off"}).
        """
        label = None
        if self.choices and (isinstance(raw, int) or (math.isfinite(raw) and raw.is_integer())):
            label = self.choices.get(int(raw))
        if label is not None:
            physical = self.physical(int(raw))
            labelled: dict[str, JsonValue] = {"value": physical, "label": label}
            if physical != int(raw):
                labelled = {"value": physical, "raw": int(raw), "label": label}
            return labelled, None
        value = self.physical(raw)
        if isinstance(value, float) and not math.isfinite(value):
            return None, f"{self.name} is not a finite number ({value}); reported as null"
        return value, None

    # -- JSON -> raw ---------------------------------------------------------------------

    def to_raw(self, value: object) -> tuple[int | float, str | None]:
        """Validate what a caller sent for this signal; return its raw value and a note.

        Raises ToolError INVALID_VALUE (wrong type, unknown label) or OUT_OF_RANGE.
        """
        if isinstance(value, Mapping):
            if "label" in value and value["label"] is not None:
                value = value["label"]
            elif "value" in value:
                value = value["value"]
            else:
                raise self._invalid(value)
        if isinstance(value, str):
            raw = self.raw_of_label(value)
            if raw is not None:
                return raw, None
            value = _parse_number(value)
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int | float):
            raise self._invalid(value)
        if not math.isfinite(value):
            raise self._invalid(value)
        return self._number_to_raw(value)

    def _number_to_raw(self, value: float) -> tuple[int | float, str | None]:
        tolerance = abs(self.scale) * 1e-6
        if not self.is_float and not self.fit_low - tolerance <= value <= self.fit_high + tolerance:
            raise ToolError("OUT_OF_RANGE", self._range_text(value))
        if self.is_float:
            # float32 values print rounded (3.4028235e38 is FLT_MAX): allow that rounding
            slack = tolerance + abs(value) * 2**-23
            if not self.low - slack <= value <= self.high + slack:
                raise ToolError("OUT_OF_RANGE", self._range_text(value))
            raw_float = (value - self.offset) / self.scale
            if self.signal.length == 32:
                raw_float = min(max(raw_float, self.raw_min), self.raw_max)
            return raw_float, None
        if self.int_like and _is_integral(value):
            # exact for 64-bit values, which a float division would round
            raw = round(Fraction(int(value) - int(self.offset), int(self.scale)))
        else:
            raw = round((value - self.offset) / self.scale)
        raw = min(max(raw, int(self.raw_min)), int(self.raw_max))
        if raw not in self.choices and not self.low - tolerance <= value <= self.high + tolerance:
            # a labelled value may lie outside the range (255 = "SNA"), as in cantools
            raise ToolError("OUT_OF_RANGE", self._range_text(value))
        sent = self.physical(raw)
        note = None
        if abs(sent - value) > tolerance:
            note = (
                f"{self.name} {format_number(value)} was sent as {format_number(sent)}"
                f" (resolution {format_number(self.scale)})"
            )
        return raw, note

    def _range_text(self, value: object) -> str:
        unit = f" {self.unit}" if self.unit else ""
        got = format_number(value) if isinstance(value, int | float) else repr(value)
        return (
            f"{self.name} must be between {format_number(self.low)} and"
            f" {format_number(self.high)}{unit}, got {got}"
        )

    def _invalid(self, value: object) -> ToolError:
        if self.choices:
            labels = list(dict.fromkeys(self.choices.values()))
            listed = ", ".join(labels[:_MAX_LISTED_LABELS])
            if len(labels) > _MAX_LISTED_LABELS:
                listed += f", ... ({len(labels)} labels)"
            return ToolError(
                "INVALID_VALUE",
                f"{self.name} takes one of {listed} (or a number); got {value!r}",
            )
        unit = f" {self.unit}" if self.unit else ""
        return ToolError(
            "INVALID_VALUE",
            f"{self.name} takes a number between {format_number(self.low)} and"
            f" {format_number(self.high)}{unit}; got {value!r}",
        )

    def _pick_default(self, raw_initial: float | None) -> float:
        """The DBC start value, else 0, else the minimum, else raw 0: the first that fits."""
        if raw_initial is not None and self.raw_min <= raw_initial <= self.raw_max:
            return float(raw_initial) if self.is_float else round(raw_initial)
        for physical in (0, self.minimum, self.low):
            if physical is None:
                continue
            try:
                raw, _ = self._number_to_raw(physical)
            except ToolError:
                continue
            return raw
        return min(max(0, self.raw_min), self.raw_max)
