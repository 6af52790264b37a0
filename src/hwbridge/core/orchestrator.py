"""Orchestrator: many tool drivers behind one MCSDriver (spec section 4, "Stacked").

The orchestrator is itself a HybridDriver, so it has one system prompt, one tool list,
native tools, the two-phase API, and it nests inside another orchestrator. It validates a
call once, against the schema of the tool that will run, and hands it to that driver.

Tool names never change under a running conversation: a driver registered later gets a
`label__` prefix only on the tools whose names are already taken (`namespace`), loses them
(`priority`), or is refused (`reject`). With `names="dotted"` every tool is offered as
`label.name` (`bench1.read_signals`: one label per bench of a farm), so no two drivers
clash. A tool no driver has passes through as an empty DriverResponse, as the spec requires.

Calls go to their driver without any lock of the orchestrator's: calls to two drivers (two
remote benches) run at once, and reads of one LLM output addressed to different drivers run
side by side (`concurrency_key`). A driver whose tools change (a remote server's) is followed:
its new tools are offered, its old ones keep their names.

A tool that cannot be offered (its name is taken under `reject`, or `label.name` is longer
than 64 characters) refuses the driver when the programmer registers it, but is only left
out (and logged) when a server chose the name: on a refresh, and for a driver that lists
the tools it skips (`skipped_tools`, as McpToolDriver does), so a remote bench's names never
stop a farm.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hwbridge.__about__ import __version__
from hwbridge.core.contract import Capability, MCSToolDriver
from hwbridge.core.health import Health, RawSpec, health_of, raw_spec_of
from hwbridge.core.hybrid import HybridDriver, unchecked_execute
from hwbridge.core.models import DriverBinding, DriverMeta, Tool, ToolError, is_tool_name
from hwbridge.core.prompts import PromptStrategy, estimate_tokens

__all__ = ["ConflictPolicy", "Naming", "Orchestrator", "label_problem"]

log = logging.getLogger(__name__)

ConflictPolicy = Literal["namespace", "priority", "reject"]
Naming = Literal["plain", "dotted"]
"""plain: tools keep their own names (clashes settled by the conflict policy); dotted:
every tool is offered as `label.name`."""
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,24}$")
_SEPARATOR = "__"
_DOT = "."
# Flags an orchestrator honours when every driver it holds does (its own come from HybridDriver).
_SHARED_FLAGS = (
    Capability.MULTI_CONNECTION.value,
    Capability.HEALTHCHECK.value,
    Capability.RAW_SPEC.value,
)


@dataclass(frozen=True, slots=True)
class _Entry:
    label: str
    driver: MCSToolDriver
    # exposed name -> the driver's own name, fixed when the tool was first seen
    names: Mapping[str, str]
    by_own: Mapping[str, str]  # the same, the other way round

    @classmethod
    def of(cls, label: str, driver: MCSToolDriver, names: Mapping[str, str]) -> _Entry:
        return cls(label, driver, dict(names), {own: exp for exp, own in names.items()})

    def exposed(self, own: str) -> str | None:
        """The name the orchestrator offers for the driver's tool `own` (None: not offered)."""
        return self.by_own.get(own)


@dataclass(frozen=True, slots=True)
class _Route:
    entry: _Entry
    name: str  # the tool's name inside its driver


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What a call sees: replaced as a whole when drivers are added or removed."""

    entries: tuple[_Entry, ...]
    tools: tuple[Tool, ...]
    routes: Mapping[str, _Route]
    refused: Mapping[str, ToolError]


class Orchestrator(HybridDriver):
    """Several tool drivers (CanDriver, SerialDriver, ObdDriver, another Orchestrator...)
    as one driver.

    `conflict` decides what happens when two drivers offer a tool with the same name:
    `namespace` (default) exposes the later one as `label__name`, `priority` keeps the
    first registered, `reject` refuses to register the later driver. `names="dotted"`
    offers every tool as `label.name` (a farm of benches: `bench1.read_signals`); a
    driver registered without a label gets its own `label` attribute when it has one
    (`McpToolDriver(url, label="bench1")`), else one made from its name.
    """

    meta = DriverMeta(
        id="8a4e0f7c-3d2b-4e6a-9c15-6b0d2f8e1a47",
        name="hwbridge Orchestrator",
        version=__version__,
        bindings=[DriverBinding(capability="orchestrator", adapter="mcs", spec_format="MCS")],
    )

    def __init__(
        self,
        drivers: Mapping[str, MCSToolDriver] | Iterable[MCSToolDriver] = (),
        *,
        conflict: ConflictPolicy = "namespace",
        names: Naming = "plain",
        prompt_strategy: str | Path | PromptStrategy = "json",
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        super().__init__(prompt_strategy, prompt_overrides=prompt_overrides)
        if conflict not in ("namespace", "priority", "reject"):
            raise ValueError("conflict must be 'namespace', 'priority' or 'reject'")
        if names not in ("plain", "dotted"):
            raise ValueError("names must be 'plain' or 'dotted'")
        self.conflict: ConflictPolicy = conflict
        self.names: Naming = names
        self._lock = threading.RLock()  # a driver may report new tools while we register it
        self._stops: dict[str, Callable[[], None]] = {}
        self._snapshot = _Snapshot((), (), {}, {})
        self.meta = type(self).meta  # refined per instance as drivers come and go
        items = drivers.items() if isinstance(drivers, Mapping) else ((None, d) for d in drivers)
        for label, driver in items:
            self.add_driver(driver, label=label)

    # -- registration ----------------------------------------------------------------------

    def add_driver(self, driver: MCSToolDriver, label: str | None = None) -> str:
        """Register a driver; returns its label (made from its name when not given)."""
        if not isinstance(driver, MCSToolDriver):
            raise TypeError(f"{type(driver).__name__} is not an MCSToolDriver")
        if driver is self:
            raise ValueError("an orchestrator cannot hold itself")
        with self._lock:
            current = self._snapshot
            own = getattr(driver, "label", None)
            label = (
                label
                or (own if isinstance(own, str) and own else None)
                or _label_from(driver, {e.label for e in current.entries})
            )
            problem = label_problem(label)
            if problem is not None:
                raise ValueError(problem)
            if any(e.label == label for e in current.entries):
                raise ValueError(f"a driver is already registered as {label!r}")
            if any(e.driver is driver for e in current.entries):
                raise ValueError("this driver is already registered")
            entry = self._entry_for(label, driver, current, lenient=_names_from_elsewhere(driver))
            self._publish((*current.entries, entry))
            if isinstance(driver, HybridDriver):
                self._stops[label] = driver.on_tools_changed(self.refresh)
        return label

    def remove_driver(self, label: str) -> MCSToolDriver:
        """Unregister a driver (it is not closed) and return it. Other names stay as they are."""
        with self._lock:
            current = self._snapshot
            kept = tuple(e for e in current.entries if e.label != label)
            if len(kept) == len(current.entries):
                known = ", ".join(e.label for e in current.entries) or "none"
                raise KeyError(f"no driver is registered as {label!r} (registered: {known})")
            removed = next(e for e in current.entries if e.label == label)
            stop = self._stops.pop(label, None)
            if stop is not None:
                stop()
            self._publish(kept)
        return removed.driver

    @property
    def drivers(self) -> dict[str, MCSToolDriver]:
        return {e.label: e.driver for e in self._snapshot.entries}

    def refresh(self) -> None:
        """Re-read the drivers' tool lists (after one of them changed its tools; a driver
        that reports its changes, such as McpToolDriver, triggers this itself). Names
        already offered stay; a new tool that cannot be offered (its name is taken under
        `reject`, or too long) is left out and logged."""
        with self._lock:
            current = self._snapshot
            entries: list[_Entry] = []
            for e in current.entries:
                partial = _Snapshot(tuple(entries), (), {}, {})
                entries.append(
                    self._entry_for(e.label, e.driver, partial, keep=e.names, lenient=True)
                )
            self._publish(tuple(entries))

    def _entry_for(
        self,
        label: str,
        driver: MCSToolDriver,
        current: _Snapshot,
        keep: Mapping[str, str] | None = None,
        lenient: bool = False,
    ) -> _Entry:
        """The names under which `driver`'s tools are offered; a tool that cannot be offered
        raises ValueError, or with `lenient` is left out (and logged)."""
        taken = {name: e.label for e in current.entries for name in e.names}
        kept_by_own = {own: exposed for exposed, own in (keep or {}).items()}
        names: dict[str, str] = {}
        for tool in driver.list_tools():
            try:
                exposed = self._name_for(label, tool.name, kept_by_own.get(tool.name), taken, names)
            except ValueError as exc:
                if not lenient:
                    raise
                log.warning("%s; it is not offered", exc)
                continue
            if exposed is not None:
                names[exposed] = tool.name
        return _Entry.of(label, driver, names)

    def _name_for(
        self,
        label: str,
        own: str,
        kept: str | None,
        taken: Mapping[str, str],
        names: Mapping[str, str],
    ) -> str | None:
        """The name the tool `own` of driver `label` is offered under (`kept`: the one it
        had before); None: not offered. `taken` maps other drivers' names to their labels,
        `names` holds this driver's so far."""
        exposed = kept
        if exposed is None or exposed in taken:
            exposed = f"{label}{_DOT}{own}" if self.names == "dotted" else own
            if not is_tool_name(exposed):
                raise ValueError(
                    f"tool {own!r} of driver {label!r} would be offered as {exposed!r}, "
                    "which is longer than 64 characters; use a shorter label"
                )
        if exposed not in taken and exposed not in names:
            return exposed
        other = taken.get(exposed, label)
        if self.conflict == "reject":
            raise ValueError(
                f"tool {own!r} of driver {label!r} has the same name as a tool "
                f"of driver {other!r} (conflict='reject')"
            )
        if self.conflict == "priority":
            return None
        exposed = f"{label}{_SEPARATOR}{own}"
        if not is_tool_name(exposed) or exposed in taken:
            raise ValueError(
                f"tool {own!r} of driver {label!r} clashes with driver "
                f"{other!r} and {exposed!r} is not a usable name; use a shorter label"
            )
        return exposed

    def _publish(self, entries: tuple[_Entry, ...]) -> None:
        """Build the snapshot every call will see, then drop the cached catalog (caller locks)."""
        routes: dict[str, _Route] = {}
        refused: dict[str, ToolError] = {}
        for entry in entries:
            for exposed, own in entry.names.items():
                routes[exposed] = _Route(entry, own)
            if isinstance(entry.driver, HybridDriver):
                for name, error in entry.driver.refused_tools().items():
                    refused.setdefault(name, error)
        choice = self._fit(entries)
        tools = tuple(
            t.model_copy(update={"name": exposed}) if exposed != t.name else t
            for entry in entries
            for t in choice[entry.label]
            for exposed in [entry.exposed(t.name)]
            if exposed is not None
        )
        offered = {t.name for t in tools}
        routes = {k: v for k, v in routes.items() if k in offered}
        self._snapshot = _Snapshot(
            entries, tools, routes, {k: v for k, v in refused.items() if k not in offered}
        )
        self.meta = _meta_for(type(self).meta, entries)
        self.tools_changed()

    def _fit(self, entries: tuple[_Entry, ...]) -> dict[str, list[Tool]]:
        """Each driver's tools, trimmed to its essential ones, largest first, until the
        prompt fits the pack's budget: one big database does not push the others out."""
        full = {e.label: e.driver.list_tools() for e in entries}
        strategy = self.prompt_strategy
        guidance = self._guidance(entries, None)

        def fits(choice: dict[str, list[Tool]]) -> bool:
            tools = [t for tools in choice.values() for t in tools]
            prompt = strategy.system_message(tools, guidance)
            return estimate_tokens(prompt) <= strategy.token_budget

        choice = dict(full)
        if fits(choice):
            return choice
        trimmable = sorted(
            (e for e in entries if isinstance(e.driver, HybridDriver)),
            key=lambda e: -len(full[e.label]),
        )
        for entry in trimmable:
            assert isinstance(entry.driver, HybridDriver)
            essential = entry.driver.essential_tools()
            if len(essential) < len(choice[entry.label]):
                choice[entry.label] = essential
                if fits(choice):
                    break
        return choice

    # -- MCSToolDriver ---------------------------------------------------------------------

    def list_tools(self) -> list[Tool]:
        return list(self._snapshot.tools)

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        route = self._snapshot.routes.get(tool_name)
        if route is None:
            raise ToolError("UNKNOWN_TOOL", f"{tool_name} is no longer offered by any driver")
        # validated against this very schema already (by process_llm_response or by the
        # direct-call check): the inner driver need not check it again
        return unchecked_execute(route.entry.driver)(route.name, arguments)

    def refused_tools(self) -> Mapping[str, ToolError]:
        return self._snapshot.refused

    def concurrency_key(self, tool_name: str) -> Hashable | None:
        """Reads of different drivers may run at once; a driver's own calls stay in order."""
        route = self._snapshot.routes.get(tool_name)
        return None if route is None else route.entry.label

    def essential_tools(self) -> list[Tool]:
        offered = set(self._snapshot.routes)
        keep: set[str] = set()
        for entry in self._snapshot.entries:
            own = (
                entry.driver.essential_tools()
                if isinstance(entry.driver, HybridDriver)
                else entry.driver.list_tools()
            )
            keep |= {n for t in own if (n := entry.exposed(t.name)) in offered}
        return [t for t in self._snapshot.tools if t.name in keep]

    # -- health and raw specs (spec section 14) --------------------------------------------

    def healthcheck(self) -> Health:
        """Each driver's health by label (`unknown` for a driver without a health check);
        the status is the worst of theirs."""
        return Health.combine({e.label: health_of(e.driver) for e in self._snapshot.entries})

    def health(self) -> Health:
        """`healthcheck()` by the name a farm asks it: each driver (each bench) by label."""
        return self.healthcheck()

    def raw_spec(self) -> dict[str, RawSpec]:
        """The source specs of every driver that has them, as `label/name`."""
        return {
            f"{e.label}/{name}": spec
            for e in self._snapshot.entries
            for name, spec in raw_spec_of(e.driver).items()
        }

    # -- prompt ----------------------------------------------------------------------------

    def driver_guidance(self, model_name: str | None = None) -> str:
        return self._guidance(self._snapshot.entries, model_name)

    @staticmethod
    def _guidance(entries: Iterable[_Entry], model_name: str | None) -> str:
        parts = [
            e.driver.driver_guidance(model_name)
            for e in entries
            if isinstance(e.driver, HybridDriver)
        ]
        return "\n\n".join(p for p in parts if p)


def label_problem(label: str) -> str | None:
    """Why `label` cannot name a driver (None: it can): 1-24 letters, digits, `_` or `-`,
    with no `__` (the separator of `label__name` and of native aliases,
    `bench1__read_signals`) and no `_` at its end, so that an alias or a namespaced name
    always says which driver it belongs to: with labels `a` and `a__b`, `a__b__c` could be
    `a__b.c` or `a.b__c`; with `a_` and `a`, `a___b` could be `a_.b` or `a._b`."""
    if not _LABEL.match(label):
        return f"label {label!r} must be 1-24 letters, digits, _ or -"
    if _SEPARATOR in label or label.endswith("_"):
        return f"label {label!r} may not contain __ nor end with _ (__ separates label and name)"
    return None


def _names_from_elsewhere(driver: MCSToolDriver) -> bool:
    """Whether a server chose the driver's tool names (it lists what it skips: McpToolDriver)."""
    return callable(getattr(driver, "skipped_tools", None))


def _label_from(driver: MCSToolDriver, taken: set[str]) -> str:
    meta = getattr(driver, "meta", None)
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", getattr(meta, "name", "") or type(driver).__name__)
    base = re.sub(r"_+", "_", base).strip("_").lower()[:20].rstrip("_") or "driver"
    label, n = base, 2
    while label in taken:
        label, n = f"{base}{n}", n + 1
    return label


def _meta_for(base: DriverMeta, entries: tuple[_Entry, ...]) -> DriverMeta:
    """The orchestrator's bindings are its drivers'; shared flags only if all honour them."""
    metas = [getattr(e.driver, "meta", None) for e in entries]
    bindings = [b for m in metas if m is not None for b in m.bindings] or list(base.bindings)
    flags = list(base.capabilities)
    for flag in _SHARED_FLAGS:
        if metas and all(m is not None and flag in m.capabilities for m in metas):
            flags.append(flag)
    return base.model_copy(update={"bindings": bindings, "capabilities": flags})
