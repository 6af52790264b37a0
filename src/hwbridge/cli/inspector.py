"""`hwbridge inspect`: the inspector (`cli.repl`) on a live bus, a database offline, a serial
device (`--spec/--port`) or a decoded capture dataset (`--dataset`)."""

from __future__ import annotations

import argparse

from hwbridge.cli import serial_cli
from hwbridge.cli.console import make_console
from hwbridge.cli.dataset_inspect import add_dataset_option, run_dataset
from hwbridge.cli.errors import EXIT_OK
from hwbridge.cli.options import add_bitrate_option, add_driver_options, open_driver
from hwbridge.cli.repl import ANYTHING_ELSE, COMMANDS, Inspector

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
        "device, --dataset a decoded capture dataset. Reads commands from stdin, so a "
        "session can be piped.",
    )
    add_driver_options(parser, bus_required=False)
    add_bitrate_option(parser)
    serial_cli.add_serial_options(parser)  # --spec FILE|NAME, --port PORT: a serial device instead
    add_dataset_option(parser)  # --dataset DIR: a decoded capture dataset instead of a bus
    parser.epilog = "commands:\n" + "\n".join(f"  {c:<18}{m}" for c, m in COMMANDS.items())
    parser.epilog += f"\n  {'anything else':<18}{ANYTHING_ELSE}\n"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.dataset is not None:
        return run_dataset(args)
    if serial_cli.wanted(args):
        return serial_cli.run_inspect(args)
    console = make_console()
    with open_driver(args) as driver:
        Inspector(driver, console, model=args.model, bus=args.bus or "").run()
    return EXIT_OK
