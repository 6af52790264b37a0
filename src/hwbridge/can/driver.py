"""CanDriver: the CAN bridge as an MCS hybrid driver, built from a DBC and a bus.

    with CanDriver.from_dbc("dbc/demo_vehicle.dbc", bus="virtual:demo") as driver:
        driver.process_llm_response('{"tool": "read_signals", ...}')

Read-only unless a SendPolicy says otherwise. Closing the driver stops periodic sends and
releases the bus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.extensions import AttachedTools, extension
from hwbridge.can.health import SILENT_AFTER_S, database_raw_spec, networks_health
from hwbridge.can.network import Network
from hwbridge.can.tools.sending import HookFactory
from hwbridge.can.tools.texts import can_texts
from hwbridge.can.tools.tool_driver import CanToolDriver, Exposure
from hwbridge.can.transport.adapter import BusSpec, CanAdapter
from hwbridge.core.health import Health, RawSpec
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError
from hwbridge.core.prompts import PromptStrategy, estimate_tokens
from hwbridge.policy import SendPolicy

__all__ = ["CanDriver"]

NetworkSpec = Mapping[str, Any]
"""{"dbc": path or CanDatabase, "bus": bus spec or None, "bitrate": ..., "hooks": {...}}"""


def _check_limits_exist(policy: SendPolicy, networks: Sequence[Network]) -> None:
    """A misspelt signal_limits key would silently remove a limit: refuse it instead."""
    problems = []
    for key in policy.describe()["signal_limits"]:
        message_name, _, signal = key.partition(".")
        found = [
            m
            for n in networks
            for m in n.db.messages
            if m.name == message_name and any(s.name == signal for s in m.signals)
        ]
        if not found:
            close = [
                f"{m.name}.{s.name}"
                for n in networks
                for m in n.db.messages
                for s in m.signals
                if s.name.lower() == signal.lower() or m.name.lower() == message_name.lower()
            ][:5]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            problems.append(f"{key!r}{hint}")
    if problems:
        raise ValueError(
            "signal_limits name signals the database does not have: " + "; ".join(problems)
        )


def _existing(paths: Sequence[str | Path]) -> tuple[str | Path, ...]:
    """`paths`, each checked to exist (FileNotFoundError names the one that does not)."""
    for path in paths:
        if not Path(path).exists():
            raise FileNotFoundError(f"no such database file or folder: {path}")
    return tuple(paths)


class CanDriver(HybridDriver, Closing):
    """An LLM-ready CAN driver: tools generated from the database, gated by a SendPolicy."""

    meta = DriverMeta(
        id="3c9d7a4e-2f61-4b8a-a0d5-7e1c9b2f6a83",
        name="hwbridge CAN",
        version=__version__,
        bindings=[DriverBinding(capability="can-bus", adapter="python-can", spec_format="DBC")],
        capabilities=["multi_connection", "healthcheck", "raw_spec"],
    )

    def __init__(
        self,
        networks: Sequence[Network],
        policy: SendPolicy | None = None,
        *,
        exposure: Exposure = "auto",
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
        discovery: bool = False,
        known_databases: Sequence[str | Path] = (),
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.policy = policy or SendPolicy()
        self._networks = tuple(networks)
        self.discovery: AttachedTools | None = None  # the discovery tools, when asked for
        try:
            _check_limits_exist(self.policy, self._networks)
            self.tool_driver = CanToolDriver(
                self._networks, self.policy, exposure=exposure, fits=self._fits
            )
            if discovery:
                self.discovery = extension("discovery").attach(
                    self.tool_driver, _existing(known_databases)
                )
        except BaseException:
            for network in self._networks:
                network.close()
            raise
        self._raw_specs = {n.name: database_raw_spec(n.db) for n in self._networks}

    @classmethod
    def from_dbc(
        cls,
        path: str | Path | CanDatabase,
        bus: BusSpec | CanAdapter | None = None,
        policy: SendPolicy | None = None,
        *,
        network: str = "can",
        bitrate: float | None = None,
        history_s: float = 30.0,
        hooks: Mapping[str, HookFactory] | None = None,
        exposure: Exposure = "auto",
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
        discovery: bool = False,
        known_databases: Sequence[str | Path] = (),
    ) -> CanDriver:
        """A driver for one database on one bus (None: offline, catalog and decoding only).

        `bus` is a bus string (`virtual:CH`, `socketcand://HOST:PORT/CH`, `slcan://PORT@BAUD`,
        `socketcan:CH`, `INTERFACE:CH`), python-can keyword arguments, an open `can.BusABC`
        or a CanAdapter. `discovery=True` adds the discovery tools (see `from_bus`) for the
        part of the bus the database does not cover; the bits it explains are never offered
        again as new fields. `known_databases` (files or folders) are matched by the
        `match_known_databases` tool beside opendbc's.
        """
        policy = policy or SendPolicy()
        if discovery:
            extension("discovery").check()
        net = Network.open(
            network, path, bus, policy, history_s=history_s, bitrate=bitrate, hooks=hooks
        )
        return cls(
            [net],
            policy,
            exposure=exposure,
            prompt_strategy=prompt_strategy,
            prompt_overrides=prompt_overrides,
            discovery=discovery,
            known_databases=known_databases,
        )

    @classmethod
    def from_bus(
        cls,
        bus: BusSpec | CanAdapter,
        reference: str | Path | CanDatabase | Sequence[str | Path | CanDatabase] | None = None,
        policy: SendPolicy | None = None,
        *,
        network: str = "can",
        bitrate: float | None = None,
        history_s: float = 30.0,
        exposure: Exposure = "auto",
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
        known_databases: Sequence[str | Path] = (),
    ) -> CanDriver:
        """A driver for a bus with no database, or one that covers only part of it
        (`reference`, e.g. a GNSS module's DBC).

        Beside the reading tools it offers the discovery tools, which only listen:
        `survey_bus`, `snapshot_bus`, `diff_snapshots`, `correlate_signal`,
        `define_signal` (read_signals, wait_for_signal and capture read a defined signal at
        once), `draft_dbc`, `mark_event` and `rank_events`; and `match_known_databases`,
        which ranks opendbc's databases (with the opendbc extra) and those of
        `known_databases` (files or folders) against the bus. `reference="obd"` takes OBD-II
        as the reference: while a tool records, the vehicle's mode 01 PIDs are polled over
        the same bus (read-only requests, within `policy`'s frame budget) and its answers
        are known signals under python-OBD's names (`correlate_signal(signal="SPEED")`).
        A list takes several, as `discover(reference=...)` does (`["gnss.dbc", "obd"]`):
        the databases are one known part, the first describing an id wins.
        Needs numpy: pip install 'mcs-hwbridge[discovery]'.
        """
        discovery = extension("discovery")  # hwbridge.discovery, attached from above
        discovery.check()
        policy = policy or SendPolicy()
        db, after_open = discovery.reference(reference)
        net = Network.open(network, db, bus, policy, history_s=history_s, bitrate=bitrate)
        driver = cls(
            [net],
            policy,
            exposure=exposure,
            prompt_strategy=prompt_strategy,
            prompt_overrides=prompt_overrides,
            discovery=True,
            known_databases=known_databases,
        )
        if after_open is not None:
            try:
                after_open(driver, net, policy)
            except BaseException:
                driver.close()
                raise
        return driver

    @classmethod
    def from_networks(
        cls,
        networks: Mapping[str, NetworkSpec],
        policy: SendPolicy | None = None,
        *,
        history_s: float = 30.0,
        exposure: Exposure = "catalog",
        prompt_strategy: str | Path | PromptStrategy = "json",
    ) -> CanDriver:
        """Several networks in one driver, each with its own database and bus; every tool
        then takes the network's name."""
        policy = policy or SendPolicy()
        opened: list[Network] = []
        try:
            for name, spec in networks.items():
                opened.append(
                    Network.open(
                        name,
                        spec["dbc"],
                        spec.get("bus"),
                        policy,
                        history_s=history_s,
                        bitrate=spec.get("bitrate"),
                        hooks=spec.get("hooks"),
                    )
                )
        except BaseException:
            for net in opened:
                net.close()
            raise
        return cls(opened, policy, exposure=exposure, prompt_strategy=prompt_strategy)

    # -- what it holds ---------------------------------------------------------------------

    @property
    def networks(self) -> dict[str, Network]:
        return dict(self.tool_driver.networks)

    @property
    def database(self) -> CanDatabase:
        """The database of the first (usually only) network (with the signals defined so
        far, on a discovery driver)."""
        return next(iter(self.tool_driver.networks.values())).db

    # -- MCSToolDriver (delegated) ---------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        tools = self.tool_driver.list_tools()
        return tools + self.discovery.list_tools() if self.discovery else tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        if self.discovery is not None and self.discovery.owns(tool_name):
            return self.discovery.execute_tool(tool_name, arguments)
        return self.tool_driver.execute_tool(tool_name, arguments)

    def essential_tools(self) -> list[Tool]:
        tools = self.tool_driver.essential_tools()
        return tools + self.discovery.list_tools() if self.discovery else tools

    def refused_tools(self) -> Mapping[str, ToolError]:
        """Send tools the policy keeps closed: a call fails with SEND_NOT_ALLOWED (it never
        passes through as if it were a final answer)."""
        offered = {t.name for t in self.tool_driver.list_tools()}
        refusals: dict[str, ToolError] = {}
        if not self.policy.allows_sending:
            closed = ToolError(
                "SEND_NOT_ALLOWED",
                "The send policy is read-only: nothing can be sent on this bus.",
            )
            names = ["send_message", "start_periodic", "stop_periodic", "send_frame"]
            names += [f"send_{m.name}" for n in self._networks for m in n.db.messages]
            return {name: closed for name in names if name not in offered}
        if not self.policy.allows_raw_frames:
            refusals["send_frame"] = ToolError(
                "SEND_NOT_ALLOWED",
                "Raw frames are not allowed by the send policy; use send_message.",
            )
        for network in self._networks:
            for message in network.db.messages:
                name = f"send_{message.name}"
                if name not in offered and not self.policy.allows_message(message.name):
                    refusals[name] = ToolError(
                        "SEND_NOT_ALLOWED",
                        f"Sending {message.name} is not allowed by the send policy.",
                    )
        return refusals

    # -- health and source (spec section 14) -----------------------------------------------

    def healthcheck(self, *, silent_after_s: float = SILENT_AFTER_S) -> Health:
        """Each network's connection, controller state, error counters and last frame age;
        sends nothing, waits for nothing (see `hwbridge.can.health`)."""
        return networks_health(self._networks, silent_after_s=silent_after_s)

    def raw_spec(self) -> dict[str, RawSpec]:
        """Each network's database file as it was when the driver was built."""
        return dict(self._raw_specs)

    # -- prompt ----------------------------------------------------------------------------

    def driver_guidance(self, model_name: str | None = None) -> str:
        guidance = can_texts().guidance
        if all(n.adapter is None for n in self._networks):
            text = guidance.offline.strip()
        elif not self.policy.allows_sending:
            text = guidance.read_only.strip()
        else:
            allowed = ", ".join(self.policy.describe()["allow_messages"]) or "raw frames"
            text = guidance.can_send.format(allowed=allowed).strip()
        if self.discovery is not None:
            text += "\n" + self.discovery.guidance()
        return text

    def _fits(self, tools: list[Tool]) -> bool:
        strategy = self.prompt_strategy
        prompt = strategy.system_message(tools, self.driver_guidance())
        return estimate_tokens(prompt) <= strategy.token_budget

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop periodic sends and release every bus; idempotent."""
        if self.discovery is not None:
            self.discovery.close()
        self.tool_driver.close()
