"""The discovery tools attached to a CanDriver from above: the entry point the CAN bridge
finds them by (`hwbridge.can.extensions`, group `hwbridge.can.extensions`, name `discovery`).

Imported when a driver first asks for discovery; numpy and the analysis load only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.discovery._deps import require_numpy

if TYPE_CHECKING:
    from hwbridge.can.database.database import CanDatabase
    from hwbridge.can.driver import CanDriver
    from hwbridge.can.extensions import AfterOpen
    from hwbridge.can.network import Network
    from hwbridge.can.tools.tool_driver import CanToolDriver
    from hwbridge.discovery.live.tools import DiscoveryTools
    from hwbridge.policy import SendPolicy

__all__ = ["EXTENSION", "DiscoveryExtension"]


class DiscoveryExtension:
    """The discovery tools for `CanDriver(discovery=True)` and `CanDriver.from_bus`."""

    def check(self) -> None:
        require_numpy()

    def attach(
        self, tool_driver: CanToolDriver, known_databases: Sequence[str | Path]
    ) -> DiscoveryTools:
        """The discovery tools over a tool driver's one network; defining a signal swaps
        that network for one reading the grown database (`CanToolDriver.replace_network`)."""
        from hwbridge.discovery.live.session import DiscoverySession
        from hwbridge.discovery.live.tools import DiscoveryTools

        if len(tool_driver.networks) != 1:
            raise ValueError("discovery works on a driver with one network")
        name = next(iter(tool_driver.networks))

        def grow(db: CanDatabase) -> None:
            tool_driver.replace_network(tool_driver.networks[name].with_database(db))

        session = DiscoverySession(tool_driver.networks[name].db, on_grow=grow)
        return DiscoveryTools(lambda: tool_driver.networks[name], session, known=known_databases)

    def reference(self, reference: Any) -> tuple[CanDatabase, AfterOpen | None]:
        """The known part of the bus (`reference`'s databases as one), and, when "obd" is
        among the references, the OBD-II poller started on the built driver."""
        from hwbridge.discovery.analysis.obd_reference import split_obd
        from hwbridge.discovery.analysis.reference import known_database

        databases, obd = split_obd(reference)
        return known_database(databases), (_attach_obd if obd else None)


def _attach_obd(driver: CanDriver, network: Network, policy: SendPolicy) -> None:
    from hwbridge.discovery.live.obd_poll import attach_obd

    attach_obd(driver, network, policy)


EXTENSION = DiscoveryExtension()
