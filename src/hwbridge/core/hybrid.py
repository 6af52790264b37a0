"""HybridDriver: implement `list_tools` and `execute_tool`, get everything LLM-facing.

The path of a call: `detect_tool_call` (parse only, no side effects) -> validation against
each tool's JSON Schema -> `execute_tool` -> a DriverResponse whose `messages` are in the
dialect the call came in. `process_llm_response` is exactly detect then execute, and never
raises. The driver keeps no per-call state, so one instance serves any number of threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, wraps
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple

import orjson

from hwbridge.core.aio import CallJob, run_in_worker
from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
from hwbridge.core.extraction import TOO_DEEP, CallExtractor, Found
from hwbridge.core.jsonsafe import dumps, loads, writable
from hwbridge.core.messages import Outcome, build_messages, plain_messages, result_text_json
from hwbridge.core.models import (
    CallView,
    Dialect,
    DriverMeta,
    DriverResponse,
    NativeToolContext,
    Tool,
    ToolCall,
    ToolError,
    trusted,
)
from hwbridge.core.native import Provider, native_aliases, native_tools
from hwbridge.core.prompts import PromptStrategy
from hwbridge.core.validation import ArgumentValidator

__all__ = ["HybridDriver", "unchecked_execute"]

log = logging.getLogger(__name__)

_DERIVED = (
    Capability.STANDALONE,
    Capability.ORCHESTRATABLE,
    Capability.TWO_PHASE,
    Capability.TOOL_CALL_SIGNALING,
    Capability.TCS,
    Capability.NATIVE_TOOLS,
)
_NOT_OBJECT = "arguments are not a JSON object"
_NEEDS_ID = frozenset({"openai", "openai_responses", "anthropic"})
_EMPTY = DriverResponse()
_CALL_FIELDS = frozenset(ToolCall.model_fields)
_RESPONSE_FIELDS = frozenset(DriverResponse.model_fields)


class PendingCall(NamedTuple):
    """A detected call inside the driver: a ToolCall's fields without the pydantic cost."""

    tool: str
    arguments: dict[str, Any]
    call_id: str | None
    dialect: Dialect
    error: str | None
    healed: bool
    origin: str | dict[str, Any]


_OPENERS = ("{", "```", "~~~")


@dataclass(frozen=True)
class _Catalog:
    """The driver's tools, indexed once, each with its compiled argument validator.

    A tool whose name a provider refuses (`bench1.read_signals`) is offered to native
    function calling under an alias (`bench1__read_signals`): a call may name either, and
    runs the tool under its own name."""

    tools: tuple[Tool, ...]
    by_name: dict[str, Tool]
    validators: dict[str, ArgumentValidator]  # by name and by alias
    refused: dict[str, ToolError]
    claimed: frozenset[str]  # every name this driver answers: its tools, aliases, refused ones
    aliases: dict[str, str]  # name -> its native alias (only names a provider refuses)
    real: dict[str, str]  # alias -> name

    @classmethod
    def of(
        cls,
        tools: list[Tool],
        refused: Mapping[str, ToolError],
        kept: Mapping[str, str] | None = None,
    ) -> _Catalog:
        """`kept`: the aliases given before (`native_aliases`), which stay what they were."""
        by_name = {t.name: t for t in tools}
        aliases = native_aliases(by_name, kept)
        validators = {t.name: ArgumentValidator(t) for t in tools}
        validators.update({alias: validators[name] for name, alias in aliases.items()})
        return cls(
            tuple(tools),
            by_name,
            validators,
            {k: v for k, v in refused.items() if k not in by_name},
            frozenset(by_name) | frozenset(refused) | frozenset(aliases.values()),
            aliases,
            {alias: name for name, alias in aliases.items()},
        )

    def tool(self, name: str) -> Tool | None:
        """The tool a call names, by its name or by its native alias."""
        return self.by_name.get(self.real.get(name, name))


_RETIRED_ALIASES = 1024
"""Aliases of tools no longer offered that are still kept from other tools (the oldest go
first): a driver whose tools are renamed without end does not grow without end."""


def _remembered(given: Mapping[str, str], aliases: Mapping[str, str]) -> dict[str, str]:
    """The aliases to keep for the next catalog: the current ones and the most recent
    _RETIRED_ALIASES of those given before (`native_aliases`)."""
    retired = [(name, alias) for name, alias in given.items() if name not in aliases]
    return {**dict(retired[-_RETIRED_ALIASES:]), **aliases}


@cache
def _extractor_for(strategy: PromptStrategy) -> CallExtractor:
    return CallExtractor(strategy)


class HybridDriver(MCSDriver, MCSToolDriver):
    """Base class for drivers: subclass it, set `meta`, implement the two tool methods.

    `prompt_strategy` picks the prompt pack: "json" (default), "xml", "compact", the path of
    a TOML file, or a loaded PromptStrategy. `prompt_overrides` merges over it.
    """

    meta: DriverMeta
    _prompt: PromptStrategy | None = None
    _hw_execute: ClassVar[Callable[[Any, str, dict[str, Any]], Any]]  # execute_tool, unchecked

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A direct call of execute_tool validates (spec section 4.2); the driver's own path,
        # which has validated already, calls the implementation underneath.
        own = getattr(cls, "execute_tool", None)
        if (
            callable(own)
            and not getattr(own, "_hw_validating", False)
            and not getattr(own, "__isabstractmethod__", False)
        ):
            cls._hw_execute = own
            cls.execute_tool = _validating(own)  # type: ignore[method-assign,assignment]
        meta = cls.__dict__.get("meta")
        if isinstance(meta, DriverMeta):
            caps = list(meta.capabilities)
            caps += [c.value for c in _DERIVED if c.value not in caps]
            cls.meta = meta.model_copy(update={"capabilities": caps})

    def __init__(
        self,
        prompt_strategy: str | Path | PromptStrategy = "json",
        *,
        prompt_overrides: dict[str, Any] | str | Path | None = None,
    ) -> None:
        if isinstance(prompt_strategy, PromptStrategy):
            self._prompt = prompt_strategy
        elif prompt_strategy != "json" or prompt_overrides:
            self._prompt = PromptStrategy.load(prompt_strategy, prompt_overrides)

    # -- configuration ---------------------------------------------------------------------

    @property
    def prompt_strategy(self) -> PromptStrategy:
        return self._prompt or PromptStrategy.default()

    def driver_guidance(self, model_name: str | None = None) -> str:
        """Driver-specific text for the system prompt's {guidance}; load it from a pack."""
        return ""

    def _catalog(self) -> _Catalog:
        """The tools indexed, built once per change of tools, one build at a time (the
        native aliases of one build are what the next keeps); a build that a change of tools
        overtook is used once, never kept."""
        catalog: _Catalog | None = self.__dict__.get("_hw_catalog")
        if catalog is not None:
            return catalog
        with self.__dict__.setdefault("_hw_building", threading.Lock()):
            catalog = self.__dict__.get("_hw_catalog")
            if catalog is None:
                version = self.__dict__.get("_hw_version", 0)
                given: dict[str, str] = self.__dict__.get("_hw_aliases", {})
                catalog = _Catalog.of(self.list_tools(), self.refused_tools(), given)
                self.__dict__["_hw_aliases"] = _remembered(given, catalog.aliases)
                if self.__dict__.get("_hw_version", 0) == version:
                    self.__dict__["_hw_catalog"] = catalog
        return catalog

    def refused_tools(self) -> Mapping[str, ToolError]:
        """Tool names this driver claims but will not run (say, send tools under a read-only
        policy). A call to one fails with its ToolError instead of passing through to
        another driver; the names are not offered to the LLM.
        """
        return {}

    def essential_tools(self) -> list[Tool]:
        """The tools to keep when a prompt must be shorter (an orchestrator sharing one token
        budget among several drivers); by default all of them."""
        return list(self._catalog().tools)

    def tools_changed(self) -> None:
        """Re-read `list_tools()` on next use (for drivers whose tools really change), and
        tell whoever listens (`on_tools_changed`: an orchestrator or a decorator holding
        this driver)."""
        self.__dict__["_hw_version"] = self.__dict__.get("_hw_version", 0) + 1
        self.__dict__.pop("_hw_catalog", None)
        refs: list[Callable[[], Callable[[], None] | None]] = self.__dict__.get("_hw_listeners", [])
        for ref in list(refs):
            listener = ref()
            if listener is None:  # its owner is gone
                with contextlib.suppress(ValueError):
                    refs.remove(ref)
                continue
            try:
                listener()
            except Exception:
                log.exception("a listener for the tools of %s failed", type(self).__name__)

    def on_tools_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` (from any thread) whenever this driver's tools change; returns
        the function that stops it. A bound method is held weakly: an orchestrator or a
        decorator that is dropped stops listening."""
        refs: list[Callable[[], Callable[[], None] | None]] = self.__dict__.setdefault(
            "_hw_listeners", []
        )
        ref: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(listener) if inspect.ismethod(listener) else lambda: listener
        )
        refs.append(ref)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                refs.remove(ref)

        return stop

    # -- MCSDriver: expose -----------------------------------------------------------------

    def get_function_description(self, model_name: str | None = None) -> str:
        strategy = self.prompt_strategy.for_model(model_name)
        return strategy.render_tools(list(self._catalog().tools))

    def get_driver_system_message(self, model_name: str | None = None) -> str:
        strategy = self.prompt_strategy.for_model(model_name)
        return strategy.system_message(
            list(self._catalog().tools), self.driver_guidance(model_name)
        )

    def get_native_tools(
        self, provider: Literal["openai", "openai_responses", "anthropic", "gemini"]
    ) -> list[dict[str, Any]]:
        """Tool definitions for a provider's native function-calling API; a tool whose name
        the providers refuse (a dot: `bench1.read_signals`) is defined under its alias
        (`bench1__read_signals`), and a call by the alias runs the tool."""
        catalog = self._catalog()
        aliases = catalog.aliases
        tools = [
            t.model_copy(update={"name": aliases[t.name]}) if t.name in aliases else t
            for t in catalog.tools
        ]
        return native_tools(tools, provider, self.prompt_strategy)

    def get_native_system_message(self, model_name: str | None = None) -> str:
        """The system prompt to send alongside `get_native_tools`."""
        strategy = self.prompt_strategy.for_model(model_name)
        return strategy.native_system_message(self.driver_guidance(model_name))

    def get_native_tool_context(
        self, model_name: str | None = None, *, provider: Provider | None = None
    ) -> NativeToolContext:
        """The system message and tool definitions for one request (the reference SDK's
        `SupportsNativeTools`, promised by the `native_tools` flag).

        hwbridge keeps no registry of which model can call functions: name the `provider`
        and the tools come in its native format beside the native system message; without
        one they stay written into the system message (`tools` is None), which every model
        reads, as the reference SDK does when it cannot tell.
        """
        if provider is None:
            return NativeToolContext(system_message=self.get_driver_system_message(model_name))
        return NativeToolContext(
            system_message=self.get_native_system_message(model_name),
            tools=self.get_native_tools(provider),
        )

    # -- MCSDriver: execute ----------------------------------------------------------------

    def process_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        """Detect, validate and execute the calls in an LLM output. Never raises.

        With `streaming=True` the text is an unfinished chunk: nothing is executed and an
        empty response returns; pass the final output again with `streaming=False`.
        """
        if streaming:
            return _EMPTY
        try:
            if type(llm_response) is str:
                fast = self._fast_path(llm_response)
                if fast is not None:
                    return fast
            calls = self._detect(llm_response)
            if not calls:
                return _EMPTY
            return self.execute_tool_call(calls)
        except Exception:  # detection failed: nothing has run
            return self._internal_error()

    def _internal_error(self) -> DriverResponse:
        error_id = uuid.uuid4().hex[:8]
        log.exception("process_llm_response failed (error id %s)", error_id)
        hint = self.prompt_strategy.retry("internal_error", tool="the tool", error_id=error_id)
        return DriverResponse(
            call_failed=True,
            call_detail=f"INTERNAL_ERROR: internal error {error_id}",
            retry_prompt=hint,
            messages=[{"role": self.prompt_strategy.result_role, "content": hint}],
        )

    # -- async (spec section 14): the same answers, without blocking the event loop --------

    async def aprocess_llm_response(
        self, llm_response: str | dict[str, Any], *, streaming: bool = False
    ) -> DriverResponse:
        """`process_llm_response` for asyncio: the same answer, computed in a worker thread so
        bus waits never block the event loop. Cancelling the await abandons reads and waits
        for sends (see `hwbridge.core.aio`); never raises otherwise."""
        if streaming:
            return _EMPTY

        def work(job: CallJob) -> DriverResponse:
            try:
                calls = self._detect(llm_response)
                if not calls:
                    return _EMPTY
                if not job.begin(self.changes_state(calls)):
                    return _EMPTY  # cancelled before anything ran
                return self.execute_tool_call(calls)
            except Exception:
                return self._internal_error()

        return await run_in_worker(work, name=f"hwbridge-call[{type(self).__name__}]")

    async def aexecute_tool_call(self, calls: Sequence[CallView]) -> DriverResponse:
        """`execute_tool_call` for asyncio, with the cancellation rules of
        `aprocess_llm_response`."""

        def work(job: CallJob) -> DriverResponse:
            if not job.begin(self.changes_state(calls)):
                return _EMPTY
            return self.execute_tool_call(calls)

        return await run_in_worker(work, name=f"hwbridge-call[{type(self).__name__}]")

    def changes_state(self, calls: Sequence[CallView]) -> bool:
        """True unless every call that could run is a read-only tool (cancellation, consent
        and a server's log treat the two apart)."""
        catalog = self._catalog()
        for call in calls:
            tool = catalog.tool(call.tool)
            if tool is not None and call.error is None and not tool.read_only:
                return True
        return False

    def tool_name(self, name: str) -> str:
        """The name of the tool a call names: itself, or the tool a native alias stands for
        (`bench1__read_signals` -> `bench1.read_signals`), for showing a call to people."""
        return self._catalog().real.get(name, name)

    def concurrency_key(self, tool_name: str) -> Hashable | None:
        """Calls of one output whose keys differ may run at once, when none of them changes
        state (an orchestrator's benches); None (the default): this driver runs its calls
        one after the other."""
        return None

    def _fast_path(self, text: str) -> DriverResponse | None:
        """The reply the prompt asks for, one `{"tool": ..., "arguments": {...}}` object with
        valid arguments, executed without the general machinery. None: take the general path
        (nothing has run). The result is exactly what detect then execute would give.
        """
        s = text.strip()
        if s[:1] != "{" or s[-1:] != "}":
            return None
        try:
            obj = loads(s)
        except ValueError:
            return None
        if type(obj) is not dict or len(obj) != 2:
            return None
        extractor = self.__dict__.get("_hw_extractor") or self._extractor()
        name = obj.get(extractor.tool_key)
        args = obj.get(extractor.argument_key)
        if type(name) is not str or type(args) is not dict:
            return None
        catalog = self.__dict__.get("_hw_catalog") or self._catalog()
        validator = catalog.validators.get(name)
        if validator is None or not validator.is_valid(args):
            return None
        strategy = self._prompt or PromptStrategy.default()
        ok, result, result_json, retry, detail, _ = self._execute(name, args, strategy)
        said = (
            strategy.result_text(name, result_text_json(name, result, result_json, strategy))
            if ok
            else retry
        )
        messages: list[dict[str, Any]] = [
            {"role": "assistant", "content": text},
            {"role": strategy.result_role, "content": said},
        ]
        return _single_response(ok, result, detail, retry, messages)

    def detect_tool_call(self, llm_response: str | dict[str, Any] | Any) -> list[ToolCall]:
        """The calls to this driver's tools in `llm_response`. Parses only; executes nothing."""
        return [
            trusted(
                ToolCall,
                {
                    "tool": c.tool,
                    "arguments": c.arguments,
                    "call_id": c.call_id,
                    "dialect": c.dialect,
                    "error": c.error,
                    "healed": c.healed,
                },
                {"_origin": c.origin},
                _CALL_FIELDS,
            )
            for c in self._detect(llm_response)
        ]

    def _detect(self, llm_response: str | dict[str, Any] | Any) -> list[PendingCall]:
        claimed = self._catalog().claimed
        try:
            response = (
                llm_response if type(llm_response) in (str, dict) else _normalize(llm_response)
            )
            extractor = self._extractor()
            found = extractor.extract(response, claimed.__contains__)
        except (RecursionError, OverflowError, UnicodeError, ValueError, TypeError):
            # an object that cannot be read at all (each call's own problems stay its own)
            log.debug("no call found in an output that could not be read", exc_info=True)
            return []
        depth = extractor.max_depth
        return [_pending(f, response, depth) for f in found if f.name in claimed]

    def _extractor(self) -> CallExtractor:
        extractor: CallExtractor | None = self.__dict__.get("_hw_extractor")
        if extractor is None:
            extractor = _extractor_for(self.prompt_strategy)
            self.__dict__["_hw_extractor"] = extractor
        return extractor

    def execute_tool_call(self, calls: Sequence[CallView]) -> DriverResponse:
        """Validate and execute calls found by `detect_tool_call`, in order."""
        catalog = self._catalog()
        claimed = catalog.claimed
        strategy = self._prompt or PromptStrategy.default()
        if len(calls) == 1:  # the common case, without the list plumbing
            if calls[0].tool not in claimed:
                return _EMPTY
            return _respond_one(self._run(calls[0], catalog, strategy), strategy)
        calls = [c for c in calls if c.tool in claimed]
        if not calls:
            return _EMPTY
        limit = strategy.parsing.max_calls
        outcomes = self._run_all(calls[:limit], catalog, strategy)
        outcomes += _not_run(calls[limit:], limit, strategy)
        return _respond(outcomes, strategy)

    def _run_all(
        self, calls: Sequence[CallView], catalog: _Catalog, strategy: PromptStrategy
    ) -> list[Outcome]:
        """The outcomes in the calls' order. Reads that `concurrency_key` puts apart (two
        benches) run at once, each group in order in a thread of its own; anything that
        changes state keeps the whole output in order."""
        groups: dict[Hashable, list[int]] = {}
        if len(calls) > 1 and not self.changes_state(calls):
            for i, call in enumerate(calls):
                key = self.concurrency_key(catalog.real.get(call.tool, call.tool))
                groups.setdefault(key if key is not None else _SERIAL, []).append(i)
        if len(groups) < 2 or _SERIAL in groups:
            return [self._run(call, catalog, strategy) for call in calls]
        outcomes: list[Outcome | None] = [None] * len(calls)
        failures: list[BaseException] = []

        def run(indexes: list[int]) -> None:
            try:
                for i in indexes:
                    outcomes[i] = self._run(calls[i], catalog, strategy)
            except BaseException as exc:  # handed to the caller below, never lost
                failures.append(exc)

        first, *rest = groups.values()
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(run, indexes),
                name=f"hwbridge-batch[{type(self).__name__}]",
                daemon=True,
            )
            for indexes in rest
        ]
        for thread in threads:
            thread.start()
        run(first)
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return [o for o in outcomes if o is not None]

    # -- ToolCallSignaling (spec section 14) -----------------------------------------------

    def might_be_tool_call(self, partial: str) -> bool:
        """True when streamed text could be (or be turning into) a tool call: buffer it."""
        openers = (*_OPENERS, "<" + self.prompt_strategy.parsing.call_tag)
        if any(o in partial for o in openers):
            return True
        tail = partial.rstrip()
        # the text ends with the beginning of an opener: "`", "``", "<tool"
        return any(tail.endswith(o[:i]) for o in openers for i in range(1, len(o)))

    def is_complete_tool_call(self, text: str) -> bool:
        """True when `text` holds at least one complete call to this driver's tools."""
        calls = self.detect_tool_call(text)
        return bool(calls) and all(c.error is None and not c.healed for c in calls)

    # -- validation of direct calls --------------------------------------------------------

    def check_call(self, tool_name: str, arguments: Any) -> None:
        """Raise ToolError unless `arguments` are valid for `tool_name` (spec section 4.2).

        Every subclass's `execute_tool` runs this first when it is called directly (by an
        orchestrator, a decorator, a test), with the message `process_llm_response` would
        give; calls that `process_llm_response` has already validated skip it.
        """
        catalog = self._catalog()
        strategy = self._prompt or PromptStrategy.default()
        refusal = catalog.refused.get(tool_name)
        if refusal is not None:
            raise refusal
        validator = catalog.validators.get(tool_name)
        if validator is None:
            available = ", ".join(catalog.by_name) or "none"
            raise ToolError(
                "UNKNOWN_TOOL",
                strategy.retry("unknown_tool", tool=_short(tool_name), available=available),
            )
        if not isinstance(arguments, dict):
            raise ToolError("INVALID_ARGUMENTS", strategy.retry("not_an_object", tool=tool_name))
        limit = strategy.parsing.max_argument_depth
        if _deeper_than(arguments, limit):
            raise ToolError(
                "INVALID_ARGUMENTS", strategy.retry("too_deep", tool=tool_name, limit=limit)
            )
        problems = validator.problems(arguments, strategy)
        if problems:
            hint = strategy.retry("invalid_arguments", tool=tool_name, problems="; ".join(problems))
            raise ToolError("INVALID_ARGUMENTS", hint, retryable=True)

    # -- internals -------------------------------------------------------------------------

    def _run(self, call: CallView, catalog: _Catalog, strategy: PromptStrategy) -> Outcome:
        name = call.tool
        refusal = catalog.refused.get(name)
        if refusal is not None:
            return Outcome(call, *_tool_error(name, refusal, strategy))
        if call.error is not None:
            if call.error == _NOT_OBJECT:
                hint = strategy.retry("not_an_object", tool=name)
            elif call.error == TOO_DEEP:
                limit = strategy.parsing.max_argument_depth
                hint = strategy.retry("too_deep", tool=name, limit=limit)
                return _failed(call, "INVALID_ARGUMENTS", hint, f"{name}: {call.error}")
            else:
                hint = strategy.retry(
                    "invalid_json",
                    tool=name,
                    problem=call.error,
                    call_example=strategy.call_example(),
                )
            return _failed(call, "INVALID_CALL", hint, f"{name}: {call.error}")
        problems = catalog.validators[name].problems(call.arguments, strategy)
        if problems:
            hint = strategy.retry("invalid_arguments", tool=name, problems="; ".join(problems))
            return _failed(call, "INVALID_ARGUMENTS", hint, f"{name}: {'; '.join(problems)}")
        return Outcome(call, *self._execute(name, call.arguments, strategy))

    def _execute(self, name: str, arguments: dict[str, Any], strategy: PromptStrategy) -> _Ran:
        """Run a call whose arguments are valid; every failure is caught and described.

        Returns (ok, result, result_json, retry, detail, error): a plain tuple, because this
        is the hot path.
        """
        catalog = self._catalog()
        try:
            result = self._hw_execute(catalog.real.get(name, name), arguments)
        except ToolError as exc:
            return _tool_error(name, exc, strategy)
        except Exception:
            error_id = uuid.uuid4().hex[:8]
            log.exception("tool %s failed (error id %s)", name, error_id)
            hint = strategy.retry("internal_error", tool=name, error_id=error_id)
            return _failure("INTERNAL_ERROR", hint, f"internal error {error_id} in {name}", True)
        try:
            text, safe = dumps(result)
        except Exception:  # the tool ran: it must not be reported as failed (invariant 10)
            error_id = uuid.uuid4().hex[:8]
            log.exception("the result of %s is not JSON (error id %s)", name, error_id)
            note = strategy.retry("result_unreadable", tool=name, error_id=error_id)
            text, safe = dumps(note)
        return (True, safe, text, None, None, None)


_Ran = tuple[bool, Any, str, str | None, str | None, dict[str, Any] | None]
_SERIAL = object()  # the group of calls that must run in order

_ExecuteTool = Callable[[Any, str, dict[str, Any]], Any]


def _validating(execute: _ExecuteTool) -> _ExecuteTool:
    """`execute_tool` that validates a direct call first, as spec section 4.2 asks."""

    @wraps(execute)
    def execute_tool(self: HybridDriver, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.check_call(tool_name, arguments)
        return execute(self, self._catalog().real.get(tool_name, tool_name), arguments)

    execute_tool._hw_validating = True  # type: ignore[attr-defined]
    return execute_tool


def unchecked_execute(driver: MCSToolDriver) -> Callable[[str, dict[str, Any]], Any]:
    """The driver's execute_tool without the direct-call check, for a caller (an
    orchestrator, a decorator) that has validated against the same schema already."""
    if isinstance(driver, HybridDriver):
        return driver._hw_execute
    return driver.execute_tool


def _sentence(text: str) -> str:
    """A tool's message as a sentence of the hint: ending with a full stop."""
    text = text.rstrip()
    return text if not text or text[-1] in ".!?)" else text + "."


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tool_error(name: str, exc: ToolError, strategy: PromptStrategy) -> _Ran:
    hint = strategy.retry(
        "tool_error",
        tool=name,
        code=exc.code,
        message=_sentence(exc.message),
        retry_hint=strategy.retry("retry_allowed" if exc.retryable else "retry_not_allowed"),
    )
    return _failure(exc.code, hint, exc.message, exc.retryable)


def _failure(code: str, hint: str, detail: str, retryable: bool) -> _Ran:
    """A failed call: `call_detail` always starts with the stable code."""
    return (
        False,
        None,
        "null",
        hint,
        f"{code}: {detail}",
        {"code": code, "message": hint, "retryable": retryable},
    )


def _pending(found: Found, origin: str | dict[str, Any], max_depth: int) -> PendingCall:
    error = found.error
    args = found.arguments
    if type(args) is not dict:
        if error is None:
            error = _NOT_OBJECT
        args = {}
    elif error is None and _deeper_than(args, max_depth):
        # refused before anything runs: no schema nests this deep, and echoing such
        # arguments back to the LLM would exhaust any JSON writer's recursion
        error = TOO_DEEP
        args = {}
    call_id = found.call_id
    if call_id is None and found.dialect in _NEEDS_ID:
        call_id = "call_" + uuid.uuid4().hex[:16]
    return PendingCall(found.name, args, call_id, found.dialect, error, bool(found.healed), origin)


_CONTAINERS = (dict, list, tuple)


def _deeper_than(value: dict[str, Any], limit: int) -> bool:
    """True when containers nest more than `limit` levels (iterative: no recursion)."""
    for child in value.values():
        if isinstance(child, _CONTAINERS):
            break
    else:
        return False  # the usual call: flat arguments
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, _CONTAINERS))
    return False


def _failed(call: CallView, code: str, hint: str, detail: str) -> Outcome:
    return Outcome(call, *_failure(code, hint, detail, True))


def _single_response(
    ok: bool, result: Any, detail: str | None, retry: str | None, messages: list[dict[str, Any]]
) -> DriverResponse:
    """The response to one call (the hot path: no validation, no list plumbing)."""
    values = {
        "tool_call_result": result if ok else None,
        "call_executed": ok,
        "call_failed": not ok,
        "call_detail": None if ok else detail,
        "retry_prompt": None if ok else retry,
        "messages": messages,
    }
    return trusted(DriverResponse, values, None, _RESPONSE_FIELDS)


def _respond_one(outcome: Outcome, strategy: PromptStrategy) -> DriverResponse:
    messages = _messages([outcome], strategy)
    return _single_response(outcome.ok, outcome.result, outcome.detail, outcome.retry, messages)


def _not_run(calls: Sequence[CallView], limit: int, strategy: PromptStrategy) -> list[Outcome]:
    """Answers for the calls beyond `limit`: each call id gets one, the response says so once."""
    if not calls:
        return []
    first = calls[0]
    hint = strategy.retry("too_many_calls", tool=first.tool, count=len(calls), limit=limit)
    detail = f"TOO_MANY_CALLS: {len(calls)} call(s) beyond the limit of {limit} were not run"
    error = {"code": "TOO_MANY_CALLS", "message": hint, "retryable": True}
    out = [Outcome(first, False, None, "null", hint, detail, error)]
    if first.dialect not in ("text", "mcs"):  # native dialects answer every call
        for call in calls[1:]:
            said = strategy.retry("not_executed", tool=call.tool)
            out.append(Outcome(call, False, None, "null", said, None, error))
    return out


def _respond(outcomes: list[Outcome], strategy: PromptStrategy) -> DriverResponse:
    executed = any(o.ok for o in outcomes)
    failed = [o for o in outcomes if not o.ok]
    if len(outcomes) == 1:
        result = outcomes[0].result if executed else None
    elif executed:
        result = [o.result if o.ok else {"error": o.error} for o in outcomes]
    else:
        result = None
    told = [o for o in failed if o.detail is not None]  # calls not run are told about once
    values = {
        "tool_call_result": result,
        "call_executed": executed,
        "call_failed": bool(failed),
        "call_detail": "; ".join(o.detail or "" for o in told) if failed else None,
        "retry_prompt": "\n".join(o.retry or "" for o in told) if failed else None,
        "messages": _messages(outcomes, strategy),
    }
    return trusted(DriverResponse, values, None, _RESPONSE_FIELDS)


def _messages(outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    """The messages to append, ready for any JSON writer; never raises, because the calls
    have already run."""
    try:
        messages = build_messages(outcomes, strategy)
    except Exception:
        log.exception("building the messages failed; answering in plain text")
        return plain_messages(outcomes, strategy)
    try:
        orjson.dumps(messages)
    except (TypeError, ValueError):  # the echo carries what no JSON writer takes
        cleaned: list[dict[str, Any]] = writable(messages)
        return cleaned
    return messages


def _normalize(response: Any) -> str | dict[str, Any]:
    """Accept SDK objects (pydantic models) as well as the dicts and strings they dump to."""
    if isinstance(response, str | dict):
        return response
    dump: Callable[..., Any] | None = getattr(response, "model_dump", None)
    if callable(dump):
        value = dump()
        if isinstance(value, dict):
            return value
    if isinstance(response, bytes | bytearray):
        return bytes(response).decode("utf-8", "replace")
    return "" if response is None else str(response)
