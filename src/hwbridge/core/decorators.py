"""Decorators around tool drivers: consent, hooks, rate limits, an audit trail.

Each one wraps any MCSToolDriver (a CanDriver, an Orchestrator, another decorator) and is
itself a HybridDriver, so it is used standalone, stacked in an orchestrator, or wrapped
again. The wrapped driver's tools, refusals and prompt guidance pass through unchanged; a
call is validated once, by the outermost driver, then runs through each decorator in turn.

They keep the wrapped driver's capability flags that they still honour, and no others.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwbridge.__about__ import __version__
from hwbridge.core.asking import ask_with_timeout
from hwbridge.core.contract import Capability, MCSToolDriver
from hwbridge.core.health import Health, RawSpec, health_of, raw_spec_of
from hwbridge.core.hybrid import HybridDriver, unchecked_execute
from hwbridge.core.limits import TokenBucket
from hwbridge.core.models import DriverMeta, Tool, ToolError

__all__ = ["AuditLog", "ConsentGate", "Hooks", "RateLimit", "ToolDriverDecorator"]

log = logging.getLogger(__name__)

Proceed = Callable[[str, dict[str, Any]], Any]
# Flags of the wrapped driver that a decorator honours by passing them through; the flags of
# the HybridDriver API (standalone, two_phase, ...) it has as a HybridDriver of its own.
_PASSED_THROUGH = frozenset(
    {Capability.MULTI_CONNECTION.value, Capability.HEALTHCHECK.value, Capability.RAW_SPEC.value}
)
_MAX_AUDITED_ARGUMENTS = 4_000


class ToolDriverDecorator(HybridDriver):
    """Base of the decorators: everything passes through to `inner` except `around()`."""

    meta = DriverMeta(
        id="b52d7e14-9c3a-4f08-8e61-0d4a7b2c9f35",
        name="hwbridge decorator",
        version=__version__,
    )

    def __init__(self, inner: MCSToolDriver) -> None:
        if not isinstance(inner, MCSToolDriver):
            raise TypeError(f"{type(inner).__name__} is not an MCSToolDriver")
        strategy = inner.prompt_strategy if isinstance(inner, HybridDriver) else "json"
        super().__init__(strategy)
        self.inner = inner
        self._proceed = unchecked_execute(inner)
        self.meta = _meta_for(type(self), inner)
        if isinstance(inner, HybridDriver):  # a remote's tools come and go: follow them
            inner.on_tools_changed(self.tools_changed)

    # -- the one thing a decorator changes -------------------------------------------------

    def around(self, tool: Tool, arguments: dict[str, Any], proceed: Proceed) -> Any:
        """Run the call (`proceed(name, arguments)`) with this decorator's behaviour."""
        return proceed(tool.name, arguments)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        tool = self._catalog().by_name[tool_name]
        return self.around(tool, arguments, self._proceed)

    # -- everything else is the wrapped driver's ---------------------------------------------

    def list_tools(self) -> list[Tool]:
        return self.inner.list_tools()

    def refused_tools(self) -> Mapping[str, ToolError]:
        return self.inner.refused_tools() if isinstance(self.inner, HybridDriver) else {}

    def essential_tools(self) -> list[Tool]:
        if isinstance(self.inner, HybridDriver):
            return self.inner.essential_tools()
        return self.inner.list_tools()

    def driver_guidance(self, model_name: str | None = None) -> str:
        if isinstance(self.inner, HybridDriver):
            return self.inner.driver_guidance(model_name)
        return ""

    def concurrency_key(self, tool_name: str) -> Hashable | None:
        if isinstance(self.inner, HybridDriver):
            return self.inner.concurrency_key(tool_name)
        return None

    def healthcheck(self) -> Health:
        """The wrapped driver's health (`unknown` when it has no health check)."""
        return health_of(self.inner)

    def raw_spec(self) -> dict[str, RawSpec]:
        """The wrapped driver's source specs (empty when it has none)."""
        return raw_spec_of(self.inner)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ToolDriverDecorator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConsentGate(ToolDriverDecorator):
    """Asks `ask(tool_name, arguments)` before each call that changes state (every tool not
    marked `read_only`), or before every call with `every_call=True`.

    Only an explicit True approves. False, any other answer, an exception or no answer
    within `timeout_s` refuse the call with CONSENT_DENIED: it fails, and nothing runs.
    """

    def __init__(
        self,
        inner: MCSToolDriver,
        ask: Callable[[str, dict[str, Any]], object],
        *,
        timeout_s: float = 60.0,
        every_call: bool = False,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        super().__init__(inner)
        self.ask = ask
        self.timeout_s = float(timeout_s)
        self.every_call = every_call

    def around(self, tool: Tool, arguments: dict[str, Any], proceed: Proceed) -> Any:
        if (self.every_call or not tool.read_only) and not self._approved(tool.name, arguments):
            raise ToolError(
                "CONSENT_DENIED",
                f"The user did not approve {tool.name}; nothing was done.",
            )
        return proceed(tool.name, arguments)

    def concurrency_key(self, tool_name: str) -> Hashable | None:
        # reads run at once only where nothing is asked: one question at a time
        return None if self.every_call else super().concurrency_key(tool_name)

    def _approved(self, tool_name: str, arguments: dict[str, Any]) -> bool:
        # asked in the call's own context: an answer given for this call (an MCP server's
        # elicitation) is there to be read
        context = contextvars.copy_context()
        return ask_with_timeout(
            lambda: context.run(self.ask, tool_name, dict(arguments)),
            self.timeout_s,
            what=tool_name,
        )


Hook = Callable[..., object]


class Hooks(ToolDriverDecorator):
    """Calls `pre(tool, arguments)` before each call, `post(tool, arguments, result)` after
    a success and `on_failure(tool, arguments, error)` after a failure.

    A hook that raises is logged and otherwise ignored: it never turns a call that was done
    into a failed one, nor stops a call from running.
    """

    def __init__(
        self,
        inner: MCSToolDriver,
        *,
        pre: Sequence[Hook] = (),
        post: Sequence[Hook] = (),
        on_failure: Sequence[Hook] = (),
    ) -> None:
        super().__init__(inner)
        self.pre = tuple(pre)
        self.post = tuple(post)
        self.on_failure = tuple(on_failure)

    def around(self, tool: Tool, arguments: dict[str, Any], proceed: Proceed) -> Any:
        _run_hooks(self.pre, tool.name, arguments)
        try:
            result = proceed(tool.name, arguments)
        except Exception as exc:
            _run_hooks(self.on_failure, tool.name, arguments, exc)
            raise
        _run_hooks(self.post, tool.name, arguments, result)
        return result


def _run_hooks(hooks: Iterable[Hook], *args: Any) -> None:
    for hook in hooks:
        try:
            hook(*args)
        except Exception:
            log.exception("hook %r failed for %s; the call goes on", hook, args[0])


class RateLimit(ToolDriverDecorator):
    """At most `calls_per_second` calls in all, and `per_tool[name]` for the named tools
    (a one-second burst each). A call over the limit fails with RATE_LIMITED (retryable);
    it does not wait."""

    def __init__(
        self,
        inner: MCSToolDriver,
        calls_per_second: float | None = None,
        *,
        per_tool: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(inner)
        self._all = TokenBucket(calls_per_second) if calls_per_second is not None else None
        names = {t.name for t in self.list_tools()}
        unknown = sorted(set(per_tool or {}) - names)
        if unknown:
            raise ValueError(f"per_tool names tools the driver does not have: {unknown}")
        self._per_tool = {name: TokenBucket(rate) for name, rate in (per_tool or {}).items()}

    def around(self, tool: Tool, arguments: dict[str, Any], proceed: Proceed) -> Any:
        bucket = self._per_tool.get(tool.name)
        for limit, scope in ((bucket, tool.name), (self._all, "all tools")):
            if limit is not None:
                wait = limit.take()
                if wait:
                    raise ToolError(
                        "RATE_LIMITED",
                        f"At most {limit.rate:g} calls per second are allowed for {scope}; "
                        f"try again in {min(wait, 60):.2f} s.",
                        retryable=True,
                    )
        return proceed(tool.name, arguments)


class AuditLog(ToolDriverDecorator):
    """Appends one JSON line per call to `path`: time, tool, arguments, outcome (`done` or
    `failed` with its code) and duration. The file is opened for appending at construction,
    so a path that cannot be written fails there, before any call runs."""

    def __init__(self, inner: MCSToolDriver, path: str | Path) -> None:
        super().__init__(inner)
        self.path = Path(path)
        try:
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise ValueError(f"audit log {str(self.path)!r} cannot be written: {exc}") from exc
        self._lock = threading.Lock()

    def around(self, tool: Tool, arguments: dict[str, Any], proceed: Proceed) -> Any:
        start = time.monotonic()
        try:
            result = proceed(tool.name, arguments)
        except ToolError as exc:
            self._write(tool.name, arguments, start, "failed", exc.code)
            raise
        except Exception:
            self._write(tool.name, arguments, start, "failed", "INTERNAL_ERROR")
            raise
        self._write(tool.name, arguments, start, "done", None)
        return result

    def _write(
        self, tool: str, arguments: dict[str, Any], start: float, outcome: str, code: str | None
    ) -> None:
        shown: Any = arguments
        text = json.dumps(arguments, ensure_ascii=False, default=str)
        if len(text) > _MAX_AUDITED_ARGUMENTS:
            shown = {"truncated": text[:_MAX_AUDITED_ARGUMENTS]}
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "tool": tool,
            "arguments": shown,
            "outcome": outcome,
            "duration_ms": round((time.monotonic() - start) * 1000, 3),
        }
        if code:
            entry["code"] = code
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            # the call has happened: losing the line must not misreport it (invariant 10)
            log.exception("could not append to the audit log %s", self.path)


def _meta_for(cls: type[ToolDriverDecorator], inner: MCSToolDriver) -> DriverMeta:
    inner_meta: DriverMeta | None = getattr(inner, "meta", None)
    own = cls.meta
    if inner_meta is None:
        return own
    kept = [c for c in inner_meta.capabilities if c in _PASSED_THROUGH]
    flags = list(own.capabilities) + [c for c in kept if c not in own.capabilities]
    return inner_meta.model_copy(
        update={"name": f"{inner_meta.name} ({cls.__name__})", "capabilities": flags}
    )
