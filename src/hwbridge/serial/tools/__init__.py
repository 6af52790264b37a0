"""The tools of the serial bridge: a spec's typed commands (query devices and streams), the
generic port tools, and the SerialToolDriver that offers them."""

from hwbridge.serial.tools.tool_driver import SerialToolDriver

__all__ = ["SerialToolDriver"]
