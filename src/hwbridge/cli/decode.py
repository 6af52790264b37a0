"""`hwbridge decode`: captures into a Parquet dataset, with a progress bar per file.

    hwbridge decode truck.MF4 --dbc j1939.dbc --dbc gps.dbc --out dataset/
    hwbridge decode logs/*.blf --dbc car.dbc --out dataset/ --workers 4
    hwbridge decode logs/*.MF4 --dbc car.dbc --out /shared/dataset --dask tcp://10.0.0.5:8786

With a J1939 database, the transport protocol is reassembled and DM1/DM2 trouble codes are
written to the j1939_dm table unless --no-j1939 is given (--j1939 turns it on without one).

Exit 0 when every capture was read to its end, 1 when one could not be (the others are
decoded all the same), 2 for bad options or a database that does not load. Interrupted
(Ctrl-C: 130, SIGTERM: 143), it leaves every capture in the dataset whole or absent and says
which are in; the same command again decodes only the others.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from hwbridge.cli.console import json_text, make_console
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, one_line, os_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from hwbridge.captures.decode import DecodeInterrupted
    from hwbridge.captures.summary import DecodeSummary, FileSummary

__all__ = ["register", "run"]

_MAX_TABLE_ROWS = 40
_NAMED = 5  # captures named in the line an interrupted decode prints


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "decode",
        help="decode captures (.mf4, .blf, .asc, .log, ...) into a Parquet dataset",
        description="Decode CAN captures with one or more databases into a Hive-style "
        "Parquet dataset: DIR/<Message>/source=<capture>/part-0.parquet, one column per "
        "signal (physical values), <Signal>_label beside labelled signals, timestamp (UTC) "
        "and source. Ask it with `hwbridge inspect --dataset DIR`, DuckDB, Spark or Athena.",
    )
    parser.add_argument("captures", nargs="+", metavar="CAPTURE", help="capture files")
    parser.add_argument(
        "--dbc",
        action="append",
        required=True,
        metavar="DB",
        help="database (.dbc, .kcd, .sym, .arxml); repeat for several (the first that knows "
        "an id decodes it)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the dataset folder")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, default=1, metavar="N", help="decode N captures at once"
    )
    where.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run on a dask.distributed cluster (e.g. tcp://10.0.0.5:8786); the workers "
        "must see the same paths",
    )
    parser.add_argument(
        "--isotp",
        action="store_true",
        help="reassemble ISO-TP transfers (UDS, OBD-II) for messages longer than 8 bytes",
    )
    parser.add_argument(
        "--j1939",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reassemble the J1939 transport protocol (multi-packet messages the databases "
        "describe) and write the j1939_dm table of DM1/DM2 trouble codes; on by default when "
        "a database describes J1939 messages",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="decode every capture again, also those the dataset already holds from an "
        "earlier run with the same databases (skipped by default)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


class RichProgress:
    """One bar per capture, on a terminal; nothing otherwise."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

        self.console = console
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[state]}"),
            console=console,
            transient=False,
            disable=not console.is_terminal,
        )
        self._tasks: dict[str, TaskID] = {}

    def started(self, source: str, path: str) -> None:
        self._tasks[source] = self.bars.add_task(source, total=1.0, state="")

    def advanced(self, source: str, fraction: float) -> None:
        task = self._tasks.get(source)
        if task is not None:
            self.bars.update(task, completed=fraction)

    def finished(self, summary: FileSummary) -> None:
        task = self._tasks.get(summary.source)
        if task is None:
            task = self.bars.add_task(summary.source, total=1.0, state="")
            self._tasks[summary.source] = task
        state = "done" if summary.ok else "FAILED"
        self.bars.update(task, completed=1.0, state=state)


def run(args: argparse.Namespace) -> int:
    try:
        from hwbridge.captures.bridge import DatabaseError
        from hwbridge.captures.decode import DecodeInterrupted, DecodeProgress, decode_captures
    except ImportError as exc:
        raise CliError(
            f"{exc.name or exc}: hwbridge decode needs pip install 'mcs-hwbridge[captures]'",
            EXIT_RUNTIME,
        ) from None
    from rich.text import Text

    from hwbridge.cli.out_paths import check_out_folder

    out = Path(args.out).expanduser()
    made = not out.exists()
    check_out_folder(out, "the dataset")  # made now: a path that cannot be is said at once
    console = make_console()
    errors = make_console(sys.stderr)
    progress = RichProgress(console)

    class _Hooks(DecodeProgress):
        def started(self, source: str, path: str) -> None:
            progress.started(source, path)

        def advanced(self, source: str, fraction: float) -> None:
            progress.advanced(source, fraction)

        def finished(self, summary: FileSummary) -> None:
            progress.finished(summary)

    try:
        with progress.bars, _unmade_if_empty(out, made):
            summary = decode_captures(
                args.captures,
                args.dbc,
                args.out,
                workers=args.workers,
                dask=args.dask,
                isotp=args.isotp,
                j1939=args.j1939,
                progress=_Hooks(),
                force=args.force,
            )
    except DecodeInterrupted as stop:
        errors.print(Text(_interrupted(stop), style="yellow"), soft_wrap=True)
        raise stop.cause from None
    except DatabaseError as exc:
        raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
    except ValueError as exc:
        raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
    except (ConnectionError, ImportError) as exc:
        raise CliError(one_line(str(exc)), EXIT_RUNTIME) from exc
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:  # a capture given
        raise CliError(os_text(exc), EXIT_USAGE) from exc
    if args.json:
        print(json_text(summary.model_dump_json(indent=2)))
    else:
        show_summary(console, summary)

    for f in summary.files:
        if not f.ok:
            where = f" at {f.position}" if f.position else ""
            kept = f"; {f.frames_decoded:,} frames decoded before it were kept" if f.rows else ""
            line = Text(f"hwbridge: {f.path}: {f.error}{where}{kept}", style="red")
            errors.print(line, soft_wrap=True)
    return EXIT_OK if summary.ok else EXIT_RUNTIME


@contextlib.contextmanager
def _unmade_if_empty(folder: Path, made: bool) -> Iterator[None]:
    """A dataset folder this run made is removed again if the run fails before writing to it
    (a capture or a database that does not exist)."""
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty
        raise


def _interrupted(stop: DecodeInterrupted) -> str:
    """What an interrupted decode left: which captures are in, which are not."""
    total = len(stop.done) + len(stop.missing)
    names = [os.path.basename(m) for m in stop.missing[:_NAMED]]
    more = f" and {len(stop.missing) - _NAMED} more" if len(stop.missing) > _NAMED else ""
    missing = f"; not in it: {', '.join(names)}{more}" if stop.missing else ""
    return (
        f"hwbridge: {len(stop.done)} of {total} captures are in {stop.out}, each whole"
        f"{missing}; the same command again decodes only those"
    )


def _ids(summary: DecodeSummary) -> str:
    """How many ids the unknown frames came from: exact below the list's cap."""
    from hwbridge.captures.summary import MAX_UNKNOWN_IDS

    count = len(summary.unknown_ids)
    if count >= MAX_UNKNOWN_IDS:
        return f"{count}+ ids"
    return f"{count} id" if count == 1 else f"{count} ids"


def _first(summary: DecodeSummary, kind: str) -> str:
    """' (first: <capture> <note>)' for the first note of this kind ('line ' or 'frame ');
    printed as plain text, never as markup: a note may quote the capture."""
    for f in summary.files:
        for note in f.malformed:
            if note.startswith(kind):
                return f" (first: {f.source} {note})"
    return ""


def show_summary(console: Console, summary: DecodeSummary) -> None:
    """Frames read, decoded and unknown; rows per table; failed captures."""
    from rich.table import Table
    from rich.text import Text

    ok = len(summary.files) - len(summary.failed)
    console.print(
        Text.assemble(
            ("decoded ", "bold"),
            f"{ok} of {len(summary.files)} capture(s) into {summary.out} "
            f"in {summary.seconds:.2f} s",
        )
    )
    console.print(
        f"frames read {summary.frames_read:,}, decoded {summary.frames_decoded:,}, "
        f"unknown frames {summary.unknown_frames:,} (from {_ids(summary)}), "
        f"error frames {summary.error_frames:,}, remote frames {summary.remote_frames:,}"
    )
    if summary.malformed_lines:
        console.print(
            Text(f"malformed lines skipped: {summary.malformed_lines:,}{_first(summary, 'line ')}"),
            soft_wrap=True,
        )
    if summary.malformed_frames:
        console.print(
            Text(
                f"malformed frames dropped: {summary.malformed_frames:,}{_first(summary, 'frame ')}"
            ),
            soft_wrap=True,
        )
    isotp = sum(f.isotp_frames for f in summary.files)
    if isotp:
        transfers = sum(f.isotp_transfers for f in summary.files)
        console.print(f"ISO-TP: {isotp:,} frames reassembled into {transfers:,} transfers")
    tp = sum(f.j1939_tp_frames for f in summary.files)
    dms = sum(f.j1939_dm_messages for f in summary.files)
    if tp or dms:
        completed = sum(f.j1939_tp_completed for f in summary.files)
        aborted = sum(f.j1939_tp_aborted for f in summary.files)
        console.print(
            f"J1939 transport protocol: {tp:,} frames, {completed:,} messages reassembled, "
            f"{aborted:,} sessions aborted; {dms:,} DM1/DM2 messages in j1939_dm"
        )
    table = Table("table", "rows", box=None, padding=(0, 2, 0, 0))
    for name, rows in list(summary.rows.items())[:_MAX_TABLE_ROWS]:
        table.add_row(name, f"{rows:,}")
    if len(summary.rows) > _MAX_TABLE_ROWS:
        table.add_row(f"... {len(summary.rows) - _MAX_TABLE_ROWS} more", "")
    if summary.rows:
        console.print(table)
    if summary.unknown_ids:
        shown = ", ".join(f"{k} ({v:,})" for k, v in list(summary.unknown_ids.items())[:8])
        console.print(f"most frequent unknown ids: {shown}", soft_wrap=True)
