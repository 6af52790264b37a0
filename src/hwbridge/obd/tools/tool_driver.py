"""ObdToolDriver: the diagnostic tools over one ObdAdapter (spec section 4, step 3).

It owns the tool definitions and maps each call to the OBD or UDS service; it knows nothing
about LLMs. Read tools are marked `read_only`; `obd_clear_dtcs` and `uds_request` are not,
and what they send is judged by the send policy.
"""

from __future__ import annotations

from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.obd.database.dtcs import DTC_PATTERN
from hwbridge.obd.tools.ecus import resolve_ecu
from hwbridge.obd.tools.obd_service import ObdService
from hwbridge.obd.tools.texts import ObdTexts, obd_texts
from hwbridge.obd.tools.uds_service import UdsService
from hwbridge.obd.transport.base import Ecu, ObdAdapter
from hwbridge.policy import SendPolicy

__all__ = ["ObdToolDriver"]

_ECU = {"type": "string", "minLength": 1, "maxLength": 40}
_PIDS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 40},
    "minItems": 1,
    "maxItems": 24,
}
_READ_ONLY = frozenset(
    {
        "obd_supported_pids", "obd_read", "obd_monitor_status", "obd_read_dtcs",
        "obd_freeze_frame", "obd_vehicle_info", "uds_read_did", "uds_read_dtcs",
    }
)  # fmt: skip


class ObdToolDriver(MCSToolDriver):
    """The OBD-II and UDS tools on `adapter`, gated by `policy`."""

    meta = DriverMeta(
        id="8b4e2c71-5a3f-4d9e-b1c6-0f7a2e9d4c58",
        name="hwbridge OBD tools",
        version=__version__,
        bindings=[
            DriverBinding(capability="vehicle-diagnostics", adapter="obd", spec_format="SAE J1979")
        ],
    )

    def __init__(
        self, adapter: ObdAdapter, policy: SendPolicy, *, texts: ObdTexts | None = None
    ) -> None:
        self.adapter = adapter
        self.policy = policy
        self.texts = texts or obd_texts()
        self.obd = ObdService(adapter, policy)
        self.uds = UdsService(adapter, policy)
        self._tools = tuple(self._build())

    def _tool(self, name: str, *params: ToolParameter) -> Tool:
        return Tool(
            name=name,
            description=self.texts.tool(name),
            parameters=list(params),
            read_only=name in _READ_ONLY,
        )

    def _build(self) -> list[Tool]:
        p = self.texts.parameter
        kind = {"type": "string", "enum": ["stored", "pending", "permanent"]}
        dtc = {"type": "string", "pattern": DTC_PATTERN}
        did = {"type": "string", "minLength": 1, "maxLength": 64}
        mask = {"type": "integer", "minimum": 0, "maximum": 255}
        request = {"type": "string", "minLength": 2, "maxLength": 3 * 4095}
        return [
            self._tool("obd_supported_pids"),
            self._tool("obd_read", p("obd_read", "pids", _PIDS, True)),
            self._tool("obd_monitor_status"),
            self._tool("obd_read_dtcs", p("obd_read_dtcs", "kind", kind, True)),
            self._tool("obd_freeze_frame", p("obd_freeze_frame", "dtc", dtc)),
            self._tool("obd_vehicle_info"),
            self._tool("obd_clear_dtcs"),
            self._tool(
                "uds_read_did",
                p("uds_read_did", "ecu", _ECU, True),
                p("uds_read_did", "did", did, True),
            ),
            self._tool(
                "uds_read_dtcs",
                p("uds_read_dtcs", "ecu", _ECU, True),
                p("uds_read_dtcs", "status_mask", mask),
            ),
            self._tool(
                "uds_request",
                p("uds_request", "ecu", _ECU, True),
                p("uds_request", "request", request, True),
            ),
        ]

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def _ecu(self, text: str) -> Ecu:
        known = self.adapter.ecus()
        if not known:
            self.adapter.request(b"\x01\x00")  # find who answers (and the addressing) first
            known = self.adapter.ecus()
        return resolve_ecu(text, known)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        a = arguments
        if tool_name == "obd_supported_pids":
            return self.obd.supported_pids()
        if tool_name == "obd_read":
            return self.obd.read(a["pids"])
        if tool_name == "obd_monitor_status":
            return self.obd.monitor_status()
        if tool_name == "obd_read_dtcs":
            return self.obd.read_dtcs(a["kind"])
        if tool_name == "obd_freeze_frame":
            return self.obd.freeze_frame(a.get("dtc"))
        if tool_name == "obd_vehicle_info":
            return self.obd.vehicle_info()
        if tool_name == "obd_clear_dtcs":
            return self.obd.clear_dtcs()
        if tool_name == "uds_read_did":
            return self.uds.read_did(self._ecu(a["ecu"]), a["did"])
        if tool_name == "uds_read_dtcs":
            return self.uds.read_dtcs(self._ecu(a["ecu"]), int(a.get("status_mask", 0xFF)))
        if tool_name == "uds_request":
            return self.uds.request(self._ecu(a["ecu"]), a["request"])
        raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver.")
