"""Writing one capture's rows into the Hive-style dataset, in bounded memory.

    DIR/<Table>/source=<capture name>/part-0.parquet

Each table of a capture gets one Parquet file, written row group by row group as decoded
chunks arrive: rows are buffered per table until a row group is full, and the largest buffer
is written early when all of them together pass the memory budget. The files are written in
the capture's staging folder; `hwbridge.captures.commit` swaps them into the dataset together
when the capture is done, so a reader never sees half a file or half a capture, and decoding
a capture again replaces its rows instead of adding them twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from hwbridge.captures.commit import staging_folder
from hwbridge.captures.names import table_folder

__all__ = ["DatasetWriter", "TablePlan"]

ROW_GROUP_ROWS = 131_072
BUFFER_BYTES = 16 * 1024 * 1024
WRITE_THREADS = 1
"""Row groups are compressed and written on threads (pyarrow releases the GIL), so writing
overlaps reading and decoding; each table's row groups are still written in order."""
MAX_WRITES_IN_FLIGHT = 2
PART_NAME = "part-0.parquet"
COMPRESSION = "zstd"  # as fast as snappy here, files half the size


class TablePlan(Protocol):
    """What the writer needs of a table: its name and its schema (a message's `MessagePlan`,
    or a table hwbridge writes itself, such as `j1939_dm`)."""

    @property
    def table(self) -> str: ...

    @property
    def schema(self) -> pa.Schema: ...


@dataclass(slots=True)
class _Table:
    plan: TablePlan
    final: Path
    temporary: Path
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0
    rows: int = 0
    last_write: Future[None] | None = None


class DatasetWriter:
    """Rows of one capture, per table, in its staging folder; `close()` completes the files
    and returns row counts (then `commit` them), `abort()` drops them."""

    def __init__(
        self,
        out: Path,
        source: str,
        *,
        row_group_rows: int = ROW_GROUP_ROWS,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.out = out
        self.source = source
        self.staging = staging_folder(out, source)
        self._row_group = row_group_rows
        self._budget = buffer_bytes
        self._tables: dict[str, _Table] = {}
        self._buffered = 0
        self._pool = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="hwbridge-parquet")
        self._in_flight: deque[Future[None]] = deque()

    def add(self, plan: TablePlan, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        table = self._tables.get(plan.table)
        if table is None:
            folder = self.staging / table_folder(plan.table)
            table = _Table(plan, folder / PART_NAME, folder / f".{PART_NAME}.tmp")
            self._tables[plan.table] = table
        size = batch.nbytes
        table.pending.append(batch)
        table.pending_rows += batch.num_rows
        table.pending_bytes += size
        self._buffered += size
        if table.pending_rows >= self._row_group:
            self._flush(table)
        while self._buffered > self._budget:
            largest = max(self._tables.values(), key=lambda t: t.pending_bytes)
            if not largest.pending_bytes:
                break
            self._flush(largest)

    def _flush(self, table: _Table) -> None:
        if not table.pending:
            return
        data = pa.Table.from_batches(table.pending, schema=table.plan.schema)
        table.rows += data.num_rows
        self._buffered -= table.pending_bytes
        table.pending, table.pending_rows, table.pending_bytes = [], 0, 0
        while len(self._in_flight) >= MAX_WRITES_IN_FLIGHT:
            self._in_flight.popleft().result()
        table.last_write = self._pool.submit(self._write, table, data, table.last_write)
        self._in_flight.append(table.last_write)

    def _write(self, table: _Table, data: pa.Table, previous: Future[None] | None) -> None:
        """On a writer thread: after the table's previous row groups, write these."""
        if previous is not None:
            previous.result()
        if table.writer is None:
            table.temporary.parent.mkdir(parents=True, exist_ok=True)
            table.writer = pq.ParquetWriter(
                table.temporary,
                table.plan.schema,
                compression=COMPRESSION,
                use_dictionary=[
                    f.name for f in table.plan.schema if pa.types.is_dictionary(f.type)
                ],
                write_statistics=True,
            )
        table.writer.write_table(data, row_group_size=self._row_group)

    def close(self) -> dict[str, int]:
        """Write what is buffered, complete every staged file; rows written per table."""
        try:
            for table in self._tables.values():
                self._flush(table)
            for future in self._in_flight:
                future.result()
            self._in_flight.clear()
            rows: dict[str, int] = {}
            for name, table in self._tables.items():
                if table.writer is not None:
                    table.writer.close()
                    os.replace(table.temporary, table.final)
                rows[name] = table.rows
            self._tables.clear()
            return rows
        finally:
            self._pool.shutdown(wait=True)

    def abort(self) -> None:
        """Drop what this capture wrote: nothing of it reaches the dataset."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for table in self._tables.values():
            if table.writer is not None:
                with contextlib.suppress(Exception):
                    table.writer.close()
        self._tables.clear()
        shutil.rmtree(self.staging, ignore_errors=True)
