"""`hwbridge mcp`: the drivers as an MCP server, for Claude Desktop, Claude Code, Cursor and
any other MCP client: the CAN bus (--dbc, --bus), a serial device (--spec, --port),
vehicle diagnostics (--obd), SAE J1939 (--j1939) and a decoded capture dataset (--dataset),
alone or together behind one Orchestrator.

stdio by default: stdout carries the protocol and nothing else (notices and logs go to
stderr). `--http HOST:PORT` serves streamable HTTP at /mcp instead, on loopback unless
another host is named, with `--token-env VAR` requiring `Authorization: Bearer <$VAR>`
and `--read-timeout SECONDS` bounding how long a request may take to arrive.
`--print-config` prints the client configuration for the same arguments and exits.
`--remote URL` (again for each bench) serves remote MCP servers too, behind this one
endpoint: an aggregating server whose tools are `bench1.read_signals`, ...
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.cli.bridges import (
    add_bridge_options,
    allowances,
    is_serial_port,
    open_bridges,
    serves_can,
    serves_serial,
)
from hwbridge.cli.console import json_text
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, one_line
from hwbridge.cli.options import add_bitrate_option, add_driver_options
from hwbridge.cli.remotes import add_remote_options, local_named, open_remotes, remote_words
from hwbridge.cli.security_key import load_security_key, security_key_words
from hwbridge.cli.serial_cli import resolve_spec

if TYPE_CHECKING:
    from hwbridge.core.contract import MCSToolDriver
    from hwbridge.mcp import HttpLimits

__all__ = ["OFFLINE_TOOLS", "is_serial_port", "register"]

OFFLINE_TOOLS = frozenset({"list_messages", "describe_message", "search_signals", "decode_frame"})
"""The CAN tools that work without a bus: what `hwbridge mcp` offers when no --bus is given."""

EXAMPLES = """\
examples:
  hwbridge mcp --dbc car.dbc --bus socketcan:can0            stdio, for a client to start
  hwbridge mcp --dbc car.dbc --bus socketcan:can0 --print-config   the client's config block
  hwbridge mcp --bus socketcand://127.0.0.1:29536/vcan0 --allow ClimateCommand
  HWBRIDGE_MCP_TOKEN=secret hwbridge mcp --bus virtual:demo --http 127.0.0.1:8000 \\
      --token-env HWBRIDGE_MCP_TOKEN
  hwbridge mcp --spec bench_psu --port /dev/ttyUSB1 --allow set_voltage
  hwbridge mcp --obd /dev/ttyUSB0                  an ELM327 adapter's diagnostics alone
  hwbridge mcp --j1939 socketcan:can0 --allow j1939_dm11   a truck's J1939 network
  hwbridge mcp --bus socketcan:can0 --discover     a bus with no database: the discovery tools
  hwbridge mcp --bus socketcan:can0 --discover --reference obd   ... correlated with OBD-II
  hwbridge mcp --dataset truck_dataset             the capture tools of a decoded dataset
  hwbridge mcp --dataset truck_dataset --bus socketcan:can0   recorded and live together
  hwbridge mcp                        the bundled demo vehicle's catalog, offline
  HWBRIDGE_REMOTE_TOKEN=secret hwbridge mcp --remote http://bench1:8000/mcp \\
      --remote http://bench2:8000/mcp --trust-remote      two benches behind one server
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "mcp",
        help="serve the drivers' tools over MCP (stdio, or streamable HTTP with --http)",
        description="An MCP server with the same tools, send policy and results as every "
        "other command: read tools are marked read-only, send tools (only with --allow) "
        "destructive; the database or device spec, the bus and port status and the driver "
        "are resources. Without --bus it serves the CAN catalog and decode tools; --spec "
        "with --port, --obd and --j1939 add a serial device, vehicle diagnostics and a "
        "J1939 network; --dataset the "
        "read-only capture tools (describe_dataset, query, signal_stats, find_events) of a "
        "decoded dataset, beside the other bridges or alone.",
        epilog=EXAMPLES,
    )
    add_driver_options(parser, bus_required=False)
    add_bitrate_option(parser)
    add_bridge_options(parser)
    parser.add_argument(
        "--dataset",
        metavar="DIR",
        help="also a decoded capture dataset (hwbridge decode --out DIR): its read-only "
        "tools describe_dataset, query, signal_stats and find_events; alone (no --bus, "
        "--dbc, --port, --obd or --j1939) only those",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
        "(HOST defaults to 127.0.0.1; port 0 picks a free one)",
    )
    parser.add_argument(
        "--token-env",
        metavar="VAR",
        help="with --http: every request must carry 'Authorization: Bearer <token>', the "
        "token being the value of environment variable VAR (a token on the command line "
        "would be visible to other users)",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        metavar="SECONDS",
        help="with --http: close (408) a connection that has not sent a whole request head "
        "within SECONDS of its first byte, or its body within SECONDS after the head "
        "(default 10). The server also holds at most 64 connections, and at most 16 per "
        "client address that have not shown the token: beyond, the oldest without the "
        "token is closed to make room, or else the event stream (or keep-alive connection) "
        "idle the longest, for a client with the token. Connections that have sent nothing "
        "yet wait apart (at most 512; one is safe from newer ones for its first 0.1 s)",
    )
    add_remote_options(parser)
    parser.add_argument(
        "--consent",
        action="store_true",
        help="ask the client's user before every call that can change state (a send, a "
        "command, a diagnostic service), by MCP elicitation, showing what would go out; "
        "declined, cancelled, unanswered in 120 s, or a client that cannot ask: refused "
        "(CONSENT_DENIED), nothing sent",
    )
    parser.add_argument(
        "--name",
        default="hwbridge",
        metavar="NAME",
        help="the server's name, and its key in --print-config (default: hwbridge)",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the client configuration (mcpServers JSON for Claude Desktop, Claude "
        "Code's .mcp.json, Cursor) for these arguments, and exit",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from hwbridge.mcp import serve
    except ImportError as exc:  # the extra is missing: say which
        raise CliError(one_line(str(exc))) from exc
    address = _address(args)
    if args.print_config:
        return _print_config(args, address)
    token = _token(args)
    limits = _limits(args)
    calls_log = logging.getLogger("hwbridge.mcp.calls")
    if calls_log.getEffectiveLevel() > logging.INFO:  # what changed state, on stderr
        calls_log.setLevel(logging.INFO)
    from hwbridge.cli.chat import drivers

    with ExitStack() as stack:
        remotes = open_remotes(args, stack)
        parts = _open_parts(args, stack) if local_named(args) or not remotes else {}
        driver = drivers(parts, remotes)
        offline = "can" in parts and args.bus is None
        offered = _offered(driver, parts, offline=offline)
        try:
            serve(
                driver,
                http=args.http,
                token=token,
                name=args.name,
                tools=offered,
                http_limits=limits,
                consent=args.consent,
            )
        except OSError as exc:
            if address is None:
                raise
            raise CliError(f"cannot serve on {args.http}: {_reason(exc)}", EXIT_RUNTIME) from exc
    return EXIT_OK


def _open_parts(args: argparse.Namespace, stack: ExitStack) -> dict[str, MCSToolDriver]:
    """The bridges the options name, and the capture dataset of --dataset beside them
    (opened first: a wrong folder costs no bus connection)."""
    captures = _open_dataset(args, stack) if args.dataset is not None else None
    parts = open_bridges(args, stack, offline=True)  # none when --dataset is alone
    if captures is not None:
        parts["captures"] = captures
    return parts


def _open_dataset(args: argparse.Namespace, stack: ExitStack) -> MCSToolDriver:
    """The CaptureDriver of --dataset (closed by `stack`), opened as `hwbridge inspect
    --dataset` opens it."""
    from hwbridge.cli.dataset_inspect import open_dataset

    driver = open_dataset(args)
    return stack.enter_context(driver)


def _offered(
    driver: MCSToolDriver, parts: dict[str, MCSToolDriver], *, offline: bool
) -> list[str] | None:
    """Without a bus only the CAN catalog and decoding work: the live tools are not offered
    (the other drivers' tools all are)."""
    if not offline:
        return None
    if getattr(driver, "names", None) == "dotted":  # beside remote benches: can.NAME
        return [
            t.name
            for t in driver.list_tools()
            if not t.name.startswith("can.") or t.name[len("can.") :] in OFFLINE_TOOLS
        ]
    others = {t.name for label, part in parts.items() if label != "can" for t in part.list_tools()}
    return [t.name for t in driver.list_tools() if t.name in OFFLINE_TOOLS or t.name in others]


def _address(args: argparse.Namespace) -> tuple[str, int] | None:
    if args.http is None:
        if args.token_env:
            raise CliError("--token-env applies to --http only (stdio needs no token)")
        if args.read_timeout is not None:
            raise CliError("--read-timeout applies to --http only")
        return None
    from hwbridge.mcp.http import parse_address

    try:
        return parse_address(args.http)
    except ValueError as exc:
        raise CliError(f"--http: {exc}") from exc


def _token(args: argparse.Namespace) -> str | None:
    if not args.token_env:
        return None
    token = os.environ.get(args.token_env, "")
    if not token.strip():
        raise CliError(f"--token-env {args.token_env}: that environment variable is not set")
    return token.strip()


def _limits(args: argparse.Namespace) -> HttpLimits | None:
    if args.read_timeout is None:
        return None
    from hwbridge.mcp import HttpLimits

    try:
        return HttpLimits(read_timeout_s=args.read_timeout)
    except ValueError as exc:
        raise CliError(f"--read-timeout: {exc}") from exc


def _print_config(args: argparse.Namespace, address: tuple[str, int] | None) -> int:
    """The config block on stdout (nothing else, so it can be piped); where it goes, and
    the matching `claude mcp add` line, on stderr."""
    from hwbridge.mcp.client_config import (
        claude_code_command,
        http_config,
        hwbridge_command,
        stdio_config,
    )

    config: dict[str, Any]
    if address is not None:
        host, port = address
        if port == 0:
            raise CliError("--print-config with --http needs a fixed port, not 0")
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/mcp"
        config = http_config(url, name=args.name, token_env=args.token_env)
        line = claude_code_command(url=url, name=args.name, token_env=args.token_env)
        where = "Claude Code's .mcp.json (start the server yourself with the same arguments)"
    else:
        command = [*hwbridge_command(), "mcp", *_server_arguments(args)]
        config = stdio_config(command, name=args.name)
        line = claude_code_command(command, name=args.name)
        where = "claude_desktop_config.json (Claude Desktop) or .mcp.json (Claude Code)"
    print(json_text(json.dumps(config, indent=2)))
    print(f"hwbridge: merge this into {where}; or run: {line}", file=sys.stderr)
    return EXIT_OK


def _server_arguments(args: argparse.Namespace) -> list[str]:
    """The arguments of this server, checked as the server will check them (a typo must
    not wait for the client to start it), paths made absolute for a client's cwd."""
    if args.remote and not local_named(args):  # the benches alone: no local bridge to check
        return (["--name", args.name] if args.name != "hwbridge" else []) + remote_words(args)
    words: list[str] = []
    dbc_given = args.dbc is not None  # before allowances() fills in the bundled one
    given = allowances(args, offline=True)
    if args.dataset is not None:
        _check_dataset(args.dataset)
        words += ["--dataset", str(Path(args.dataset).resolve())]
    if serves_can(args, offline=True):
        if dbc_given:
            words += ["--dbc", str(Path(args.dbc).resolve())]
        if args.bus:
            words += ["--bus", _absolute_bus(args.bus)]
        if args.discover:
            words.append("--discover")
        for reference in args.reference:
            obd = reference.strip().lower() == "obd"
            words += ["--reference", reference if obd else str(Path(reference).resolve())]
    if serves_serial(args):
        if args.spec is not None:
            spec = resolve_spec(args.spec)
            bundled = not Path(args.spec).is_file()
            words += ["--spec", args.spec if bundled else str(spec.resolve())]
        words += ["--port", _absolute_port(args.port)]
    if given.messages or given.commands:
        words += ["--allow", *given.messages, *given.commands]
    if args.obd:
        words += ["--obd", args.obd if args.obd == args.bus else _absolute_bus(args.obd)]
    if args.j1939:
        words += ["--j1939", args.j1939 if args.j1939 == args.bus else _absolute_bus(args.j1939)]
    if given.services:
        words += ["--allow-service", *given.services]
    if args.security_key:
        load_security_key(args.security_key)  # a typo fails here, not in the client
        words += security_key_words(args.security_key)
    for option, flag in (("dids", "--dids"), ("odx", "--odx")):
        if getattr(args, option, None):
            words += [flag, str(Path(getattr(args, option)).resolve())]
    if getattr(args, "odx_variant", None):
        words += ["--odx-variant", args.odx_variant]
    if args.exposure != "auto":
        words += ["--exposure", args.exposure]
    if args.model:
        words += ["--model", args.model]
    if args.pack != "json":
        pack = Path(args.pack)
        words += ["--pack", str(pack.resolve()) if pack.suffix == ".toml" else args.pack]
    if args.consent:
        words.append("--consent")
    if args.name != "hwbridge":
        words += ["--name", args.name]
    return words + remote_words(args)


def _check_dataset(folder: str) -> None:
    """--print-config says at once when --dataset names no dataset (the client would not);
    the folder is only looked at, no query worker is started."""
    try:
        from hwbridge.captures.dataset import Dataset
    except ImportError as exc:
        raise CliError(
            f"{exc.name or exc}: --dataset needs pip install 'mcs-hwbridge[captures]'",
            EXIT_RUNTIME,
        ) from None
    try:
        Dataset.open(folder)
    except FileNotFoundError as exc:
        raise CliError(f"--dataset: {exc}", EXIT_USAGE) from None


def _absolute_port(port: str) -> str:
    """A relative device path (a pty's symlink) made absolute; URLs and COMn as given."""
    if "://" in port or is_serial_port(port) or not Path(port).exists():
        return port
    return str(Path(port).absolute())


def _absolute_bus(bus: str) -> str:
    if bus.startswith("replay:"):
        path, sep, query = bus[len("replay:") :].partition("?")
        return f"replay:{Path(path).resolve()}{sep}{query}"
    return bus


def _reason(exc: OSError) -> str:
    return one_line(exc.strerror or str(exc))
