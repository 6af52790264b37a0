"""Options shared by the subcommands that build a CAN driver, and building it with clear errors.

The heavy imports (cantools, python-can) happen inside `open_driver`, so `hwbridge --help`,
`hwbridge schema` and `hwbridge sim` start fast.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import warnings
from typing import TYPE_CHECKING

from hwbridge.cli.console import terminal_text
from hwbridge.cli.errors import EXIT_RUNTIME, EXIT_USAGE, CliError, one_line

if TYPE_CHECKING:
    from hwbridge.can import CanDatabase, CanDriver
    from hwbridge.policy import SendPolicy

__all__ = [
    "BUS_FORMS",
    "add_bitrate_option",
    "add_driver_options",
    "database_path",
    "discovery_references",
    "driver_database",
    "load_database",
    "open_driver",
    "resolve_allow",
]

_GLOB = frozenset("*?[")
_OBD_NOTICE = (
    "OBD-II is the reference: while the discovery tools record, the vehicle is asked for its "
    "mode 01 PIDs (read-only, within the send policy's frame budget)"
)


BUS_FORMS = (
    "virtual:CH, socketcand://HOST[:PORT]/CH, slcan://PORT@BAUD, socketcan:CH, "
    "INTERFACE:CH (any python-can interface), replay:PATH"
)


def add_driver_options(parser: argparse.ArgumentParser, *, bus_required: bool) -> None:
    """--dbc, --bus, --allow, --exposure, --model, --pack: one meaning in every subcommand."""
    parser.add_argument(
        "--dbc",
        metavar="FILE",
        help="CAN database (.dbc, .kcd, .sym, .arxml); default: the bundled demo vehicle",
    )
    bus_help = f"the CAN bus: {BUS_FORMS}"
    if not bus_required:
        bus_help += (
            "; without it the driver is offline (catalog and decoding only, and the prompt "
            "says so); `--bus virtual:x` gives a live driver's prompt without hardware"
        )
    parser.add_argument("--bus", required=bus_required, metavar="BUS", help=bus_help)
    parser.add_argument(
        "--allow",
        action="extend",
        nargs="+",
        default=[],
        metavar="MESSAGE",
        help="messages the send policy allows (names or globs such as 'Climate*'); "
        "without it the driver is read-only",
    )
    parser.add_argument(
        "--exposure",
        choices=("auto", "catalog", "messages"),
        default="auto",
        help="catalog: generic tools only; messages: also read_<Message>/send_<Message>; "
        "auto (default): typed tools when they fit the prompt budget",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model the prompt is for; a pack may pick a variant by name "
        "(e.g. compact for small local models, xml for Claude)",
    )
    parser.add_argument(
        "--pack",
        default="json",
        metavar="json|xml|compact|PATH",
        help="prompt pack: a packaged one or a .toml file merged over one (default: json)",
    )


def bitrate(text: str) -> float:
    """`--bitrate 500000`, `500k`, `1M`: bit/s, above zero."""
    scale = {"k": 1e3, "m": 1e6}.get(text[-1:].lower(), 1.0)
    number = text[:-1] if scale != 1.0 else text
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a bitrate (bit/s: 500000, 500k, 1M)"
        ) from None
    if not 0 < value <= 20e6:
        raise argparse.ArgumentTypeError(f"{text!r}: a bitrate is above 0 and at most 20M")
    return value


def add_bitrate_option(parser: argparse.ArgumentParser) -> None:
    """--bitrate, for the commands that open a bus: bus_status then gives the bus load."""
    parser.add_argument(
        "--bitrate",
        type=bitrate,
        metavar="BIT/S",
        help="the bus's nominal bitrate (500000, 500k, 1M) so bus_status reports the bus "
        "load; it is what the bus runs at, not set on the interface (needs --bus)",
    )


def database_path(args: argparse.Namespace) -> str:
    """--dbc, or the bundled demo vehicle's database, said in one line on stderr.

    The choice is stored back in `args.dbc`, so what a command prints names the file it
    used, and the line is printed once however often this is asked.
    """
    if args.dbc is None:
        from hwbridge.resources import bundled_dbc, default_dbc_notice

        try:
            args.dbc = str(bundled_dbc())
        except FileNotFoundError as exc:  # a broken install: say so, do not guess
            raise CliError(f"no --dbc given and {exc}; reinstall hwbridge", EXIT_RUNTIME) from exc
        print(f"hwbridge: {default_dbc_notice(args.dbc)}", file=sys.stderr)
    return str(args.dbc)


def load_database(path: str, *, debug: bool = False) -> CanDatabase:
    """Load a database; repairs become one warning line on stderr (all of them with --debug)."""
    from hwbridge.can import CanDatabase, DatabaseError, DatabaseRepairWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DatabaseRepairWarning)
        try:
            db = CanDatabase.load(path)
        except DatabaseError as exc:
            raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
    for warning in caught:
        lines = str(warning.message).splitlines()
        shown = lines if debug else lines[:1]
        first = (
            shown[0] if debug or len(lines) < 2 else f"{shown[0].rstrip(':')} (--debug lists them)"
        )
        print(f"hwbridge: warning: {terminal_text(first)}", file=sys.stderr)
        for line in shown[1:]:
            print(f"hwbridge:   {terminal_text(line.strip())}", file=sys.stderr)
    return db


def discovery_references(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The database files of --reference, and whether it names `obd`; usage errors for
    --discover without --bus and --reference without either (checked before anything opens,
    whichever bridges are named)."""
    given: list[str] = list(getattr(args, "reference", None) or [])
    if given and not getattr(args, "discover", False):
        raise CliError(
            "--reference needs --discover"
            + (" and --bus" if args.bus is None else "")
            + ": it is what the discovery tools correlate the bus with"
        )
    if getattr(args, "discover", False) and args.bus is None:
        what = "--reference and --discover need" if given else "--discover needs"
        raise CliError(f"{what} --bus: the discovery tools record a live bus")
    obd = [r for r in given if r.strip().lower() == "obd"]
    return [r for r in given if r not in obd], bool(obd)


def driver_database(args: argparse.Namespace) -> CanDatabase:
    """The CAN driver's database: --dbc (or the bundled demo vehicle's); with --discover,
    --dbc and the database files of --reference as one known part (the first describing an
    id wins), or none (an empty database: the bus is to be discovered, nothing is assumed).
    --discover without --bus is a usage error: the discovery tools record a live bus."""
    if getattr(args, "discover", False):
        files, _ = discovery_references(args)
        paths = ([args.dbc] if args.dbc is not None else []) + files
        if len(paths) < 2:
            from hwbridge.can import CanDatabase

            debug = bool(args.debug)
            return load_database(paths[0], debug=debug) if paths else CanDatabase.empty()
        try:
            from hwbridge.discovery._deps import require_numpy

            require_numpy()
        except ImportError as exc:
            raise CliError(one_line(str(exc)), EXIT_RUNTIME) from None
        from hwbridge.discovery.analysis.reference import known_database

        return known_database([load_database(p, debug=bool(args.debug)) for p in paths])
    return load_database(database_path(args), debug=bool(args.debug))


def resolve_allow(db: CanDatabase, patterns: list[str]) -> list[str]:
    """Check --allow against the database: a typo would otherwise allow nothing, silently.

    Plain names resolve as the tools resolve them (any case, renamed, or an id such as
    0x3C0) to the exact name the policy matches; a glob must match at least one message.
    """
    from hwbridge.core.models import ToolError

    allowed: list[str] = []
    for pattern in patterns:
        if _GLOB & set(pattern):
            if not any(fnmatch.fnmatchcase(name, pattern) for name in db.message_names):
                raise CliError(f"--allow {pattern}: matches no message in {db.path}")
            allowed.append(pattern)
            continue
        try:
            allowed.append(str(db.message(pattern).name))
        except ToolError as exc:
            raise CliError(f"--allow {pattern}: {exc.message}") from exc
    return allowed


def open_driver(args: argparse.Namespace, policy: SendPolicy | None = None) -> CanDriver:
    """The CanDriver the options describe; offline when there is no --bus.

    Usage errors (database, pack, --allow, bus string) exit 2; a bus that does not answer
    exits 1. The prompt pack is loaded before the bus opens, so a bad pack leaks no bus.
    `policy` (several bridges sharing one) replaces the one --allow would give.
    """
    from hwbridge.can import CanDriver, SendPolicy
    from hwbridge.core.models import ToolError
    from hwbridge.core.prompts import PromptPackError, PromptStrategy

    bus: str | None = args.bus
    rate: float | None = getattr(args, "bitrate", None)
    if rate is not None and bus is None:
        raise CliError("--bitrate needs --bus: there is no bus to measure the load of")
    db = driver_database(args)
    discovery = bool(getattr(args, "discover", False))
    if policy is None:
        policy = SendPolicy(allow_messages=resolve_allow(db, list(args.allow)))
    try:
        strategy = PromptStrategy.load(str(args.pack))
    except PromptPackError as exc:
        raise CliError(f"--pack: {one_line(str(exc))}") from exc
    try:
        if discovery:  # a bus: driver_database said so
            _, obd = discovery_references(args)
            assert bus is not None
            driver = CanDriver.from_bus(
                bus,
                reference=[db, "obd"] if obd else db,
                policy=policy,
                exposure=args.exposure,
                prompt_strategy=strategy,
                bitrate=rate,
            )
            if obd:
                print(f"hwbridge: {_OBD_NOTICE}", file=sys.stderr)
            return driver
        return CanDriver.from_dbc(
            db,
            bus=bus,
            policy=policy,
            exposure=args.exposure,
            prompt_strategy=strategy,
            bitrate=rate,
        )
    except ToolError as exc:
        raise CliError(f"{one_line(exc.message)} ({exc.code})", EXIT_RUNTIME) from exc
    except (ValueError, TypeError, ImportError, NotImplementedError) as exc:
        if bus is None:
            raise
        raise CliError(f"--bus: {one_line(str(exc))}") from exc
    except FileNotFoundError as exc:  # replay:PATH with no such capture
        if bus is None:
            raise
        raise CliError(f"--bus: {_os_text(exc)}") from exc
    except OSError as exc:
        if bus is None:
            raise
        raise CliError(f"cannot open {bus}: {_os_text(exc)}", EXIT_RUNTIME) from exc


def _os_text(exc: OSError) -> str:
    """`no such file: 'x.log'` rather than `[Errno 2] no such file: 'x.log'`."""
    if not exc.strerror:
        return one_line(str(exc))
    return one_line(f"{exc.strerror}: {exc.filename!r}" if exc.filename else exc.strerror)
