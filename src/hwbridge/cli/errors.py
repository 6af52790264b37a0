"""Exit codes and the one error type subcommands raise, so `main` prints one line, not a trace."""

from __future__ import annotations

__all__ = [
    "EXIT_OK",
    "EXIT_RUNTIME",
    "EXIT_USAGE",
    "MAX_LINE_CHARS",
    "CliError",
    "one_line",
    "os_text",
]

EXIT_OK = 0
EXIT_RUNTIME = 1
"""The command was right but the world was not: a bus that does not answer, a failed write."""
EXIT_USAGE = 2
"""The command was wrong: bad options, an unreadable or invalid database, a bad bus string."""


class CliError(Exception):
    """A failure the user can fix, already phrased for them; `main` prints it as one line."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


MAX_LINE_CHARS = 500
"""Characters of an error line, at most: a library's message may quote a file (cantools'
syntax error quotes the whole line of the DBC, 3 MB of it for a hostile one)."""


def one_line(text: str) -> str:
    """Messages from libraries may span lines (cantools, repairs) and quote files; stderr gets
    one line of at most MAX_LINE_CHARS characters, its control characters escaped (an ESC
    from a file would drive the terminal)."""
    parts: list[str] = []
    size = 0
    for raw in text.splitlines():
        if part := raw.strip():
            parts.append(part[: MAX_LINE_CHARS + 1])
            size += len(parts[-1]) + 1
            if size > MAX_LINE_CHARS:
                break
    line = " ".join(parts)[: MAX_LINE_CHARS + 1]
    if not line.isprintable():
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    if len(line) > MAX_LINE_CHARS:
        line = line[: MAX_LINE_CHARS - 3] + "..."
    return line


def os_text(exc: OSError) -> str:
    """`capture not found: missing.mf4` rather than `[Errno 2] capture not found: '...'`."""
    if not exc.strerror:
        return one_line(str(exc))
    if exc.filename is None:
        return one_line(exc.strerror)
    return one_line(f"{exc.strerror}: {exc.filename}")
