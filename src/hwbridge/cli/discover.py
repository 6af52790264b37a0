"""`hwbridge discover`: the signals of a capture with no database, and a draft DBC.

    hwbridge discover drive.blf --reference gnss.dbc --out draft.dbc
    hwbridge discover drive.blf --json > report.json
    hwbridge discover drive.blf --reference gnss.dbc --html report.html
    hwbridge discover drive.blf --reference obd --events events.csv
    hwbridge discover --bus socketcan:can0 --duration 60 --reference obd
    hwbridge discover drive.blf --match-known --dbc my_dbcs/

Prints, per frame id, its rate, length and the fields found (kind, bits, order, sign, and
what a reference says they mean); `--json` prints the report instead; `--out` writes the
draft DBC; `--html` writes the evidence (bit grids, flip rates, each matched field drawn
over its reference) as one self-contained page; `--match-known` ranks known databases
(opendbc's, and those of `--dbc`) by how much of the capture each explains and decodes with
the best that fits. `--reference obd` takes the OBD-II answers on the bus as the reference;
`--events` ranks fields against marked moments; `--bus` records a live bus for `--duration`
seconds first. Exit 0, or 1 when a capture could not be read to its end (the frames before
the break are used) or the bus could not be recorded; 2 for bad options, a capture that
cannot be opened, a bad reference or events file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.cli.console import json_text, make_console
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, one_line, os_text
from hwbridge.cli.out_paths import check_out_file, write_whole

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from hwbridge.discovery.report.models import DiscoveryReport, FieldReport

__all__ = ["register", "run", "show_matches", "show_report"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "discover",
        help="find the signals of a capture with no database, and write a draft DBC",
        description="Split each frame id of the captures into fields from how their bits "
        "flip (values, flags, counters, checksums, constants, byte order and sign), give "
        "them a meaning by correlating them with a reference database's signals (unit, "
        "scale and offset by least squares), and write the result as a draft DBC.",
    )
    parser.add_argument(
        "captures", nargs="*", metavar="CAPTURE", help="captures (.blf, .mf4, .asc, .log, ...)"
    )
    parser.add_argument(
        "--reference",
        action="append",
        metavar="DB",
        help="a database of the known part of the bus (e.g. a GNSS module's DBC); its "
        "messages are decoded, and every field is correlated with its signals; `obd`: the "
        "OBD-II mode 01 answers on the bus (asked for while recording with --bus), as "
        "python-OBD's SPEED, RPM, ...; repeatable",
    )
    parser.add_argument(
        "--events",
        metavar="CSV",
        help="moments marked while recording, one `time_s,name` line each (time on the "
        "capture's clock): the report ranks, per event, the fields that changed at its marks "
        "and nowhere else",
    )
    parser.add_argument(
        "--bus",
        metavar="BUS",
        help="record this live bus for --duration seconds instead of reading captures",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to record with --bus (default 30, at most 3600)",
    )
    parser.add_argument(
        "--match-known",
        action="store_true",
        help="rank known databases (opendbc's, with the opendbc extra, and those of --dbc) by "
        "how much of the capture each explains (ids of the right length and rate, counters "
        "that count, checksums that check, values in range), and decode with the best that "
        "fits instead of rediscovering what it explains",
    )
    parser.add_argument(
        "--dbc",
        action="append",
        default=[],
        metavar="PATH",
        help="with --match-known: a database file, or a folder of them, to match too; repeatable",
    )
    parser.add_argument("--out", metavar="DBC", help="write the draft DBC here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write the evidence as one self-contained HTML page a browser opens "
        "offline: each id's bits on a grid shaded by how often they flipped, each field's "
        "bits as a heat row, each field matched to a reference drawn over it with r, scale "
        "and offset (the busiest 64 ids)",
    )
    parser.add_argument(
        "--min-r",
        type=float,
        default=0.9,
        metavar="R",
        help="|r| a field needs to take a reference signal's meaning (default 0.9)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from hwbridge.discovery.api import discover
    except ImportError as exc:  # pragma: no cover - numpy missing
        raise CliError(one_line(str(exc)), EXIT_RUNTIME) from None
    if not 0.0 < args.min_r <= 1.0:
        raise CliError("--min-r must be above 0 and at most 1", EXIT_USAGE)
    if args.dbc and not args.match_known:
        raise CliError("--dbc names databases to match: add --match-known", EXIT_USAGE)
    if bool(args.captures) == bool(args.bus):
        raise CliError("give captures, or --bus to record a live bus (not both)", EXIT_USAGE)
    if not 0.0 < args.duration <= 3600.0:
        raise CliError("--duration must be above 0 and at most 3600 seconds", EXIT_USAGE)
    if args.out:  # before the recording and the analysis, not after them
        check_out_file(Path(args.out), "the draft DBC")
    if args.html:
        check_out_file(Path(args.html), "the evidence page", "--html")
    with tempfile.TemporaryDirectory(prefix="hwbridge-discover-") as folder:
        captures = args.captures
        if args.bus:
            from hwbridge.cli.discover_live import record_live

            obd = any(r.strip().lower() == "obd" for r in args.reference or [])
            if obd:
                make_console(sys.stderr).print(
                    "asking the vehicle for its OBD-II PIDs (mode 01, read-only) while recording",
                    soft_wrap=True,
                )
            capture, _ = record_live(args.bus, args.duration, Path(folder), obd=obd)
            captures = [capture]
        report = _discover(discover, captures, args)
        if args.bus:
            report.captures = [args.bus]
    return _output(report, args)


def _discover(discover: Any, captures: list[Any], args: argparse.Namespace) -> DiscoveryReport:
    from hwbridge.can.database.loader import DatabaseError

    try:
        return discover(  # type: ignore[no-any-return]
            captures,
            reference=args.reference,
            min_r=args.min_r,
            evidence=bool(args.html),
            events=args.events,
            match_known=args.match_known,
            known=args.dbc,
        )
    except ImportError as exc:
        raise CliError(one_line(str(exc)), EXIT_RUNTIME) from None
    except (DatabaseError, ValueError) as exc:
        raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
    except OSError as exc:
        raise CliError(os_text(exc), EXIT_USAGE) from exc


def _output(report: DiscoveryReport, args: argparse.Namespace) -> int:
    from rich.text import Text

    if args.out:  # whole or not at all: an interrupt leaves the old draft or the new one
        write_whole(Path(args.out), report.to_dbc().encode("utf-8"), "the draft DBC")
    if args.html:
        from hwbridge.discovery.report.html import render_html

        write_whole(
            Path(args.html), render_html(report).encode("utf-8"), "the evidence page", "--html"
        )
    if args.json:
        print(json_text(report.to_json(indent=True)))
    else:
        show_report(make_console(), report, wrote=args.out)
        if args.html:
            make_console().print(f"evidence written to {args.html}", soft_wrap=True)
    broken = [n for n in report.notes if n.message in report.captures]
    errors = make_console(sys.stderr)
    for note in broken:
        errors.print(Text(f"hwbridge: {note.message}: {note.text}", style="red"), soft_wrap=True)
    if not broken and not report.messages and not report.dropped:  # nothing found: fail
        errors.print(Text("hwbridge: no CAN frame was found in the capture(s)", style="red"))
        return EXIT_RUNTIME
    return EXIT_RUNTIME if broken else EXIT_OK


def _field_line(f: FieldReport) -> Text:
    from rich.text import Text

    order = "intel" if f.byte_order == "little_endian" else "motorola"
    where = f"{f.start_bit}|{f.length}@{order}{'-' if f.signed else '+'}"
    line = Text(f"  {f.name:<24} {where:<18} {f.kind:<9}")
    if f.is_float:
        line.append(" float")
    if f.is_multiplexer:
        line.append(" multiplexer (M)")
    if f.reference is not None:
        unit = f" {f.unit}" if f.unit else ""
        line.append(
            f" x{f.scale:g} {f.offset:+g}{unit}  ~ {f.reference.message}.{f.reference.signal}"
            f" r={f.reference.r:.3f} R2={f.reference.r2:.3f} {f.reference.verdict}",
            style="green",
        )
    return line


def _show_events(console: Console, report: DiscoveryReport, shown: int = 3) -> None:
    """Per marked event, its best candidates (all of them are in --json)."""
    for event in report.events:
        console.print(f"event {event.name!r}, {event.marks} mark(s):", soft_wrap=True)
        if not event.candidates:
            console.print("  no field changed at its marks", soft_wrap=True)
        for c in event.candidates[:shown]:
            ident = f"0x{c.id:08X}" if c.extended else f"0x{c.id:03X}"
            order = "intel" if c.byte_order == "little_endian" else "motorola"
            console.print(
                f"  {ident} {c.start_bit}|{c.length}@{order}  {c.field or 'bits':<22}"
                f" score {c.score:.3f} ({c.marks_hit} mark(s) hit, {c.changes_elsewhere}"
                " change(s) elsewhere)",
                soft_wrap=True,
            )


def show_report(console: Console, report: DiscoveryReport, *, wrote: str | None = None) -> None:
    """Per id: rate, length, frames, then one line per field; notes and a summary."""
    from rich.text import Text

    for m in report.messages:
        bits = "29-bit" if m.extended else "11-bit"
        ident = f"0x{m.id:08X}" if m.extended else f"0x{m.id:03X}"
        rate = f"{1000.0 / m.period_ms:.1f} Hz ({m.period_ms:g} ms)" if m.period_ms else "once"
        console.print(
            Text.assemble((ident, "bold"), f"  {bits}  {m.dlc} bytes  {rate}  {m.frames:,} frames")
        )
        constant = [f for f in m.signals if f.kind == "constant"]
        for f in m.signals:
            if f.kind != "constant":
                console.print(_field_line(f), soft_wrap=True)
        if constant:
            quiet = sum(f.length for f in constant)
            console.print(f"  + {len(constant)} constant field(s), {quiet} bits that never changed")
    kinds: dict[str, int] = {}
    for m in report.messages:
        for f in m.signals:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
    matched = sum(1 for m in report.messages for f in m.signals if f.reference is not None)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    console.print(
        f"{len(report.messages)} id(s) from {report.frames:,} frames: {counts or 'no fields'};"
        f" {matched} matched to a reference signal",
        soft_wrap=True,
    )
    if report.matches:
        show_matches(console, report)
    if report.reference_messages:
        shown = ", ".join(report.reference_messages[:10])
        console.print(f"decoded with the reference, not rediscovered: {shown}", soft_wrap=True)
    wider = [n for n in report.notes if n.signal is not None and "never changed" in n.text]
    if wider:
        console.print(
            Text(
                f"note: {len(wider)} field(s) have bits right above them that never changed;"
                " nothing tells whether those belong to them, so only the bits that moved are"
                " given (each is named in the draft's comments and in --json)",
                style="yellow",
            ),
            soft_wrap=True,
        )
    _show_events(console, report)
    for note in report.notes:
        if note in wider:
            continue
        where = note.signal or note.message  # "*": the whole capture, said without a place
        text = note.text if where == "*" else f"{where}: {note.text}"
        console.print(Text(f"note: {text}", style="yellow"), soft_wrap=True)
    if wrote:
        console.print(f"draft DBC written to {wrote}", soft_wrap=True)


def show_matches(console: Console, report: DiscoveryReport, shown: int = 5) -> None:
    """The best known databases, one line each, and the ones decoded with."""
    from rich.text import Text

    console.print("known databases, best first:")
    for m in report.matches[:shown]:
        checks = ", ".join(
            f"{name} {value:.0%}"
            for name, value in m.checks.model_dump().items()
            if value is not None
        )
        line = Text(
            f"  {m.database:<36} {m.ids:>4} ids ({m.ids_explained:.0%}, {m.frames_explained:.0%}"
            f" of frames)  score {m.score:.2f}  {checks}"
        )
        if m.tied_with:
            line.append(f"  same as {', '.join(m.tied_with[:3])}", style="yellow")
        console.print(line, soft_wrap=True)
    if report.decoded_with:
        console.print(
            Text(f"decoded with {', '.join(report.decoded_with)}", style="green"), soft_wrap=True
        )
