"""The conversation of `hwbridge chat` (see `chat`): the terminal's lines in, the model's
streamed words, tool calls and results out. Imported when a chat starts: asyncio and rich
are not needed for `hwbridge --help`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import select
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from hwbridge.cli.errors import EXIT_OK
from hwbridge.cli.stop_signals import relayed_signals

if TYPE_CHECKING:
    from hwbridge.core.hybrid import HybridDriver
    from hwbridge.core.models import ToolCall
    from hwbridge.core.runner import ChatClient, Runner, RunResult, Step

__all__ = ["COMMANDS", "CONSENT_TIMEOUT_S", "PROMPT", "Chat", "TerminalInput"]

PROMPT = "you> "
CONSENT_TIMEOUT_S = 120.0
_SHOWN_CHARS = 160
# a blocked wait runs no signal handler when the kernel hands SIGINT to another thread:
# waits in the main thread wake this often so that Ctrl-C is never lost
_WAKE_S = 0.2
COMMANDS = {
    "/tools": "the tools the model can call",
    "/health": "the connection's health (bus state, error counters, last frame age)",
    "/reset": "forget the conversation",
    "/help": "this list",
    "/quit": "leave (or Ctrl-D)",
}


class TerminalInput:
    """Lines from the terminal for the chat prompt and for consent questions.

    On a terminal the prompt uses input() (line editing, history) and a question polls
    stdin so Ctrl-C can withdraw it; from a pipe one reader thread feeds both, and what is
    read is echoed so a scripted session reads as a transcript.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.interactive = sys.stdin.isatty()
        self._lines: queue.Queue[str | None] = queue.Queue()
        if not self.interactive:
            threading.Thread(target=self._pump, name="hwbridge-chat-stdin", daemon=True).start()
        else:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (history and editing for input())

    def _pump(self) -> None:
        try:
            for line in iter(sys.stdin.readline, ""):
                self._lines.put(line.rstrip("\r\n"))
        finally:
            self._lines.put(None)

    def read(self, prompt: str = PROMPT) -> str | None:
        """A line for the prompt; None at end of input."""
        if self.interactive:
            try:
                return input(prompt)
            except EOFError:
                return None
        while True:  # a wait that wakes: Ctrl-C taken by another thread is seen here too
            try:
                line = self._lines.get(timeout=_WAKE_S)
                break
            except queue.Empty:
                continue
        if line is not None:
            self.console.print(f"{prompt}{line}", style="dim", soft_wrap=True)
        return line

    def answer(self, withdrawn: threading.Event, timeout_s: float) -> str | None:
        """A line for a question, from any thread; None when withdrawn or timed out."""
        deadline = timeout_s
        step = 0.05
        while deadline > 0 and not withdrawn.is_set():
            if self.interactive and os.name == "nt":  # no select() on a console: block
                line = sys.stdin.readline()
                return line.rstrip("\r\n") if line else None
            if self.interactive:
                ready, _, _ = select.select([sys.stdin], [], [], step)
                if ready:
                    line = sys.stdin.readline()
                    return line.rstrip("\r\n") if line else None
            else:
                try:
                    line = self._lines.get(timeout=step)
                except queue.Empty:
                    pass
                else:
                    if line is not None:
                        self.console.print(line, style="dim", soft_wrap=True)
                    return line
            deadline -= step
        return None


class Chat:
    """The conversation loop: questions in, streamed answers and tool calls out."""

    def __init__(
        self,
        driver: HybridDriver,
        client: ChatClient,
        console: Console,
        *,
        max_rounds: int = 8,
        consent: bool = False,
    ) -> None:
        from hwbridge.core.decorators import ConsentGate
        from hwbridge.core.runner import Runner

        self.console = console
        self.input = TerminalInput(console)
        self.withdrawn = threading.Event()  # set by Ctrl-C: a pending question is answered no
        self.client = client
        self.base = driver
        self.driver: HybridDriver = (
            ConsentGate(driver, self.ask, timeout_s=CONSENT_TIMEOUT_S) if consent else driver
        )
        self.consent = consent
        self.runner: Runner = Runner(
            self.driver,
            client,
            max_rounds,
            on_text=self.on_text,
            on_call=self.on_call,
            on_step=self.on_step,
        )
        self._mid_line = False
        self._answering = False

    # -- the loop ------------------------------------------------------------------------

    def banner(self, *, bus: str, policy: str) -> None:
        tools = len(self.driver.list_tools())
        consent = ", consent asked before each send" if self.consent else ""
        mode = getattr(self.client, "mode", "native")
        self.console.print(
            Text.assemble(
                ("hwbridge chat", "bold"),
                f": {self.client.provider} {self.client.model} ({mode} tools) on {bus}; "
                f"{tools} tools, send policy {policy}{consent}.",
            ),
            soft_wrap=True,
        )
        self.console.print(
            "Ctrl-C stops an answer; Ctrl-C again or Ctrl-D leaves. /help lists commands.",
            style="dim",
        )

    def loop(self) -> int:
        with asyncio.Runner() as aio:
            while True:
                try:
                    line = self.input.read()
                except KeyboardInterrupt:
                    self.console.print()
                    return EXIT_OK
                if line is None:
                    return EXIT_OK
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if self.command(text):
                        return EXIT_OK
                    continue
                try:
                    self.turn(aio, text)
                except KeyboardInterrupt:  # Ctrl-C twice: leave now
                    self._end_line()
                    self.console.print("(left)", style="yellow")
                    return EXIT_OK

    def turn(self, aio: asyncio.Runner, text: str) -> None:
        """One question to its answer; Ctrl-C cancels it (see the module docstring)."""
        self.withdrawn.clear()
        self._answering = False
        holder: dict[str, asyncio.Task[Any]] = {}

        async def ask() -> RunResult:
            task = asyncio.current_task()
            assert task is not None
            holder["task"] = task
            return await self.runner.arun(text)

        loop = aio.get_loop()

        def leave_if_withdrawn(signum: int) -> None:
            # in the signal handler: a second Ctrl-C leaves at once (reading a flag takes no
            # lock; setting it does, so that is left to `withdraw`)
            if self.withdrawn.is_set():
                raise KeyboardInterrupt

        def withdraw(signum: int) -> None:
            self.withdrawn.set()
            task = holder.get("task")
            if task is not None:
                loop.call_soon_threadsafe(task.cancel)

        try:
            with relayed_signals((signal.SIGINT,), withdraw, at_once=leave_if_withdrawn):
                result = aio.run(ask())
        except asyncio.CancelledError:
            self._end_line()
            self.console.print("(interrupted)", style="yellow")
            return
        self.finish(result)

    def command(self, text: str) -> bool:
        """A /command; True to leave."""
        word = text.split(maxsplit=1)[0].lower()
        if word in ("/quit", "/exit", "/q"):
            return True
        if word == "/tools":
            from hwbridge.cli.render import tools_table

            self.console.print(tools_table(self.driver.list_tools()))
        elif word == "/health":
            health = self.base.healthcheck() if hasattr(self.base, "healthcheck") else None
            if health is None:
                self.console.print("this driver has no health check", style="dim")
            else:
                self.console.print_json(health.model_dump_json(exclude={"checked_at"}))
        elif word == "/reset":
            self.runner.reset()
            self.console.print("(conversation forgotten)", style="dim")
        else:
            for usage, meaning in COMMANDS.items():
                self.console.print(Text.assemble((f"{usage:<9}", "bold"), meaning))
        return False

    # -- what the Runner reports ---------------------------------------------------------

    def on_text(self, delta: str) -> None:
        if not self._answering:
            self._end_line()
            self.console.print(Text("model: ", style="bold magenta"), end="")
            self._answering = True
        self.console.print(Text(delta), end="", soft_wrap=True)
        self._mid_line = not delta.endswith("\n")

    def on_call(self, call: ToolCall) -> None:
        self._end_line()
        self._answering = False
        line = Text.assemble(("  → ", "cyan"), (self.driver.tool_name(call.tool), "bold cyan"))
        if call.arguments:
            line.append(" " + _short(json.dumps(call.arguments, ensure_ascii=False)), "green")
        self.console.print(line, soft_wrap=True)

    def on_step(self, step: Step) -> None:
        if not step.calls:
            return
        self._end_line()
        self._answering = False  # what the model says next is a new answer: labelled
        single = len(step.calls) == 1
        for outcome in step.calls:
            if outcome.ok:
                result = json.dumps(outcome.result, ensure_ascii=False, default=str)
                line = Text.assemble(
                    ("  ✓ ", "green"),
                    (self.driver.tool_name(outcome.tool), "bold"),
                    " " + _short(result),
                )
            else:
                said = step.response.call_detail if single else None
                said = said or outcome.code or "failed"
                line = Text.assemble(
                    ("  ✗ ", "red"),
                    (self.driver.tool_name(outcome.tool), "bold"),
                    " ",
                    (_short(said), "red"),
                )
            self.console.print(line, soft_wrap=True)

    def finish(self, result: RunResult) -> None:
        self._end_line()
        if result.stop_reason == "provider_error":
            self.console.print(
                Text(f"provider error: {result.detail}", style="red"), soft_wrap=True
            )
        elif result.stop_reason != "answer":
            self.console.print(f"(stopped: {result.stop_reason}: {result.detail})", style="yellow")
        if result.usage is not None:
            rounds = len(result.steps)
            self.console.print(
                f"({rounds} round{'s' if rounds != 1 else ''}, "
                f"{result.usage.input_tokens:,} tokens in, {result.usage.output_tokens:,} out)",
                style="dim",
            )

    def ask(self, tool: str, arguments: dict[str, Any]) -> bool:
        """ConsentGate's question, on the terminal: only y or yes approves."""
        self._end_line()
        shown = _short(json.dumps(arguments, ensure_ascii=False))
        self.console.print(
            Text.assemble(("  ? ", "yellow"), "allow ", (tool, "bold"), f" {shown}? [y/N] "),
            end="",
            soft_wrap=True,
        )
        line = self.input.answer(self.withdrawn, CONSENT_TIMEOUT_S - 1)
        if line is None:
            self.console.print("no", style="yellow")
            return False
        if self.input.interactive:
            self._mid_line = False
        return line.strip().lower() in ("y", "yes")

    def _end_line(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
