"""The faults a simulated car can be given (`VirtualVehicle.inject_fault`, `--fault`, a
scenario phase's `fault`): a module of its own so that the scenario's validation can name
them without importing python-can."""

from __future__ import annotations

from typing import Final

__all__ = ["FAULTS", "TARGETED_FAULTS"]

FAULTS: Final = ("overheat", "silence", "out_of_range", "error_frames", "obd_stall")
TARGETED_FAULTS: Final = {"silence": "message", "out_of_range": "signal"}
"""Faults that need a target, and the keyword that names it."""
