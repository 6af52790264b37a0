"""`hwbridge demo` at work (`demo` registers the command): a recorded LLM session against
the simulated vehicle, over a real transport.

Starts the simulator in its own process (`python -m firmware_sim` with this interpreter, a
socketcand server on loopback), connects a CanDriver to it with python-can's socketcand
interface and plays the recorded LLM outputs of `demo_session.toml` (recorded, not produced
by a live model). The database and the session ship inside the package, so the demo runs
from an installed wheel in any folder; `make demo` is this command. `--inspect` (or
HWBRIDGE_INSPECT=1) opens the interactive inspector on the same bus instead.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from hwbridge.cli.console import make_console
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, CliError

if TYPE_CHECKING:
    from hwbridge.can import CanDriver, SendPolicy
    from hwbridge.core.models import DriverResponse

__all__ = ["Session", "load_session", "run", "simulator"]

SESSION_FILE = "demo_session.toml"
READY_TIMEOUT_S = 30.0  # a hang, not a speed target: the simulator is ready in ~0.35 s
_RESULT_CHARS = 900


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Step(_Strict):
    """One recorded LLM output and the outcome the demo expects from it."""

    label: str
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    dialect: Literal["text", "openai"] = "text"
    answer: str | None = None
    refused: str | None = None
    """The error code a refusal must carry (e.g. SEND_NOT_ALLOWED); None: it must execute."""

    @model_validator(mode="after")
    def _one_output(self) -> Step:
        if (self.tool is None) == (self.answer is None):
            raise ValueError(f"step {self.label!r}: give either tool (+ arguments) or answer")
        return self

    def output(self, call_id: str) -> str | dict[str, Any]:
        """What the LLM wrote: a text JSON call, an OpenAI message, or prose."""
        if self.answer is not None:
            return self.answer
        if self.dialect == "openai":
            function = {"name": self.tool, "arguments": json.dumps(self.arguments)}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        return json.dumps({"tool": self.tool, "arguments": self.arguments})

    def surprise(self, response: DriverResponse) -> str | None:
        """How the response differs from what was recorded, or None."""
        detail = response.call_detail or ""
        if self.answer is not None:
            wanted = not (response.call_executed or response.call_failed)
        elif self.refused is not None:
            wanted = response.call_failed and detail.startswith(f"{self.refused}:")
        else:
            wanted = response.call_executed and not response.call_failed
        if wanted:
            return None
        if response.call_failed:
            got = f"failed ({detail})"
        else:
            got = "executed" if response.call_executed else "no tool call"
        return f"{self.label!r} {got}"


class PolicySpec(_Strict):
    """The SendPolicy of one act (read-only when empty)."""

    allow_messages: list[str] = Field(default_factory=list)
    signal_limits: dict[str, tuple[float, float]] = Field(default_factory=dict)
    max_frames_per_second: float = 20

    def build(self) -> SendPolicy:
        from hwbridge.can import SendPolicy

        return SendPolicy(
            allow_messages=self.allow_messages,
            signal_limits=self.signal_limits,
            max_frames_per_second=self.max_frames_per_second,
        )


class HookSpec(_Strict):
    """counter_and_checksum(counter, checksum) for one message."""

    counter: str | None = None
    checksum: str | None = None


class Act(_Strict):
    heading: str | None = None
    policy: PolicySpec = Field(default_factory=PolicySpec)
    hooks: dict[str, HookSpec] = Field(default_factory=dict)
    steps: list[Step] = Field(min_length=1)


class Session(_Strict):
    """The recorded session: acts on the same bus, each with its own send policy."""

    bitrate: int | None = None
    acts: list[Act] = Field(min_length=1)

    @property
    def allowed(self) -> list[str]:
        """Every message some act may send: what the inspector opens."""
        return sorted({name for act in self.acts for name in act.policy.allow_messages})


def load_session() -> Session:
    """The recorded session that ships beside this module."""
    text = resources.files("hwbridge.cli").joinpath(SESSION_FILE).read_text(encoding="utf-8")
    return Session.model_validate(tomllib.loads(text))


def run(args: argparse.Namespace) -> int:
    from hwbridge.resources import bundled_dbc

    session = load_session()
    dbc = bundled_dbc()
    console = make_console()
    started = time.monotonic()
    with simulator(dbc) as bus:
        if args.inspect or os.environ.get("HWBRIDGE_INSPECT") == "1":
            allow = [a for name in session.allowed for a in ("--allow", name)]
            rate = [] if session.bitrate is None else ["--bitrate", str(session.bitrate)]
            return _inspect(args, ["--dbc", str(dbc), "--bus", bus, *rate, *allow])
        surprises = play(console, session, dbc, bus)
    console.print(Text(f"demo finished in {time.monotonic() - started:.1f} s", style="dim"))
    if surprises:
        raise CliError("the demo did not go as recorded: " + "; ".join(surprises), EXIT_RUNTIME)
    return EXIT_OK


def _inspect(outer: argparse.Namespace, words: list[str]) -> int:
    """`hwbridge inspect WORDS` run inside this command: its options parsed as inspect's, the
    global ones (--debug...) kept as this command was given them."""
    from hwbridge.cli import inspector

    parser = argparse.ArgumentParser(prog="hwbridge")
    inspector.register(parser.add_subparsers())
    args = parser.parse_args(["inspect", *words])
    for name, value in vars(outer).items():
        if not hasattr(args, name):
            setattr(args, name, value)
    code: int = args.func(args)
    return code


@contextmanager
def simulator(dbc: Path, timeout_s: float = READY_TIMEOUT_S) -> Iterator[str]:
    """Run the simulated vehicle in its own process; yield its socketcand bus string.

    `sys.executable -m firmware_sim` finds the simulator wherever hwbridge is installed (a
    wheel, an editable install); its errors go to our stderr as they are.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--dbc", str(dbc), "--socketcand", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield _ready_line(proc, timeout_s).removeprefix("socketcand: ")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _ready_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The simulator's first line, `socketcand: ...`, or a clear error within `timeout_s`."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise CliError(f"the simulator printed nothing in {timeout_s:.0f} s", EXIT_RUNTIME)
    line = proc.stdout.readline().strip()
    if not line.startswith("socketcand: "):
        try:  # at end of output the process is exiting: wait for its status
            code = proc.wait(5) if not line else proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        status = f" (exit status {code})" if code is not None else ""
        raise CliError(f"the simulator did not start{status}: {line!r}", EXIT_RUNTIME)
    return line


def play(console: Console, session: Session, dbc: Path, bus: str) -> list[str]:
    """Every act of the session on `bus`; returns the steps whose outcome was not recorded."""
    from hwbridge.can import CanDriver, counter_and_checksum
    from hwbridge.core.prompts import estimate_tokens

    surprises: list[str] = []
    for index, act in enumerate(session.acts):
        hooks = {
            name: counter_and_checksum(spec.counter, spec.checksum)
            for name, spec in act.hooks.items()
        }
        with CanDriver.from_dbc(
            dbc, bus=bus, policy=act.policy.build(), hooks=hooks, bitrate=session.bitrate
        ) as driver:
            if index == 0:
                prompt = driver.get_driver_system_message()
                console.print(
                    Text.assemble(
                        ("hwbridge demo", "bold"),
                        f": {driver.meta.name} on {bus}, {len(driver.list_tools())} tools, "
                        f"system prompt {len(prompt):,} characters "
                        f"(~{estimate_tokens(prompt):,} tokens), send policy: {_policy(driver)}",
                    ),
                )
                console.print(
                    Text("Every LLM output below is recorded, not produced by a live model.")
                )
            if act.heading:
                console.print(Text(act.heading, style="bold"))
            for number, step in enumerate(act.steps, 1):
                output = step.output(call_id=f"call_{index + 1}_{number}")
                response = driver.process_llm_response(output)
                show(console, step.label, output, response)
                surprise = step.surprise(response)
                if surprise:
                    surprises.append(surprise)
    return surprises


def _policy(driver: CanDriver) -> str:
    allowed = driver.policy.describe()["allow_messages"]
    return f"may send {', '.join(allowed)}" if allowed else "read-only"


def show(console: Console, label: str, output: str | dict[str, Any], r: DriverResponse) -> None:
    said = output if isinstance(output, str) else json.dumps(output)
    if r.call_executed:
        status = ("executed", "green")
    elif r.call_failed:
        status = ("failed", "red")
    else:
        status = ("no call: final answer", "blue")
    lines = [
        Text.assemble(("recorded LLM output: ", "dim"), said),
        Text.assemble("status: ", status),
    ]
    if r.call_executed:
        result = json.dumps(r.tool_call_result, ensure_ascii=False)
        lines.append(Text("result: " + result[:_RESULT_CHARS]))
    if r.call_failed:
        lines.append(Text(f"detail: {r.call_detail}"))
        lines.append(Text(f"retry prompt: {r.retry_prompt}"))
    if r.messages:
        roles = ", ".join(str(m.get("role", m.get("type"))) for m in r.messages)
        lines.append(Text(f"messages to append: {roles}"))
    console.print(Panel(Text("\n").join(lines), title=Text(label), title_align="left"))
