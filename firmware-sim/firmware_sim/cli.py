"""`python -m firmware_sim`: run the simulated vehicle and expose it over real transports.

One line per transport goes to stdout once it accepts connections, exactly
`socketcand: socketcand://HOST:PORT/vcan0`, `slcan: /dev/pts/N`, `elm327: /dev/pts/N`,
`psu: /dev/pts/N`, `gnss: /dev/pts/N`; then the simulator runs until SIGINT or SIGTERM and
exits 0. Bad input (a DBC that does not load, a malformed option) exits 2 with one line on
stderr; a transport that cannot start exits 1. Without --dbc the demo vehicle bundled with
hwbridge runs, said in one stderr line. `--j1939` runs a J1939 truck instead (engine,
transmission and brake controllers, `firmware_sim.j1939`) on the same transports, from the
bundled `j1939_truck.dbc` or the J1939 database given with --dbc. The bench devices
(--psu, --gnss) need no vehicle: asked for alone, they run without one (and without the
default socketcand server).
`hwbridge sim` calls `main(argv)` in its own process, so nothing here reads sys.argv or
exits the interpreter.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from firmware_sim.stop_signals import stop_on_signals

__all__ = ["SOCKETCAND_BUS", "build_parser", "main", "parse_fault"]

SOCKETCAND_BUS = "vcan0"
_PROG = "python -m firmware_sim"
_DEFAULT_SOCKETCAND = "127.0.0.1:0"
_EPILOG = """\
With no --dbc, the demo vehicle bundled with hwbridge runs (one line on stderr says so).
With no transport option, a socketcand server starts on {socketcand} (any free port).
Printed once ready, one line per transport:
  socketcand: socketcand://HOST:PORT/{bus}
  slcan: /dev/pts/N
  elm327: /dev/pts/N
  psu: /dev/pts/N        (--psu: a SCPI bench power supply)
  gnss: /dev/pts/N       (--gnss: a GNSS receiver streaming NMEA 0183)
Faults: overheat, error_frames, silence:MESSAGE, out_of_range:SIGNAL.
{truck}
A client may connect with no database at all (CanDriver.from_bus) to discover the signals;
--gnss-can adds a GNSS module whose database (gnss_module.dbc) is the reference for that.
Runs until SIGINT or SIGTERM.
"""


_TRUCK = """\
--j1939: a J1939 truck instead of the car, on the same transports: engine (0x00),
transmission (0x03) and brakes (0x0B) claim their addresses, send their periodic PGNs and
DM1 every second, answer requests (one frame, BAM to global, RTS/CTS to the requester,
NACK when unsupported), DM2, DM11 and DM3. --dbc names a J1939 database (signals found by
their SPN attribute; default: the bundled j1939_truck.dbc). Truck faults (--j1939 --fault):
{faults}"""


def _epilog() -> str:
    from firmware_sim.j1939.diagnostics import TRUCK_FAULTS  # stdlib only: quick for --help

    faults = "\n".join(
        f"  {f.name:<27} {f.controller}, SPN {f.spn} FMI {f.fmi}: {f.lamp_text()}"
        for f in TRUCK_FAULTS.values()
    )
    return _EPILOG.format(
        socketcand=_DEFAULT_SOCKETCAND, bus=SOCKETCAND_BUS, truck=_TRUCK.format(faults=faults)
    )


class UsageError(Exception):
    """Bad input from the user: exit status 2."""


class _Device(Protocol):
    def start(self) -> str: ...

    def stop(self) -> None: ...


class _Vehicle(Protocol):
    """The car (`VirtualVehicle`) or the truck (`VirtualTruck`)."""

    def start(self) -> object: ...

    def stop(self) -> None: ...


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, so `main` can return a status."""

    def error(self, message: str) -> Any:
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog or _PROG,
        description="Simulated vehicle: periodic CAN messages from a DBC and an OBD-II ECU.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dbc",
        metavar="FILE",
        help="the vehicle's database (default: the demo vehicle bundled with hwbridge; with"
        " --j1939 the bundled j1939_truck.dbc)",
    )
    parser.add_argument(
        "--j1939",
        action="store_true",
        help="a J1939 truck (engine, transmission, brakes) instead of the car",
    )
    parser.add_argument(
        "--channel", default="sim", metavar="NAME", help="python-can virtual channel (sim)"
    )
    parser.add_argument(
        "--socketcand", metavar="HOST:PORT", help="serve socketcand here (port 0: any free port)"
    )
    parser.add_argument("--slcan", action="store_true", help="an SLCAN adapter on a pty")
    parser.add_argument("--elm327", action="store_true", help="an ELM327 OBD adapter on a pty")
    parser.add_argument(
        "--psu", action="store_true", help="a SCPI bench power supply on a pty (no vehicle needed)"
    )
    parser.add_argument(
        "--gnss", action="store_true", help="a GNSS receiver streaming NMEA on a pty"
    )
    parser.add_argument(
        "--gnss-can",
        action="store_true",
        help="a GNSS module on the vehicle's bus too (GnssSpeed, dbc/gnss_module.dbc): the "
        "reference for discovering the vehicle's signals without its database",
    )
    parser.add_argument(
        "--gnss-rate",
        type=float,
        default=1.0,
        metavar="HZ",
        help="GNSS updates per second, 1-10 (1)",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME[:TARGET]",
        help="inject a fault at start (repeatable; the truck's with --j1939, listed below)",
    )
    parser.add_argument(
        "--scenario",
        metavar="FILE",
        help="script the drive in phases (a TOML file, or a bundled scenario: "
        "park_accelerate_door, stop_and_go, overheat_on_motorway)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="model seed (0)")
    parser.add_argument("--no-drive", action="store_true", help="stay parked at idle")
    parser.add_argument(
        "--vin", help="the VIN the OBD-II ECU (or the truck's engine) reports (17 characters)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more to stderr")
    return parser


def parse_fault(text: str, *, j1939: bool = False) -> tuple[str, dict[str, str]]:
    """`silence:EngineData` -> ("silence", {"message": "EngineData"}); with `j1939` a truck
    fault (`nox_sensor` -> ("nox_sensor", {}))."""
    from firmware_sim.j1939.diagnostics import TRUCK_FAULTS
    from firmware_sim.vehicle import FAULTS  # with python-can: not for --help (0.1 s)

    name, _, target = text.partition(":")
    name, target = name.strip(), target.strip()
    if j1939:
        truck = ", ".join(TRUCK_FAULTS)
        if name not in TRUCK_FAULTS:
            whose = "the car's, not the truck's" if name in FAULTS else "unknown"
            raise UsageError(f"fault {name!r} is {whose}; the truck's faults: {truck}")
        if target:
            raise UsageError(f"fault {name} takes no target (got {target!r})")
        return name, {}
    if name not in FAULTS:
        if name in TRUCK_FAULTS:
            raise UsageError(f"fault {name!r} is the J1939 truck's: add --j1939")
        raise UsageError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")
    key = {"silence": "message", "out_of_range": "signal"}.get(name)
    if key is None:
        if target:
            raise UsageError(f"fault {name} takes no target (got {target!r})")
        return name, {}
    if not target:
        raise UsageError(f"fault {name} needs a target: {name}:{key.upper()}")
    return name, {key: target}


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--socketcand wants HOST:PORT (port 0 for any free port), got {text!r}")
    return host.strip("[]"), int(port)


def _device(kind: str, channel: str) -> _Device:
    """The serial device `kind`, imported on demand (its module may be absent)."""
    try:
        if kind == "slcan":
            from firmware_sim.slcan_device import SlcanDevice

            return SlcanDevice(channel)
        from firmware_sim.elm327 import Elm327Device

        return Elm327Device(channel)
    except ImportError as exc:
        raise RuntimeError(f"the {kind} device is not available: {exc}") from exc


def _setup_logging(verbose: bool) -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=logging.INFO if verbose else logging.WARNING,
            format="firmware_sim: %(levelname)s: %(message)s",
            stream=sys.stderr,
        )


def main(
    argv: Sequence[str] | None = None,
    *,
    stop: threading.Event | None = None,
    prog: str | None = None,
) -> int:
    """Run the simulator; returns the exit status. `stop` ends it from another thread.
    `prog` is the command's name in help and messages (`hwbridge sim` runs this too)."""
    global _PROG  # noqa: PLW0603 - every message names the command; restored below
    if prog is None:
        return _main(argv, stop)
    saved, _PROG = _PROG, prog
    try:
        return _main(argv, stop)
    finally:
        _PROG = saved


def _main(argv: Sequence[str] | None, stop: threading.Event | None) -> int:
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
        faults = [parse_fault(f, j1939=args.j1939) for f in args.fault]
        endpoint = _host_port(args.socketcand) if args.socketcand else None
        if args.j1939 and (args.elm327 or args.gnss_can or args.scenario):
            car_only = (
                "--elm327" if args.elm327 else "--gnss-can" if args.gnss_can else "--scenario"
            )
            raise UsageError(f"{car_only} belongs to the car; not with --j1939")
    except _Exit as exc:
        return exc.status
    except UsageError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    if not 1 <= args.gnss_rate <= 10:
        print(f"{_PROG}: error: --gnss-rate must be 1 to 10", file=sys.stderr)
        return 2
    bench_only = (args.psu or args.gnss) and not (
        endpoint or args.slcan or args.elm327 or args.j1939
    )
    if endpoint is None and not (args.slcan or args.elm327 or bench_only):
        endpoint = _host_port(_DEFAULT_SOCKETCAND)
    if bench_only:
        _setup_logging(args.verbose)
        stop = stop if stop is not None else threading.Event()
        with stop_on_signals(stop):
            return _serve_bench(args, stop)
    if args.dbc is None and args.j1939:
        from hwbridge.resources import J1939_TRUCK_DBC, bundled_dbc

        try:
            args.dbc = str(bundled_dbc(J1939_TRUCK_DBC))
        except FileNotFoundError as exc:
            print(f"{_PROG}: error: no --dbc given and {exc}; reinstall hwbridge", file=sys.stderr)
            return 1
        print(
            f"{_PROG}: no --dbc given, using the bundled J1939 truck ({args.dbc})", file=sys.stderr
        )
    if args.dbc is None:
        from hwbridge.resources import bundled_dbc, default_dbc_notice

        try:
            args.dbc = str(bundled_dbc())
        except FileNotFoundError as exc:
            print(f"{_PROG}: error: no --dbc given and {exc}; reinstall hwbridge", file=sys.stderr)
            return 1
        print(f"{_PROG}: {default_dbc_notice(args.dbc)}", file=sys.stderr)
    args.gnss_can_dbc = None
    if args.gnss_can:
        from hwbridge.resources import bundled_dbc

        try:
            args.gnss_can_dbc = str(bundled_dbc("gnss_module.dbc"))
        except FileNotFoundError as exc:
            print(f"{_PROG}: error: --gnss-can and {exc}; reinstall hwbridge", file=sys.stderr)
            return 1
        print(
            f"{_PROG}: a GNSS module sends GnssSpeed (0x650) too; its database is"
            f" {args.gnss_can_dbc}",
            file=sys.stderr,
        )
    _setup_logging(args.verbose)
    stop = stop if stop is not None else threading.Event()
    with stop_on_signals(stop):
        return _serve(args, faults, endpoint, stop)


def _load_dbc(path: str) -> Any:
    """The vehicle's database, loaded by cantools itself (never by hwbridge's codec: the
    simulator is an independent witness of hwbridge's decoding)."""
    import cantools

    try:
        return cantools.database.load_file(path, strict=False)
    except cantools.database.errors.UnsupportedDatabaseFormatError as exc:
        raise ValueError(str(exc).splitlines()[0] if str(exc) else "not a database") from None


def _serve(
    args: argparse.Namespace,
    faults: list[tuple[str, dict[str, str]]],
    endpoint: tuple[str, int] | None,
    stop: threading.Event,
) -> int:
    from firmware_sim.socketcand import SocketcandServer

    try:
        db: Any = _load_dbc(args.dbc)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        print(f"{_PROG}: error: cannot load {args.dbc}: {exc}", file=sys.stderr)
        return 2
    if args.gnss_can_dbc:
        db = [db, _load_dbc(args.gnss_can_dbc)]
    try:
        vehicle = _truck(args, db, faults) if args.j1939 else _car(args, db, faults)
    except ValueError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    summary = getattr(vehicle, "period_summary", None)
    if summary:
        print(summary, file=sys.stderr)
    cleanup: list[Callable[[], None]] = []
    try:
        vehicle.start()
        cleanup.append(vehicle.stop)
        lines = []
        if endpoint is not None:
            server = SocketcandServer(
                {SOCKETCAND_BUS: args.channel}, host=endpoint[0], port=endpoint[1]
            )
            server.start()
            cleanup.append(server.stop)
            lines.append(f"socketcand: {server.url(SOCKETCAND_BUS)}")
        for kind, wanted in (("slcan", args.slcan), ("elm327", args.elm327)):
            if wanted:
                device = _device(kind, args.channel)
                path = device.start()
                cleanup.append(device.stop)
                lines.append(f"{kind}: {path}")
        lines += _start_bench(args, cleanup)
        print("\n".join(lines), flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    except (OSError, RuntimeError) as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for close in reversed(cleanup):
            close()


def _car(args: argparse.Namespace, db: Any, faults: list[tuple[str, dict[str, str]]]) -> _Vehicle:
    from firmware_sim.obd import DEFAULT_VIN
    from firmware_sim.vehicle import VirtualVehicle

    vehicle = VirtualVehicle(
        db,
        channel=args.channel,
        seed=args.seed,
        drive=not args.no_drive,
        vin=args.vin or DEFAULT_VIN,
        scenario=args.scenario,
        dbc_name=Path(args.dbc).name,
    )
    for name, target in faults:
        vehicle.inject_fault(name, **target)
    return vehicle


def _truck(args: argparse.Namespace, db: Any, faults: list[tuple[str, dict[str, str]]]) -> _Vehicle:
    from firmware_sim.j1939.controllers import DEFAULT_TRUCK_VIN
    from firmware_sim.j1939.truck import VirtualTruck

    if not any(m.is_extended_frame for m in db.messages):
        raise ValueError(f"{args.dbc} has no 29-bit (J1939) message; --j1939 wants a J1939 DBC")
    truck = VirtualTruck(
        db,
        channel=args.channel,
        seed=args.seed,
        drive=not args.no_drive,
        vin=args.vin or DEFAULT_TRUCK_VIN,
    )
    for name, _ in faults:
        truck.inject_fault(name)
    return truck


def _start_bench(args: argparse.Namespace, cleanup: list[Callable[[], None]]) -> list[str]:
    """The bench devices asked for, started; their `kind: path` lines."""
    lines = []
    if args.psu:
        from firmware_sim.bench_psu import BenchPsu

        psu = BenchPsu()
        lines.append(f"psu: {psu.start()}")
        cleanup.append(psu.stop)
    if args.gnss:
        from firmware_sim.gnss import GnssReceiver

        gnss = GnssReceiver(rate_hz=args.gnss_rate)
        lines.append(f"gnss: {gnss.start()}")
        cleanup.append(gnss.stop)
    return lines


def _serve_bench(args: argparse.Namespace, stop: threading.Event) -> int:
    """Only bench devices: no vehicle, no database."""
    cleanup: list[Callable[[], None]] = []
    try:
        lines = _start_bench(args, cleanup)
        print("\n".join(lines), flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    except (OSError, RuntimeError) as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for close in reversed(cleanup):
            close()
