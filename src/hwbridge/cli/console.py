"""Rich consoles that follow the user's terminal: colour only on a tty, NO_COLOR respected."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["make_console"]

_PIPE_WIDTH = 100  # rich assumes 80 columns off a terminal; tool tables read better wider


def make_console(file: TextIO | None = None) -> Console:
    """A console on `file` (default: the current sys.stdout, so tests can capture it).

    Rich itself honours NO_COLOR, FORCE_COLOR and TERM=dumb and writes no escape codes
    when `file` is not a terminal. Markup and highlighting are off: tool descriptions hold
    brackets (`[rpm]`), so styles come only from Text objects, never from parsed strings.
    """
    from rich.console import Console  # here: `import hwbridge.cli.main` stays without rich

    console = Console(file=file if file is not None else sys.stdout, highlight=False, markup=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = _PIPE_WIDTH
    return console
