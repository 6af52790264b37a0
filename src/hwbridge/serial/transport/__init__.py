"""How bytes move: the pyserial adapter, framing, and the background line reader that
streaming devices need."""

from hwbridge.serial.transport.adapter import PySerialAdapter, SerialStatus
from hwbridge.serial.transport.framing import Framing
from hwbridge.serial.transport.monitor import LineMonitor, LineRecord

__all__ = ["Framing", "LineMonitor", "LineRecord", "PySerialAdapter", "SerialStatus"]
