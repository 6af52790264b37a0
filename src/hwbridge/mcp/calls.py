"""One MCP tool call through the driver's own path, with progress and cancellation.

The call is found in `{"tool": name, "arguments": ...}` by the driver's `detect_tool_call`
and run by `aexecute_tool_call`, exactly as `process_llm_response` would run it: the same
validation, the same refusals, the same results. While it runs, a progress notification
goes out every half second (when the client asked for progress), so a `wait_for_signal`, a
`capture` or a slow serial command shows it is alive. A driver that hears how far its call
has come (`McpToolDriver`, from the remote server's own progress) claims the reports
(`hwbridge.core.aio.PROGRESS`): the half-second ones stop, and the server's own go on, at
most one per `progress_interval_s` (the latest one; the last is sent before the result),
each message cut to PROGRESS_MESSAGE_CHARS: a bench that reports a megabyte 18 times a
second does not pass it on.

Cancellation by the client (`notifications/cancelled`) follows `hwbridge.core.aio`: a call
that has not started does not run; reads are abandoned at once (they end within their own
timeouts, unseen); a call that changes state and has started is finished, and its outcome
is logged, since the client will never read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from mcp import types
from mcp.server import ServerRequestContext

from hwbridge.core.aio import PROGRESS, WORKER_SLOT, ExecutionCancelled, WorkerSlot
from hwbridge.core.hybrid import HybridDriver
from hwbridge.core.models import DriverResponse, ToolCall, ToolError
from hwbridge.mcp.consent import (
    CONSENT_TIMEOUT_S,
    MRTR_VERSION,
    approve,
    ask_consent,
    binding,
    can_elicit,
)
from hwbridge.mcp.questions import (
    QUESTIONS,
    Questions,
    Sealed,
    StateSeal,
    bench_answers,
    relayed,
)
from hwbridge.mcp.tools import call_result, error_result

__all__ = ["MAX_RUNNING", "PROGRESS_INTERVAL_S", "PROGRESS_MESSAGE_CHARS", "CallHandler"]

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.5
"""How often a call's progress goes to the client: its own clock's, or at most this often
the driver's (a remote bench's) own reports."""
PROGRESS_MESSAGE_CHARS = 200
"""A progress message passed on from a driver is cut to this length."""
MAX_RUNNING = 32
"""Calls running at once per server: a client that cancels and repeats long reads cannot
pile up threads and bus waiters without end (BUSY beyond)."""
# Arguments that say how long a call may take, in milliseconds (CAN, serial, OBD tools).
_DURATION_ARGUMENTS = ("timeout_ms", "duration_ms")

_Ran = tuple[DriverResponse | None, ExecutionCancelled | None]


class CallHandler:
    """The `tools/call` handler of one driver; `offered` (when given) are the only tool
    names it runs, the others are unknown to it."""

    def __init__(
        self,
        driver: HybridDriver,
        *,
        offered: frozenset[str] | None = None,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
        max_running: int = MAX_RUNNING,
        consent: bool = False,
        consent_timeout_s: float = CONSENT_TIMEOUT_S,
    ) -> None:
        self.driver = driver
        self.offered = offered
        self.consent = consent
        self.consent_timeout_s = consent_timeout_s
        self.progress_interval_s = progress_interval_s
        self.max_running = max_running
        self._running = 0  # calls whose worker has not ended (cancelled reads included)
        self._count = threading.Lock()
        self._seal = StateSeal()  # the request_state of a bench's question handed back

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name = params.name
        arguments: dict[str, Any] = dict(params.arguments or {})
        if self.offered is not None and name not in self.offered:
            return self._not_offered(name)
        calls = self.driver.detect_tool_call({"tool": name, "arguments": arguments})
        if not calls:
            return self._unknown(name, arguments)
        approved = False
        changes_state = self.driver.changes_state(calls[:1])
        bound = binding(calls[0].tool, calls[0].arguments)
        # the state this server handed back a round ago: opened once, for this very call
        sealed = self._seal.open(params.request_state, bound) if changes_state else None
        if sealed is not None and sealed.approved:  # the person said yes a round ago
            approved = True
        elif self.consent and changes_state:  # asked before a slot is held
            verdict = await ask_consent(
                ctx,
                self.driver,
                calls[0],
                params,
                self.consent_timeout_s,
                seal=self._seal,
                sealed=sealed,
            )
            if isinstance(verdict, types.InputRequiredResult):
                return verdict
            if not verdict.approved:
                log.info("%s refused: %s", name, verdict.reason)
                return error_result(f"CONSENT_DENIED: {verdict.reason}; nothing was sent.")
            approved = True
        with self._count:
            busy = self._running >= self.max_running
            if not busy:
                self._running += 1
        if busy:  # cancelled reads still run to their own timeout
            return error_result(
                f"BUSY: {self.max_running} calls are still running on this server (some "
                "may be cancelled reads waiting out their timeout); try again in a moment."
            )
        slot = WorkerSlot(self._release)
        progress = _Progress(ctx, name, self.progress_interval_s)
        questions = self._questions(ctx, params, sealed) if changes_state else None
        task = asyncio.ensure_future(self._execute(calls[:1], slot, progress, approved, questions))
        task.add_done_callback(lambda _done: slot.call_ended())
        try:
            await self._wait(task, progress, _expected_s(arguments))
            await progress.finish()
        except asyncio.CancelledError:
            progress.stop()
            # Cancelled once, in its own task: never again and again by the server's cancel
            # scope, which would spin while a send finishes.
            task.cancel()
            task.add_done_callback(lambda done: _log_cancelled(name, done, changes_state))
            raise
        response, cancelled = task.result()
        if response is None:  # cancelled from elsewhere (the worker's own shutdown)
            response = cancelled.response if cancelled is not None else None
        if response is None:
            return error_result("INTERNAL_ERROR: the call was cancelled before it ran")
        if questions is not None and questions.pending is not None:
            return self._hand_back(questions, bound, approved)
        if changes_state:  # in the server's log too: an HTTP client may hang up unseen
            log.info("%s %s%s", name, _outcome(response), _detail(response))
        return call_result(response)

    def _questions(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        sealed: Sealed | None,
    ) -> Questions | None:
        """How a bench's question about this call reaches this server's client: asked
        mid-call on a connection of the handshake versions, handed back as `input_required`
        on a 2026-07-28 one; None when the client cannot be asked."""
        if not can_elicit(ctx):
            return None
        if ctx.protocol_version >= MRTR_VERSION:
            return Questions(
                relay=True,
                answers=bench_answers(dict(params.input_responses or {})),
                state=sealed.bench_state if sealed is not None else None,
            )

        async def ask(message: str, schema: dict[str, Any]) -> types.ElicitResult:
            result = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
            return types.ElicitResult.model_validate(result.model_dump())

        return Questions(
            ask_on_server=ask, loop=asyncio.get_running_loop(), timeout_s=self.consent_timeout_s
        )  # fmt: skip

    def _hand_back(
        self, questions: Questions, bound: str, approved: bool
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A bench's questions, as this server's `input_required` result."""
        assert questions.pending is not None
        asked, why = relayed(questions.pending_from, questions.pending)
        if asked is None:
            return error_result(
                f"REMOTE_UNSUPPORTED: {questions.pending_from[:120]} {why}, which cannot be "
                "passed on to you; nothing was sent."
            )
        state = self._seal.seal(bound, Sealed(approved, questions.pending.request_state))
        return types.InputRequiredResult(input_requests=asked, request_state=state)

    def _release(self) -> None:
        with self._count:
            self._running -= 1

    async def _execute(
        self,
        calls: list[ToolCall],
        slot: WorkerSlot,
        progress: _Progress,
        approved: bool,
        questions: Questions | None,
    ) -> _Ran:
        """The call's response; a cancelled one's `ExecutionCancelled` is returned, not
        raised, so its outcome (what went out) survives the cancellation. Its worker
        thread holds `slot` until it ends. `approved`: the person consented to this call,
        which the consent gate sees in this task's context only."""
        WORKER_SLOT.set(slot)  # this task's own context: seen by run_in_worker
        PROGRESS.set(progress)
        QUESTIONS.set(questions)  # a remote bench's questions about it (hwbridge.mcp.questions)
        if approved:
            approve(calls[0].tool, calls[0].arguments)
        try:
            return await self.driver.aexecute_tool_call(calls), None
        except ExecutionCancelled as exc:
            return None, exc

    async def _wait(
        self, task: asyncio.Future[_Ran], progress: _Progress, total: float | None
    ) -> None:
        """Wait for the call, reporting progress while it runs (a no-op unless asked)."""
        started = time.monotonic()
        while True:
            done, _ = await asyncio.wait({task}, timeout=self.progress_interval_s)
            if done:
                return
            if progress.forwarded:  # the driver reports its own progress
                continue
            elapsed = round(time.monotonic() - started, 1)
            if total is not None:
                elapsed = min(elapsed, total)
            message = f"{progress.name}: {elapsed:.1f} s" + (
                f" of at most {total:g} s" if total is not None else ""
            )
            await progress.send(elapsed, total, message)

    def _not_offered(self, name: str) -> types.CallToolResult:
        available = ", ".join(
            t.name for t in self.driver.list_tools() if t.name in (self.offered or ())
        )
        hint = self.driver.prompt_strategy.retry(
            "unknown_tool", tool=name[:80], available=available or "none"
        )
        return error_result(f"UNKNOWN_TOOL: {hint}")

    def _unknown(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """A tool this driver does not have: the driver's own UNKNOWN_TOOL error."""
        try:
            self.driver.check_call(name, arguments)
        except ToolError as exc:
            return error_result(f"{exc.code}: {exc.message}")
        return error_result(f"UNKNOWN_TOOL: {name[:80]} is not a tool of this server.")


class _Progress:
    """The progress of one call as the client sees it: always increasing, from the handler's
    own clock or, once the driver reports any, from the driver (from any thread): the
    driver's at most once per `interval_s`, the latest one, its message cut."""

    def __init__(self, ctx: ServerRequestContext[Any], name: str, interval_s: float) -> None:
        self.ctx = ctx
        self.name = name
        self.interval_s = interval_s
        self.loop = asyncio.get_running_loop()
        self.reported = 0.0
        self.forwarded = False
        self._latest: tuple[float, float | None, str | None] | None = None  # not yet sent
        self._sent_at = -float("inf")
        self._passing: asyncio.Task[None] | None = None

    async def send(self, progress: float, total: float | None, message: str | None) -> None:
        if progress <= self.reported:  # progress must increase: past the total, stay quiet
            return
        self.reported = progress
        try:
            await self.ctx.session.report_progress(progress, total, message)
        except Exception:  # a client that went away must not fail the call
            log.debug("progress for %s could not be sent", self.name, exc_info=True)

    # the driver's side (a `hwbridge.core.aio.ProgressSink`), from its own thread

    def claim(self) -> None:
        self.forwarded = True

    def report(self, progress: float, total: float | None, message: str | None) -> None:
        if message is not None and len(message) > PROGRESS_MESSAGE_CHARS:
            message = message[: PROGRESS_MESSAGE_CHARS - 3] + "..."

        def schedule() -> None:
            self.forwarded = True
            self._latest = (progress, total, message)
            if self._passing is None or self._passing.done():
                self._passing = self.loop.create_task(self._pass_on())

        with contextlib.suppress(RuntimeError):  # the server's loop has closed: nobody listens
            self.loop.call_soon_threadsafe(schedule)

    async def _pass_on(self) -> None:
        """Send the latest report, at most one per `interval_s`, until none is left."""
        while self._latest is not None:
            wait = self._sent_at + self.interval_s - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await self._send_latest()

    async def _send_latest(self) -> None:
        latest, self._latest = self._latest, None
        if latest is not None:
            self._sent_at = self.loop.time()
            await self.send(*latest)

    async def finish(self) -> None:
        """The call ended: the latest report, if one is still to go, goes before the
        result."""
        self.stop()
        await self._send_latest()

    def stop(self) -> None:
        if self._passing is not None:
            self._passing.cancel()


def _expected_s(arguments: dict[str, Any]) -> float | None:
    """How long the call may take, when its arguments say so (seconds)."""
    for key in _DURATION_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value) / 1000.0
    return None


def _outcome(response: DriverResponse) -> str:
    return "executed" if response.call_executed else "failed"


def _detail(response: DriverResponse) -> str:
    return f": {response.call_detail}" if response.call_detail else ""


def _log_cancelled(name: str, task: asyncio.Future[_Ran], changes_state: bool) -> None:
    """The outcome of a call the client cancelled: nobody else will ever see it."""
    if task.cancelled():  # before it began
        log.debug("the client cancelled %s before it ran", name)
        return
    error = task.exception()
    if error is not None:
        log.error("the cancelled call %s failed: %s", name, error)
        return
    response, cancelled = task.result()
    if cancelled is not None and cancelled.response is not None:
        response = cancelled.response
        outcome = "executed" if response.call_executed else "failed"
        detail = f": {response.call_detail}" if response.call_detail else ""
        log.warning("the client cancelled %s after it started; it %s%s", name, outcome, detail)
    elif cancelled is not None:
        log.debug("the client cancelled %s; nothing it did changed state", name)
    elif response is not None and changes_state:
        log.warning(
            "the client cancelled %s as it ended; it %s%s",
            name,
            _outcome(response),
            _detail(response),
        )
    else:
        log.debug("the client cancelled %s as it ended; its answer is dropped", name)
