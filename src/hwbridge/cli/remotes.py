"""Remote benches for `hwbridge chat` and `hwbridge mcp`: `--remote URL` (again for each
bench), each an `McpToolDriver` labelled bench1, bench2, ... (or `--remote LABEL=URL`), all
behind one Orchestrator whose tools are `bench1.read_signals`, `bench2.read_signals`, ...

A remote tool counts as read-only here only when `--trust-remote` believes the benches'
read-only marks or `--remote-read-only PATTERN` names it; any other remote tool is one the
chat asks consent for, and the aggregating server marks as not read-only. The bearer token
comes from an environment variable (`--remote-token-env VAR`, default
HWBRIDGE_REMOTE_TOKEN when it is set), never from the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from typing import TYPE_CHECKING

from hwbridge.cli.errors import EXIT_RUNTIME, CliError, one_line

if TYPE_CHECKING:
    from hwbridge.core.contract import MCSToolDriver

__all__ = ["TOKEN_VARIABLE", "add_remote_options", "local_named", "open_remotes", "remote_words"]

TOKEN_VARIABLE = "HWBRIDGE_REMOTE_TOKEN"
_LABELLED = re.compile(r"^([A-Za-z0-9_-]{1,24})=(https?://.+)$")
_LOCAL = ("bus", "dbc", "port", "spec", "obd", "j1939", "dataset")


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "remote benches (each an `hwbridge mcp --http` server, or any MCP server)"
    )
    group.add_argument(
        "--remote",
        action="append",
        default=[],
        metavar="URL",
        help="an MCP server over streamable HTTP (http://HOST:PORT/mcp), once per bench; "
        "its tools are offered as bench1.NAME, bench2.NAME, ... (LABEL=URL names it)",
    )
    group.add_argument(
        "--remote-token-env",
        metavar="VAR",
        help=f"the benches' bearer token is the value of environment variable VAR "
        f"(default: {TOKEN_VARIABLE}, when it is set)",
    )
    group.add_argument(
        "--trust-remote",
        action="store_true",
        help="believe the benches' read-only marks (your own hwbridge benches): those tools "
        "run without consent; without it every remote tool is treated as one that changes "
        "state, unless --remote-read-only names it",
    )
    group.add_argument(
        "--remote-read-only",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="remote tools treated as read-only whatever the bench says, as names or globs: "
        "LABEL.NAME (bench1.read_*) matches only the bench you labelled LABEL, whatever its "
        "tools call themselves; a plain NAME (read_signals) matches that tool on every bench, "
        "but never a tool whose own name has a dot",
    )
    group.add_argument(
        "--remote-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="the longest a remote call may take beyond the time its own arguments ask for "
        "(timeout_ms, duration_ms); then it fails with REMOTE_TIMEOUT (default 30)",
    )


def local_named(args: argparse.Namespace) -> bool:
    """Whether any local bridge (or dataset) is named beside the remotes."""
    return any(getattr(args, name, None) is not None for name in _LOCAL)


def open_remotes(args: argparse.Namespace, stack: contextlib.ExitStack) -> dict[str, MCSToolDriver]:
    """An McpToolDriver per --remote, by label, connected (closed by `stack`); a bench that
    does not answer exits 1 naming it."""
    if not args.remote:
        if args.trust_remote or args.remote_read_only or args.remote_token_env:
            raise CliError(
                "--trust-remote, --remote-read-only and --remote-token-env need --remote"
            )
        return {}
    if not args.remote_timeout > 0:
        raise CliError("--remote-timeout must be above 0")
    token = _token(args)
    try:
        from hwbridge.core.models import ToolError
        from hwbridge.mcp import McpToolDriver
    except ImportError as exc:
        raise CliError(one_line(str(exc))) from exc
    drivers: dict[str, MCSToolDriver] = {}
    for n, given in enumerate(args.remote, start=1):
        label, url = _label_and_url(given, n)
        if label in drivers:
            raise CliError(f"--remote {given}: the label {label} is given twice")
        try:
            driver = McpToolDriver(
                url,
                token=token,
                label=label,
                timeout_s=args.remote_timeout,
                read_only=args.remote_read_only,
                trust_annotations=args.trust_remote,
            )
        except ToolError as exc:
            raise CliError(f"--remote {url}: {one_line(exc.message)}", EXIT_RUNTIME) from exc
        except ValueError as exc:
            raise CliError(f"--remote {given}: {one_line(str(exc))}") from exc
        drivers[label] = stack.enter_context(driver)
    return drivers


def remote_words(args: argparse.Namespace) -> list[str]:
    """The remote options as arguments again (for `hwbridge mcp --print-config`)."""
    words: list[str] = []
    for given in args.remote:
        words += ["--remote", given]
    if args.remote_token_env:
        words += ["--remote-token-env", args.remote_token_env]
    if args.trust_remote:
        words.append("--trust-remote")
    if args.remote_read_only:
        words += ["--remote-read-only", *args.remote_read_only]
    if args.remote_timeout != 30.0:
        words += ["--remote-timeout", f"{args.remote_timeout:g}"]
    return words


def _label_and_url(given: str, n: int) -> tuple[str, str]:
    labelled = _LABELLED.match(given)
    if labelled:
        return labelled.group(1), labelled.group(2)
    if not given.startswith(("http://", "https://")):
        raise CliError(f"--remote {given}: give http(s)://HOST:PORT/mcp (or LABEL=URL)")
    return f"bench{n}", given


def _token(args: argparse.Namespace) -> str | None:
    variable = args.remote_token_env
    if variable is None:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        return token or None
    token = os.environ.get(variable, "").strip()
    if not token:
        raise CliError(f"--remote-token-env {variable}: that environment variable is not set")
    return token
