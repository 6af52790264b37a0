"""ObdDriver: vehicle diagnostics (OBD-II and read-only UDS) as an MCS hybrid driver.

    with ObdDriver.from_can(bus="socketcand://127.0.0.1:29536/vcan0") as driver:
        driver.process_llm_response('{"tool": "obd_read_dtcs", "arguments": {"kind": "stored"}}')

    with ObdDriver.from_elm327("/dev/ttyUSB0") as driver:
        ...

The same tools over either adapter (spec section 4): ISO-TP on a CAN bus, or an ELM327 on a
serial port. Read-only unless the send policy allows a service by name
(`SendPolicy(allow_services=["obd_clear_dtcs"])`); the tools that change an ECU (sessions,
security access, writes, routines, resets) are offered only when the policy allows their
service (`uds_0x10`, `uds_0x27`, `uds_0x2E`, `uds_0x31`, `uds_0x11`), and unlocking needs the
user's own key function (`security_key`), which hwbridge never shows to the model.
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
from hwbridge.obd.database.did_definitions import DidDefinitions, load_did_definitions
from hwbridge.obd.database.odx import OdxDescription, load_odx
from hwbridge.obd.tools.security_access import SecurityKey
from hwbridge.obd.tools.texts import obd_texts
from hwbridge.obd.tools.tool_driver import CHANGING_TOOLS, ObdToolDriver
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
        security_key: SecurityKey | None = None,
        tester_present_s: float = 2.0,
        dids: str | Path | DidDefinitions | None = None,
        odx: str | Path | OdxDescription | None = None,
        odx_variant: str | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.policy = policy or SendPolicy()
        self.adapter = adapter
        try:
            if security_key is not None and not callable(security_key):
                raise TypeError(
                    "security_key is a function: key(seed: bytes, level: int, ecu: str)"
                )
            if odx is None and odx_variant is not None:
                raise ValueError("odx_variant names a variant of odx=FILE.pdx; give odx too")
            self.dids = (
                dids if isinstance(dids, DidDefinitions | None) else load_did_definitions(dids)
            )
            description = odx if isinstance(odx, OdxDescription | None) else load_odx(odx)
            self.tool_driver = ObdToolDriver(
                adapter,
                self.policy,
                security_key=security_key,
                tester_present_s=tester_present_s,
                dids=self.dids,
                odx=description,
                odx_variant=odx_variant,
            )
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
        security_key: SecurityKey | None = None,
        tester_present_s: float = 2.0,
        dids: str | Path | DidDefinitions | None = None,
        odx: str | Path | OdxDescription | None = None,
        odx_variant: str | None = None,
    ) -> ObdDriver:
        """OBD-II over ISO 15765-4 on a CAN bus.

        `bus` is anything `CanDriver.from_dbc` takes (a bus string such as
        `socketcand://HOST:PORT/CH` or `socketcan:can0`, python-can keyword arguments, an open
        `can.BusABC`), or a CanAdapter or CanDriver to share: the diagnostic requests then
        go over the same connection, and neither driver loses the other's frames.
        `addressing` is auto (11-bit ids, else 29-bit), 11bit or 29bit.
        `security_key(seed, level, ecu) -> bytes` is your key function for `uds_unlock`;
        `tester_present_s` how often an open session is kept (under S3, 5 s).
        `dids` a DID definitions file (TOML, `hwbridge.obd.database.did_definitions`): DIDs
        by name and typed values for uds_read_did and uds_write_did. `odx` an ODX description
        (`.pdx`, or one `.odx-d` file; needs the `odx` extra, odxtools): one typed tool per
        diagnostic service of the variant `odx_variant` (needed when it has several).
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
        return cls(
            adapter,
            policy,
            prompt_strategy=prompt_strategy,
            security_key=security_key,
            tester_present_s=tester_present_s,
            dids=dids,
            odx=odx,
            odx_variant=odx_variant,
        )

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
        security_key: SecurityKey | None = None,
        tester_present_s: float = 2.0,
        dids: str | Path | DidDefinitions | None = None,
        odx: str | Path | OdxDescription | None = None,
        odx_variant: str | None = None,
    ) -> ObdDriver:
        """OBD-II through an ELM327 (or compatible) interface on a serial port.

        `port` is a device path (`/dev/ttyUSB0`, `COM3`, a pty), a pyserial URL
        (`socket://HOST:PORT` for Wi-Fi adapters, `rfc2217://...`) or an open pyserial port.
        `protocol` is the ELM327 protocol: 0 searches automatically, 6-9 are the CAN ones.
        `security_key`, `tester_present_s`, `dids`, `odx` and `odx_variant` as for `from_can`.
        """
        from hwbridge.obd.transport.elm327_adapter import Elm327Adapter

        adapter = Elm327Adapter.open(
            port, baudrate=baudrate, protocol=protocol, timeout_s=timeout_s
        )
        return cls(
            adapter,
            policy,
            prompt_strategy=prompt_strategy,
            security_key=security_key,
            tester_present_s=tester_present_s,
            dids=dids,
            odx=odx,
            odx_variant=odx_variant,
        )

    # -- MCSToolDriver (delegated) ---------------------------------------------------------

    def _hidden(self) -> dict[str, str]:
        """The tools not offered, each with the service the policy does not allow (or
        `security_key` when uds_unlock has no key function)."""
        hidden = {
            tool: service
            for tool, service in {_CLEAR: _CLEAR, **self.tool_driver.changing_tools()}.items()
            if not self.policy.allows_service(service)
        }
        if "uds_unlock" not in hidden and not self.tool_driver.has_security_key:
            hidden["uds_unlock"] = "security_key"
        return hidden

    def list_tools(self) -> list[Tool]:
        hidden = self._hidden()
        return [t for t in self.tool_driver.list_tools() if t.name not in hidden]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return self.tool_driver.execute_tool(tool_name, arguments)

    def refused_tools(self) -> Mapping[str, ToolError]:
        """The tools not offered (obd_clear_dtcs and the tools that change an ECU under a
        policy that does not allow their service; uds_unlock without a key function): a call
        fails with SEND_NOT_ALLOWED or NO_SECURITY_KEY, and never passes through."""
        allowed = ", ".join(self.policy.describe()["allow_services"]) or "none (read-only)"
        refused = {}
        for tool, service in self._hidden().items():
            if service == "security_key":
                refused[tool] = ToolError(
                    "NO_SECURITY_KEY",
                    "No security key function was given to this driver, so no ECU can be "
                    "unlocked; nothing was sent.",
                )
                continue
            what = "Clearing trouble codes" if tool == _CLEAR else f"{tool} ({service})"
            refused[tool] = ToolError(
                "SEND_NOT_ALLOWED",
                f"{what} changes the vehicle's state and is not allowed by the send policy "
                f"(services allowed: {allowed}); nothing was sent.",
            )
        return refused

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
        """The data files the tools decode with (trouble code descriptions, UDS names, the
        DID definitions given)."""
        out = {}
        if self.dids is not None and Path(self.dids.source).is_file():
            data = Path(self.dids.source).read_bytes()
            out["dids"] = RawSpec(
                format="TOML",
                source=self.dids.source,
                text=data.decode("utf-8-sig", "replace"),
                sha256=hashlib.sha256(data).hexdigest(),
            )
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
            return guidance.read_only.strip() + self._odx_guidance()
        text = guidance.can_clear.format(allowed=", ".join(allowed)).strip()
        hidden = self._hidden()
        offered = [tool for tool in CHANGING_TOOLS if tool not in hidden]
        if offered:
            text += "\n" + guidance.changes.format(tools=", ".join(offered)).strip()
        if hidden.get("uds_unlock") == "security_key":
            text += "\n" + guidance.no_security_key.strip()
        return text + self._odx_guidance()

    def _odx_guidance(self) -> str:
        odx = self.tool_driver.odx
        if odx is None:
            return ""
        return "\n" + obd_texts().odx.guidance.format(variant=odx.variant).strip()

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Return the ECUs hwbridge put in a non-default session to the default session, then
        release the adapter (and the bus or port it opened); idempotent."""
        try:
            self.tool_driver.close()
        finally:
            self.adapter.close()
