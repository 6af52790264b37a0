"""Runner: a driver, a chat client and the loop between them (spec section 14, "Runner").

    runner = Runner(driver, OpenAIClient("gpt-4o-mini"))
    result = runner.run("What is the engine speed?")
    result.answer, result.steps, result.usage

Each round sends the conversation to the model, lets the driver detect and execute the calls
in its output, and appends the driver's `messages` (already in the provider's dialect). The
run ends with the model's final answer, or with a clear `stop_reason`: `max_rounds`,
`repeated_failure` (the same call failed again with the same arguments), `provider_error`,
`refusal` or `length`. The Runner keeps the conversation, so a second `run` continues it.

The core knows no provider SDK: a client is anything with the small `ChatClient` protocol
(`hwbridge.llm` has OpenAI, Anthropic and Ollama ones). Streamed text reaches `on_text` as it
arrives, except what might be a tool call (`might_be_tool_call`): a call's JSON is never
shown to the user as an answer.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.core.aio import ExecutionCancelled
from hwbridge.core.contract import Capability, MCSDriver
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import DriverResponse, ToolCall

__all__ = [
    "CallOutcome",
    "ChatClient",
    "ChatSetup",
    "ChatTurn",
    "ProviderError",
    "ProviderErrorKind",
    "RunResult",
    "Runner",
    "Step",
    "StopReason",
    "Usage",
]

log = logging.getLogger(__name__)

StopReason = Literal[
    "answer", "refusal", "length", "max_rounds", "repeated_failure", "provider_error"
]
ProviderErrorKind = Literal["auth", "rate_limit", "server", "connection", "bad_request", "other"]
_EMPTY = DriverResponse()
_MAX_DETAIL = 300


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Usage(_Model):
    """Tokens as the provider counted them."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ProviderError(Exception):
    """The model could not be asked: no key, a refused key, a rate limit, a server error,
    a server that does not answer. `str()` is one line for a person."""

    def __init__(
        self,
        provider: str,
        kind: ProviderErrorKind,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        text = " ".join(str(message).split())
        if len(text) > _MAX_DETAIL:
            text = text[: _MAX_DETAIL - 3] + "..."
        super().__init__(f"{provider}: {text}")
        self.provider = provider
        self.kind: ProviderErrorKind = kind
        self.message = text
        self.status = status
        self.retryable = retryable


class ChatSetup(_Model):
    """What a client sends with every request for one driver: the system prompt and, in
    native mode, the provider's tool definitions."""

    system: str
    tools: list[dict[str, Any]] | None = None


class ChatTurn(_Model):
    """One answer of the model.

    `output` is what the driver reads: the text (text mode) or the assistant message in the
    provider's own format (native mode). `text` is what the model said in words.
    `finish_reason` is normalized: stop, tool_calls, length, refusal, content_filter.
    """

    output: str | dict[str, Any]
    text: str = ""
    refusal: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


TextSink = Callable[[str], None]


class ChatClient(Protocol):
    """What the Runner needs from an LLM client."""

    provider: str
    model: str

    def setup(self, driver: MCSDriver) -> ChatSetup:
        """The system prompt and tools for `driver` in this client's mode."""
        ...

    def chat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        """Ask the model; pass streamed text to `on_delta`; raise ProviderError on failure."""
        ...

    async def achat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        """`chat` for asyncio."""
        ...


class CallOutcome(_Model):
    """What happened to one call of a round."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    ok: bool
    result: Any = None
    code: str | None = Field(default=None, description="the error code of a failed call")


class Step(_Model):
    """One round: what the model said, the calls it made and what each did."""

    round: int
    output: str | dict[str, Any]
    text: str = ""
    calls: list[CallOutcome] = Field(default_factory=list)
    response: DriverResponse
    usage: Usage | None = None
    finish_reason: str | None = None


class RunResult(_Model):
    """The outcome of `Runner.run`: the final answer (None when the run stopped without
    one), why it stopped, every round, and the tokens used where the provider said."""

    answer: str | None
    stop_reason: StopReason
    detail: str | None = None
    steps: list[Step] = Field(default_factory=list)
    usage: Usage | None = None

    @property
    def ok(self) -> bool:
        """True when the model gave a final answer."""
        return self.stop_reason == "answer"


CallCallback = Callable[[ToolCall], None]
StepCallback = Callable[[Step], None]


class Runner:
    """Runs a conversation between `client` and `driver`, at most `max_rounds` model
    requests per `run`.

    `on_text(delta)` gets the model's words as they stream (never a tool call's JSON),
    `on_call(call)` each call before it runs, `on_step(step)` each round after its calls
    ran. A Runner holds one conversation; it runs one `run` at a time.
    """

    def __init__(
        self,
        driver: MCSDriver,
        client: ChatClient,
        max_rounds: int = 8,
        *,
        on_text: TextSink | None = None,
        on_call: CallCallback | None = None,
        on_step: StepCallback | None = None,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.driver = driver
        self.client = client
        self.max_rounds = max_rounds
        self.on_text = on_text
        self.on_call = on_call
        self.on_step = on_step
        self._messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._busy = False

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (without the system prompt), a copy."""
        return list(self._messages)

    def reset(self) -> None:
        """Forget the conversation."""
        with self._lock:
            if self._busy:
                raise RuntimeError("cannot reset a Runner while it runs")
            self._messages = []

    # -- the loop ---------------------------------------------------------------------------

    def run(self, user_input: str) -> RunResult:
        """Run until the model answers or a stop reason applies. Tools run in the calling
        thread; use `arun` when Ctrl-C (a cancelled task) must stop a long wait cleanly."""
        state = self._begin(user_input)
        try:
            while state.round < self.max_rounds:
                gate = _TextGate(self.driver, self.on_text)
                try:
                    turn = self.client.chat(state.setup, self._messages, gate.feed)
                except Exception as exc:
                    return state.finish("provider_error", None, _provider_detail(exc))
                gate.whole(turn.text)
                calls = self._detect(turn.output)
                if calls is None:
                    response = self.driver.process_llm_response(turn.output)
                elif calls:
                    self._announce(calls)
                    response = self.driver.execute_tool_call(calls)  # type: ignore[attr-defined]
                else:
                    response = _EMPTY
                done = self._after(state, turn, gate, calls or [], response)
                if done is not None:
                    return done
            return state.finish("max_rounds", None, _rounds_detail(self.max_rounds))
        finally:
            self._end()

    async def arun(self, user_input: str) -> RunResult:
        """`run` for asyncio: the model request and the tools never block the event loop.

        Cancelling the task stops the run: a request in flight is abandoned, reads are
        abandoned, and calls that change state are waited for and recorded in the
        conversation (so the next run knows what went out) before CancelledError rises.
        """
        state = self._begin(user_input)
        try:
            while state.round < self.max_rounds:
                gate = _TextGate(self.driver, self.on_text)
                try:
                    turn = await self.client.achat(state.setup, self._messages, gate.feed)
                except Exception as exc:
                    return state.finish("provider_error", None, _provider_detail(exc))
                gate.whole(turn.text)
                calls = self._detect(turn.output)
                try:
                    if calls is None:
                        response = await self.driver.aprocess_llm_response(turn.output)
                    elif calls:
                        self._announce(calls)
                        assert isinstance(self.driver, HybridDriver)
                        response = await self.driver.aexecute_tool_call(calls)
                    else:
                        response = _EMPTY
                except ExecutionCancelled as exc:
                    # a call that changed state was waited for: keep it in the conversation
                    if isinstance(exc.response, DriverResponse):
                        self._after(state, turn, gate, calls or [], exc.response)
                    raise
                done = self._after(state, turn, gate, calls or [], response)
                if done is not None:
                    return done
            return state.finish("max_rounds", None, _rounds_detail(self.max_rounds))
        finally:
            self._end()

    # -- pieces shared by run and arun --------------------------------------------------------

    def _begin(self, user_input: str) -> _RunState:
        with self._lock:
            if self._busy:
                raise RuntimeError("this Runner is already running; use one Runner per task")
            self._busy = True
        try:
            setup = self.client.setup(self.driver)
        except BaseException:
            self._end()
            raise
        self._messages.append({"role": "user", "content": user_input})
        return _RunState(setup)

    def _end(self) -> None:
        with self._lock:
            self._busy = False

    def _detect(self, output: str | dict[str, Any]) -> list[ToolCall] | None:
        """The calls in `output` (parse only); None for a driver without the two-phase API."""
        if not isinstance(self.driver, HybridDriver):
            return None
        try:
            return self.driver.detect_tool_call(output)
        except Exception:
            log.exception("detecting calls failed; the driver processes the output itself")
            return None

    def _announce(self, calls: list[ToolCall]) -> None:
        if self.on_call is None:
            return
        for call in calls:
            try:
                self.on_call(call)
            except Exception:
                log.exception("on_call failed; the call goes on")

    def _after(
        self,
        state: _RunState,
        turn: ChatTurn,
        gate: _TextGate,
        calls: list[ToolCall],
        response: DriverResponse,
    ) -> RunResult | None:
        """Record the round; the RunResult when the run is over."""
        state.round += 1
        if turn.usage is not None:
            state.usage = turn.usage if state.usage is None else state.usage + turn.usage
        outcomes = _outcomes(calls, response) if not response.is_final_answer else []
        step = Step(
            round=state.round,
            output=turn.output,
            text=turn.text,
            calls=outcomes,
            response=response,
            usage=turn.usage,
            finish_reason=turn.finish_reason,
        )
        state.steps.append(step)
        if response.is_final_answer:
            answer = turn.text or turn.refusal or ""
            if not turn.text and turn.refusal:
                gate.feed(turn.refusal)
            gate.flush()
            if answer:  # providers refuse empty assistant turns
                self._messages.append({"role": "assistant", "content": answer})
            self._notify(step)
            if turn.refusal is not None or turn.finish_reason == "refusal":
                return state.finish("refusal", answer, "the model refused")
            if turn.finish_reason == "length":
                return state.finish("length", answer, "the answer was cut at the token limit")
            return state.finish("answer", answer, None)
        self._messages.extend(response.messages or [])
        self._notify(step)
        failed = {_key(o) for o in outcomes if not o.ok}
        repeated = failed & state.failed
        if repeated:
            tool = next(iter(sorted(repeated)))[0]
            detail = f"{tool} failed again with the same arguments"
            return state.finish("repeated_failure", None, detail)
        state.failed |= failed
        return None

    def _notify(self, step: Step) -> None:
        if self.on_step is None:
            return
        try:
            self.on_step(step)
        except Exception:
            log.exception("on_step failed; the run goes on")


class _RunState:
    """What one run accumulates."""

    def __init__(self, setup: ChatSetup) -> None:
        self.setup = setup
        self.round = 0
        self.steps: list[Step] = []
        self.usage: Usage | None = None
        self.failed: set[tuple[str, str]] = set()

    def finish(self, reason: StopReason, answer: str | None, detail: str | None) -> RunResult:
        return RunResult(
            answer=answer, stop_reason=reason, detail=detail, steps=self.steps, usage=self.usage
        )


class _TextGate:
    """Passes streamed text to `on_text` as it comes, holding back whatever might be the
    start of a tool call (`might_be_tool_call`); held text is shown only if the turn turns
    out to be a final answer."""

    def __init__(self, driver: MCSDriver, on_text: TextSink | None) -> None:
        might = getattr(driver, "might_be_tool_call", None)
        flags = getattr(getattr(driver, "meta", None), "capabilities", ())
        if Capability.TOOL_CALL_SIGNALING.value not in flags or not callable(might):
            might = _might_be_json
        self._might: Callable[[str], bool] = might
        self._on_text = on_text
        self._pending = ""
        self._holding = False
        self.streamed = False

    def feed(self, delta: str) -> None:
        if not delta:
            return
        self.streamed = True
        self._pending += delta
        if not self._might(self._pending):
            self._emit(self._pending)
            self._pending = ""
            self._holding = False
            return
        if self._holding:
            return  # already held from the start of the pending text
        pending = self._pending
        cut = next((k - 1 for k in range(1, len(pending) + 1) if self._might(pending[:k])), 0)
        self._emit(pending[:cut])
        self._pending = pending[cut:]
        self._holding = True

    def whole(self, text: str | None) -> None:
        """The turn's text, when the provider did not stream it: shown before the turn's
        calls are announced, as streamed text is."""
        if not self.streamed and text:
            self.feed(text)

    def flush(self) -> None:
        """The turn was a final answer: show what was held back."""
        self._emit(self._pending)
        self._pending = ""

    def _emit(self, text: str) -> None:
        if text and self._on_text is not None:
            try:
                self._on_text(text)
            except Exception:
                log.exception("on_text failed; the run goes on")


def _might_be_json(text: str) -> bool:
    return "{" in text or "```" in text or "<tool_call" in text


_ERROR_KEYS = frozenset({"code", "message", "retryable"})


def _is_error_item(item: Any) -> bool:
    """The shape HybridDriver gives a failed call among several: {"error": {code, ...}}."""
    return (
        isinstance(item, dict)
        and len(item) == 1
        and isinstance(item.get("error"), dict)
        and set(item["error"]) == _ERROR_KEYS
    )


def _code(detail: str | None) -> str | None:
    if not detail:
        return None
    head = detail.split(":", 1)[0].strip()
    return head if head.replace("_", "").isalnum() and head.upper() == head else None


def _outcomes(calls: list[ToolCall], response: DriverResponse) -> list[CallOutcome]:
    """Each call's outcome. One call: the response's flags. Several: the driver's result
    list, in call order ({"error": {...}} for a failed one); calls past its end were not
    run (over the driver's limit)."""

    def outcome(call: ToolCall, ok: bool, result: Any = None, code: str | None = None) -> Any:
        return CallOutcome(
            tool=call.tool,
            arguments=call.arguments,
            call_id=call.call_id,
            ok=ok,
            result=result,
            code=code,
        )

    if len(calls) == 1:
        ok = response.call_executed
        result = response.tool_call_result if ok else None
        return [outcome(calls[0], ok, result, None if ok else _code(response.call_detail))]
    results = response.tool_call_result
    if not response.call_executed or not isinstance(results, list):
        return [outcome(c, False) for c in calls]
    out = []
    for index, call in enumerate(calls):
        if index >= len(results):
            out.append(outcome(call, False, None, "TOO_MANY_CALLS"))
        elif _is_error_item(results[index]):
            out.append(outcome(call, False, None, str(results[index]["error"]["code"])))
        else:
            out.append(outcome(call, True, results[index]))
    return out


def _key(outcome: CallOutcome) -> tuple[str, str]:
    return outcome.tool, json.dumps(outcome.arguments, sort_keys=True, default=str)


def _provider_detail(exc: Exception) -> str:
    if isinstance(exc, ProviderError):
        return str(exc)
    log.warning("the chat client failed", exc_info=True)
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:_MAX_DETAIL]


def _rounds_detail(rounds: int) -> str:
    return f"no final answer after {rounds} round{'s' if rounds != 1 else ''}"
