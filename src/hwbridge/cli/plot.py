"""`hwbridge plot`: signals over time into a PNG, an SVG or a self-contained HTML page.

    hwbridge plot truck.MF4 --dbc j1939.dbc --dbc gps.dbc --signal EngineSpeed --out rpm.png
    hwbridge plot --dataset truck_dataset --signal 'gnss_pos.*' --out position.svg
    hwbridge plot --bus socketcand://127.0.0.1:29536/vcan0 --duration 10 \\
        --signal VehicleSpeed --signal GearLever --out drive.html

A capture is decoded into a temporary dataset first; a dataset is downsampled in SQL, so a
signal with millions of samples comes to Python as a few thousand (each pixel column keeps
its first, last, minimum and maximum sample); a live bus is recorded for `--duration`
seconds. `--start` and `--end` are seconds after the beginning of the recording.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError, one_line, os_text
from hwbridge.cli.out_paths import check_out_file, write_whole

if TYPE_CHECKING:
    from hwbridge.can import CanDatabase
    from hwbridge.captures.sql.process import WorkerProcess
    from hwbridge.plot import Series

__all__ = ["register", "run"]

MAX_DURATION_S = 600.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "plot",
        help="draw signals over time (.png, .svg, .html) from a capture, a dataset or a bus",
        description="Draw signals over time from a capture file (decoded with --dbc), a "
        "decoded dataset (--dataset) or a live bus (--bus with --duration). Signals share one "
        "time axis, with one panel per unit; labelled signals are drawn as steps with their "
        "labels. Millions of samples are downsampled so that every pixel column keeps its "
        "minimum and maximum. Needs matplotlib: pip install 'mcs-hwbridge[plot]'.",
        epilog="examples:\n"
        "  hwbridge plot truck.MF4 --dbc j1939.dbc --signal EngineSpeed --out rpm.png\n"
        "  hwbridge plot --dataset truck_dataset --signal 'gnss_pos.*' --out pos.svg\n"
        "  hwbridge plot --bus socketcand://127.0.0.1:29536/vcan0 --duration 10 \\\n"
        "      --signal VehicleSpeed --signal GearLever --out drive.html\n",
    )
    parser.add_argument("source", nargs="?", metavar="SOURCE", help="a capture file")
    parser.add_argument(
        "--signal",
        action="append",
        required=True,
        metavar="NAME",
        help="a signal: its name, Message.Signal or a glob (*Speed); repeat for several",
    )
    parser.add_argument(
        "--dbc",
        action="append",
        metavar="FILE",
        help="database for a capture or a bus; repeat for several (a bus without --dbc uses "
        "the bundled demo vehicle's)",
    )
    parser.add_argument("--dataset", metavar="DIR", help="a dataset written by hwbridge decode")
    parser.add_argument("--bus", metavar="URL", help="record a live bus (needs --duration)")
    parser.add_argument(
        "--duration", type=float, metavar="S", help="how long to record the bus, in seconds"
    )
    parser.add_argument("--start", type=float, metavar="S", help="from S seconds in")
    parser.add_argument("--end", type=float, metavar="S", help="up to S seconds in")
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="the picture: FILE.png, FILE.svg or FILE.html"
    )
    parser.add_argument(
        "--width", type=int, default=1200, metavar="PX", help="width in pixels (default 1200)"
    )
    parser.add_argument("--title", help="a title above the panels")
    parser.set_defaults(func=run)


def _format(out: str) -> str:
    suffix = Path(out).suffix.lower().lstrip(".")
    if suffix not in ("png", "svg", "html"):
        raise CliError(f"--out {out}: the file must end in .png, .svg or .html")
    return suffix


def _check(args: argparse.Namespace) -> None:
    given = [x for x in (args.source, args.dataset, args.bus) if x is not None]
    if len(given) != 1:
        raise CliError("give one source: a capture file, --dataset DIR, or --bus URL")
    if args.bus is not None:
        if args.duration is None or not 0 < args.duration <= MAX_DURATION_S:
            raise CliError(f"--bus needs --duration S (more than 0, at most {MAX_DURATION_S:g})")
    elif args.duration is not None:
        raise CliError("--duration is for --bus only")
    if args.source is not None and not args.dbc:
        raise CliError("a capture needs --dbc to decode its signals")
    if args.dataset is not None and args.dbc:
        raise CliError("--dbc is not used with --dataset: the dataset is decoded already")
    if args.start is not None and args.end is not None and args.end < args.start:
        raise CliError("--end must not be before --start")
    if not 200 <= args.width <= 8000:
        raise CliError("--width must be between 200 and 8000 pixels")


def run(args: argparse.Namespace) -> int:
    fmt = _format(args.out)
    _check(args)
    check_out_file(Path(args.out), "the picture")  # before a minute of recording
    if importlib.util.find_spec("matplotlib") is None:  # said before any work is done
        from hwbridge.plot import EXTRA_HINT

        raise CliError(
            f"drawing signals needs matplotlib, which is not installed: {EXTRA_HINT}",
            EXIT_RUNTIME,
        )
    # a dataset (a capture is decoded into one) is read by the query worker: started first,
    # so that its imports run on the other core while this process imports its own
    worker = _start_worker() if args.bus is None else None
    try:
        return _run(args, fmt, worker)
    finally:
        if worker is not None:
            worker.discard()  # unless the dataset's engine took it (and closed it)


def _run(args: argparse.Namespace, fmt: str, worker: WorkerProcess | None) -> int:
    started = time.perf_counter()
    if args.bus is not None:
        _require_matplotlib()
        series = _from_bus(args)
    elif args.dataset is not None:
        series = _from_dataset(Path(args.dataset), args, worker)
    else:
        _require_matplotlib()
        series = _from_capture(args, worker)
    from hwbridge.plot import render

    if all(not s.t for s in series):
        raise CliError("no samples of " + ", ".join(s.name for s in series), EXIT_RUNTIME)
    data = render(series, fmt, width_px=args.width, title=args.title)
    out = Path(args.out)
    write_whole(out, data, "the picture")
    elapsed = time.perf_counter() - started
    for s in series:
        drawn = f", {len(s.t):,} drawn" if s.downsampled else ""
        print(f"{s.name}: {s.total:,} samples{drawn}", file=sys.stderr)
    print(f"wrote {out} ({len(data):,} bytes) in {elapsed:.2f} s")
    return EXIT_OK


# -- sources ---------------------------------------------------------------------------------


def _start_worker() -> WorkerProcess | None:
    try:
        from hwbridge.captures.sql.process import WorkerProcess
    except ImportError:  # said where the dataset is opened
        return None
    try:
        return WorkerProcess.start()
    except OSError:  # the engine starts one itself, and says why it cannot
        return None


def _require_matplotlib() -> None:
    from hwbridge.plot import PlotUnavailable, require_matplotlib

    try:
        require_matplotlib()
    except PlotUnavailable as exc:
        raise CliError(str(exc), EXIT_RUNTIME) from None


def _from_capture(args: argparse.Namespace, worker: WorkerProcess | None) -> list[Series]:
    try:
        from hwbridge.captures.bridge import DatabaseError
        from hwbridge.captures.decode import decode_captures
    except ImportError as exc:
        raise CliError(
            f"{exc.name or exc}: plotting a capture needs pip install 'mcs-hwbridge[captures]'",
            EXIT_RUNTIME,
        ) from None
    with tempfile.TemporaryDirectory(prefix="hwbridge-plot-") as tmp:
        try:
            summary = decode_captures([args.source], args.dbc, tmp)
        except (DatabaseError, ValueError) as exc:
            raise CliError(one_line(str(exc)), EXIT_USAGE) from exc
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            raise CliError(os_text(exc), EXIT_USAGE) from exc
        for f in summary.files:
            if not f.ok:
                print(f"hwbridge: {f.source}: {f.error}", file=sys.stderr)
        if not summary.rows:
            raise CliError(f"{args.source}: no frame matches the databases", EXIT_RUNTIME)
        return _from_dataset(Path(tmp), args, worker)


def _from_dataset(
    root: Path, args: argparse.Namespace, worker: WorkerProcess | None
) -> list[Series]:
    try:
        from hwbridge.captures.dataset import Dataset
        from hwbridge.captures.series import SeriesReader
        from hwbridge.captures.sql.engine import QueryLimits, SqlEngine
    except ImportError as exc:
        raise CliError(
            f"{exc.name or exc}: plotting a dataset needs pip install 'mcs-hwbridge[captures]'",
            EXIT_RUNTIME,
        ) from None
    from hwbridge.core.errors import ToolError

    try:
        dataset = Dataset.open(root)
    except FileNotFoundError as exc:
        raise CliError(f"--dataset: {exc}", EXIT_USAGE) from None
    limits = QueryLimits(timeout_s=120.0, spare_worker=False)
    engine = SqlEngine(dataset, limits, worker=worker)
    try:
        reader = SeriesReader(dataset, engine)
        try:
            refs = reader.resolve(args.signal)
        except ToolError as exc:
            raise CliError(f"--signal: {exc.message}", EXIT_USAGE) from None
        span = reader.span(refs)
        since = until = None
        if span is not None and args.start is not None:
            since = dt.datetime.fromtimestamp(span[0] + args.start, dt.UTC)
        if span is not None and args.end is not None:
            until = dt.datetime.fromtimestamp(span[0] + args.end, dt.UTC)

        def read() -> list[Series]:
            return [reader.series(r, args.width, since=since, until=until) for r in refs]

        from concurrent.futures import ThreadPoolExecutor

        # the worker answers (another process, another core) while matplotlib is imported
        with ThreadPoolExecutor(1, thread_name_prefix="hwbridge-plot") as pool:
            answer = pool.submit(read)
            try:
                _require_matplotlib()
                _warm_matplotlib()
                return answer.result()
            except ToolError as exc:
                raise CliError(f"{exc.code}: {exc.message}", EXIT_RUNTIME) from None
            except BaseException:  # Ctrl-C, no matplotlib: the reading ends now, not later
                engine.stop()
                raise
    finally:
        # the worker is killed and reaped (its memory freed by the kernel) while the picture
        # is drawn; the interpreter joins this thread before the process ends
        threading.Thread(target=engine.close, name="hwbridge-plot-close").start()


def _warm_matplotlib() -> None:
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401


def _database(args: argparse.Namespace) -> CanDatabase:
    from hwbridge.cli.options import database_path, load_database

    paths = list(args.dbc or [])
    if not paths:
        args.dbc = None
        paths = [database_path(args)]
    db = load_database(paths[0], debug=bool(args.debug))
    for path in paths[1:]:  # the first database that knows an id decodes it
        more = load_database(path, debug=bool(args.debug)).messages
        db = db.with_messages(
            [m for m in more if db.message_for_frame(m.frame_id, m.is_extended_frame) is None]
        )
    return db


def _from_bus(args: argparse.Namespace) -> list[Series]:
    from hwbridge.can import CanDriver
    from hwbridge.can.tools.series import frames_series, resolve_signals
    from hwbridge.core.errors import ToolError

    db = _database(args)
    try:
        specs = resolve_signals(db, args.signal)
    except ToolError as exc:
        raise CliError(f"--signal: {exc.message}", EXIT_USAGE) from None
    try:
        driver = CanDriver.from_dbc(db, bus=args.bus, history_s=args.duration + 5.0)
    except (ValueError, TypeError, ImportError, NotImplementedError) as exc:
        raise CliError(f"--bus: {one_line(str(exc))}") from exc
    except OSError as exc:
        raise CliError(f"cannot open {args.bus}: {os_text(exc)}", EXIT_RUNTIME) from exc
    with driver:
        monitor = next(iter(driver.networks.values())).reader.require_bus()
        begin = monitor.now()
        print(f"hwbridge: recording {args.bus} for {args.duration:g} s", file=sys.stderr)
        time.sleep(args.duration)
        start = begin + (args.start or 0.0)
        end = begin + args.end if args.end is not None else None
        frames = monitor.history(start=start, end=end)
    if not frames:
        raise CliError(f"{args.bus}: no frame in {args.duration:g} s", EXIT_RUNTIME)
    return frames_series(db, frames, specs, args.width)
