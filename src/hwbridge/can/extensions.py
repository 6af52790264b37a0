"""What the packages above the CAN bridge attach to it, found by entry point: tool sets on a
CanDriver (`hwbridge.can.extensions`) and listeners on a bus read through a database
(`hwbridge.can.listeners`).

`CanDriver.from_bus(...)` and `CanDriver.from_dbc(..., discovery=True)` give a driver the
discovery tools, but discovery is built on the bridge (`hwbridge.discovery` reads databases,
networks and OBD-II), so the bridge must not import it. It names what it needs instead: the
extension registered under the entry point group `hwbridge.can.extensions` (hwbridge's own
`pyproject.toml` registers `discovery = "hwbridge.discovery.live.attach:EXTENSION"`), loaded
the first time a driver asks for it, as python-can finds its interfaces by entry point. In
the same way J1939 reassembles the multi-packet messages a database describes
(`j1939 = "hwbridge.j1939.transport.multipacket:listener_for"`). A third party may register
its own under either group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hwbridge.can.database.database import CanDatabase
    from hwbridge.can.driver import CanDriver
    from hwbridge.can.network import Network
    from hwbridge.can.tools.tool_driver import CanToolDriver
    from hwbridge.can.transport.adapter import FrameListener
    from hwbridge.can.transport.monitor import BusMonitor
    from hwbridge.core.models import Tool
    from hwbridge.policy import SendPolicy

__all__ = [
    "GROUP",
    "LISTENERS",
    "AttachedTools",
    "CanExtension",
    "ListenerFactory",
    "extension",
    "listeners_for",
]

GROUP = "hwbridge.can.extensions"
LISTENERS = "hwbridge.can.listeners"

AfterOpen = Callable[["CanDriver", "Network", "SendPolicy"], None]
"""What an extension does to a driver once it is built (e.g. start polling OBD-II)."""


class AttachedTools(Protocol):
    """Tools offered beside the bridge's own: the driver lists them, routes the calls it
    owns to them, adds their guidance to the prompt, and closes them with itself."""

    def list_tools(self) -> list[Tool]: ...

    def owns(self, name: str) -> bool: ...

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any: ...

    def guidance(self) -> str: ...

    def close(self) -> None: ...


class CanExtension(Protocol):
    """What an entry point of `GROUP` names."""

    def check(self) -> None:
        """Raise ImportError (naming the extra to install) when the extension cannot run."""

    def attach(
        self, tool_driver: CanToolDriver, known_databases: Sequence[str | Path]
    ) -> AttachedTools:
        """The tools over `tool_driver`'s networks."""

    def reference(self, reference: Any) -> tuple[CanDatabase, AfterOpen | None]:
        """The database a bus driver reads given `reference` (`from_bus`), and what to do
        to the driver once it is built."""


class ListenerFactory(Protocol):
    """What an entry point of `LISTENERS` names: the listener a bus read through `db` needs
    beside the monitor's own (None: none)."""

    def __call__(self, db: CanDatabase, monitor: BusMonitor) -> FrameListener | None: ...


@cache
def extension(name: str) -> CanExtension:
    """The extension registered as `name` (ImportError when none is)."""
    for point in entry_points(group=GROUP, name=name):
        found: CanExtension = point.load()
        return found
    raise ImportError(
        f"no CAN extension {name!r} is installed (entry point group {GROUP}): "
        "reinstall mcs-hwbridge"
    )


@cache
def _listener_factories() -> tuple[ListenerFactory, ...]:
    return tuple(point.load() for point in entry_points(group=LISTENERS))


def listeners_for(db: CanDatabase, monitor: BusMonitor) -> list[FrameListener]:
    """The listeners the registered factories give a bus read through `db`."""
    found = (factory(db, monitor) for factory in _listener_factories())
    return [listener for listener in found if listener is not None]
