"""Several bridges at once, for the commands that put a whole setup in front of an LLM
(`hwbridge chat`, `hwbridge mcp`): a CAN bus (--dbc/--bus; --discover adds the discovery
tools), a serial device (--spec/--port), OBD-II diagnostics (--obd, with
--dids and --odx describing its ECUs) and SAE J1939 (--j1939),
under ONE SendPolicy.

`--allow NAME` goes to the bridge that knows the name: a CAN message of the database, a
serial command that changes the device's state, or a diagnostic service (`obd_clear_dtcs`,
`uds_0x2E`, `j1939_dm11`, `j1939_dm3`, ...; `--allow-service` names services only). A name no
bridge knows is a usage error, so a typo cannot silently allow nothing. `--obd` takes a CAN
bus string (ISO-TP; the same bus as --bus shares its connection) or a serial port with an
ELM327 on it; `--j1939` a CAN bus string (the same bus as --bus shares its connection, and
the database of --dbc decodes its parameter groups).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hwbridge.cli.errors import EXIT_RUNTIME, CliError, one_line
from hwbridge.cli.options import (
    discovery_references,
    driver_database,
    open_driver,
    resolve_allow,
)
from hwbridge.cli.security_key import load_security_key
from hwbridge.cli.serial_cli import add_serial_options, open_serial_driver, resolve_spec

if TYPE_CHECKING:
    from hwbridge.core.contract import MCSToolDriver
    from hwbridge.j1939 import J1939Driver
    from hwbridge.obd import ObdDriver
    from hwbridge.policy import SendPolicy

__all__ = [
    "Allowances",
    "add_bridge_options",
    "allowances",
    "is_serial_port",
    "open_bridges",
    "serves_can",
    "serves_serial",
]

_GLOB = set("*?[")
_SERIAL_URLS = ("socket://", "rfc2217://", "loop://", "spy://", "alt://", "hwgrep://")


@dataclass(frozen=True)
class Allowances:
    """What --allow and --allow-service give each bridge's part of the one policy."""

    messages: list[str]
    commands: list[str]
    services: list[str]


def add_bridge_options(parser: argparse.ArgumentParser) -> None:
    """--spec/--port, --obd, --j1939 and --allow-service beside the CAN options
    (add_driver_options)."""
    add_serial_options(parser)
    parser._option_string_actions["--spec"].help = (
        "also a serial device: its spec (TOML), or the name of a bundled one "
        "(bench_psu, gnss_nmea); needs --port"
    )
    parser._option_string_actions["--port"].help = (
        "the serial device's port: a path (/dev/ttyUSB0, COM3) or a pyserial URL "
        "(socket://, rfc2217://); alone, the generic port tools"
    )
    parser.add_argument(
        "--obd",
        metavar="BUS_OR_PORT",
        help="also vehicle diagnostics (OBD-II, read-only UDS): over ISO-TP on a CAN bus "
        "(any --bus form; the value of --bus shares its connection) or through an ELM327 on "
        "a serial port (/dev/ttyUSB0, COM3, socket://HOST:PORT)",
    )
    parser.add_argument(
        "--security-key",
        metavar="MODULE:FUNCTION",
        help="with --obd: your own SecurityAccess key function, key(seed: bytes, level: int, "
        "ecu: str) -> bytes, as MODULE:FUNCTION or FILE.py:FUNCTION; it lets uds_unlock unlock "
        "an ECU (when the policy allows uds_0x27). hwbridge ships none, and never shows the "
        "function, a seed or a key to the model",
    )
    parser.add_argument(
        "--dids",
        metavar="FILE",
        help="with --obd: DID definitions (TOML: name, DID, type, scale, unit, range, "
        "writable) so that uds_read_did and uds_write_did take DIDs by name and typed values",
    )
    parser.add_argument(
        "--odx",
        metavar="FILE",
        help="with --obd: an ECU's ODX description (.pdx or .odx-d; needs the odx extra): "
        "one typed tool per diagnostic service of the variant, judged by the send policy "
        "by its service id",
    )
    parser.add_argument(
        "--odx-variant",
        metavar="NAME",
        help="with --odx: the variant (ECU or base variant) to make the tools of, when the "
        "description has several",
    )
    parser.add_argument(
        "--j1939",
        metavar="BUS",
        help="also SAE J1939 (trucks, buses, machines: DM1/DM2 faults, requests, nodes) on a "
        "CAN bus (any --bus form, replay: included; the value of --bus shares its "
        "connection; --dbc decodes its parameter groups)",
    )
    parser.add_argument(
        "--discover",
        action="store_true",
        help="also the discovery tools on the CAN bus of --bus (survey_bus, snapshot_bus, "
        "diff_snapshots, correlate_signal, define_signal, draft_dbc, match_known_databases): "
        "they find the signals its database does not describe, and only listen; without "
        "--dbc the bus has no database",
    )
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="obd|DB",
        help="with --discover: what the discovery tools correlate the bus with. `obd`: while "
        "they record, the vehicle is asked for its OBD-II mode 01 PIDs (read-only requests, "
        "each a frame of the send policy's budget, at most 10 a second) and its answers are "
        "known signals (correlate_signal signal=SPEED, RPM, ...); a database file: a known "
        "part of the bus, as --dbc; repeatable",
    )
    parser.add_argument(
        "--allow-service",
        action="extend",
        nargs="+",
        default=[],
        metavar="SERVICE",
        help="diagnostic services the send policy allows (obd_clear_dtcs, uds_0x2E, "
        "j1939_dm11, j1939_dm3, globs); --allow takes them too; without either, diagnostics "
        "are read-only",
    )
    allow = parser._option_string_actions["--allow"]
    allow.metavar = "NAME"
    allow.help = (
        "what the send policy allows, by name or glob: CAN messages of the database "
        "('Climate*'), serial commands that change the device's state ('set_*'), diagnostic "
        "services (obd_clear_dtcs, uds_0x2E, j1939_dm11); each name goes to the bridge that "
        "knows it; "
        "without it everything is read-only"
    )


def serves_can(args: argparse.Namespace, *, offline: bool) -> bool:
    """Whether the CAN driver is part of the setup: with --bus; with `offline` (a server
    that offers the catalog without a bus) also with --dbc, or when nothing else is named
    (a serial device, diagnostics, a dataset of `hwbridge mcp --dataset`)."""
    if args.bus is not None:
        return True
    if not offline:
        return False
    dataset = getattr(args, "dataset", None) is not None
    others = args.obd is not None or args.j1939 is not None or serves_serial(args) or dataset
    return not others or args.dbc is not None


def serves_serial(args: argparse.Namespace) -> bool:
    if args.spec is not None and args.port is None:
        raise CliError("--spec needs --port PORT: the device is talked to, not described")
    return args.port is not None


def open_bridges(
    args: argparse.Namespace, stack: contextlib.ExitStack, *, offline: bool = False
) -> dict[str, MCSToolDriver]:
    """The drivers the options name (closed by `stack`), labelled can, serial, obd and
    j1939, sharing one SendPolicy. `offline`: the CAN catalog is served even without a bus."""
    from hwbridge.policy import SendPolicy

    named = (args.bus, args.port, args.obd, args.j1939)
    if not offline and all(n is None for n in named):
        if args.spec is not None:
            serves_serial(args)  # says --spec needs --port
        raise CliError("name a bridge: --bus (CAN), --spec and --port (serial), --obd or --j1939")
    given = allowances(args, offline=offline)
    policy = SendPolicy(
        allow_messages=given.messages, allow_commands=given.commands, allow_services=given.services
    )
    drivers: dict[str, MCSToolDriver] = {}
    if serves_can(args, offline=offline):
        drivers["can"] = stack.enter_context(open_driver(args, policy=policy))
    if serves_serial(args):
        drivers["serial"] = stack.enter_context(open_serial_driver(args, policy=policy))
    if args.obd is not None:
        drivers["obd"] = stack.enter_context(_open_obd(args, policy, drivers.get("can")))
    if args.j1939 is not None:
        drivers["j1939"] = stack.enter_context(_open_j1939(args, policy, drivers.get("can")))
    return drivers


def allowances(args: argparse.Namespace, *, offline: bool = False) -> Allowances:
    """Each --allow name, given to every bridge that knows it; --allow-service to the
    diagnostics. Checked before anything opens, so a typo costs no connection."""
    discovery_references(args)  # --discover and --reference need --bus, whatever is named
    can = serves_can(args, offline=offline)
    serial = serves_serial(args)
    db = driver_database(args) if can else None
    changing: list[str] = []
    if serial and args.spec is not None:
        from hwbridge.serial import SpecError, load_spec

        try:
            spec = load_spec(resolve_spec(args.spec)).spec
        except SpecError as exc:
            raise CliError(one_line(str(exc))) from exc
        changing = sorted(n for n, c in spec.commands.items() if c.changes_state)
    obd = args.obd is not None
    j1939 = args.j1939 is not None
    diagnostics = obd or j1939
    services = [_service(name, "--allow-service") for name in getattr(args, "allow_service", [])]
    if getattr(args, "security_key", None) and not obd:
        raise CliError("--security-key needs --obd BUS_OR_PORT: it unlocks diagnostic ECUs")
    for option, what in (("dids", "--dids"), ("odx", "--odx")):
        if getattr(args, option, None) and not obd:
            raise CliError(f"{what} needs --obd BUS_OR_PORT: it describes diagnostic ECUs")
    if getattr(args, "odx_variant", None) and not getattr(args, "odx", None):
        raise CliError("--odx-variant needs --odx FILE: it names a variant of that description")
    if services and not diagnostics:
        raise CliError(
            "--allow-service needs --obd BUS_OR_PORT or --j1939 BUS: no diagnostics are served"
        )
    messages: list[str] = []
    commands: list[str] = []
    for name in args.allow:
        placed = False
        if db is not None and _in_database(db, name):
            messages += resolve_allow(db, [name])
            placed = True
        if any(fnmatch.fnmatchcase(c, name) for c in changing):
            commands.append(name)
            placed = True
        if (obd and name.lower().startswith(("obd_", "uds_"))) or (
            j1939 and name.lower().startswith("j1939_")
        ):
            services.append(_service(name, "--allow"))
            placed = True
        if placed:
            continue
        if db is not None and not serial and not diagnostics:
            resolve_allow(db, [name])  # the database's own words, with close names
        if serial and db is None and not diagnostics:
            listed = ", ".join(changing) or "none"
            raise CliError(
                f"--allow {name}: matches no command that changes state (these do: {listed})"
            )
        raise CliError(
            f"--allow {name}: no CAN message, serial command or diagnostic service of "
            "this setup has that name"
        )
    return Allowances(messages, commands, services)


def _service(name: str, option: str) -> str:
    from hwbridge.policy.service_rules import service_pattern

    try:
        return service_pattern(name)
    except ValueError as exc:
        raise CliError(f"{option} {name}: {str(exc).removeprefix('allow_services: ')}") from exc


def _in_database(db: Any, name: str) -> bool:
    from hwbridge.core.models import ToolError

    if _GLOB & set(name):
        return any(fnmatch.fnmatchcase(n, name) for n in db.message_names)
    try:
        db.message(name)
    except ToolError:
        return False
    return True


def is_serial_port(target: str) -> bool:
    """A serial port (an ELM327's) rather than a CAN bus string: a device path, COMn, or a
    pyserial URL. `slcan://` is a CAN adapter on a serial port, hence a bus."""
    if target.startswith(_SERIAL_URLS) or target.startswith(("/dev/", "\\\\.\\")):
        return True
    return bool(re.fullmatch(r"(?i)COM\d+", target))


def _open_j1939(args: argparse.Namespace, policy: SendPolicy, can: Any) -> J1939Driver:
    """The J1939 driver --j1939 names: on the CAN driver's own connection (and database)
    when it is the same bus, else on its own, decoding with --dbc when one is given."""
    from hwbridge.core.models import ToolError
    from hwbridge.j1939 import J1939Driver

    target: str = args.j1939
    try:
        if can is not None and target == args.bus:
            return J1939Driver.from_can(can, policy)  # one connection for both
        return J1939Driver.from_can(bus=target, policy=policy, dbc=args.dbc)
    except ToolError as exc:
        raise CliError(
            f"--j1939 {target}: {one_line(exc.message)} ({exc.code})", EXIT_RUNTIME
        ) from exc
    except (ValueError, TypeError, ImportError, NotImplementedError) as exc:
        raise CliError(f"--j1939 {target}: {one_line(str(exc))}") from exc
    except OSError as exc:
        reason = one_line(exc.strerror or str(exc))
        raise CliError(f"--j1939 {target}: {reason}", EXIT_RUNTIME) from exc


def _open_obd(args: argparse.Namespace, policy: SendPolicy, can: Any) -> ObdDriver:
    """The diagnostic driver --obd names: on the CAN driver's own connection when it is the
    same bus, over ISO-TP on another bus, or through an ELM327 on a serial port."""
    from hwbridge.core.models import ToolError
    from hwbridge.obd import ObdDriver
    from hwbridge.obd.database.did_definitions import DidDefinitionError
    from hwbridge.obd.database.odx import OdxError

    target: str = args.obd
    given = getattr(args, "security_key", None)
    options: dict[str, Any] = {
        "security_key": load_security_key(given) if given else None,
        "dids": getattr(args, "dids", None),
        "odx": getattr(args, "odx", None),
        "odx_variant": getattr(args, "odx_variant", None),
    }
    try:
        if can is not None and target == args.bus:
            return ObdDriver.from_can(can, policy, **options)  # one connection for both
        if is_serial_port(target):
            return ObdDriver.from_elm327(target, policy, **options)
        return ObdDriver.from_can(bus=target, policy=policy, **options)
    except DidDefinitionError as exc:
        raise CliError(f"--dids: {one_line(str(exc))}") from exc
    except OdxError as exc:
        raise CliError(f"--odx: {one_line(str(exc))}") from exc
    except ToolError as exc:
        raise CliError(
            f"--obd {target}: {one_line(exc.message)} ({exc.code})", EXIT_RUNTIME
        ) from exc
    except (ValueError, TypeError, ImportError, NotImplementedError) as exc:
        raise CliError(f"--obd {target}: {one_line(str(exc))}") from exc
    except OSError as exc:
        reason = one_line(exc.strerror or str(exc))
        raise CliError(f"--obd {target}: {reason}", EXIT_RUNTIME) from exc
