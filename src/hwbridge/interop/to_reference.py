"""An hwbridge tool driver as an mcs-driver-core `MCSToolDriver`, for the reference SDK's
orchestrator (`mcs-orchestrator-base`), decorators and client loops.

The reference sees its own `Tool`, `ToolParameter` and `DriverMeta` dataclasses. A call runs
through the hwbridge driver's `execute_tool`, which validates its arguments against the
tool's JSON Schema first; a refusal is raised as the hwbridge `ToolError` (its text starts
with the code), which the reference reports as a failed call. Results reach the reference
JSON-safe, so its `json.dumps` never fails on a call that ran.
"""

from __future__ import annotations

from typing import Any

from mcs.driver.core import DriverBinding as RefBinding
from mcs.driver.core import DriverMeta as RefMeta
from mcs.driver.core import MCSToolDriver as RefToolDriver
from mcs.driver.core import Tool as RefTool
from mcs.driver.core import ToolParameter as RefParameter
from mcs.driver.core.mixins.healthcheck import SupportsHealthcheck

from hwbridge.core.contract import Capability, MCSToolDriver
from hwbridge.core.health import health_of
from hwbridge.core.jsonsafe import dumps
from hwbridge.core.models import DriverMeta, Tool
from hwbridge.interop.health import health_to_reference

__all__ = ["AsReferenceToolDriver", "to_reference"]


class AsReferenceToolDriver(RefToolDriver):  # type: ignore[misc]  # the reference is untyped
    """An mcs-driver-core MCSToolDriver that runs an hwbridge tool driver (`.driver`)."""

    def __init__(self, driver: MCSToolDriver) -> None:
        if not isinstance(driver, MCSToolDriver):
            raise TypeError(f"{type(driver).__name__} is not an hwbridge MCSToolDriver")
        self.driver = driver
        flags = [Capability.ORCHESTRATABLE.value]
        if isinstance(self, SupportsHealthcheck):
            flags.append(Capability.HEALTHCHECK.value)
        self.meta = reference_meta(driver.meta, flags)

    def list_tools(self) -> list[RefTool]:
        return [reference_tool(t) for t in self.driver.list_tools()]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        result = self.driver.execute_tool(tool_name, arguments)
        return dumps(result)[1]


class _WithHealthcheck(AsReferenceToolDriver, SupportsHealthcheck):  # type: ignore[misc]
    """The same, for a driver with a health check: the reference's orchestrator asks it."""

    def healthcheck(self) -> dict[str, Any]:
        return health_to_reference(health_of(self.driver))


def to_reference(driver: MCSToolDriver) -> AsReferenceToolDriver:
    """`driver` as an mcs-driver-core MCSToolDriver (with `SupportsHealthcheck` when the
    driver lists the `healthcheck` flag)."""
    if driver.meta.has_capability(Capability.HEALTHCHECK) and callable(
        getattr(driver, "healthcheck", None)
    ):
        return _WithHealthcheck(driver)
    return AsReferenceToolDriver(driver)


def reference_tool(tool: Tool) -> RefTool:
    return RefTool(
        name=tool.name,
        title=tool.title,
        description=tool.description or tool.title,
        parameters=[
            RefParameter(
                name=p.name,
                description=p.description or "",
                required=p.required,
                schema=dict(p.schema) if p.schema is not None else None,
            )
            for p in tool.parameters
        ],
    )


def reference_meta(meta: DriverMeta, flags: list[str]) -> RefMeta:
    return RefMeta(
        id=str(meta.id),
        name=meta.name,
        version=meta.version,
        bindings=tuple(RefBinding(b.capability, b.adapter, b.spec_format) for b in meta.bindings),
        supported_llms=tuple(meta.supported_llms) if meta.supported_llms is not None else None,
        capabilities=tuple(flags),
    )
