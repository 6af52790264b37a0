"""The diagnostic tools: OBD-II modes and read-only UDS over any ObdAdapter."""

from hwbridge.obd.tools.obd_service import ObdService
from hwbridge.obd.tools.tool_driver import ObdToolDriver
from hwbridge.obd.tools.uds_service import UdsService

__all__ = ["ObdService", "ObdToolDriver", "UdsService"]
