"""HybridDriver: implement `list_tools` and `execute_tool`, get everything LLM-facing.

The path of a call: `detect_tool_call` (parse only, no side effects) -> validation against
each tool's JSON Schema -> `execute_tool` -> a DriverResponse whose `messages` are in the
dialect the call came in. `process_llm_response` is exactly detect then execute, and never
raises. The driver keeps no per-call state, so one instance serves any number of threads.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from hwbridge.core.contract import Capability, MCSDriver, MCSToolDriver
from hwbridge.core.extraction import CallExtractor, Found
from hwbridge.core.jsonsafe import dumps
from hwbridge.core.messages import Outcome, build_messages
from hwbridge.core.models import DriverMeta, DriverResponse, Tool, ToolCall, ToolError
from hwbridge.core.native import native_tools
from hwbridge.core.prompts import PromptStrategy
from hwbridge.core.validation import ArgumentValidator

__all__ = ["HybridDriver"]

log = logging.getLogger(__name__)

_DERIVED = (
    Capability.STANDALONE,
    Capability.ORCHESTRATABLE,
    Capability.TWO_PHASE,
    Capability.TOOL_CALL_SIGNALING,
    Capability.NATIVE_TOOLS,
)
_NOT_OBJECT = "arguments are not a JSON object"
_NEEDS_ID = frozenset({"openai", "openai_responses", "anthropic"})
_EMPTY = DriverResponse()
_OPENERS = ("{", "```", "~~~")


@dataclass(frozen=True)
class _Catalog:
    """The driver's tools, indexed once; validators are compiled on first use."""

    tools: tuple[Tool, ...]
    by_name: dict[str, Tool]
    _validators: dict[str, ArgumentValidator] = field(default_factory=dict)

    def validator(self, name: str) -> ArgumentValidator:
        v = self._validators.get(name)
        if v is None:
            v = self._validators.setdefault(name, ArgumentValidator(self.by_name[name]))
        return v


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
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
        catalog: _Catalog | None = self.__dict__.get("_hw_catalog")
        if catalog is None:
            tools = tuple(self.list_tools())
            catalog = _Catalog(tools, {t.name: t for t in tools})
            self.__dict__["_hw_catalog"] = catalog
        return catalog

    def tools_changed(self) -> None:
        """Re-read `list_tools()` on next use (for drivers whose tools really change)."""
        self.__dict__.pop("_hw_catalog", None)

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
        """Tool definitions for a provider's native function-calling API."""
        return native_tools(list(self._catalog().tools), provider, self.prompt_strategy)

    def get_native_system_message(self, model_name: str | None = None) -> str:
        """The system prompt to send alongside `get_native_tools`."""
        strategy = self.prompt_strategy.for_model(model_name)
        return strategy.native_system_message(self.driver_guidance(model_name))

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
            calls = self.detect_tool_call(llm_response)
            if not calls:
                return _EMPTY
            return self.execute_tool_call(calls)
        except Exception:
            error_id = uuid.uuid4().hex[:8]
            log.exception("process_llm_response failed (error id %s)", error_id)
            hint = self.prompt_strategy.retry("internal_error", tool="the tool", error_id=error_id)
            return DriverResponse(
                call_failed=True,
                call_detail=f"internal error {error_id}",
                retry_prompt=hint,
                messages=[{"role": self.prompt_strategy.result_role, "content": hint}],
            )

    def detect_tool_call(self, llm_response: str | dict[str, Any] | Any) -> list[ToolCall]:
        """The calls to this driver's tools in `llm_response`. Parses only; executes nothing."""
        response = _normalize(llm_response)
        catalog = self._catalog()
        by_name = catalog.by_name
        found = _extractor_for(self.prompt_strategy).extract(response, by_name.__contains__)
        return [self._to_call(f, response) for f in found if f.name in by_name]

    def execute_tool_call(self, calls: list[ToolCall]) -> DriverResponse:
        """Validate and execute calls found by `detect_tool_call`, in order."""
        catalog = self._catalog()
        calls = [c for c in calls if c.tool in catalog.by_name]
        if not calls:
            return _EMPTY
        strategy = self.prompt_strategy
        outcomes = [self._run(call, catalog, strategy) for call in calls]
        return _respond(outcomes, strategy)

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

    # -- internals -------------------------------------------------------------------------

    def _to_call(self, found: Found, origin: str | dict[str, Any]) -> ToolCall:
        error = found.error
        args = found.arguments
        if error is None and not isinstance(args, dict):
            error = _NOT_OBJECT
        call_id = found.call_id
        if call_id is None and found.dialect in _NEEDS_ID:
            call_id = "call_" + uuid.uuid4().hex[:16]
        call = ToolCall.model_construct(
            tool=found.name,
            arguments=args if isinstance(args, dict) else {},
            call_id=call_id,
            dialect=found.dialect,
            error=error,
            healed=bool(found.healed),
        )
        return call.with_origin(origin)

    def _run(self, call: ToolCall, catalog: _Catalog, strategy: PromptStrategy) -> Outcome:
        name = call.tool
        if call.error is not None:
            if call.error == _NOT_OBJECT:
                hint = strategy.retry("not_an_object", tool=name)
            else:
                hint = strategy.retry(
                    "invalid_json",
                    tool=name,
                    problem=call.error,
                    call_example=strategy.call_example(),
                )
            return _failed(call, "INVALID_CALL", hint, f"{name}: {call.error}")
        problems = catalog.validator(name).problems(call.arguments, strategy)
        if problems:
            hint = strategy.retry("invalid_arguments", tool=name, problems="; ".join(problems))
            return _failed(call, "INVALID_ARGUMENTS", hint, f"{name}: {'; '.join(problems)}")
        try:
            result = self.execute_tool(name, call.arguments)
            text, safe = dumps(result)
        except ToolError as exc:
            hint = strategy.retry(
                "tool_error",
                tool=name,
                code=exc.code,
                message=exc.message,
                retry_hint=strategy.retry(
                    "retry_allowed" if exc.retryable else "retry_not_allowed"
                ),
            )
            return _failed(
                call, exc.code, hint, f"{exc.code}: {exc.message}", retryable=exc.retryable
            )
        except Exception:
            error_id = uuid.uuid4().hex[:8]
            log.exception("tool %s failed (error id %s)", name, error_id)
            hint = strategy.retry("internal_error", tool=name, error_id=error_id)
            return _failed(call, "INTERNAL_ERROR", hint, f"internal error {error_id} in {name}")
        return Outcome(call, True, safe, text)


def _failed(
    call: ToolCall, code: str, hint: str, detail: str, *, retryable: bool = True
) -> Outcome:
    error = {"code": code, "message": hint, "retryable": retryable}
    return Outcome(call, False, retry=hint, detail=detail, error=error)


def _respond(outcomes: list[Outcome], strategy: PromptStrategy) -> DriverResponse:
    executed = any(o.ok for o in outcomes)
    failed = [o for o in outcomes if not o.ok]
    if len(outcomes) == 1:
        result = outcomes[0].result if executed else None
    elif executed:
        result = [o.result if o.ok else {"error": o.error} for o in outcomes]
    else:
        result = None
    return DriverResponse.model_construct(
        tool_call_result=result,
        call_executed=executed,
        call_failed=bool(failed),
        call_detail="; ".join(o.detail or "" for o in failed) or None,
        retry_prompt="\n".join(o.retry or "" for o in failed) or None,
        messages=build_messages(outcomes, strategy),
    )


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
