"""SAE J1939 for trucks, buses and machines: diagnostics (DM1, DM2, DM11, DM3), the transport
protocol, requests and the nodes on the bus, as one MCS driver (`J1939Driver`)."""

from hwbridge.j1939.database import DiagnosticMessage, Dtc, J1939Name, Lamps, parse_dm
from hwbridge.j1939.database.catalog import J1939Database
from hwbridge.j1939.driver import J1939Driver
from hwbridge.j1939.tools import J1939Settings, J1939ToolDriver
from hwbridge.j1939.transport.link import J1939Link

__all__ = [
    "DiagnosticMessage",
    "Dtc",
    "J1939Database",
    "J1939Driver",
    "J1939Link",
    "J1939Name",
    "J1939Settings",
    "J1939ToolDriver",
    "Lamps",
    "parse_dm",
]
