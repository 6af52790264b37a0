"""`RawEncoder`: a plain message's payload from raw values, through cantools' own codec pieces.

`Message.encode` converts every signal's physical value on every call and walks the codec
tree; a plan that keeps its signals' raw values (converted once, when a value changes, by the
signal's own cantools conversion) hands them to cantools' `encode_data` with the message's
precomputed formats instead. The bits are cantools' either way (the simulator is a witness:
it never packs bits itself), and the payload is the very one `Message.encode` makes.
"""

from __future__ import annotations

from typing import Any

from cantools.database.utils import encode_data

__all__ = ["RawEncoder"]

RawValue = int | float


class RawEncoder:
    """Encodes one plain (not multiplexed) message from raw values."""

    __slots__ = ("_conversions", "_formats", "_length", "_signals")

    def __init__(self, message: Any) -> None:
        codec = message._codecs
        self._signals = codec["signals"]
        self._formats = codec["formats"]
        self._length = int(message.length)
        self._conversions = {s.name: s.conversion for s in self._signals}

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
        `Message.encode` would for a label the signal does not have)."""
        conversion = self._conversions[name]
        if isinstance(value, str):
            return int(conversion.choice_to_number(value))
        return conversion.numeric_scaled_to_raw(value)  # type: ignore[no-any-return]

    def raws(self, values: dict[str, int | float | str]) -> dict[str, RawValue]:
        """Every signal's raw value."""
        return {name: self.raw(name, value) for name, value in values.items()}

    def encode(self, raws: dict[str, RawValue]) -> bytes:
        """The payload: what `Message.encode(values, padding=False, strict=False)` returns."""
        return encode_data(raws, self._signals, self._formats, False).to_bytes(self._length, "big")
