"""`hwbridge prompt`: the system prompt exactly as the LLM gets it, plain text for pipes."""

from __future__ import annotations

import argparse
import sys

from hwbridge.cli.console import stdout_text
from hwbridge.cli.errors import EXIT_OK
from hwbridge.cli.options import add_driver_options, open_driver

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "prompt",
        help="print the system prompt for a database (plain text)",
        description="Print the system prompt an LLM gets for a database, exactly and "
        "without markup, e.g. `hwbridge prompt --dbc car.dbc --bus virtual:x > prompt.txt`. "
        "Without --bus it is the prompt of an offline driver (catalog and decoding only).",
    )
    add_driver_options(parser, bus_required=False)
    from hwbridge.cli.serial_cli import add_serial_options

    add_serial_options(parser)  # --spec FILE|NAME, --port PORT: a serial device instead
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hwbridge.cli import serial_cli

    if serial_cli.wanted(args):
        return serial_cli.run_prompt(args)
    with open_driver(args) as driver:
        text = driver.get_driver_system_message(args.model)
    sys.stdout.write(stdout_text(text) + "\n")
    sys.stdout.flush()
    return EXIT_OK
