"""The tools of the serial bridge: a spec's typed commands (query devices and streams), the
generic port tools, and the SerialToolDriver that offers them."""

from hwbridge._lazy import lazy_package
from hwbridge.serial.tools.tool_driver import SerialToolDriver

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
