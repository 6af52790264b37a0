"""How a capture's tables enter the dataset together, or not at all.

A capture is decoded into a staging folder of the dataset (`.hwbridge-staging/<source>/`,
hidden from every reader); when all its tables are written, `commit` swaps them in for the
capture's earlier rows, table by table, after writing a journal that says what the swap is.
The swap takes milliseconds and an interrupt (SIGINT, SIGTERM) waits for it; a process that
is killed in the middle leaves the journal, and `recover` (run by every decode before it
starts and after it is interrupted) finishes the swap from it. Staged tables without a
journal are work that was interrupted: `recover` deletes them. So a reader of the dataset
sees every capture whole (all its tables, all its rows, from one run) or not at all.

`.hwbridge-decoded/<source>.json` records what a committed capture was decoded from (the
file's size and time, the databases, the options) and its summary, so that running the same
decode again decodes only what is not in the dataset yet.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from hwbridge.captures.names import partition_value

__all__ = [
    "DECODED",
    "JOURNAL",
    "STAGING",
    "commit",
    "decoded_record",
    "recover",
    "staging_folder",
]

STAGING = ".hwbridge-staging"
JOURNAL = ".hwbridge-journal"
DECODED = ".hwbridge-decoded"
_PART = "part-0.parquet"
_MAX_RECORD_BYTES = 4 * 1024 * 1024  # a record or journal is a few kB; a bigger one is not ours


def staging_folder(out: Path, source: str) -> Path:
    """Where a capture's tables are written until they are committed."""
    return out / STAGING / partition_value(source)


def commit(out: Path, source: str, tables: list[str], record: Mapping[str, Any]) -> None:
    """Swap the staged `tables` (folder names) of `source` in for its earlier rows in every
    table, and keep `record` (what it was decoded from, its summary) beside them."""
    name = partition_value(source)
    journal = out / JOURNAL / f"{name}.json"
    with _signals_held():
        _write_json(journal, {"source": source, "tables": sorted(tables), "record": record})
        _roll_forward(out, journal)


def recover(out: Path) -> list[str]:
    """Finish every swap a killed process left half done, delete staged work that was never
    committed; the sources whose swap was finished."""
    finished: list[str] = []
    journals = out / JOURNAL
    if journals.is_dir():
        for journal in sorted(journals.glob("*.json")):
            source = _roll_forward(out, journal)
            if source is not None:
                finished.append(source)
    for folder in (journals, out / DECODED):  # a file being written when the process died
        for torn in folder.glob(".*.json.tmp") if folder.is_dir() else ():
            torn.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        journals.rmdir()  # when empty
    shutil.rmtree(out / STAGING, ignore_errors=True)
    return finished


def decoded_record(out: Path, source: str) -> dict[str, Any] | None:
    """What `source` was last decoded from, if it is in the dataset."""
    path = out / DECODED / f"{partition_value(source)}.json"
    try:
        if path.stat().st_size > _MAX_RECORD_BYTES:
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _roll_forward(out: Path, journal: Path) -> str | None:
    """Do (or finish) the swap a journal describes; idempotent: a staged table already moved
    is not touched again. The journal's source, or None for an unreadable journal."""
    try:
        if journal.stat().st_size > _MAX_RECORD_BYTES:  # not one this module wrote
            raise ValueError("too large")
        entry = json.loads(journal.read_text(encoding="utf-8"))
        source, tables, record = str(entry["source"]), list(entry["tables"]), entry["record"]
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)  # torn while written: the swap never began
        return None
    name = partition_value(source)
    partition = f"source={name}"
    staged = out / STAGING / name
    wanted = {str(t) for t in tables}
    for table in _table_folders(out):
        if table.name not in wanted:  # rows of a table this run has none of
            shutil.rmtree(table / partition, ignore_errors=True)
    for table_name in sorted(wanted):
        part = staged / table_name / _PART
        if not part.is_file():
            continue  # moved already, before the process was killed
        final = out / table_name / partition
        shutil.rmtree(final, ignore_errors=True)
        final.mkdir(parents=True, exist_ok=True)
        os.replace(part, final / _PART)
    _write_json(out / DECODED / f"{name}.json", record)
    shutil.rmtree(staged, ignore_errors=True)
    journal.unlink(missing_ok=True)
    return source


def _table_folders(out: Path) -> list[Path]:
    try:
        return [p for p in out.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
    except OSError:
        return []


def _write_json(path: Path, value: Any) -> None:
    """Written whole or not at all: a temporary file, synced, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done, then act as they would have (only in
    the main thread, the one Python runs signal handlers in; elsewhere the journal alone
    keeps the swap whole)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)  # now, with the handler the process had
