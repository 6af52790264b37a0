"""SAE J1939 for trucks, buses and machines: diagnostics (DM1, DM2, DM11, DM3), the transport
protocol, requests and the nodes on the bus, as one MCS driver (`J1939Driver`).

Names are imported on first use: a CanDriver reading multi-packet messages needs only the
pure transport module, not the driver and its tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package

if TYPE_CHECKING:
    from hwbridge.j1939.database import DiagnosticMessage, Dtc, J1939Name, Lamps, parse_dm
    from hwbridge.j1939.database.catalog import J1939Database
    from hwbridge.j1939.driver import J1939Driver
    from hwbridge.j1939.tools import J1939Settings, J1939ToolDriver
    from hwbridge.j1939.transport.link import J1939Link

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
