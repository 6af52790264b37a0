"""Numeric limits on named values, `"Owner.name": (min, max)`: one implementation for the
signal limits of a CAN message and the parameter limits of a serial command."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hwbridge.core.models import ToolError

__all__ = ["check_bounds", "parse_bounds"]

Bounds = dict[str, tuple[float, float]]


def parse_bounds(
    option: str, shape: str, given: Mapping[str, tuple[float, float]] | None
) -> Bounds:
    """`given` checked (ValueError naming `option` and the key `shape` it wants) and as floats."""
    limits = dict(given or {})
    for key, (lo, hi) in limits.items():
        if "." not in key or lo > hi:
            raise ValueError(f"{option}[{key!r}] must be '{shape}': (min, max) with min <= max")
    return {k: (float(v[0]), float(v[1])) for k, v in limits.items()}


def check_bounds(
    limits: Bounds, owner: str, values: Mapping[str, Any], *, labelled: bool = False
) -> None:
    """OUT_OF_RANGE unless every limited value of `owner` is a number within its limits;
    with `labelled`, a `{"value": ...}` mapping (a decoded labelled value) is judged by it."""
    for name, given in values.items():
        bounds = limits.get(f"{owner}.{name}")
        if bounds is None:
            continue
        value = given.get("value") if labelled and isinstance(given, Mapping) else given
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolError(
                "OUT_OF_RANGE",
                f"{owner}.{name} is limited by the send policy and needs a number; got {value!r}.",
            )
        lo, hi = bounds
        if not lo <= value <= hi:
            raise ToolError(
                "OUT_OF_RANGE",
                f"{owner}.{name} must be between {lo:g} and {hi:g} under the send "
                f"policy; got {value:g}.",
            )
