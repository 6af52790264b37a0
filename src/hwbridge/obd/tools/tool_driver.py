"""ObdToolDriver: the diagnostic tools over one ObdAdapter (spec section 4, step 3).

It owns the tool definitions and maps each call to the OBD or UDS service; it knows nothing
about LLMs. Read tools are marked `read_only` (`uds_scan_dids` too: it only reads, within the
policy's frame budget); `obd_clear_dtcs`, `uds_request` and the tools that change an ECU
(`uds_session`, `uds_unlock`, `uds_write_did`, `uds_routine`, `uds_reset`) are not, and what
they send is judged by the send policy on its exact bytes.
"""

from __future__ import annotations

from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.obd.database.did_definitions import DidDefinitions
from hwbridge.obd.database.dtcs import DTC_PATTERN
from hwbridge.obd.database.odx import OdxDescription
from hwbridge.obd.tools.did_scan import DidScanner
from hwbridge.obd.tools.did_values import DidValueEncoder, parse_did_range
from hwbridge.obd.tools.ecus import resolve_ecu
from hwbridge.obd.tools.gated import GatedRequests
from hwbridge.obd.tools.obd_service import ObdService
from hwbridge.obd.tools.odx_services import OdxServices
from hwbridge.obd.tools.security_access import SecurityAccessFlow, SecurityKey
from hwbridge.obd.tools.session_keeper import SessionKeeper
from hwbridge.obd.tools.texts import ObdTexts, obd_texts
from hwbridge.obd.tools.uds_control import RESET_KINDS, ROUTINE_ACTIONS, UdsControl
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
        "uds_scan_dids",
    }
)  # fmt: skip
CHANGING_TOOLS = {
    "uds_session": "uds_0x10", "uds_unlock": "uds_0x27", "uds_write_did": "uds_0x2E",
    "uds_routine": "uds_0x31", "uds_reset": "uds_0x11",
}  # fmt: skip
"""The tools that change an ECU, and the policy name of the service each sends (a tool is
offered only when the policy allows it; what it sends is judged by its bytes all the same)."""


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
        self,
        adapter: ObdAdapter,
        policy: SendPolicy,
        *,
        texts: ObdTexts | None = None,
        security_key: SecurityKey | None = None,
        tester_present_s: float = 2.0,
        did_values: DidValueEncoder | None = None,
        dids: DidDefinitions | None = None,
        odx: OdxDescription | None = None,
        odx_variant: str | None = None,
    ) -> None:
        self.adapter = adapter
        self.policy = policy
        self.texts = texts or obd_texts()
        self.dids = dids
        self.obd = ObdService(adapter, policy)
        self.uds = UdsService(adapter, policy, dids=dids)
        self.keeper = SessionKeeper(adapter, period_s=tester_present_s)
        gate = GatedRequests(adapter, policy)
        self.control = UdsControl(gate, self.keeper, did_values, dids)
        self.security = SecurityAccessFlow(gate, self.keeper, security_key)
        self.scanner = DidScanner(adapter, policy)
        own = tuple(self._build())
        self.odx: OdxServices | None = None
        if odx is not None:
            taken = frozenset(t.name for t in own)
            self.odx = OdxServices(odx, gate, self.keeper, self.texts.odx, odx_variant, taken)
            own += tuple(self.odx.tools())
        self._tools = own

    @property
    def has_security_key(self) -> bool:
        return self.security.key_function is not None

    def _tool(self, name: str, *params: ToolParameter) -> Tool:
        description = self.texts.tool(name)
        if self.dids is not None and name in ("uds_read_did", "uds_write_did"):
            defined = self.dids.describe()
            texts = self.texts.dids
            added = texts.read if name == "uds_read_did" else texts.write
            description += " " + added.format(dids=defined)
        return Tool(
            name=name,
            description=description,
            parameters=list(params),
            read_only=name in _READ_ONLY,
        )

    def changing_tools(self) -> dict[str, str]:
        """Every tool that changes an ECU, with the policy name of the service it sends."""
        return {**CHANGING_TOOLS, **(self.odx.changing() if self.odx is not None else {})}

    def _build(self) -> list[Tool]:
        p = self.texts.parameter
        kind = {"type": "string", "enum": ["stored", "pending", "permanent"]}
        dtc = {"type": "string", "pattern": DTC_PATTERN}
        did = {"type": "string", "minLength": 1, "maxLength": 64}
        mask = {"type": "integer", "minimum": 0, "maximum": 255}
        request = {"type": "string", "minLength": 2, "maxLength": 3 * 4095}
        session = {"type": "string", "minLength": 1, "maxLength": 16}
        level = {"type": "integer", "minimum": 1, "maximum": 125}
        value: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 3 * 4093}
        value_param = p("uds_write_did", "value", value, True)
        if self.dids is not None:
            value = {"anyOf": [value, {"type": "number"}]}
            value_param = ToolParameter(
                name="value", description=self.texts.dids.value, schema=value, required=True
            )
        routine = {"type": "string", "minLength": 1, "maxLength": 6}
        action = {"type": "string", "enum": list(ROUTINE_ACTIONS)}
        data = {"type": "string", "maxLength": 3 * 4091}
        kind_reset = {"type": "string", "enum": list(RESET_KINDS)}
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
            self._tool(
                "uds_scan_dids",
                p("uds_scan_dids", "ecu", _ECU, True),
                p("uds_scan_dids", "start", did, True),
                p("uds_scan_dids", "end", did, True),
            ),
            self._tool(
                "uds_session",
                p("uds_session", "ecu", _ECU, True),
                p("uds_session", "session", session, True),
            ),
            self._tool(
                "uds_unlock",
                p("uds_unlock", "ecu", _ECU, True),
                p("uds_unlock", "level", level, True),
            ),
            self._tool(
                "uds_write_did",
                p("uds_write_did", "ecu", _ECU, True),
                p("uds_write_did", "did", did, True),
                value_param,
            ),
            self._tool(
                "uds_routine",
                p("uds_routine", "ecu", _ECU, True),
                p("uds_routine", "routine", routine, True),
                p("uds_routine", "action", action, True),
                p("uds_routine", "data", data),
            ),
            self._tool(
                "uds_reset",
                p("uds_reset", "ecu", _ECU, True),
                p("uds_reset", "kind", kind_reset, True),
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
        if tool_name == "uds_scan_dids":
            dids = parse_did_range(a["start"], a["end"])
            return self.scanner.scan(self._ecu(a["ecu"]), dids)
        if tool_name == "uds_session":
            return self.control.session(self._ecu(a["ecu"]), a["session"])
        if tool_name == "uds_unlock":
            return self.security.unlock(self._ecu(a["ecu"]), a["level"])
        if tool_name == "uds_write_did":
            return self.control.write_did(self._ecu(a["ecu"]), a["did"], a["value"])
        if tool_name == "uds_routine":
            ecu = self._ecu(a["ecu"])
            return self.control.routine(ecu, a["routine"], a["action"], a.get("data"))
        if tool_name == "uds_reset":
            return self.control.reset(self._ecu(a["ecu"]), a["kind"])
        if self.odx is not None and tool_name in self.odx.services:
            return self.odx.call(tool_name, a, self._ecu)
        raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver.")

    def sessions(self) -> dict[str, dict[str, Any]]:
        """The sessions hwbridge opened or saw end, per ECU."""
        return self.keeper.sessions()

    def close(self) -> None:
        """Stop keeping sessions and return their ECUs to the default session."""
        self.keeper.close()
