"""A field found in a payload: its bits, order, kind and sign, and how to read its value.

`analyse` finds them, `floats` and `multiplex` refine them, the survey reports them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwbridge.discovery.bits import ByteOrder, float_values, to_signed, values
from hwbridge.discovery.report.models import Kind

__all__ = ["Field", "Kind"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Field:
    """A field found in a payload (positions least significant first)."""

    bits: tuple[int, ...]
    byte_order: ByteOrder
    kind: Kind
    signed: bool = False
    detail: str | None = None  # how a checksum is computed, a counter's step
    algorithm: str | None = None  # a checksum's family
    wider: int = 0  # constant bits right above it that may belong to it
    distinct: int = 0  # distinct values seen
    is_float: bool = False  # an IEEE 754 float (floats.py): `bits` are all 32 or 64 of it
    is_multiplexer: bool = False  # its value selects the layout of the rest (multiplex.py)
    multiplexer_ids: tuple[int, ...] | None = None  # present only when the mux has these

    @property
    def length(self) -> int:
        return len(self.bits)

    @property
    def start_bit(self) -> int:
        """As cantools writes it: the LSB (little endian) or the MSB (big endian)."""
        return self.bits[0] if self.byte_order == "little_endian" else self.bits[-1]

    def raw(self, bits: npt.NDArray[np.uint8]) -> I64:
        """The field's raw value in every row of a bit matrix (two's complement if signed;
        a float's value as a float)."""
        if self.is_float:
            return float_values(bits, self.bits)  # type: ignore[return-value]
        raw = values(bits, self.bits)
        return to_signed(raw, self.length) if self.signed else raw
