"""`RawEncoder`: a plain message's payload from raw values, through cantools' own codec pieces.

`Message.encode` converts every signal's physical value on every call and walks the codec
tree; a plan that keeps its signals' raw values (converted once, when a value changes, by the
signal's own cantools conversion, or for walks by a `WalkBank` doing the same arithmetic for
many at once) hands them straight to the message's compiled formats, as cantools'
`encode_data` does once it has the raw values (`Message.encode(..., scaling=False)`). The
bits are cantools' either way (the simulator is a witness: it never packs bits itself), and
the payload is the very one `Message.encode` makes (tests/sim/test_frames_pinned.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RawEncoder"]

RawValue = int | float


class RawEncoder:
    """Encodes one plain (not multiplexed) message from raw values."""

    __slots__ = ("_big", "_conversions", "_empty", "_length", "_little")

    def __init__(self, message: Any) -> None:
        codec = message._codecs
        formats = codec["formats"]
        orders = {s.byte_order for s in codec["signals"]}
        # a format without a signal (cantools makes both) packs only zeros: not packed
        self._big = formats.big_endian if "big_endian" in orders else None
        self._little = formats.little_endian if "little_endian" in orders else None
        self._empty = not codec["signals"]
        self._length = int(message.length)
        self._conversions = {s.name: s.conversion for s in codec["signals"]}

    @staticmethod
    def handles(message: Any) -> bool:
        """Whether a message is plain: no multiplexer, not a container."""
        codec = getattr(message, "_codecs", None)
        return (
            codec is not None
            and not codec["multiplexers"]
            and not getattr(message, "is_container", False)
        )

    def raw(self, name: str, value: int | float | str) -> RawValue:
        """The raw value cantools encodes for a signal's physical value or label (raises as
        `Message.encode` would for a label the signal does not have): an int, but for a
        float signal, as `encode_data` takes it unscaled."""
        conversion = self._conversions[name]
        if isinstance(value, str):
            return int(conversion.choice_to_number(value))
        return conversion.numeric_scaled_to_raw(value)  # type: ignore[no-any-return]

    def numeric(self, name: str) -> Callable[[float], RawValue]:
        """`raw` of a number for one signal: its cantools conversion's own method."""
        found: Callable[[float], RawValue] = self._conversions[name].numeric_scaled_to_raw
        return found

    def raws(self, values: dict[str, int | float | str]) -> dict[str, RawValue]:
        """Every signal's raw value."""
        return {name: self.raw(name, value) for name, value in values.items()}

    def encode(self, raws: dict[str, RawValue]) -> bytes:
        """The payload: what `Message.encode(values, padding=False, strict=False)` returns."""
        if self._empty:
            return bytes(self._length)
        big, little = self._big, self._little
        packed = int.from_bytes(big.pack(raws), "big") if big is not None else 0
        if little is not None:
            packed |= int.from_bytes(little.pack(raws), "little")
        return packed.to_bytes(self._length, "big")
