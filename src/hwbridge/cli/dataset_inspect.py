"""`hwbridge inspect --dataset DIR`: the inspector REPL on a CaptureDriver instead of a bus.

The commands are the inspector's (tools, describe, call, prompt, paste, or an LLM output);
`status` describes the dataset.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, cast

from hwbridge.cli.console import make_console
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError
from hwbridge.cli.repl import Inspector

if TYPE_CHECKING:
    from rich.console import Console

    from hwbridge.captures.driver import CaptureDriver

__all__ = ["DatasetInspector", "add_dataset_option", "run_dataset"]


def add_dataset_option(parser: argparse.ArgumentParser) -> None:
    """--dataset DIR: a decoded capture dataset instead of a bus."""
    parser.add_argument(
        "--dataset",
        metavar="DIR",
        help="inspect a decoded capture dataset (hwbridge decode) instead of a live bus",
    )


class DatasetInspector(Inspector):
    """The inspector's loop and commands over a CaptureDriver."""

    def __init__(self, driver: CaptureDriver, console: Console, *, model: str | None = None):
        super().__init__(cast(Any, driver), console, model=model, bus=str(driver.dataset.root))
        self._commands["status"] = lambda _: self.call("describe_dataset", {})

    def banner(self) -> None:
        from rich.text import Text

        dataset = self.driver.dataset  # type: ignore[attr-defined]
        self.console.print(
            Text.assemble(
                ("hwbridge inspect", "bold"),
                f": dataset {dataset.root} ({len(dataset.tables)} tables, "
                f"{len(dataset.sources)} sources)",
            ),
            soft_wrap=True,
        )
        self.console.print(f"{len(self.tools)} tools, read-only.", soft_wrap=True)
        self.console.print(
            "Type help for commands (status describes the dataset); anything else is run as "
            "LLM output.",
            style="dim",
        )


def open_dataset(args: argparse.Namespace) -> CaptureDriver:
    """The CaptureDriver of --dataset; a folder that is not a dataset's root is a usage
    error naming the root nearby, a missing captures extra a runtime one."""
    try:
        from hwbridge.captures.driver import CaptureDriver
    except ImportError as exc:
        raise CliError(
            f"{exc.name or exc}: --dataset needs pip install 'mcs-hwbridge[captures]'",
            EXIT_RUNTIME,
        ) from None
    try:
        return CaptureDriver.from_dataset(args.dataset, prompt_strategy=str(args.pack))
    except FileNotFoundError as exc:
        raise CliError(f"--dataset: {exc}", EXIT_USAGE) from None


def run_dataset(args: argparse.Namespace) -> int:
    driver = open_dataset(args)
    console = make_console()
    with driver:
        DatasetInspector(driver, console, model=args.model).run()
    return EXIT_OK
