"""How frames move: python-can adapters and bus strings, the BusMonitor that the read tools
look at, and the replay of recorded captures as a live bus."""

from hwbridge._lazy import lazy_package
from hwbridge.can.transport.adapter import AdapterStatus, BusSpec, CanAdapter, PythonCanAdapter
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord
from hwbridge.can.transport.replay import ReplayAdapter

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
