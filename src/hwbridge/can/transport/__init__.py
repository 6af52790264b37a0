"""How frames move: python-can adapters and bus strings, the BusMonitor that the read tools
look at, and the replay of recorded captures as a live bus."""

from hwbridge.can.transport.adapter import AdapterStatus, BusSpec, CanAdapter, PythonCanAdapter
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord
from hwbridge.can.transport.replay import ReplayAdapter

__all__ = [
    "AdapterStatus",
    "BusMonitor",
    "BusSpec",
    "CanAdapter",
    "FrameRecord",
    "PythonCanAdapter",
    "ReplayAdapter",
]
