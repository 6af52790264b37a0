"""Signals found without a database: fields from how bits flip, counters, checksums,
meaning from a reference, a draft DBC, the known database that fits a capture, and the live
discovery tools.

    from hwbridge.can import discover
    report = discover(["drive.blf"], reference="gnss.dbc")

Discovery computes with numpy (`pip install 'mcs-hwbridge[discovery]'`); nothing heavy is
imported until a name below is used, so `import hwbridge.can` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_names

if TYPE_CHECKING:
    from hwbridge.can.discovery.api import discover
    from hwbridge.can.discovery.match import match_databases
    from hwbridge.can.discovery.report import (
        DatabaseMatch,
        DiscoveryReport,
        FieldReport,
        MatchChecks,
        MessageReport,
        Note,
        ReferenceMatch,
    )

_LAZY = {
    "discover": "hwbridge.can.discovery.api",
    "match_databases": "hwbridge.can.discovery.match",
    "DatabaseMatch": "hwbridge.can.discovery.report",
    "MatchChecks": "hwbridge.can.discovery.report",
    "DiscoveryReport": "hwbridge.can.discovery.report",
    "FieldReport": "hwbridge.can.discovery.report",
    "MessageReport": "hwbridge.can.discovery.report",
    "Note": "hwbridge.can.discovery.report",
    "ReferenceMatch": "hwbridge.can.discovery.report",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "DatabaseMatch",
    "DiscoveryReport",
    "FieldReport",
    "MatchChecks",
    "MessageReport",
    "Note",
    "ReferenceMatch",
    "discover",
    "match_databases",
]
