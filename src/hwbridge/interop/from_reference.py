"""An mcs-driver-core tool driver as an hwbridge `HybridDriver`.

What hwbridge adds around a reference driver: every dialect parsed and answered in kind,
arguments validated against the tools' JSON Schemas before the driver sees them, consent
gates and the other decorators, the Orchestrator, the MCP server. The reference driver's
exceptions are its way of failing a call: each becomes a `ToolError` with the code
`EXECUTION_FAILED` and the exception's text, which the LLM may act on.

The reference knows nothing of read-only tools: every tool changes state unless named in
`read_only` (consent gates ask before it, MCP marks it destructive).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mcs.driver.core import DriverMeta as RefMeta
from mcs.driver.core.mixins.healthcheck import SupportsHealthcheck

from hwbridge.__about__ import __version__
from hwbridge.core.contract import Capability
from hwbridge.core.health import Health
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import (
    NATIVE_TOOL_NAME_PATTERN,
    DriverBinding,
    DriverMeta,
    Tool,
    ToolError,
    ToolParameter,
)
from hwbridge.core.prompts import PromptStrategy
from hwbridge.interop.health import health_from_reference

__all__ = ["FromReferenceDriver", "from_reference"]

log = logging.getLogger(__name__)

_NAME = re.compile(NATIVE_TOOL_NAME_PATTERN)  # names every provider takes, as before
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_SEMVER_LIKE = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_ID_NAMESPACE = uuid.UUID("5b0c6f1e-2d4a-4c7b-9e83-1f6a0d2c7e94")  # ids that are not UUIDs


class FromReferenceDriver(HybridDriver):
    """An hwbridge driver that runs an mcs-driver-core MCSToolDriver (`.driver`)."""

    meta = DriverMeta(
        id="c7e1d3a9-5f24-4b6e-8a0c-2d9f4e1b7a36",
        name="MCS reference driver",
        version=__version__,  # the adapter's; each instance carries its driver's
    )

    def __init__(
        self,
        driver: Any,
        *,
        read_only: Iterable[str] = (),
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        if not (
            callable(getattr(driver, "list_tools", None))
            and callable(getattr(driver, "execute_tool", None))
        ):
            raise TypeError(f"{type(driver).__name__} is not an MCS tool driver")
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        self.driver = driver
        self.read_only = frozenset(read_only)
        self._health = RefMeta.resolve_capability(driver, SupportsHealthcheck)
        flags = list(type(self).meta.capabilities)
        if self._health is not None:
            flags.append(Capability.HEALTHCHECK.value)
        self.meta = hwbridge_meta(getattr(driver, "meta", None), type(self).meta, flags)
        self._names: dict[str, str] = {}
        tools = self.list_tools()  # names are fixed now; unknown read_only names are typos
        unknown = self.read_only - {t.name for t in tools} - set(self._names.values())
        if unknown:
            raise ValueError(f"read_only names tools the driver does not have: {sorted(unknown)}")

    # -- MCSToolDriver ---------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        """The reference driver's tools; a name no provider accepts is rewritten (letters,
        digits, _ and -, at most 64) and mapped back when called. After the reference
        driver's tools change, call `tools_changed()`."""
        names: dict[str, str] = {}
        tools: list[Tool] = []
        for ref in self.driver.list_tools():
            name = _usable_name(str(ref.name), names)
            names[name] = str(ref.name)
            tools.append(self._tool(name, ref))
        self._names = names
        return tools

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        original = self._names.get(tool_name, tool_name)
        try:
            return self.driver.execute_tool(original, dict(arguments))
        except ToolError:
            raise
        except Exception as exc:
            log.debug("reference tool %s failed", original, exc_info=True)
            text = str(exc).strip() or type(exc).__name__
            raise ToolError(
                "EXECUTION_FAILED",
                f"{original} failed: {text.rstrip('.')}.",
                retryable=True,
            ) from exc

    # -- health (spec section 14) ----------------------------------------------------------

    def healthcheck(self) -> Health:
        """The reference driver's health check, in hwbridge's terms (OK is ok, WARNING
        degraded, ERROR down); `unknown` when it has none or the check fails."""
        if self._health is None:
            return Health(status="unknown", problems=["this driver has no health check"])
        try:
            return health_from_reference(self._health.healthcheck())
        except Exception as exc:
            return Health(status="unknown", problems=[f"the health check failed: {exc}"[:300]])

    def _tool(self, name: str, ref: Any) -> Tool:
        parameters = [
            ToolParameter(
                name=str(p.name),
                description=getattr(p, "description", None) or None,
                required=bool(getattr(p, "required", False)),
                # the reference tells the LLM a parameter without a schema is a string
                schema=dict(p.schema) if getattr(p, "schema", None) else {"type": "string"},
            )
            for p in (getattr(ref, "parameters", None) or [])
        ]
        title = getattr(ref, "title", None)
        description = getattr(ref, "description", None)
        original = str(ref.name)
        return Tool(
            name=name,
            title=title,
            description=description or title or original,
            parameters=parameters,
            read_only=name in self.read_only or original in self.read_only,
        )


def from_reference(
    driver: Any,
    *,
    read_only: Iterable[str] = (),
    prompt_strategy: str | Path | PromptStrategy = "json",
) -> FromReferenceDriver:
    """`driver` (an mcs-driver-core MCSToolDriver: a BaseDriver, a BaseOrchestrator, your
    own) as an hwbridge HybridDriver. `read_only` names the tools that change nothing."""
    return FromReferenceDriver(driver, read_only=read_only, prompt_strategy=prompt_strategy)


def _usable_name(name: str, taken: Mapping[str, str]) -> str:
    if _NAME.fullmatch(name) and name not in taken:
        return name
    base = _NOT_NAME.sub("_", name).strip("_")[:60] or "tool"
    candidate, n = base, 2
    while candidate in taken or not _NAME.fullmatch(candidate):
        candidate, n = f"{base[:58]}_{n}", n + 1
    return candidate


def hwbridge_meta(ref: Any, base: DriverMeta, flags: list[str]) -> DriverMeta:
    """The reference driver's identity as a DriverMeta: an id that is not a UUID becomes a
    stable UUID derived from it, a version that is not semantic is completed or 0.0.0."""
    if ref is None:
        return base.model_copy(update={"capabilities": flags})
    raw_id = str(getattr(ref, "id", "") or "")
    try:
        driver_id = uuid.UUID(raw_id)
    except ValueError:
        driver_id = uuid.uuid5(_ID_NAMESPACE, raw_id or base.name)
    match = _SEMVER_LIKE.match(str(getattr(ref, "version", "") or ""))
    version = ".".join(str(int(g or 0)) for g in match.groups()) if match else "0.0.0"
    bindings = [
        DriverBinding(capability=b.capability, adapter=b.adapter, spec_format=b.spec_format)
        for b in getattr(ref, "bindings", ()) or ()
    ]
    llms = getattr(ref, "supported_llms", None)
    return DriverMeta(
        id=driver_id,
        name=str(getattr(ref, "name", "") or base.name),
        version=version,
        bindings=bindings,
        supported_llms=list(llms) if llms is not None else None,
        capabilities=flags,
    )
