"""The `hwbridge` command (also `python -m hwbridge`): thin subcommands over the library.

Each subcommand lives in its own module with `register(subparsers)`; heavy imports wait
until a subcommand runs. Every failure a user can meet ends as one `hwbridge: ...` line on
stderr with exit code 2 (usage) or 1 (runtime); `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Sequence

from hwbridge import __version__
from hwbridge.cli import (
    chat,
    decode,
    demo,
    discover,
    drivers,
    dump,
    inspector,
    mcp_server,
    monitor,
    plot,
    ports,
    prompt,
    record,
    schema,
    sim,
    tools,
)
from hwbridge.cli.console import terminal_text
from hwbridge.cli.errors import EXIT_RUNTIME, EXIT_USAGE, CliError, one_line, os_text

__all__ = ["build_parser", "main"]

EXIT_STATUS = """\
exit status:
  0  done
  1  the job failed: the bus does not answer (BUS_DOWN), a capture broke while it was
     read, the simulator is missing, a file cannot be written, an unexpected error
     (--debug shows its traceback)
  2  usage error: an unknown option, a file or folder that does not exist (a capture,
     a database, a dataset), a database that fails to load, a bad --bus string, an
     unknown --allow message, a bad prompt pack
"""

EXAMPLES = """\
examples:
  hwbridge demo                      a recorded LLM session against the simulated vehicle
  hwbridge tools                     the tools of the bundled demo vehicle (no --dbc given)
  hwbridge tools --dbc big.dbc --exposure catalog --json
  hwbridge prompt --dbc car.dbc --model llama3.2:3b > prompt.txt
  hwbridge sim                       the simulated demo vehicle, served over socketcand
  hwbridge inspect --bus socketcand://127.0.0.1:29536/vcan0
  hwbridge ports                     serial ports and CAN interfaces on this machine
  hwbridge inspect --spec bench_psu --port /dev/ttyUSB0
  hwbridge discover drive.blf --reference gnss.dbc --out draft.dbc
  hwbridge sim --help
"""

_GLOBAL_FLAGS = frozenset({"--debug"})


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """One-paragraph descriptions wrap to the terminal; laid-out epilogs stay as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hwbridge",
        description="MCS drivers for CAN buses and serial hardware.",
        epilog=f"{EXIT_STATUS}\n{EXAMPLES}",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"hwbridge {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks and debug logs on errors"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        tools,
        prompt,
        inspector,
        chat,
        mcp_server,
        drivers,
        sim,
        schema,
        decode,
        discover,
        dump,
        demo,
        ports,
        plot,
        monitor,
        record,
    ):
        module.register(sub)
    for name, choice in sub.choices.items():
        choice.epilog = f"{choice.epilog}\n{EXIT_STATUS}" if choice.epilog else EXIT_STATUS
        choice.formatter_class = _Formatter
        if name != "sim":  # also after the subcommand, where people tend to type it
            choice.add_argument(
                "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
            )
    return parser


def _split_sim(argv: list[str]) -> tuple[bool, list[str]] | None:
    """(debug, simulator arguments) when the command is `sim`: argparse must not see them."""
    index = 0
    while index < len(argv) and argv[index] in _GLOBAL_FLAGS:
        index += 1
    if index < len(argv) and argv[index] == "sim":
        return "--debug" in argv[:index], argv[index + 1 :]
    return None


class _TerminalFormatter(logging.Formatter):
    """Log lines with their control characters shown (`terminal_text`): a message may hold
    what a bench, a device or a file said."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_text(super().format(record))


class _BriefFormatter(_TerminalFormatter):
    """Library logs on stderr without tracebacks; those are for --debug."""

    def formatException(self, ei: object) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        record.exc_text = ""
        return super().format(record).rstrip()


OWN_LOGGERS = ("hwbridge", "firmware_sim")
"""Whose log lines reach the terminal: a library's (python-can, cantools, mcp, httpx...) only
with --debug. A library's warning is its business with its own code (python-can's socketcand
client warns at every TCP read that splits a frame); what the user must know, hwbridge says."""


class _OwnLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return any(name == own or name.startswith(own + ".") for own in OWN_LOGGERS)


def _configure_logging(debug: bool) -> None:
    root = logging.getLogger()
    if root.handlers:  # an embedding application (or pytest) already decided
        return
    handler = logging.StreamHandler(sys.stderr)
    if debug:
        handler.setFormatter(_TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_BriefFormatter("hwbridge: %(levelname)s: %(message)s"))
        handler.addFilter(_OwnLines())
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    if debug:  # ours only: cantools' and canmatrix's debug chatter helps nobody here
        logging.getLogger("hwbridge").setLevel(logging.DEBUG)


def _fail(message: str, code: int) -> int:
    print(f"hwbridge: {terminal_text(one_line(message))}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """After a closed pipe (`hwbridge prompt ... | head`), let Python exit without noise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the command's own process: it ends as an interrupt does
    (a BaseException, as KeyboardInterrupt is: no `except Exception` takes it for an error),
    its `finally` blocks run (temporary files deleted, files closed whole)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the command's own process, which ends when the command does
        # the temporary folder is found before a signal can end the command: finding it
        # writes a probe file there, which a SIGTERM in that moment would leave behind
        tempfile.gettempdir()
        for stop in (signal.SIGTERM, signal.SIGHUP):  # what timeout, systemd, a closed
            signal.signal(stop, _terminate)  # terminal send: unwound like Ctrl-C
        try:
            return _main(None)
        finally:
            # the interpreter's last collection would walk every object matplotlib,
            # pyarrow and the rest made (0.1-0.2 s after `hwbridge plot`) only to free memory
            # that the process hands back anyway (atexit handlers still run)
            gc.freeze()
    return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the command's own process: asammdf only when an MF4 file is read
        from hwbridge._deferred import defer_asammdf

        defer_asammdf()
    simulator = _split_sim(arguments)
    debug = simulator[0] if simulator else "--debug" in arguments
    _configure_logging(debug)
    try:
        if simulator is not None:
            return sim.run_simulator(simulator[1], own_process=argv is None)
        args = build_parser().parse_args(arguments)
        code: int = args.func(args)
        return code
    except CliError as exc:
        if debug:
            traceback.print_exc()
        return _fail(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Terminated as exc:
        return _fail(f"terminated ({exc})", 128 + exc.signum)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_RUNTIME
    except FileNotFoundError as exc:
        if debug:  # a path given on the command line that is not there: usage
            traceback.print_exc()
        return _fail(os_text(exc), EXIT_USAGE)
    except OSError as exc:
        if debug:
            traceback.print_exc()
        return _fail(os_text(exc), EXIT_RUNTIME)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        return _fail(
            f"unexpected error: {type(exc).__name__}: {exc} (--debug shows the traceback)",
            EXIT_RUNTIME,
        )


if __name__ == "__main__":
    raise SystemExit(main())
