"""What the captures package takes from the CAN bridge: its database, nothing live.

This is the one module of `hwbridge.captures` that imports `hwbridge.can`, so a change of the
CAN bridge's layout is one edit here. Transports (buses, adapters, monitors) are never used:
captures are files.
"""

from __future__ import annotations

from hwbridge.can.database import CanDatabase, DatabaseError, DatabaseRepairWarning, SignalSpec

__all__ = ["CanDatabase", "DatabaseError", "DatabaseRepairWarning", "SignalSpec"]
