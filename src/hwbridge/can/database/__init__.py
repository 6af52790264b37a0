"""What describes a CAN device: the database (DBC, KCD, SYM, ARXML through cantools), its
repairs for real-world files, the catalog and signal search, and value encoding."""

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

__all__ = [
    "FORMATS",
    "CanDatabase",
    "DatabaseError",
    "DatabaseImportWarning",
    "DatabaseRepairWarning",
    "DecodedFrame",
    "EncodedFrame",
    "JsonValue",
    "SignalSpec",
]
