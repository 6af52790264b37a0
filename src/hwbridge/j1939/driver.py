"""J1939Driver: SAE J1939 (trucks, buses, machines) as an MCS hybrid driver.

    with J1939Driver.from_can(bus="socketcand://127.0.0.1:29536/vcan0") as driver:
        driver.process_llm_response('{"tool": "j1939_dm1", "arguments": {}}')

The tools read the active and previously active faults (DM1, DM2), request any parameter
group, and list the nodes; requests only read and go out by default, from an address the
driver claims first (249 unless told otherwise). Clearing codes (DM11, DM3) changes the
vehicle's state: only when the send policy allows it
(`SendPolicy(allow_services=["j1939_dm11", "j1939_dm3"])`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.__about__ import __version__
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.adapter import BusSpec, CanAdapter
from hwbridge.core.health import Health, RawSpec
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError
from hwbridge.core.prompts import PromptStrategy, packs_dir
from hwbridge.j1939.database.catalog import J1939Database
from hwbridge.j1939.database.ids import GLOBAL, MAX_PGN, make_id
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.tools.common import J1939Settings
from hwbridge.j1939.tools.texts import j1939_texts
from hwbridge.j1939.tools.tool_driver import J1939ToolDriver
from hwbridge.j1939.transport.address import CLAIM_WAIT_S
from hwbridge.j1939.transport.link import J1939Link
from hwbridge.j1939.transport.tp import T3
from hwbridge.policy import SendPolicy, SendRequest
from hwbridge.policy.outcomes import failure_outcome
from hwbridge.policy.service_rules import J1939_SERVICES

if TYPE_CHECKING:
    from hwbridge.can.driver import CanDriver

__all__ = ["J1939Driver"]

_CLEAR = "j1939_clear_dtcs"


class J1939Driver(HybridDriver, Closing):
    """An LLM-ready J1939 driver over a J1939Link, gated by a SendPolicy."""

    meta = DriverMeta(
        id="a4e9c3b7-6d18-4f25-b0a2-8c7e1d5f9b64",
        name="hwbridge J1939",
        version=__version__,
        bindings=[
            DriverBinding(
                capability="vehicle-diagnostics", adapter="python-can", spec_format="SAE J1939"
            )
        ],
        capabilities=["healthcheck", "raw_spec"],
    )

    def __init__(
        self,
        link: J1939Link,
        policy: SendPolicy | None = None,
        *,
        database: J1939Database | None = None,
        settings: J1939Settings | None = None,
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        try:
            super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
            self.policy = policy or link.policy
            self.link = link
            self.database = database or J1939Database()
            self.tool_driver = J1939ToolDriver(link, self.policy, self.database, settings=settings)
        except BaseException:
            link.close()
            raise

    @classmethod
    def from_can(
        cls,
        bus: BusSpec | CanAdapter | CanDriver = None,
        policy: SendPolicy | None = None,
        dbc: str | Path | CanDatabase | None = None,
        *,
        address: int = 249,
        name: J1939Name | None = None,
        response_s: float = 1.25,
        claim_wait_s: float = CLAIM_WAIT_S,
        bam_gap_s: float = 0.05,
        t3_s: float = T3,
        dm1_window_s: float = 1.5,
        request_timeout_s: float = 2.0,
        prompt_strategy: str | Path | PromptStrategy = "json",
    ) -> J1939Driver:
        """J1939 on a CAN bus.

        `bus` is anything `CanDriver.from_dbc` takes (a bus string such as
        `socketcand://HOST:PORT/CH`, `socketcan:can0` or `replay:truck.MF4`, python-can
        keyword arguments, an open `can.BusABC`), or a CanAdapter or CanDriver to share: the
        J1939 frames then go over the same connection, and no driver loses the others'
        frames. `dbc` describes parameter groups (decoded in `j1939_request`) and names
        SPNs (its `SPN` signal attribute); a shared CanDriver's database serves when none is
        given. `address` is the one this tool claims (249, off-board diagnostic-service
        tool #1; it moves to a free one of 128-247 when it loses the contest); `name` its
        NAME (function 129, arbitrary-address capable, a random identity number). The
        times are J1939's: `response_s` (T3) for answers to a request, `claim_wait_s` for a
        claim to stand, `bam_gap_s` between BAM packets, `t3_s` for our RTS/CTS receiver,
        `dm1_window_s` for a DM1 to count as current.
        """
        from hwbridge.can.driver import CanDriver

        policy = policy or SendPolicy()
        if isinstance(bus, CanDriver):
            adapters = [n.adapter for n in bus.networks.values() if n.adapter is not None]
            if not adapters:
                raise ValueError("that CanDriver has no bus attached to share")
            if dbc is None:
                dbc = bus.database
            bus = adapters[0]
        database = J1939Database.load(dbc)  # a bad database costs no connection
        link = J1939Link.open(
            bus,
            policy,
            name=name,
            address=address,
            response_s=response_s,
            claim_wait_s=claim_wait_s,
            bam_gap_s=bam_gap_s,
            t3_s=t3_s,
        )
        settings = J1939Settings(dm1_window_s=dm1_window_s, request_timeout_s=request_timeout_s)
        return cls(
            link, policy, database=database, settings=settings, prompt_strategy=prompt_strategy
        )

    # -- MCSToolDriver (delegated) ---------------------------------------------------------

    def _clears_allowed(self) -> list[str]:
        return [s for s in J1939_SERVICES if self.policy.allows_service(s)]

    def list_tools(self) -> list[Tool]:
        tools = self.tool_driver.list_tools()
        if not self._clears_allowed():
            tools = [t for t in tools if t.name != _CLEAR]
        return tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return self.tool_driver.execute_tool(tool_name, arguments)

    def refused_tools(self) -> Mapping[str, ToolError]:
        """j1939_clear_dtcs under a policy that allows neither DM11 nor DM3: a call fails
        with SEND_NOT_ALLOWED (it is not offered to the LLM, and never passes through)."""
        if self._clears_allowed():
            return {}
        allowed = ", ".join(self.policy.describe()["allow_services"]) or "none (read-only)"
        return {
            _CLEAR: ToolError(
                "SEND_NOT_ALLOWED",
                "Clearing trouble codes changes the vehicle's state and is not allowed by the "
                f"send policy (j1939_dm11, j1939_dm3; services allowed: {allowed}); nothing "
                "was sent.",
            )
        }

    # -- sending a parameter group (Python API, not a tool) --------------------------------

    def send_pgn(
        self, pgn: int, data: bytes, destination: int = GLOBAL, *, priority: int = 6
    ) -> dict[str, Any]:
        """Send `data` as parameter group `pgn`: one frame up to 8 bytes, a BAM to everyone
        (`destination` 255) or an RTS/CTS session to one node for 9 to 1,785 bytes.

        The send policy judges it as a raw frame of the group's identifier from this
        tool's address (the one it holds, else the one it will claim):
        `SendPolicy(allow_raw_frames=True, allow_ids=[...])`; every frame of it spends the
        policy's frame budget. Audited like every send. The judgement (and the user's
        consent) comes before anything goes out, the address claim included; a dry run
        sends nothing at all."""
        if not 0 <= destination <= 255:
            raise ToolError("INVALID_VALUE", f"destination must be 0..255, not {destination}.")
        if not 0 <= pgn <= MAX_PGN:
            raise ToolError("INVALID_VALUE", f"A PGN is 0..{MAX_PGN}, not {pgn}.")
        if not 0 <= priority <= 7:
            raise ToolError("INVALID_VALUE", f"priority must be 0..7, not {priority}.")
        address = self.link.address
        if address is None:
            address = self.link.preferred_address
        request = SendRequest(
            kind="raw",
            arbitration_id=make_id(pgn, address, destination, priority),
            data=bytes(data),
            is_extended=True,
            tool="send_pgn",
        )
        if self.policy.dry_run:
            self.policy.check(request)
            return {"sent": False, "dry_run": True, "from": address}
        with self.policy.open_audit() as audit:
            self.policy.check(request)
            try:
                outcome = self.link.transmit(
                    pgn, data, destination, priority=priority, source=address
                )
            except ToolError as exc:
                audit.write(request, failure_outcome(exc), exc.code)
                raise
            audit.write(request, "sent" if outcome.complete else "unconfirmed")
        result: dict[str, Any] = {
            "sent": True,
            "pgn": pgn,
            "to": "global" if destination == GLOBAL else destination,
            "from": address,
            "transport": outcome.transport,
            "size": outcome.size,
            "packets": outcome.packets,
            "complete": outcome.complete,
        }
        if outcome.problem:
            result["problem"] = outcome.problem
        return result

    # -- health and source (spec section 14) -----------------------------------------------

    def healthcheck(self) -> Health:
        """The bus, this tool's address claim and what was heard; sends nothing."""
        details = self.link.describe()
        problems = []
        if not details.get("connected"):
            status = "down"
            problems.append(f"not connected ({details.get('last_error') or 'closed'})")
        elif not details.get("nodes_heard"):
            status = "degraded"
            problems.append("no J1939 node has been heard yet")
        else:
            status = "ok"
        if details.get("claim") == "cannot_claim":
            problems.append(f"no address: {details.get('claim_problem')}")
        return Health(status=status, details=details, problems=problems)

    def raw_spec(self) -> dict[str, RawSpec]:
        """The SAE tables the tools decode with, and the DBC when one was given."""
        from hwbridge.can.health import database_raw_spec

        path = packs_dir() / "j1939_data.toml"
        data = path.read_bytes()
        out = {
            "j1939_data": RawSpec(
                format="TOML",
                source=str(path),
                text=data.decode("utf-8"),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        }
        if self.database.db is not None:
            out["database"] = database_raw_spec(self.database.db)
        return out

    # -- prompt ----------------------------------------------------------------------------

    def driver_guidance(self, model_name: str | None = None) -> str:
        guidance = j1939_texts().guidance
        allowed = self._clears_allowed()
        if not allowed:
            return guidance.read_only.strip()
        return guidance.can_clear.format(allowed=", ".join(allowed)).strip()

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening (and release the bus the driver opened); idempotent."""
        self.link.close()
