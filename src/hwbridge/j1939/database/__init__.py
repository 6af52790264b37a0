"""What J1939 means: identifiers, NAMEs, diagnostic messages and the SAE reference tables."""

from hwbridge.j1939.database.dm import DiagnosticMessage, Dtc, Lamps, parse_dm, parse_dtc
from hwbridge.j1939.database.ids import J1939Id, make_id, parse_id
from hwbridge.j1939.database.name import J1939Name

__all__ = [
    "DiagnosticMessage",
    "Dtc",
    "J1939Id",
    "J1939Name",
    "Lamps",
    "make_id",
    "parse_dm",
    "parse_dtc",
    "parse_id",
]
