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
    from hwbridge.discovery.analysis.match import match_databases
    from hwbridge.discovery.api import discover
    from hwbridge.discovery.report.models import (
        DatabaseMatch,
        DiscoveryReport,
        FieldReport,
        MatchChecks,
        MessageReport,
        Note,
        ReferenceMatch,
    )

_LAZY = {
    "discover": "hwbridge.discovery.api",
    "match_databases": "hwbridge.discovery.analysis.match",
    "DatabaseMatch": "hwbridge.discovery.report.models",
    "MatchChecks": "hwbridge.discovery.report.models",
    "DiscoveryReport": "hwbridge.discovery.report.models",
    "FieldReport": "hwbridge.discovery.report.models",
    "MessageReport": "hwbridge.discovery.report.models",
    "Note": "hwbridge.discovery.report.models",
    "ReferenceMatch": "hwbridge.discovery.report.models",
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
