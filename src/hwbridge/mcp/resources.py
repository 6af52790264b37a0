"""What a driver describes about itself, as MCP resources.

- `hwbridge://driver`: its DriverMeta (identity, bindings, capability flags, trust).
- `hwbridge://health`: its `healthcheck()` (bus or port state, error counters, last frame
  age), read fresh each time, for drivers with the `healthcheck` flag.
- `hwbridge://spec/<name>`: each source spec as loaded (`raw_spec()`: the DBC, the device
  spec), for drivers with the `raw_spec` flag; the text as it was, repaired or not.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, unquote

import anyio.to_thread
import orjson
from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from hwbridge.core.contract import Capability
from hwbridge.core.health import Health, RawSpec, health_of, raw_spec_of
from hwbridge.core.hybrid import HybridDriver

__all__ = ["DRIVER_URI", "HEALTH_URI", "SPEC_PREFIX", "Resources"]

log = logging.getLogger(__name__)

DRIVER_URI = "hwbridge://driver"
HEALTH_URI = "hwbridge://health"
SPEC_PREFIX = "hwbridge://spec/"
_JSON = "application/json"


class Resources:
    """The `resources/list` and `resources/read` handlers of one driver."""

    def __init__(self, driver: HybridDriver) -> None:
        self.driver = driver

    def _has_health(self) -> bool:
        # an orchestrator has a health check (its drivers' by label) without the flag
        # unless every driver has one
        return self.driver.meta.has_capability(Capability.HEALTHCHECK) or callable(
            getattr(self.driver, "healthcheck", None)
        )

    async def list(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        meta = self.driver.meta
        listed = [
            types.Resource(
                uri=DRIVER_URI,
                name="driver",
                title=f"{meta.name} {meta.version}",
                description="The driver's identity, bindings, capability flags and trust.",
                mime_type=_JSON,
            )
        ]
        if self._has_health():
            listed.append(
                types.Resource(
                    uri=HEALTH_URI,
                    name="health",
                    title="Bus and port status",
                    description="The connection's health, checked when read: state, error "
                    "counters, the age of the last frame, problems.",
                    mime_type=_JSON,
                )
            )
        for name, spec in self._specs().items():
            listed.append(
                types.Resource(
                    uri=SPEC_PREFIX + quote(name, safe="/"),
                    name=f"spec/{name}",
                    title=f"{spec.format} {name}",
                    description=_spec_description(spec),
                    mime_type="text/plain" if spec.text is not None else _JSON,
                    size=len(spec.text.encode()) if spec.text is not None else None,
                )
            )
        return types.ListResourcesResult(resources=listed)

    async def read(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == DRIVER_URI:
            return _json(uri, self.driver.meta.model_dump(mode="json"))
        if uri == HEALTH_URI and self._has_health():
            health = await anyio.to_thread.run_sync(self._health)
            return _json(uri, health.model_dump(mode="json"))
        if uri.startswith(SPEC_PREFIX):
            spec = self._specs().get(unquote(uri[len(SPEC_PREFIX) :]))
            if spec is not None:
                if spec.text is None:
                    return _json(uri, spec.model_dump(mode="json"))
                contents = types.TextResourceContents(
                    uri=uri, mime_type="text/plain", text=spec.text
                )
                return types.ReadResourceResult(contents=[contents])
        raise MCPError(INVALID_PARAMS, f"Unknown resource: {uri[:200]}")

    def _health(self) -> Health:
        if self.driver.meta.has_capability(Capability.HEALTHCHECK):
            return health_of(self.driver)
        try:
            health: Health = self.driver.healthcheck()  # type: ignore[attr-defined]
        except Exception as exc:  # a health check never fails the request
            return Health(status="unknown", problems=[f"the health check failed: {exc}"[:300]])
        return health

    def _specs(self) -> dict[str, RawSpec]:
        if self.driver.meta.has_capability(Capability.RAW_SPEC):
            return raw_spec_of(self.driver)
        specs = getattr(self.driver, "raw_spec", None)  # an orchestrator's, partly
        if not callable(specs):
            return {}
        try:
            found: dict[str, RawSpec] = specs()
        except Exception:
            log.warning(
                "the raw specs of %s could not be read", self.driver.meta.name, exc_info=True
            )
            return {}
        return found


def _json(uri: str, value: Any) -> types.ReadResourceResult:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    contents = types.TextResourceContents(uri=uri, mime_type=_JSON, text=text)
    return types.ReadResourceResult(contents=[contents])


def _spec_description(spec: RawSpec) -> str:
    parts = [f"The {spec.format} source as loaded"]
    if spec.source:
        parts.append(f"from {spec.source}")
    if spec.repaired:
        parts.append("(it loaded after in-memory repairs; this is the original text)")
    text = " ".join(parts) + "."
    return f"{text} sha256 {spec.sha256}." if spec.sha256 else text
