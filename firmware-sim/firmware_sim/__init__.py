"""Simulated ECUs and devices, reachable over real transports (python-can, TCP, ptys).

`VirtualVehicle` runs a DBC-driven vehicle with an OBD-II responder on a python-can virtual
channel; `python -m firmware_sim` serves it over socketcand, slcan and ELM327.
`firmware_sim.j1939.VirtualTruck` runs a J1939 truck instead (`python -m firmware_sim
--j1939`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firmware_sim.vehicle import FAULTS, VirtualVehicle

__all__ = ["FAULTS", "VirtualVehicle"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `python -m firmware_sim` must stay quick to start, and
    # python-can pulls in heavy optional readers when it is imported.
    if name in __all__:
        value = getattr(importlib.import_module("firmware_sim.vehicle"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'firmware_sim' has no attribute {name!r}")
