"""The inspector's loop: a REPL on one driver, to see exactly what an LLM's output does.

A person lists and describes tools, calls one (`call TOOL {json}` or just `TOOL {json}`),
or pastes any LLM output; every call goes through `process_llm_response`, so validation,
the send policy and the messages are the ones an LLM would get. `hwbridge inspect`
(`cli.inspector`) opens it on a bus; the serial and dataset inspectors extend it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from hwbridge.cli.repl_input import LineReader, needs_more

if TYPE_CHECKING:
    from rich.console import Console

    from hwbridge.can import CanDriver
    from hwbridge.core.models import DriverResponse, Tool

__all__ = ["ANYTHING_ELSE", "COMMANDS", "Inspector"]

COMMANDS: dict[str, str] = {
    "tools [TEXT]": "list the tools (those whose name contains TEXT)",
    "describe TOOL": "a tool's description and parameters",
    "call TOOL [JSON]": "call a tool with a JSON object of arguments (or just: TOOL [JSON])",
    "status": "the bus_status tool",
    "prompt": "the system prompt",
    "paste": "read an LLM output over several lines, until a line with a single '.'",
    "help": "this list",
    "quit": "leave (or end of input, Ctrl-D)",
}
ANYTHING_ELSE = (
    "an LLM output, run through process_llm_response; one left open (a brace, a code "
    "fence) continues until it closes or an empty line"
)
_QUIT = frozenset({"quit", "exit", "q"})


class Inspector:
    """The REPL's commands over one driver; `run` loops until quit or end of input."""

    def __init__(
        self, driver: CanDriver, console: Console, *, model: str | None = None, bus: str = ""
    ) -> None:
        self.driver = driver
        self.console = console
        self.model = model
        self.bus = bus
        self.tools: dict[str, Tool] = {t.name: t for t in driver.list_tools()}
        self.refused = frozenset(driver.refused_tools())
        self.reader = LineReader(console, self._words)
        self._commands: dict[str, Callable[[str], None]] = {
            "tools": self.cmd_tools,
            "describe": self.cmd_describe,
            "call": self.cmd_call,
            "status": lambda _: self.call("bus_status", {}),
            "prompt": self.cmd_prompt,
            "paste": lambda _: self.llm_output(self.reader.read_block()),
            "help": lambda _: self.cmd_help(),
            "?": lambda _: self.cmd_help(),
        }

    def _words(self) -> Iterator[str]:
        yield from (c.split()[0] for c in COMMANDS)
        yield from self.tools

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        self.banner()
        while True:
            try:
                line = self.reader.read()
                if line is None or line.strip() in _QUIT:
                    return
                self.handle(line)
            except KeyboardInterrupt:
                self.console.print("\n(interrupted; quit or Ctrl-D leaves)", style="yellow")

    def handle(self, line: str) -> None:
        """One input line: a command, a tool name, or (anything else) an LLM output."""
        text = line.strip()
        if not text:
            return
        word, _, rest = text.partition(" ")
        command = self._commands.get(word)  # exact: prose such as "Status: ..." is output
        if command is not None:
            command(rest.strip())
        elif word in self.tools or word in self.refused:
            self.cmd_call(text)
        else:
            if needs_more(line):
                if self.reader.interactive:
                    self.console.print(
                        "(unfinished: continue, or end with an empty line)", style="dim"
                    )
                line = self.reader.read_rest(line)
            self.llm_output(line)

    def banner(self) -> None:
        db = self.driver.database
        allowed = self.driver.policy.describe()["allow_messages"]
        policy = f"may send {', '.join(allowed)}" if allowed else "read-only"
        on = f"on {self.bus}" if self.bus else "offline: catalog, encoding and decoding only"
        where = f": {db.path} ({len(db.messages)} messages) {on}"
        from rich.text import Text

        self.console.print(Text.assemble(("hwbridge inspect", "bold"), where), soft_wrap=True)
        self.console.print(f"{len(self.tools)} tools; send policy {policy}.", soft_wrap=True)
        self.console.print(
            "Type help for commands; anything else is run as LLM output.", style="dim"
        )

    # -- commands ----------------------------------------------------------------------

    def cmd_help(self) -> None:
        from rich.table import Table

        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        table.add_column(style="bold")
        table.add_column()
        for usage, meaning in COMMANDS.items():
            table.add_row(usage, meaning)
        table.add_row("anything else", ANYTHING_ELSE)
        self.console.print(table)

    def cmd_tools(self, text: str) -> None:
        from hwbridge.cli.render import tools_table

        needle = text.lower()
        shown = [t for name, t in self.tools.items() if needle in name.lower()]
        self.console.print(tools_table(shown))

    def cmd_describe(self, name: str) -> None:
        from hwbridge.cli.render import describe_tool

        tool = self._tool(name)
        if tool is not None:
            self.console.print(describe_tool(tool))

    def cmd_prompt(self, _: str) -> None:
        from rich.text import Text

        self.console.print(Text(self.driver.get_driver_system_message(self.model)), soft_wrap=True)

    def cmd_call(self, text: str) -> None:
        name, _, raw = text.partition(" ")
        if not name:
            self.error("usage: call TOOL {json arguments}")
            return
        if name not in self.refused and self._tool(name) is None:
            return
        arguments: Any = {}
        if raw.strip():
            try:
                arguments = json.loads(raw)
            except ValueError as exc:
                self.error(f"arguments are not JSON ({exc}); e.g. {self._example(name)}")
                return
            if not isinstance(arguments, dict):
                self.error(f"arguments must be a JSON object; e.g. {self._example(name)}")
                return
        self.call(name, arguments)

    # -- running -----------------------------------------------------------------------

    def call(self, name: str, arguments: dict[str, Any]) -> None:
        """A call as the prompt asks an LLM to write it, so it takes the LLM's path."""
        self.llm_output(json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=False))

    def llm_output(self, text: str) -> None:
        """Detect, then process; JSON that finds nothing as text is tried as an API payload."""
        if not text.strip():
            return
        payload: str | dict[str, Any] = text
        calls = self.driver.detect_tool_call(text)
        if not calls:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and self.driver.detect_tool_call(parsed):
                payload = parsed
                calls = self.driver.detect_tool_call(parsed)
        from rich.text import Text

        for call in calls:
            notes = [call.dialect] + (["healed"] if call.healed else [])
            line = Text.assemble(
                ("call ", "dim"), (call.tool, "bold cyan"), f" ({', '.join(notes)})"
            )
            if call.arguments:
                line.append(" " + json.dumps(call.arguments, ensure_ascii=False), style="green")
            self.console.print(line)
        self.show(self.driver.process_llm_response(payload))

    def show(self, response: DriverResponse) -> None:
        from hwbridge.cli.render import response_panel

        self.console.print(response_panel(response))

    # -- helpers -----------------------------------------------------------------------

    def _tool(self, name: str) -> Tool | None:
        """The tool called `name`, or None after saying why not."""
        tool = self.tools.get(name)
        if tool is not None:
            return tool
        if not name:
            self.error("which tool? e.g. describe read_signals")
        elif name in self.refused:
            self.error(f"{name} is closed by the send policy (--allow opens a message)")
        else:
            close = difflib.get_close_matches(name, list(self.tools), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `tools` lists them"
            self.error(f"tool {name} is unknown{hint}")
        return None

    def _example(self, name: str) -> str:
        tool = self.tools.get(name)
        required = [p.name for p in tool.parameters if p.required] if tool else []
        shown = ", ".join(f'"{p}": ...' for p in required)
        return f"call {name} {{{shown}}}"

    def error(self, message: str) -> None:
        from rich.text import Text

        self.console.print(Text(message, style="red"))
