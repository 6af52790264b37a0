"""The simulated J1939 truck (`python -m firmware_sim --j1939`), one job per module:

- `ids`: 29-bit identifiers and the PGNs of the network layer;
- `scheduler`: the one thread that sends everything timed;
- `transport`: J1939-21's transport protocol as a sender (BAM, RTS/CTS originator);
- `diagnostics`: the truck's faults, DTCs, lamps and the DM1/DM2 payloads (J1939-73);
- `controllers`: who the engine, transmission and brake controllers are (NAME, ids);
- `node`: one controller on the network (address claim, requests, acknowledgements, DM1);
- `model`: the truck's physics, on the car's drive cycle;
- `periodic`: the database's parameter groups filled from the model by SPN;
- `truck`: `VirtualTruck`, all of it on a python-can virtual channel.

Written from SAE J1939-21/-71/-73/-81 for the simulator alone: nothing here imports
`hwbridge.j1939`, so the client and the simulator witness each other.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from firmware_sim.j1939.diagnostics import TRUCK_FAULTS
    from firmware_sim.j1939.truck import VirtualTruck

__all__ = ["TRUCK_FAULTS", "VirtualTruck"]

_HOMES = {
    "TRUCK_FAULTS": "firmware_sim.j1939.diagnostics",
    "VirtualTruck": "firmware_sim.j1939.truck",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: the CLI lists the faults without loading python-can.
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'firmware_sim.j1939' has no attribute {name!r}")
