"""Line input for the inspect REPL: readline on a terminal, plain lines from a pipe.

Piped input is echoed after the prompt, so `hwbridge inspect ... < session.txt` prints a
readable transcript.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["LineReader", "needs_more"]

PROMPT = "hwbridge> "
CONTINUE = "... "


def needs_more(text: str) -> bool:
    """True while pasted text is visibly unfinished: an open code fence, bracket or brace."""
    if text.count("```") % 2:
        return True
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth > 0


class LineReader:
    """Reads one line at a time; None at end of input."""

    def __init__(self, console: Console, words: Callable[[], Iterable[str]]) -> None:
        self.console = console
        self.interactive = sys.stdin.isatty()
        if self.interactive:
            _enable_readline(words)

    def read(self, prompt: str = PROMPT) -> str | None:
        if self.interactive:
            try:
                return input(prompt)
            except EOFError:
                return None
        line = sys.stdin.readline()
        if not line:
            return None
        line = line.rstrip("\r\n")
        self.console.print(f"{prompt}{line}", style="dim", soft_wrap=True)
        return line

    def read_block(self) -> str:
        """`paste`: lines until one with a single '.' or the end of input."""
        lines: list[str] = []
        while (line := self.read(CONTINUE)) is not None and line.strip() != ".":
            lines.append(line)
        return "\n".join(lines)

    def read_rest(self, first: str) -> str:
        """An unfinished paste: lines until it is complete, or an empty or '.' line, or EOF.

        The empty line matters: an LLM output that never closes its brace must not swallow
        the commands that follow it.
        """
        lines = [first]
        while needs_more("\n".join(lines)):
            line = self.read(CONTINUE)
            if line is None or line.strip() in ("", "."):
                break
            lines.append(line)
        return "\n".join(lines)


def _enable_readline(words: Callable[[], Iterable[str]]) -> None:
    """History and tab completion of commands and tool names, where readline exists."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline
        return

    def complete(text: str, state: int) -> str | None:
        matches = sorted(w for w in words() if w.startswith(text))
        return matches[state] if state < len(matches) else None

    readline.set_completer(complete)
    readline.set_completer_delims(' \t\n{}[]",:')
    if "libedit" in (readline.__doc__ or ""):  # macOS
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
