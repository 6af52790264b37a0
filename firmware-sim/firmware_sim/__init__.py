"""Simulated ECUs and devices, reachable over real transports (python-can, TCP, ptys).

`VirtualVehicle` runs a DBC-driven vehicle with an OBD-II responder on a python-can virtual
channel; `python -m firmware_sim` serves it over socketcand, slcan and ELM327.
`firmware_sim.j1939.VirtualTruck` runs a J1939 truck instead (`python -m firmware_sim
--j1939`). `demo_security_key` is the engine ECU's SecurityAccess algorithm (a demo one,
public so that testers can unlock it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firmware_sim.uds_security import demo_security_key
    from firmware_sim.vehicle import FAULTS, VirtualVehicle

__all__ = ["FAULTS", "VirtualVehicle", "demo_security_key"]
_HOMES = {
    "FAULTS": "firmware_sim.vehicle",
    "VirtualVehicle": "firmware_sim.vehicle",
    "demo_security_key": "firmware_sim.uds_security",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: `python -m firmware_sim` must stay quick to start, and
    # python-can pulls in heavy optional readers when it is imported.
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'firmware_sim' has no attribute {name!r}")
