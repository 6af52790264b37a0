"""The diagnostic tools: OBD-II modes and read-only UDS over any ObdAdapter."""

from hwbridge._lazy import lazy_package
from hwbridge.obd.tools.obd_service import ObdService
from hwbridge.obd.tools.tool_driver import ObdToolDriver
from hwbridge.obd.tools.uds_service import UdsService

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
