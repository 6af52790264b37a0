"""DistinctCounter: about how many different values were seen, in a few kilobytes.

The bus monitor stops tracking unknown ids past a bound, but must still say how many it
dropped; an exact set would grow with every id an attacker invents. A HyperLogLog sketch
answers within a few percent (exact for small counts) in fixed memory.
"""

from __future__ import annotations

import math

__all__ = ["DistinctCounter"]

_MASK64 = (1 << 64) - 1


def _mix(value: int) -> int:
    """splitmix64's finalizer: consecutive ids become unrelated 64-bit hashes."""
    z = (value + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class DistinctCounter:
    """A HyperLogLog sketch of non-negative ints (2**bits registers, ~1.04/sqrt(2**bits))."""

    __slots__ = ("_bits", "_registers")

    def __init__(self, bits: int = 12) -> None:
        if not 4 <= bits <= 16:
            raise ValueError("bits must be between 4 and 16")
        self._bits = bits
        self._registers = bytearray(1 << bits)

    def add(self, value: int) -> None:
        h = _mix(value)
        index = h >> (64 - self._bits)
        rest = (h << self._bits) & _MASK64
        rank = 64 - rest.bit_length() + 1 if rest else 64 - self._bits + 1
        self._registers[index] = max(self._registers[index], rank)

    def estimate(self) -> int:
        """The estimated number of distinct values added (0 when none)."""
        registers = self._registers
        m = len(registers)
        zeros = registers.count(0)
        if zeros == m:
            return 0
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / sum(2.0**-r for r in registers)
        if raw <= 2.5 * m and zeros:
            raw = m * math.log(m / zeros)  # linear counting: near-exact for small counts
        return max(1, round(raw))

    def clear(self) -> None:
        self._registers = bytearray(len(self._registers))
