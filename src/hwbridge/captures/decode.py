"""`decode_captures`: many captures into one Parquet dataset, here, in local processes or on Dask.

    summary = decode_captures(["truck.MF4"], ["j1939.dbc", "gps.dbc"], "dataset/")

Every capture is one task (see `file_task`); the three ways to run them differ only in where
the tasks run. A capture enters the dataset whole or not at all (`commit`): interrupted (Ctrl-C,
SIGTERM, a worker killed), a decode leaves only whole captures and raises `DecodeInterrupted`
saying which are in; run again, it decodes only the captures that are not.

The databases are loaded here first, so a bad database fails at once with a
clear error instead of once per worker. On Dask the workers must see the same paths (a
shared file system or object store mount) for the captures, the databases and `out`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.can.io.readers import check_capture
from hwbridge.captures.bridge import DatabaseError, DatabaseRepairWarning
from hwbridge.captures.commit import decoded_record, recover
from hwbridge.captures.file_task import DecodeTask, load_tables, run_task, task_stamp
from hwbridge.captures.summary import DecodeSummary, FileSummary

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["DecodeInterrupted", "DecodeProgress", "decode_captures", "source_names"]

PathLike = str | Path
DASK_CONNECT_S = 10.0
"""How long to wait for a Dask scheduler to answer."""
STOP_GRACE_S = 2.0
"""Interrupted, local workers get this long to drop the capture they are on; then they are
killed (what they wrote is dropped all the same)."""


class DecodeInterrupted(BaseException):
    """A decode was interrupted (Ctrl-C, SIGTERM): the dataset holds the captures of
    `done` whole and nothing of `missing`; `cause` is the interrupt. A BaseException, as the
    interrupt is: no `except Exception` takes it for a failed decode."""

    def __init__(
        self, out: Path, done: list[FileSummary], missing: list[str], cause: BaseException
    ) -> None:
        super().__init__(f"{len(done)} of {len(done) + len(missing)} captures are in {out}")
        self.out = out
        self.done = done
        self.missing = missing
        self.cause = cause


class DecodeProgress:
    """Hooks for showing progress; the default does nothing. The CLI draws rich bars."""

    def started(self, source: str, path: str) -> None:
        """A capture's task was handed to a worker."""

    def advanced(self, source: str, fraction: float) -> None:
        """A capture is `fraction` (0..1) read."""

    def finished(self, summary: FileSummary) -> None:
        """A capture is done (`summary.ok` says whether it was read to the end)."""


def source_names(paths: Sequence[Path]) -> list[str]:
    """Each capture's `source`: its file name, with as many parent folders as it takes to
    tell apart captures of the same name (CANedge names files 00000001.MF4 in every folder)."""
    depth = [1] * len(paths)
    parts = [p.resolve().parts for p in paths]

    def name(i: int) -> str:
        return "/".join(parts[i][-depth[i] :])

    while True:
        seen: dict[str, list[int]] = {}
        for i in range(len(paths)):
            seen.setdefault(name(i), []).append(i)
        clashes = [group for group in seen.values() if len(group) > 1]
        grown = False
        for group in clashes:
            for i in group:
                if depth[i] < len(parts[i]):
                    depth[i] += 1
                    grown = True
        if not clashes or not grown:
            return [name(i) for i in range(len(paths))]


def _load_databases(dbcs: Sequence[PathLike], isotp: bool) -> tuple[list[str], bool]:
    """Load every database once (DatabaseError names the file); their resolved paths, and
    whether one describes J1939 messages.

    The tables are cached per process, so the in-process run reuses them as they are.
    """
    resolved = [str(Path(dbc).expanduser().resolve()) for dbc in dbcs]
    for given, path in zip(dbcs, resolved, strict=True):
        if not Path(path).is_file():
            problem = "Is a directory" if Path(path).is_dir() else "No such file or directory"
            raise DatabaseError(given, None, f"cannot read the file: {problem}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatabaseRepairWarning)
        tables = load_tables(resolved, isotp=isotp)
    return resolved, tables.describes_j1939


def decode_captures(
    paths: Iterable[PathLike],
    dbcs: Iterable[PathLike],
    out: PathLike,
    workers: int = 1,
    dask: str | None = None,
    *,
    isotp: bool = False,
    j1939: bool | None = None,
    progress: DecodeProgress | None = None,
    force: bool = False,
) -> DecodeSummary:
    """Decode captures with databases into a Hive-style Parquet dataset at `out`.

    `workers` > 1 decodes that many captures at once in local processes; `dask` (a scheduler
    address such as "tcp://10.0.0.5:8786") runs the same tasks on a dask.distributed cluster.
    `isotp=True` reassembles ISO-TP transfers for messages longer than 8 bytes (UDS/OBD
    databases written for CANedge decoders). `j1939` reassembles the J1939 transport protocol
    (BAM and RTS/CTS) so multi-packet messages the databases describe are decoded into their
    tables, and writes the `j1939_dm` table (DM1 and DM2 trouble codes, one row per message
    and code); None (the default) turns it on when a database describes J1939 messages.
    A capture that breaks while it is read
    (truncated, corrupt) is reported in the summary with where it broke; the others are
    decoded all the same. Nothing is decoded when a capture cannot be opened at all: a
    missing one raises FileNotFoundError (IsADirectoryError for a folder), one of an unknown
    format ValueError; a database that does not load (or is missing) raises DatabaseError.

    A capture already in `out` from an earlier decode of the same file (size and time) with
    the same databases and options is not decoded again (its summary says `skipped`), unless
    `force`. Interrupted, the decode raises DecodeInterrupted once every capture in `out` is
    whole (within about STOP_GRACE_S).
    """
    captures = [Path(p).expanduser() for p in paths]
    databases = [Path(d) for d in dbcs]
    if not captures:
        raise ValueError("no capture to decode")
    if not databases:
        raise ValueError("decoding needs at least one database (--dbc)")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if dask is not None and workers != 1:
        raise ValueError("give workers (local processes) or dask (a cluster), not both")
    started = time.perf_counter()
    progress = progress or DecodeProgress()
    for path in captures:  # the caller's mistakes, before any work
        check_capture(path)
    resolved, describes_j1939 = _load_databases(databases, isotp)
    dbc_paths = tuple(resolved)
    with_j1939 = describes_j1939 if j1939 is None else bool(j1939)
    target = Path(out).expanduser().resolve()
    target.mkdir(parents=True, exist_ok=True)
    recover(target)  # what a killed decode left: its swap finished, its staged work dropped
    sources = source_names(captures)
    results: dict[int, FileSummary] = {}
    planned: dict[int, DecodeTask] = {}  # every capture that can be read
    tasks: dict[int, DecodeTask] = {}  # those to decode now
    for i, (path, source) in enumerate(zip(captures, sources, strict=True)):
        try:
            checked = check_capture(path)
        except (OSError, ValueError) as exc:
            results[i] = FileSummary(path=str(path), source=source, ok=False, error=_text(exc))
            progress.finished(results[i])
            continue
        task = planned[i] = DecodeTask(
            str(checked.resolve()), source, dbc_paths, str(target), isotp, j1939=with_j1939
        )
        earlier = None if force else _recorded(target, task)
        if earlier is not None:
            results[i] = earlier.model_copy(update={"skipped": True, "seconds": 0.0})
            progress.finished(results[i])
        else:
            tasks[i] = task
    try:
        _run(tasks, results, progress, workers=workers, dask=dask)
    except BaseException as exc:  # Ctrl-C, SIGTERM, an error: only whole captures stay
        recover(target)
        if isinstance(exc, Exception):
            raise
        raise _interrupted(target, captures, planned, results, exc) from exc
    recover(target)  # a worker killed on its own left staged work: dropped
    for i, task in tasks.items():  # a worker that died after its swap: the capture is in
        if not results[i].ok and (summary := _recorded(target, task)) is not None:
            results[i] = summary
    files = [results[i] for i in range(len(captures))]
    return DecodeSummary.of(target, files, time.perf_counter() - started)


def _run(
    tasks: dict[int, DecodeTask],
    results: dict[int, FileSummary],
    progress: DecodeProgress,
    *,
    workers: int,
    dask: str | None,
) -> None:
    """Run the tasks here, in local processes or on Dask, filling `results` as they end."""
    if dask is not None:
        results.update(_on_dask(dask, tasks, progress))
    elif workers > 1 and len(tasks) > 1:
        _in_processes(min(workers, len(tasks)), tasks, progress, results)
    else:
        for i, task in tasks.items():
            tables = load_tables(task.dbcs, isotp=task.isotp)
            progress.started(task.source, task.path)
            results[i] = run_task(task, _advance(progress, task.source), tables)
            progress.finished(results[i])


def _interrupted(
    out: Path,
    captures: list[Path],
    planned: dict[int, DecodeTask],
    results: dict[int, FileSummary],
    cause: BaseException,
) -> DecodeInterrupted:
    """What an interrupted decode leaves: what is in is what the dataset holds (a worker may
    have swapped a capture in and died by the same signal before its result came back)."""
    inside = {i: _in_dataset(out, task, results.get(i)) for i, task in planned.items()}
    done = [summary for summary in inside.values() if summary is not None]
    missing = [str(p) for i, p in enumerate(captures) if inside.get(i) is None]
    return DecodeInterrupted(out, done, missing, cause)


def _in_dataset(out: Path, task: DecodeTask, result: FileSummary | None) -> FileSummary | None:
    """The capture's summary if its rows are in `out` (from this run or an earlier one)."""
    if result is not None and result.skipped:
        return result
    return _recorded(out, task)


def _recorded(out: Path, task: DecodeTask) -> FileSummary | None:
    """The summary of the decode of this capture with these databases and options whose
    rows are in `out`, or None."""
    record = decoded_record(out, task.source)
    if record is None:
        return None
    try:
        if record.get("stamp") != task_stamp(task):
            return None
        summary = FileSummary.model_validate(record.get("summary"))
    except (OSError, ValueError):
        return None
    return summary if summary.path == task.path else None


def _text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def _advance(progress: DecodeProgress, source: str) -> Callable[[float], None]:
    return lambda fraction: progress.advanced(source, fraction)


# -- local processes ------------------------------------------------------------------------


_worker: dict[str, Any] = {}  # in a worker process: the stop event and the progress queue


def _start_worker(stop: Any, updates: Any) -> None:
    """A worker process's first step: the parent alone decides when to stop (Ctrl-C reaches
    the whole process group in a terminal): SIGINT is ignored, the stop event is asked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker["stop"], _worker["updates"] = stop, updates
    with contextlib.suppress(Exception):
        updates.put(("\0pid", os.getpid()))


def _task_in_process(task: DecodeTask) -> FileSummary:
    """Runs in a worker process: the task, with progress sent back through a queue."""
    stop, updates = _worker["stop"], _worker["updates"]
    last = [0.0]

    def report(fraction: float) -> None:
        if fraction - last[0] >= 0.01 or fraction >= 1.0:
            last[0] = fraction
            with contextlib.suppress(Exception):
                updates.put((task.source, fraction))

    return run_task(task, report, stop=stop.is_set)


def _in_processes(
    workers: int,
    tasks: dict[int, DecodeTask],
    progress: DecodeProgress,
    results: dict[int, FileSummary],
) -> None:
    """Run the tasks on `workers` local processes, filling `results` as they end. On an
    interrupt: no new task starts, the running ones are asked to drop their capture, and
    those still running after STOP_GRACE_S are killed."""
    import multiprocessing  # here: a decode of one capture never starts a process
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = multiprocessing.get_context("spawn")  # no fork of a threaded parent
    stop = context.Event()
    updates = context.Queue()
    pids: set[int] = set()
    running: dict[Future[FileSummary], int] = {}
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(stop, updates)
    ) as pool:
        try:
            for i, task in tasks.items():
                running[pool.submit(_task_in_process, task)] = i
                progress.started(task.source, task.path)
            pending = set(running)
            while pending:
                done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                _drain(updates, progress, pids)
                for future in done:
                    i = running[future]
                    results[i] = _outcome(future, tasks[i])
                    progress.finished(results[i])
            _drain(updates, progress, pids)
        except BaseException:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            _finish_or_kill(running, results, pids, updates, progress)
            raise
        finally:
            updates.cancel_join_thread()  # never wait on the queue's feeder at exit


def _finish_or_kill(
    running: dict[Future[FileSummary], int],
    results: dict[int, FileSummary],
    pids: set[int],
    updates: Any,
    progress: DecodeProgress,
) -> None:
    """Interrupted: let the running tasks end (a capture committed before the stop counts),
    then kill the workers that have not ended by STOP_GRACE_S."""
    from concurrent.futures import ALL_COMPLETED, wait

    started = [f for f in running if f.running() or f.done()]
    finished, _ = wait(started, timeout=STOP_GRACE_S, return_when=ALL_COMPLETED)
    _drain(updates, progress, pids)
    for future in finished:
        i = running[future]
        if i not in results and not future.cancelled() and future.exception() is None:
            results[i] = future.result()
    for pid in pids:  # whatever is still running: a killed worker's capture is dropped
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _drain(updates: Any, progress: DecodeProgress, pids: set[int]) -> None:
    while True:
        try:
            source, fraction = updates.get_nowait()
        except (queue.Empty, EOFError, OSError, ValueError):
            return
        if source == "\0pid":
            pids.add(int(fraction))
        else:
            progress.advanced(source, fraction)


def _outcome(future: Future[FileSummary], task: DecodeTask) -> FileSummary:
    try:
        return future.result()
    except Exception as exc:  # a worker that died (out of memory, killed)
        return FileSummary(
            path=task.path,
            source=task.source,
            ok=False,
            error=f"the worker decoding it failed: {type(exc).__name__}: {exc}",
        )


# -- Dask -----------------------------------------------------------------------------------


def _on_dask(
    address: str, tasks: dict[int, DecodeTask], progress: DecodeProgress
) -> dict[int, FileSummary]:
    try:
        from distributed import Client
    except ImportError:
        raise ImportError(
            "--dask needs dask.distributed: pip install 'mcs-hwbridge[dask]'"
        ) from None
    results: dict[int, FileSummary] = {}
    try:
        client = Client(address, timeout=f"{DASK_CONNECT_S}s", set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"no Dask scheduler answers at {address}: {exc}") from None
    with client:
        futures = {}
        for i, task in tasks.items():
            future = client.submit(run_task, task, pure=False)
            futures[future] = i
            progress.started(task.source, task.path)
        pending = dict(futures)
        while pending:
            done = [f for f in pending if f.done()]  # type: ignore[no-untyped-call]
            if not done:
                time.sleep(0.05)
                continue
            for future in done:
                i = pending.pop(future)
                try:
                    results[i] = future.result()
                except Exception as exc:
                    results[i] = FileSummary(
                        path=tasks[i].path,
                        source=tasks[i].source,
                        ok=False,
                        error=f"the Dask task failed: {type(exc).__name__}: {exc}",
                    )
                progress.finished(results[i])
    return results
