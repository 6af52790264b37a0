"""What J1939 means: identifiers, NAMEs, diagnostic messages and the SAE reference tables."""

from hwbridge._lazy import lazy_package
from hwbridge.j1939.database.dm import DiagnosticMessage, Dtc, Lamps, parse_dm, parse_dtc
from hwbridge.j1939.database.ids import J1939Id, make_id, parse_id
from hwbridge.j1939.database.name import J1939Name

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
