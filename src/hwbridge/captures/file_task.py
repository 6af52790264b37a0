"""Decoding one capture into the dataset: the unit of work of every way to run a decode.

A `DecodeTask` is a small picklable value (paths and options), so the same function runs
in this process, in a local worker process or on a Dask worker; each worker loads the
databases once and keeps them. A capture that breaks off keeps what was decoded before the
break and reports where it broke; the other captures are not affected. A capture enters the
dataset whole when its task ends (`hwbridge.captures.commit`); a task that is stopped or
interrupted leaves nothing of it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwbridge.can.io.frames import CaptureError, FrameChunk, coalesced, concat_chunks
from hwbridge.can.io.readers import open_capture
from hwbridge.captures.bridge import CanDatabase, DatabaseRepairWarning
from hwbridge.captures.commit import commit
from hwbridge.captures.isotp import IsoTpAssembler
from hwbridge.captures.names import table_folder
from hwbridge.captures.summary import MAX_UNKNOWN_IDS, FileSummary
from hwbridge.captures.tables import MessageTables, key_text
from hwbridge.captures.writer import DatasetWriter

__all__ = ["DecodeStopped", "DecodeTask", "load_tables", "run_task", "task_stamp"]

log = logging.getLogger(__name__)

Progress = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class DecodeTask:
    """One capture to decode: where it is, what it is called in the dataset, with what."""

    path: str
    source: str
    dbcs: tuple[str, ...]
    out: str
    isotp: bool = False
    fast: bool = True
    j1939: bool = False


class DecodeStopped(Exception):
    """The decode was asked to stop: the capture was left out of the dataset."""


def task_stamp(task: DecodeTask) -> dict[str, Any]:
    """What a decode of `task` depends on: the capture's size and time, each database's, the
    options. Equal stamps decode to the same rows."""

    def of(path: str) -> list[Any]:
        stat = os.stat(path)
        return [path, stat.st_size, stat.st_mtime_ns]

    return {
        "capture": of(task.path),
        "dbcs": [of(d) for d in task.dbcs],
        "isotp": task.isotp,
        "j1939": task.j1939,
        "fast": task.fast,
    }


def _stamp(paths: Sequence[str]) -> tuple[tuple[str, float], ...]:
    return tuple((p, os.stat(p).st_mtime) for p in paths)


@functools.lru_cache(maxsize=4)
def _tables(stamped: tuple[tuple[str, float], ...], isotp: bool) -> MessageTables:
    databases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatabaseRepairWarning)  # reported once, by the caller
        for path, _ in stamped:
            databases.append(CanDatabase.load(path))
    return MessageTables(databases, isotp=isotp)


def load_tables(dbcs: Sequence[str], *, isotp: bool = False) -> MessageTables:
    """The tables of these databases, loaded once per process (reloaded if a file changes)."""
    return _tables(_stamp([str(Path(d).resolve()) for d in dbcs]), isotp)


_DONE = object()


def prefetch(chunks: Iterator[FrameChunk]) -> Iterator[FrameChunk]:
    """Read the next chunk on a thread while this one is decoded (zlib, isal and pyarrow
    release the GIL); one chunk ahead at most, and the reader's errors arrive in order."""
    ahead: queue.Queue[Any] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        ahead.put(chunk, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ahead.put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            ahead.put(exc)

    thread = threading.Thread(target=produce, name="hwbridge-capture-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = ahead.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(queue.Empty):
                ahead.get(timeout=0.05)
        thread.join()


def run_task(
    task: DecodeTask,
    progress: Progress | None = None,
    tables: MessageTables | None = None,
    stop: Callable[[], bool] | None = None,
) -> FileSummary:
    """Decode `task.path` into `task.out`; never raises for a bad capture (see the summary).

    `stop()` is asked between chunks: when it says so, the capture is dropped and
    DecodeStopped raised; an interrupt (KeyboardInterrupt, any BaseException) drops it too."""
    started = time.perf_counter()
    if tables is None:
        tables = load_tables(task.dbcs, isotp=task.isotp)
    out = Path(task.out)
    counts: dict[str, int] = {"read": 0, "decoded": 0, "unknown": 0}
    unknown: Counter[int] = Counter()
    assembler = IsoTpAssembler(tables.isotp_keys)
    j1939 = _J1939(tables) if task.j1939 else None
    try:
        reader = open_capture(task.path, fast=task.fast)
    except CaptureError as exc:
        return _failed(task, exc.reason, exc.position, started)
    except (OSError, ValueError, ImportError, NotImplementedError) as exc:
        return _failed(task, str(exc), "start of file", started)
    try:  # from here on the reader is closed however this ends (a .mf4.gz's copy deleted)
        try:
            stamp = task_stamp(task)
        except OSError as exc:
            return _failed(task, str(exc), "start of file", started)
        writer = DatasetWriter(out, task.source)
        try:
            rows, error, position = _decode_all(
                task, reader, writer, tables,
                assembler=assembler, j1939=j1939, counts=counts, unknown=unknown,
                progress=progress, stop=stop,
            )  # fmt: skip
        except BaseException:
            writer.abort()
            raise
    finally:
        reader.close()
    errors, remotes = reader.counts.error_frames, reader.counts.remote_frames
    malformed_lines, malformed = reader.counts.malformed_lines, reader.counts.malformed
    malformed_frames = reader.counts.malformed_frames
    malformed = malformed + reader.counts.frame_notes
    if progress is not None:
        progress(1.0)
    summary = FileSummary(
        path=task.path,
        source=task.source,
        ok=error is None,
        error=error,
        position=position,
        frames_read=counts["read"] + errors + remotes,
        frames_decoded=counts["decoded"],
        unknown_frames=counts["unknown"],
        unknown_ids={key_text(k): n for k, n in unknown.most_common(MAX_UNKNOWN_IDS)},
        error_frames=errors,
        remote_frames=remotes,
        malformed_lines=malformed_lines,
        malformed=list(malformed),
        malformed_frames=malformed_frames,
        isotp_frames=assembler.stats.frames,
        isotp_transfers=assembler.stats.transfers,
        **(j1939.counts() if j1939 is not None else {}),
        rows={k: v for k, v in sorted(rows.items()) if v},
        seconds=round(time.perf_counter() - started, 3),
    )
    tables_written = [table_folder(name) for name in rows]
    record = {"stamp": stamp, "summary": summary.model_dump(mode="json")}
    # interrupted in the swap (only outside the main thread can it be), the staged files
    # stay for `recover`: it finishes the swap from the journal, or drops them without one
    commit(out, task.source, tables_written, record)
    return summary


def _decode_all(
    task: DecodeTask,
    reader: Any,
    writer: DatasetWriter,
    tables: MessageTables,
    *,
    assembler: IsoTpAssembler,
    j1939: _J1939 | None,
    counts: dict[str, int],
    unknown: Counter[int],
    progress: Progress | None,
    stop: Callable[[], bool] | None,
) -> tuple[dict[str, int], str | None, str | None]:
    """Read and decode the whole capture into the staged tables: rows per table, and why and
    where the capture broke off when it did."""
    error: str | None = None
    position: str | None = None
    try:
        for chunk in prefetch(coalesced(reader.chunks())):
            if stop is not None and stop():
                raise DecodeStopped(task.source)
            counts["read"] += len(chunk)
            plain, transfers = assembler.feed(chunk)
            for part in (plain, transfers):
                if part is not None:
                    _decode(part, tables, writer, counts, unknown)
            if j1939 is not None:
                j1939.feed(plain, writer)
            if progress is not None:
                progress(reader.progress)
    except CaptureError as exc:
        error, position = exc.reason, exc.position
    except DecodeStopped:
        raise
    except Exception as exc:  # a reader library failing on a damaged file
        log.debug("reading %s failed", task.path, exc_info=True)
        error, position = f"unreadable: {type(exc).__name__}: {exc}", reader.position
    assembler.finish()
    if j1939 is not None:
        j1939.tp.finish()
    return writer.close(), error, position


def _decode(
    chunk: FrameChunk,
    tables: MessageTables,
    writer: DatasetWriter,
    counts: dict[str, int],
    unknown: Counter[int],
) -> None:
    routed = tables.route(chunk)
    counts["decoded"] += routed.decoded
    for key, frames in routed.unknown.items():
        unknown[key] += frames
        counts["unknown"] += frames
    for table, rows in routed.groups:
        plan = tables.plans[table]
        batch = plan.decode(chunk.timestamp_us[rows], chunk.data[rows], chunk.length[rows])
        writer.add(plan, batch)


class _J1939:
    """J1939 over one capture: multi-packet messages reassembled and decoded into the tables
    that describe their PGN; DM1 and DM2 (single-frame and multi-packet) into `j1939_dm`."""

    def __init__(self, tables: MessageTables) -> None:
        # imported here: only captures a J1939 database describes need them
        from hwbridge.captures.j1939_dm import DmTable
        from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler

        self.tables = tables
        self.tp = J1939TpAssembler()
        self.dm = DmTable(tables.spn_names)
        self.dm_messages = 0

    def feed(self, chunk: FrameChunk, writer: DatasetWriter) -> None:
        from hwbridge.captures.j1939_dm import dm_mask
        from hwbridge.j1939.transport.tp_chunks import CHUNK_BYTES

        messages = self.tp.feed(chunk)
        frames = messages.frames() if len(messages) else []
        for part in frames:  # the reassembled messages a database describes
            routed = self.tables.route(part)
            for table, rows in routed.groups:
                plan = self.tables.plans[table]
                batch = plan.decode(part.timestamp_us[rows], part.data[rows], part.length[rows])
                writer.add(plan, batch)
        found = [c.take(dm_mask(c)) for c in (chunk, *frames)]
        found = [c for c in found if len(c)]
        if not found:
            return
        self.dm_messages += sum(len(c) for c in found)
        padded = sum(len(c) for c in found) * max(c.data.shape[1] for c in found)
        if len(found) > 1 and padded <= CHUNK_BYTES:  # single frames and reassembled, in order
            dms = concat_chunks(found)
            found = [dms.take(np.argsort(dms.timestamp_us, kind="stable"))]
        for part in found:
            writer.add(self.dm, self.dm.batch(part))

    def counts(self) -> dict[str, int]:
        return {
            "j1939_tp_frames": self.tp.stats.frames,
            "j1939_tp_completed": self.tp.stats.completed,
            "j1939_tp_aborted": self.tp.stats.aborted,
            "j1939_dm_messages": self.dm_messages,
        }


def _failed(task: DecodeTask, error: str, position: str, started: float) -> FileSummary:
    return FileSummary(
        path=task.path,
        source=task.source,
        ok=False,
        error=error,
        position=position,
        seconds=round(time.perf_counter() - started, 3),
    )
