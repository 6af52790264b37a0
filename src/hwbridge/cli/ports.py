"""`hwbridge ports`: the serial ports (pyserial's list_ports) and the CAN interfaces
python-can detects, to find what to pass as --port or --bus."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
from typing import Any

from hwbridge.cli.console import json_text, make_console
from hwbridge.cli.errors import EXIT_OK

__all__ = ["can_interfaces", "register", "serial_ports"]

# Left out unless --all: socketcand listens 4 s for server beacons; virtual and
# udp_multicast always "find" an invented channel or the default multicast groups.
_SLOW_OR_INVENTED = frozenset({"socketcand", "virtual", "udp_multicast"})


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "ports",
        help="list serial ports and the CAN interfaces python-can detects",
        description="List the serial ports pyserial finds (with USB ids and the /dev/serial "
        "links) and the CAN channels python-can's interfaces detect: what to pass as --port "
        "or --bus.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--all",
        action="store_true",
        help="also ask socketcand (listens 4 s for server beacons), virtual and udp_multicast",
    )
    parser.set_defaults(func=run)


def serial_ports() -> list[dict[str, Any]]:
    """Every serial port pyserial lists, links (e.g. /dev/serial/by-id/...) included."""
    from serial.tools import list_ports

    out = []
    for port in sorted(list_ports.comports(include_links=True), key=lambda p: p.device):
        entry: dict[str, Any] = {"port": port.device, "description": port.description}
        if port.vid is not None and port.pid is not None:
            entry["usb"] = f"{port.vid:04X}:{port.pid:04X}"
        for key in ("manufacturer", "product", "serial_number", "location"):
            value = getattr(port, key, None)
            if value:
                entry[key] = value
        if port.hwid and port.hwid != "n/a":
            entry["hwid"] = port.hwid
        out.append(entry)
    return out


def can_interfaces(
    everything: bool = False, serial: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The channels python-can's interfaces detect; their import chatter is kept quiet.

    python-can's serial-port interfaces (`serial`, `slcan`, ...) "detect" every serial
    port, /dev/ttyS0 included: a port is no CAN channel until a CAN adapter is known to be
    on it, so the ports in `serial` are listed there only (with slcan://PORT@BAUD as the
    way to use one as a bus)."""
    from can.interfaces import VALID_INTERFACES

    import can

    names = sorted(VALID_INTERFACES if everything else VALID_INTERFACES - _SLOW_OR_INVENTED)
    logger = logging.getLogger("can")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            found = can.detect_available_configs(interfaces=names)
    finally:
        logger.setLevel(level)
    ports = {entry["port"] for entry in serial or ()}
    return [
        {k: (v if isinstance(v, str | int | float | bool) or v is None else str(v))
         for k, v in config.items()}
        for config in found
        if not _is_serial_port(str(config.get("channel")), ports)
    ]  # fmt: skip


def _is_serial_port(channel: str, ports: set[str]) -> bool:
    return channel in ports or channel.startswith("/dev/tty") or channel.upper().startswith("COM")


def run(args: argparse.Namespace) -> int:
    serial = serial_ports()
    can = can_interfaces(bool(args.all), serial)
    if args.json:
        document = {"serial": serial, "can": can}
        sys.stdout.write(json_text(json.dumps(document, indent=2, ensure_ascii=False)) + "\n")
        return EXIT_OK
    from rich.table import Table

    console = make_console()
    table = Table(title=f"{len(serial)} serial port(s): --port", title_justify="left")
    for column in ("port", "description", "usb", "serial number"):
        table.add_column(column)
    for entry in serial:
        table.add_row(
            entry["port"],
            entry["description"],
            entry.get("usb", ""),
            entry.get("serial_number", ""),
        )
    console.print(table)
    buses = Table(title=f"{len(can)} CAN channel(s): --bus INTERFACE:CHANNEL", title_justify="left")
    buses.add_column("interface")
    buses.add_column("channel")
    buses.add_column("as --bus")
    for config in can:
        interface, channel = str(config.get("interface")), str(config.get("channel"))
        buses.add_row(interface, channel, f"{interface}:{channel}")
    console.print(buses)
    console.print(
        "(a CAN adapter on a serial port: --bus slcan://PORT@BAUD"
        + ("" if args.all else "; --all also asks socketcand, virtual and udp_multicast")
        + ")",
        style="dim",
    )
    return EXIT_OK
