"""Several bridges at once, for the commands that put a whole setup in front of an LLM
(`hwbridge chat`, `hwbridge mcp`): a CAN bus (--dbc/--bus), a serial device (--spec/--port)
and OBD-II diagnostics (--obd), under ONE SendPolicy.

`--allow NAME` goes to the bridge that knows the name: a CAN message of the database, a
serial command that changes the device's state, or a diagnostic service (`obd_clear_dtcs`,
`uds_0x2E`, ...). A name no bridge knows is a usage error, so a typo cannot silently allow
nothing. `--obd` takes a CAN bus string (ISO-TP; the same bus as --bus shares its
connection) or a serial port with an ELM327 on it.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
from typing import TYPE_CHECKING, Any

from hwbridge.cli.errors import EXIT_RUNTIME, CliError, one_line
from hwbridge.cli.options import database_path, load_database, open_driver, resolve_allow
from hwbridge.cli.serial_cli import add_serial_options, open_serial_driver, resolve_spec

if TYPE_CHECKING:
    from hwbridge.core.contract import MCSToolDriver
    from hwbridge.policy import SendPolicy

__all__ = ["add_bridge_options", "open_bridges"]

_GLOB = set("*?[")


def add_bridge_options(parser: argparse.ArgumentParser) -> None:
    """--spec/--port and --obd beside the CAN options (add_driver_options)."""
    add_serial_options(parser)
    parser.add_argument(
        "--obd",
        metavar="BUS_OR_PORT",
        help="OBD-II and read-only UDS: a CAN bus string (ISO-TP; the same as --bus shares "
        "its connection) or a serial port with an ELM327 (/dev/ttyUSB0, socket://HOST:PORT)",
    )
    allow = parser._option_string_actions["--allow"]
    allow.metavar = "NAME"
    allow.help = (
        "what the send policy allows, by name or glob: CAN messages of the database, serial "
        "commands that change the device's state, diagnostic services (obd_clear_dtcs, "
        "uds_0x2E); without it everything is read-only"
    )


def open_bridges(args: argparse.Namespace, stack: contextlib.ExitStack) -> dict[str, MCSToolDriver]:
    """The drivers the options name (closed by `stack`), labelled can, serial and obd."""
    from hwbridge.policy import SendPolicy

    if args.bus is None and args.spec is None and args.port is None and args.obd is None:
        raise CliError("name a bridge: --bus (CAN), --spec and --port (serial), or --obd")
    messages, commands, services = _allowances(args)
    policy = SendPolicy(allow_messages=messages, allow_commands=commands, allow_services=services)
    drivers: dict[str, MCSToolDriver] = {}
    if args.bus is not None:
        can = stack.enter_context(open_driver(args, policy=policy))
        drivers["can"] = can
    if args.spec is not None or args.port is not None:
        drivers["serial"] = stack.enter_context(open_serial_driver(args, policy=policy))
    if args.obd is not None:
        drivers["obd"] = stack.enter_context(_open_obd(args, policy, drivers.get("can")))
    return drivers


def _allowances(args: argparse.Namespace) -> tuple[list[str], list[str], list[str]]:
    """Each --allow name, given to every bridge that knows it."""
    messages: list[str] = []
    commands: list[str] = []
    services: list[str] = []
    db = load_database(database_path(args), debug=bool(args.debug)) if args.bus else None
    changing: list[str] = []
    if args.spec is not None:
        from hwbridge.serial import SpecError, load_spec

        try:
            spec = load_spec(resolve_spec(args.spec)).spec
        except SpecError as exc:
            raise CliError(one_line(str(exc))) from exc
        changing = sorted(n for n, c in spec.commands.items() if c.changes_state)
    for name in args.allow:
        placed = False
        if db is not None and _in_database(db, name):
            messages += resolve_allow(db, [name])
            placed = True
        if any(fnmatch.fnmatchcase(c, name) for c in changing):
            commands.append(name)
            placed = True
        if args.obd is not None and name.lower().startswith(("obd_", "uds_")):
            services.append(name)
            placed = True
        if not placed:
            raise CliError(
                f"--allow {name}: no CAN message, serial command or diagnostic service of "
                "this setup has that name"
            )
    return messages, commands, services


def _in_database(db: Any, name: str) -> bool:
    from hwbridge.core.models import ToolError

    if _GLOB & set(name):
        return any(fnmatch.fnmatchcase(n, name) for n in db.message_names)
    try:
        db.message(name)
    except ToolError:
        return False
    return True


def _open_obd(args: argparse.Namespace, policy: SendPolicy, can: Any) -> Any:
    from hwbridge.can.transport.bus_url import is_replay_url, parse_bus_url
    from hwbridge.core.models import ToolError
    from hwbridge.obd import ObdDriver

    target: str = args.obd
    try:
        if target == args.bus and can is not None:
            return ObdDriver.from_can(can, policy)  # one connection for both
        try:
            is_bus = is_replay_url(target) or bool(parse_bus_url(target))
        except ValueError:
            is_bus = False  # not a bus string: a serial port with an ELM327
        if is_bus:
            return ObdDriver.from_can(target, policy)
        return ObdDriver.from_elm327(target, policy)
    except ToolError as exc:
        raise CliError(
            f"--obd {target}: {one_line(exc.message)} ({exc.code})", EXIT_RUNTIME
        ) from exc
    except (ValueError, OSError) as exc:
        raise CliError(f"--obd {target}: {one_line(str(exc))}", EXIT_RUNTIME) from exc
