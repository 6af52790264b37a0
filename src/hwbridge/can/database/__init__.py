"""What describes a CAN device: the database (DBC, KCD, SYM, ARXML through cantools), its
repairs for real-world files, the catalog and signal search, and value encoding."""

from hwbridge._lazy import lazy_package
from hwbridge.can.database.database import (
    FORMATS,
    CanDatabase,
    DatabaseError,
    DatabaseImportWarning,
    DatabaseRepairWarning,
    DecodedFrame,
    EncodedFrame,
    JsonValue,
    SignalSpec,
)

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
