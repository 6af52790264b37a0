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

from hwbridge._lazy import lazy_package

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

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
