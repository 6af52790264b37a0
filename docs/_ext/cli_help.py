"""The command reference, generated from the argparse parsers of the `hwbridge` command.

`{hwbridge-help}` renders `hwbridge --help` and then, one section per subcommand (in the order
`hwbridge --help` lists them), that subcommand's own `--help`, exactly as a terminal 88
columns wide prints it. `hwbridge sim` hands its arguments to the simulator, so its section
is `python -m firmware_sim --help` under the name `hwbridge sim`. Nothing is re-typed: a new
option shows up on the next build.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

COLUMNS = "88"


@contextmanager
def _columns() -> Iterator[None]:
    """argparse wraps to $COLUMNS: fix it, so the page does not depend on the build terminal."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subparsers of `parser`, by name, in the order they were registered."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def help_texts() -> Iterator[tuple[str, str]]:
    """(title, help text): `hwbridge`, then each subcommand."""
    from firmware_sim.cli import build_parser as simulator_parser
    from hwbridge.cli.main import build_parser

    with _columns():
        parser = build_parser()
        yield "hwbridge", parser.format_help()
        for name, sub in subcommands(parser).items():
            if name == "sim":
                simulator = simulator_parser()
                simulator.prog = "hwbridge sim"
                yield "hwbridge sim", simulator.format_help()
            else:
                yield f"hwbridge {name}", sub.format_help()


class HwbridgeHelp(SphinxDirective):
    """`{hwbridge-help}`: a section per command, holding its live --help."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        sections: list[nodes.Node] = []
        for title, text in help_texts():
            section = nodes.section(ids=[nodes.make_id(title)])
            section += nodes.title(text=title)
            block = nodes.literal_block(text, text)
            block["language"] = "text"
            section += block
            sections.append(section)
        return sections


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("hwbridge-help", HwbridgeHelp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
