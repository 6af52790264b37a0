"""The serial bridge: device specs (TOML), the pyserial transport, tools an LLM can call."""

from hwbridge.serial.driver import SerialDriver
from hwbridge.serial.spec import DeviceSpec, SpecError, load_spec
from hwbridge.serial.tools import SerialToolDriver
from hwbridge.serial.transport import Framing, LineMonitor, PySerialAdapter, SerialStatus

__all__ = [
    "DeviceSpec",
    "Framing",
    "LineMonitor",
    "PySerialAdapter",
    "SerialDriver",
    "SerialStatus",
    "SerialToolDriver",
    "SpecError",
    "load_spec",
]
