"""`hwbridge dump FILE`: a CAN database browsed offline, as `cantools dump` shows it.

    hwbridge dump car.dbc
    hwbridge dump car.dbc --message 'Engine*' --message 0x3C0

Per message: id, name, length, senders, cycle time; its signals (start|length, byte order,
sign, scale and offset, minimum and maximum, unit, multiplexing), their value tables, and
the bit layout as a grid drawn by cantools' own `layout_string`. The database is loaded as
every other command loads it (with hwbridge's repairs, said on stderr). Colour on a
terminal only; plain text in a pipe. Exit 0, or 2 for a file that is missing or does not
load, or a --message that matches nothing.
"""

from __future__ import annotations

import argparse
import fnmatch
from typing import TYPE_CHECKING, Any

from hwbridge.cli.console import make_console
from hwbridge.cli.errors import EXIT_OK, CliError

if TYPE_CHECKING:
    from rich.console import Console

    from hwbridge.can import CanDatabase

__all__ = ["exact", "register", "run", "selected_messages", "show_message"]

_GLOB = frozenset("*?[")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "dump",
        help="browse a CAN database offline: messages, signals, value tables, bit layouts",
        description="Print a CAN database (.dbc, .kcd, .sym, .arxml) as `cantools dump` "
        "does: per message its id, length, senders and cycle time, its signals (start|length, "
        "byte order, sign, scale, offset, minimum, maximum, unit, multiplexing), their value "
        "tables, and the bit layout as a grid. The file is loaded with hwbridge's repairs, as "
        "every other command loads it; nothing is sent or read.",
        epilog="examples:\n"
        "  hwbridge dump dbc/demo_vehicle.dbc\n"
        "  hwbridge dump car.dbc --message 'Engine*' --message 0x3C0\n"
        "  hwbridge dump car.dbc --no-layout | less\n",
    )
    parser.add_argument("database", metavar="FILE", help="the CAN database to show")
    parser.add_argument(
        "-m",
        "--message",
        action="append",
        default=[],
        metavar="GLOB",
        help="only the messages whose name matches (a glob such as 'Engine*', any case) "
        "or with this id (0x3C0, 960); repeatable",
    )
    parser.add_argument("--no-layout", action="store_true", help="leave out the bit layout grids")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hwbridge.cli.options import load_database

    db = load_database(args.database, debug=bool(args.debug))
    messages = selected_messages(db, list(args.message))
    console = make_console()
    _show_header(console, db, len(messages))
    for message in messages:
        show_message(console, message, layout=not args.no_layout)
    return EXIT_OK


def selected_messages(db: CanDatabase, patterns: list[str]) -> list[Any]:
    """The database's messages (sorted by id) that any pattern names: a glob or a name in
    any case, or a frame id. No pattern: all of them. A pattern matching nothing is an error."""
    messages = sorted(db.messages, key=lambda m: (m.frame_id, m.name))
    if not patterns:
        return messages
    chosen: set[int] = set()
    for pattern in patterns:
        found = [id(m) for m in messages if _matches(m, pattern)]
        if not found:
            raise CliError(f"--message {pattern}: matches no message in {db.path}")
        chosen.update(found)
    return [m for m in messages if id(m) in chosen]


def _matches(message: Any, pattern: str) -> bool:
    name = str(message.name).lower()
    wanted = pattern.lower()
    if _GLOB & set(pattern):
        return fnmatch.fnmatchcase(name, wanted)
    if name == wanted:
        return True
    try:
        frame_id = int(pattern, 0)
    except ValueError:
        return False
    return int(message.frame_id) == frame_id


def _show_header(console: Console, db: CanDatabase, shown: int) -> None:
    from rich.text import Text

    total = len(db.messages)
    signals = sum(len(m.signals) for m in db.messages)
    nodes = [str(n.name) for n in getattr(db.cantools, "nodes", [])]
    line = Text.assemble((str(db.path), "bold"), f": {total} message(s), {signals} signal(s)")
    if nodes:
        line.append(f", nodes {', '.join(nodes)}")
    if shown != total:
        line.append(f"; {shown} shown")
    console.print(line, soft_wrap=True)
    if db.repairs:
        console.print(
            Text(f"loaded with {len(db.repairs)} repair(s) (see the warning above)", style="yellow")
        )


def _frame_id(message: Any) -> str:
    if message.is_extended_frame:
        return f"0x{message.frame_id:08X} (29-bit)"
    return f"0x{message.frame_id:03X}"


def show_message(console: Console, message: Any, *, layout: bool = True) -> None:
    """One message: its header line (and its J1939 parameter group), its signals as a table,
    value tables, the layout; printed at once as one text (a rich Table per message made a
    331-message database take twice as long as `cantools dump`)."""
    from rich.text import Text

    out = Text()
    out.append("\n" + "─" * _RULE + "\n", style="dim")
    out.append(str(message.name), style="bold cyan")
    out.append(f"  {_frame_id(message)}")
    kind = " CAN FD" if getattr(message, "is_fd", False) else ""
    out.append(f"  {message.length} bytes{kind}")
    senders = ", ".join(str(s) for s in message.senders) or "-"
    out.append(f"  senders: {senders}")
    cycle = message.cycle_time
    out.append(f"  cycle time: {cycle} ms" if cycle else "  cycle time: -")
    if getattr(message, "protocol", None):
        out.append(f"  protocol: {message.protocol}")
    out.append("\n")
    j1939 = _j1939_line(message)
    if j1939:
        out.append(f"  {j1939}\n")
    if message.comment:
        out.append(f"  {_comment(message.comment)}\n", style="dim")
    if getattr(message, "is_container", False):
        children = ", ".join(str(c.name) for c in message.contained_messages or [])
        out.append(f"  container of: {children or '-'}\n")
    else:
        if message.signals:
            out.append(_signal_table(message))
        out.append(_choices(message))
        if layout:
            drawn = _layout(message)
            if drawn:
                out.append("  Layout:\n" + drawn + "\n")
    out.rstrip()
    console.print(out, soft_wrap=True, overflow="ignore", crop=False)


_RULE = 80
_COLUMNS = (
    "  signal",
    "start|len",
    "order",
    "sign",
    "scale",
    "offset",
    "min",
    "max",
    "unit",
    "mux",
)
_LEFT = frozenset({0, 2, 8, 9})  # the columns read as words, not numbers


def _signal_table(message: Any) -> str:
    rows = [list(_COLUMNS)]
    for s in sorted(message.signals, key=lambda s: (s.start, s.name)):
        order = "intel" if s.byte_order == "little_endian" else "motorola"
        sign = "float" if s.is_float else ("signed" if s.is_signed else "unsigned")
        rows.append([
            f"  {s.name}", f"{s.start}|{s.length}", order, sign, exact(s.scale),
            exact(s.offset), exact(s.minimum), exact(s.maximum), str(s.unit or ""),
            _mux(message, s),
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(width) if i in _LEFT else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def exact(value: Any) -> str:
    """A number as the database holds it: 8031.875, not 8031.88; 0.1, not 0.1000000001."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return str(value)


def _j1939_line(message: Any) -> str:
    """A J1939 message's parameter group, as `cantools dump` shows it: PGN, priority, source
    address and PDU format (PDU 1 names its destination)."""
    if str(getattr(message, "protocol", "") or "").lower() != "j1939":
        return ""
    if not message.is_extended_frame:
        return ""
    from cantools import j1939

    unpack: Any = j1939.frame_id_unpack  # untyped in cantools
    pgn_of: Any = j1939.pgn_from_frame_id
    frame_id = int(message.frame_id)
    try:
        unpacked = unpack(frame_id)
        pgn = int(pgn_of(frame_id))
    except Exception:  # an id cantools cannot read as J1939: said without the group
        return ""
    if unpacked.pdu_format < 240:
        pdu = f"PDU 1 (destination 0x{unpacked.pdu_specific:02X})"
    else:
        pdu = "PDU 2 (broadcast)"
    return (
        f"J1939: PGN 0x{pgn:05X} ({pgn})  priority {unpacked.priority}  "
        f"source 0x{unpacked.source_address:02X}  {pdu}"
    )


def _mux(message: Any, signal: Any) -> str:
    if signal.is_multiplexer:
        return "selector"
    ids = signal.multiplexer_ids
    if not ids:
        return ""
    shown = ",".join(str(i) for i in ids[:8]) + (",..." if len(ids) > 8 else "")
    return f"{signal.multiplexer_signal}={shown}"


def _choices(message: Any) -> str:
    labelled = [s for s in message.signals if s.choices]
    if not labelled:
        return ""
    lines = ["  Value tables:"]
    for s in sorted(labelled, key=lambda s: (s.start, s.name)):
        pairs = ", ".join(f"{int(k)} {v}" for k, v in sorted(s.choices.items(), key=_key))
        lines.append(f"    {s.name}: {pairs}")
    return "\n".join(lines) + "\n"


def _key(item: tuple[Any, Any]) -> int:
    return int(item[0])


def _comment(comment: Any) -> str:
    if isinstance(comment, dict):  # ARXML: one comment per language
        comment = next(iter(comment.values()), "")
    return " ".join(str(comment).split())


def _layout(message: Any) -> str:
    """cantools' own drawing of the bit layout (`cantools dump`), indented; empty when it
    cannot draw this message."""
    try:
        from cantools.subparsers.dump import formatting

        draw: Any = formatting.layout_string  # untyped in cantools
        drawn = str(draw(message))
    except Exception:  # an internal helper of cantools: its absence costs the grid only
        return ""
    return "\n".join(("    " + line).rstrip() for line in drawn.splitlines())
