"""The serial bridge: device specs (TOML), the pyserial transport, tools an LLM can call."""

from hwbridge.serial.transport import Framing, PySerialAdapter, SerialStatus

__all__ = ["Framing", "PySerialAdapter", "SerialStatus"]
