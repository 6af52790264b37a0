"""ObdDriver: vehicle diagnostics (OBD-II and read-only UDS) as an MCS hybrid driver.

    with ObdDriver.from_can(bus="socketcand://127.0.0.1:29536/vcan0") as driver:
        driver.process_llm_response('{"tool": "obd_read_dtcs", "arguments": {"kind": "stored"}}')

    with ObdDriver.from_elm327("/dev/ttyUSB0") as driver:
        ...

The same tools over either adapter (spec section 4): ISO-TP on a CAN bus, or an ELM327 on a
serial port. Read-only unless the send policy allows a service by name
(`SendPolicy(allow_services=["obd_clear_dtcs"])`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.__about__ import __version__
from hwbridge.can.transport.adapter import BusSpec, CanAdapter, PythonCanAdapter
from hwbridge.core.health import Health, RawSpec
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError
from hwbridge.core.prompts import PromptStrategy, packs_dir
from hwbridge.obd.tools.texts import obd_texts
from hwbridge.obd.tools.tool_driver import ObdToolDriver
from hwbridge.obd.transport.base import Addressing, ObdAdapter
from hwbridge.obd.transport.isotp_adapter import IsoTpObdAdapter
from hwbridge.policy import SendPolicy

if TYPE_CHECKING:
    from hwbridge.can.driver import CanDriver
    from hwbridge.obd.transport.serial_link import PortSpec

__all__ = ["ObdDriver"]

_DATA_FILES = ("obd_dtc_descriptions.toml", "uds_identifiers.toml")
_CLEAR = "obd_clear_dtcs"


class ObdDriver(HybridDriver, Closing):
    """An LLM-ready diagnostic driver over an ObdAdapter, gated by a SendPolicy."""

    meta = DriverMeta(
        id="e7c1a9d4-3b62-4f08-9d5e-6a2b8c4f1e37",
        name="hwbridge OBD",
        version=__version__,
        bindings=[
            DriverBinding(
                capability="vehicle-diagnostics", adapter="can-isotp", spec_format="SAE J1979"
            ),
            DriverBinding(
                capability="vehicle-diagnostics", adapter="elm327", spec_format="SAE J1979"
            ),
        ],
        capabilities=["healthcheck", "raw_spec"],
    )

    def __init__(
        self,
        adapter: ObdAdapter,
        policy: SendPolicy | None = None,
        *,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.policy = policy or SendPolicy()
        self.adapter = adapter
        try:
            self.tool_driver = ObdToolDriver(adapter, self.policy)
        except BaseException:
            adapter.close()
            raise

    @classmethod
    def from_can(
        cls,
        bus: BusSpec | CanAdapter | CanDriver = None,
        policy: SendPolicy | None = None,
        *,
        addressing: Addressing = "auto",
        timeout_s: float = 1.0,
        prompt_strategy: str | Path | PromptStrategy = "json",
    ) -> ObdDriver:
        """OBD-II over ISO 15765-4 on a CAN bus.

        `bus` is anything `CanDriver.from_dbc` takes (a bus string such as
        `socketcand://HOST:PORT/CH` or `socketcan:can0`, python-can keyword arguments, an open
        `can.BusABC`), or a CanAdapter or CanDriver to share: the diagnostic requests then
        go over the same connection, and neither driver loses the other's frames.
        `addressing` is auto (11-bit ids, else 29-bit), 11bit or 29bit.
        """
        from hwbridge.can.driver import CanDriver

        if isinstance(bus, CanDriver):
            adapters = [n.adapter for n in bus.networks.values() if n.adapter is not None]
            if not adapters:
                raise ValueError("that CanDriver has no bus attached to share")
            bus = adapters[0]
        own = not isinstance(bus, CanAdapter)
        can_adapter = bus if isinstance(bus, CanAdapter) else PythonCanAdapter(bus)
        try:
            adapter = IsoTpObdAdapter(
                can_adapter, addressing=addressing, timeout_s=timeout_s, own_adapter=own
            )
        except BaseException:
            if own:
                can_adapter.close()
            raise
        return cls(adapter, policy, prompt_strategy=prompt_strategy)

    @classmethod
    def from_elm327(
        cls,
        port: PortSpec,
        policy: SendPolicy | None = None,
        *,
        baudrate: int = 38400,
        protocol: str = "0",
        timeout_s: float = 5.0,
        prompt_strategy: str | Path | PromptStrategy = "json",
    ) -> ObdDriver:
        """OBD-II through an ELM327 (or compatible) interface on a serial port.

        `port` is a device path (`/dev/ttyUSB0`, `COM3`, a pty), a pyserial URL
        (`socket://HOST:PORT` for Wi-Fi adapters, `rfc2217://...`) or an open pyserial port.
        `protocol` is the ELM327 protocol: 0 searches automatically, 6-9 are the CAN ones.
        """
        from hwbridge.obd.transport.elm327_adapter import Elm327Adapter

        adapter = Elm327Adapter.open(
            port, baudrate=baudrate, protocol=protocol, timeout_s=timeout_s
        )
        return cls(adapter, policy, prompt_strategy=prompt_strategy)

    # -- MCSToolDriver (delegated) ---------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        tools = self.tool_driver.list_tools()
        if not self.policy.allows_service(_CLEAR):
            tools = [t for t in tools if t.name != _CLEAR]
        return tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return self.tool_driver.execute_tool(tool_name, arguments)

    def refused_tools(self) -> Mapping[str, ToolError]:
        """obd_clear_dtcs under a policy that does not allow it: a call fails with
        SEND_NOT_ALLOWED (it is not offered to the LLM, and never passes through)."""
        if self.policy.allows_service(_CLEAR):
            return {}
        allowed = ", ".join(self.policy.describe()["allow_services"]) or "none (read-only)"
        return {
            _CLEAR: ToolError(
                "SEND_NOT_ALLOWED",
                "Clearing trouble codes changes the vehicle's state and is not allowed by the "
                f"send policy (services allowed: {allowed}); nothing was sent.",
            )
        }

    # -- health and source (spec section 14) -----------------------------------------------

    def healthcheck(self) -> Health:
        """The adapter's connection and what it found (ECUs, addressing, protocol); sends
        nothing."""
        details = self.adapter.describe()
        problems = []
        if not details.get("connected"):
            status = "down"
            problems.append(f"not connected ({details.get('last_error') or 'closed'})")
        elif details.get("ecus"):
            status = "ok"
        else:
            status = "degraded"
            problems.append("no ECU has answered yet")
        return Health(status=status, details=details, problems=problems)

    def raw_spec(self) -> dict[str, RawSpec]:
        """The data files the tools decode with (trouble code descriptions, UDS names)."""
        out = {}
        for name in _DATA_FILES:
            path = packs_dir() / name
            data = path.read_bytes()
            out[name.removesuffix(".toml")] = RawSpec(
                format="TOML",
                source=str(path),
                text=data.decode("utf-8"),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        return out

    # -- prompt ----------------------------------------------------------------------------

    def driver_guidance(self, model_name: str | None = None) -> str:
        guidance = obd_texts().guidance
        allowed = self.policy.describe()["allow_services"]
        if not allowed:
            return guidance.read_only.strip()
        return guidance.can_clear.format(allowed=", ".join(allowed)).strip()

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Release the adapter (and the bus or port it opened); idempotent."""
        self.adapter.close()
