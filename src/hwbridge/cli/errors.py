"""Exit codes and the one error type subcommands raise, so `main` prints one line, not a trace."""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_RUNTIME", "EXIT_USAGE", "CliError", "one_line", "os_text"]

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


def one_line(text: str) -> str:
    """Messages from libraries may span lines (cantools, repairs); stderr gets one."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def os_text(exc: OSError) -> str:
    """`capture not found: missing.mf4` rather than `[Errno 2] capture not found: '...'`."""
    if not exc.strerror:
        return one_line(str(exc))
    if exc.filename is None:
        return one_line(exc.strerror)
    return one_line(f"{exc.strerror}: {exc.filename}")
