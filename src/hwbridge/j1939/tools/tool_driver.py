"""J1939ToolDriver: the J1939 tools over one link (spec section 4, step 3).

It owns the tool definitions and maps each call to the service; it knows nothing about
LLMs. The reading tools are marked `read_only`; `j1939_clear_dtcs` is not, and what it sends
is judged by the send policy.
"""

from __future__ import annotations

from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.contract import MCSToolDriver
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, ToolParameter
from hwbridge.j1939.database.catalog import J1939Database
from hwbridge.j1939.tools.common import J1939Settings
from hwbridge.j1939.tools.service import J1939Service
from hwbridge.j1939.tools.texts import J1939Texts, j1939_texts
from hwbridge.j1939.transport.link import J1939Link
from hwbridge.policy import SendPolicy

__all__ = ["J1939ToolDriver"]

_ADDRESS = {"type": "integer", "minimum": 0, "maximum": 253}
_READ_ONLY = frozenset({"j1939_dm1", "j1939_dm2", "j1939_request", "j1939_nodes"})


class J1939ToolDriver(MCSToolDriver):
    """The J1939 tools on `link`, gated by `policy`, decoding with `db`."""

    meta = DriverMeta(
        id="5d2f8a61-9c3e-4b7a-8e14-2a6c0f9b3d75",
        name="hwbridge J1939 tools",
        version=__version__,
        bindings=[
            DriverBinding(
                capability="vehicle-diagnostics", adapter="j1939", spec_format="SAE J1939"
            )
        ],
    )

    def __init__(
        self,
        link: J1939Link,
        policy: SendPolicy,
        db: J1939Database | None = None,
        *,
        settings: J1939Settings | None = None,
        texts: J1939Texts | None = None,
    ) -> None:
        self.link = link
        self.policy = policy
        self.db = db or J1939Database()
        self.texts = texts or j1939_texts()
        self.service = J1939Service(link, policy, self.db, settings)
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
        pgn = {"type": "integer", "minimum": 0, "maximum": 0x3FFFF}
        timeout = {"type": "integer", "minimum": 100, "maximum": 20000}
        which = {"type": "string", "enum": ["active", "previously_active"]}
        return [
            self._tool("j1939_dm1", p("j1939_dm1", "address", _ADDRESS)),
            self._tool("j1939_dm2", p("j1939_dm2", "address", _ADDRESS)),
            self._tool(
                "j1939_request",
                p("j1939_request", "pgn", pgn, True),
                p("j1939_request", "address", _ADDRESS),
                p("j1939_request", "timeout_ms", timeout),
            ),
            self._tool("j1939_nodes"),
            self._tool(
                "j1939_clear_dtcs",
                p("j1939_clear_dtcs", "which", which, True),
                p("j1939_clear_dtcs", "address", _ADDRESS),
            ),
        ]

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        a = arguments
        if tool_name == "j1939_dm1":
            return self.service.dm1(a.get("address"))
        if tool_name == "j1939_dm2":
            return self.service.dm2(a.get("address"))
        if tool_name == "j1939_request":
            return self.service.request(a["pgn"], a.get("address"), a.get("timeout_ms"))
        if tool_name == "j1939_nodes":
            return self.service.nodes()
        if tool_name == "j1939_clear_dtcs":
            return self.service.clear(a["which"], a.get("address"))
        raise ToolError("UNKNOWN_TOOL", f"{tool_name} is not a tool of this driver.")
