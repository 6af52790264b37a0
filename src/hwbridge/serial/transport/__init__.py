"""How bytes move: the pyserial adapter, framing, and the background line reader that
streaming devices need."""

from hwbridge._lazy import lazy_package
from hwbridge.serial.transport.adapter import PySerialAdapter, SerialStatus
from hwbridge.serial.transport.framing import Framing
from hwbridge.serial.transport.monitor import LineMonitor, LineRecord

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
