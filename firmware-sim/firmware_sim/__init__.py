"""Simulated ECUs and devices, reachable over real transports (python-can, TCP, ptys).

`VirtualVehicle` runs a DBC-driven vehicle with an OBD-II responder on a python-can virtual
channel; `python -m firmware_sim` serves it over socketcand, slcan and ELM327.
"""

from firmware_sim.vehicle import FAULTS, VirtualVehicle

__all__ = ["FAULTS", "VirtualVehicle"]
