"""`hwbridge inspect`: the inspector (`cli.repl`) on a live bus, a database offline, a serial
device (`--spec/--port`), a decoded capture dataset (`--dataset`), or vehicle diagnostics
(`--obd`) and J1939 (`--j1939`) with any of the others, as `chat` and `mcp` take them."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

from hwbridge.cli import serial_cli
from hwbridge.cli.bridges import add_bridge_options, open_bridges
from hwbridge.cli.console import make_console
from hwbridge.cli.dataset_inspect import add_dataset_option, run_dataset
from hwbridge.cli.errors import EXIT_OK
from hwbridge.cli.options import add_bitrate_option, add_driver_options, open_driver
from hwbridge.cli.repl import ANYTHING_ELSE, COMMANDS, Inspector

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "inspect",
        help="an interactive session: call tools, paste LLM outputs (a bus, a device, a "
        "dataset, or a database offline)",
        description="Open a driver and try it by hand: list and describe tools, call one "
        "with JSON arguments, or paste any LLM output (text, fenced JSON, <tool_call> tags, "
        "OpenAI/Anthropic/Gemini/Ollama JSON) to see the DriverResponse an application would "
        "get. With --bus on a live bus; without it the database is browsed offline (its "
        "catalog, encoding and decoding: no frame is read or sent); --spec/--port a serial "
        "device, --dataset a decoded capture dataset, --obd vehicle diagnostics (OBD-II, "
        "UDS) and --j1939 a J1939 network, alone or beside the others as in chat and mcp. "
        "Reads commands from stdin, so a session can be piped.",
    )
    add_driver_options(parser, bus_required=False)
    add_bitrate_option(parser)
    add_bridge_options(parser)  # --spec/--port, --obd, --j1939, --allow-service, --discover
    add_dataset_option(parser)  # --dataset DIR: a decoded capture dataset instead of a bus
    parser.epilog = "commands:\n" + "\n".join(f"  {c:<18}{m}" for c, m in COMMANDS.items())
    parser.epilog += f"\n  {'anything else':<18}{ANYTHING_ELSE}\n"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.dataset is not None:
        return run_dataset(args)
    if args.obd is not None or args.j1939 is not None:
        return _run_bridges(args)
    if serial_cli.wanted(args):
        return serial_cli.run_inspect(args)
    console = make_console()
    with open_driver(args) as driver:
        Inspector(driver, console, model=args.model, bus=args.bus or "").run()
    return EXIT_OK


def _run_bridges(args: argparse.Namespace) -> int:
    """Diagnostics or J1939 (and whatever else is named) in one inspector, as chat has them."""
    from hwbridge.cli.chat import drivers

    console = make_console()
    with contextlib.ExitStack() as stack:
        parts = open_bridges(args, stack)
        BridgesInspector(drivers(parts), console, model=args.model, parts=parts).run()
    return EXIT_OK


class BridgesInspector(Inspector):
    """The inspector over one bridge or an orchestrator of several; `status` is the health
    of each."""

    def __init__(
        self, driver: Any, console: Console, *, model: str | None, parts: dict[str, Any]
    ) -> None:
        super().__init__(driver, console, model=model, bus=", ".join(parts))
        self.parts = parts
        self._commands["status"] = lambda _: self.cmd_status()

    def banner(self) -> None:
        from rich.text import Text

        named = ", ".join(f"{label} ({type(d).__name__})" for label, d in self.parts.items())
        self.console.print(
            Text.assemble(("hwbridge inspect", "bold"), f": {named}"), soft_wrap=True
        )
        self.console.print(f"{len(self.tools)} tools.", soft_wrap=True)
        self.console.print(
            "Type help for commands; anything else is run as LLM output.", style="dim"
        )

    def cmd_status(self) -> None:
        for label, part in self.parts.items():
            check = getattr(part, "healthcheck", None)
            if callable(check):
                health = check()
                self.console.print(f"{label}: {health.status}", soft_wrap=True)
                self.console.print_json(health.model_dump_json(exclude={"checked_at"}))
