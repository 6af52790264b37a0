"""Interop with the MCS reference SDK (mcs-driver-core, mcs-orchestrator-base): extra `mcs`.

    from hwbridge.interop import from_reference, to_reference

    reference_orchestrator.add_driver(to_reference(can_driver), label="car")
    Orchestrator({"files": from_reference(csv_driver, read_only=["list_files"])})

`to_reference` runs any hwbridge tool driver as an mcs-driver-core `MCSToolDriver`;
`from_reference` runs any mcs-driver-core tool driver as an hwbridge `HybridDriver` (its
prompts, dialects, argument validation, consent gates, MCP server). Without wrapping, an
hwbridge driver already passes the reference SDK's capability checks (see
`hwbridge.core.contract.Capability`).
"""

from __future__ import annotations

try:
    import mcs.driver.core
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "hwbridge.interop needs the MCS reference SDK: pip install 'mcs-hwbridge[mcs]'"
    ) from exc

from hwbridge._lazy import lazy_package
from hwbridge.interop.from_reference import FromReferenceDriver, from_reference
from hwbridge.interop.health import health_from_reference, health_to_reference
from hwbridge.interop.to_reference import AsReferenceToolDriver, to_reference

# the public names are the imports above, written once (hwbridge._lazy)
__getattr__, __dir__ = lazy_package(globals())
