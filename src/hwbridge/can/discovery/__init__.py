"""Signals found without a database: fields from how bits flip, counters, checksums,
meaning from a reference, a draft DBC, and the live discovery tools.

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
    from hwbridge.can.discovery.report import (
        DiscoveryReport,
        FieldReport,
        MessageReport,
        Note,
        ReferenceMatch,
    )

_LAZY = {
    "discover": "hwbridge.can.discovery.api",
    "DiscoveryReport": "hwbridge.can.discovery.report",
    "FieldReport": "hwbridge.can.discovery.report",
    "MessageReport": "hwbridge.can.discovery.report",
    "Note": "hwbridge.can.discovery.report",
    "ReferenceMatch": "hwbridge.can.discovery.report",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "DiscoveryReport",
    "FieldReport",
    "MessageReport",
    "Note",
    "ReferenceMatch",
    "discover",
]
