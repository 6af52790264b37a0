"""The serial bridge: device specs (TOML), the pyserial transport, tools an LLM can call."""

from hwbridge._lazy import lazy_package
from hwbridge.serial.driver import SerialDriver
from hwbridge.serial.spec import DeviceSpec, SpecError, load_spec
from hwbridge.serial.tools import SerialToolDriver
from hwbridge.serial.transport import Framing, LineMonitor, PySerialAdapter, SerialStatus

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
