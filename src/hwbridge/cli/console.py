"""Rich consoles that follow the user's terminal: colour only on a tty, NO_COLOR respected,
and never a control character from what they show.

Text from a bench, a device, a bus or a file reaches the terminal through these consoles
and the CLI's log lines: an error message holding OSC 52 writes the clipboard, OSC 0 sets
the window title, and erase and cursor-up sequences forge a line above. `terminal_text`
shows every control character but a line break and a tab as an escape (`\\x1b`); the
consoles apply it to everything they print, and `hwbridge.cli.main` to every log line.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment
    from rich.text import Text

__all__ = ["json_text", "make_console", "stdout_text", "terminal_text"]

_PIPE_WIDTH = 100  # rich assumes 80 columns off a terminal; tool tables read better wider
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]+")
"""C0 but \\t and \\n (ESC among them), DEL, C1: what a terminal acts on rather than shows."""

_RAW_IN_JSON = re.compile("[\x7f-\x9f]")


def _json_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def _escape(found: re.Match[str]) -> str:
    return "".join(f"\\x{ord(c):02x}" for c in found.group())


def terminal_text(text: str) -> str:
    """`text` safe to write to a terminal: each control character but `\\n` and `\\t` (C0,
    ESC, DEL, C1) shown as `\\xNN`, so it is seen and never acted on."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def json_text(document: str) -> str:
    """A JSON document safe to write to a terminal, meaning the same: JSON escapes C0 itself;
    DEL and C1 (a CSI or OSC from a database or a bench, which some terminals act on) are
    written as `\\u00NN`, as valid JSON as the raw character."""
    return _RAW_IN_JSON.sub(_json_escape, document) if _RAW_IN_JSON.search(document) else document


def stdout_text(text: str) -> str:
    """Text for stdout: shown safely (`terminal_text`) when stdout is a terminal, as it is
    when it is piped to a file or a program (a system prompt handed on whole)."""
    return terminal_text(text) if sys.stdout.isatty() else text


def make_console(file: TextIO | None = None) -> Console:
    """A console on `file` (default: the current sys.stdout, so tests can capture it).

    Rich itself honours NO_COLOR, FORCE_COLOR and TERM=dumb and writes no escape codes
    when `file` is not a terminal. Markup and highlighting are off: tool descriptions hold
    brackets (`[rpm]`), so styles come only from Text objects, never from parsed strings.
    What it prints has its control characters shown (`terminal_text`): only rich's own
    styles reach the terminal as escape codes.
    """
    console = _console_type()(
        file=file if file is not None else sys.stdout, highlight=False, markup=False
    )
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = _PIPE_WIDTH
    return console


@cache
def _console_type() -> type[Console]:
    """The Console class that shows control characters (rich is imported here, not when
    this module is: `import hwbridge.cli.main` stays without rich)."""
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

    class TerminalConsole(Console):
        """A Console whose text, whatever renders it (a table, a panel, JSON), has its
        control characters shown: a text before it is laid out, any segment after."""

        def render(
            self, renderable: RenderableType, options: ConsoleOptions | None = None
        ) -> Iterable[Segment]:
            if isinstance(renderable, str):
                renderable = terminal_text(renderable)
            elif isinstance(renderable, Text) and _CONTROL.search(renderable.plain):
                renderable = _shown(renderable)
            for segment in super().render(renderable, options):
                if segment.control or not _CONTROL.search(segment.text):
                    yield segment
                else:
                    yield Segment(terminal_text(segment.text), segment.style)

    def _shown(text: Text) -> Text:
        """`text` with its control characters shown, its styles kept."""
        cuts = sorted({i for m in _CONTROL.finditer(text.plain) for i in (m.start(), m.end())})
        shown = text.blank_copy()
        for piece in text.divide(cuts):
            if not _CONTROL.fullmatch(piece.plain):
                shown.append_text(piece)
                continue
            escaped = piece.blank_copy(terminal_text(piece.plain))
            for span in piece.spans:
                escaped.stylize(span.style, 0, len(escaped))
            shown.append_text(escaped)
        return shown

    return TerminalConsole
