"""Writing one capture's rows into the Hive-style dataset, in bounded memory.

    DIR/<Table>/source=<capture name>/part-0.parquet

Each table of a capture gets one Parquet file, written row group by row group as decoded
chunks arrive: rows are buffered per table until a row group is full, and the largest buffer
is written early when all of them together pass the memory budget. A file is written under
a hidden temporary name and renamed when complete, so a reader never sees half a file, and
decoding a capture again replaces its rows instead of adding them twice.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from hwbridge.captures.decoding import MessagePlan
from hwbridge.captures.names import partition_value, table_folder

__all__ = ["DatasetWriter", "clear_source"]

ROW_GROUP_ROWS = 131_072
BUFFER_BYTES = 48 * 1024 * 1024
PART_NAME = "part-0.parquet"
COMPRESSION = "zstd"


def clear_source(out: Path, source: str) -> None:
    """Remove the rows an earlier run wrote for `source`, in every table."""
    partition = f"source={partition_value(source)}"
    if not out.is_dir():
        return
    for table in out.iterdir():
        target = table / partition
        if table.is_dir() and target.is_dir():
            shutil.rmtree(target)


@dataclass(slots=True)
class _Table:
    plan: MessagePlan
    final: Path
    temporary: Path
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0
    rows: int = 0


class DatasetWriter:
    """Rows of one capture, per table; `close()` completes the files and returns row counts."""

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
        self._partition = f"source={partition_value(source)}"
        self._row_group = row_group_rows
        self._budget = buffer_bytes
        self._tables: dict[str, _Table] = {}
        self._buffered = 0

    def add(self, plan: MessagePlan, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        table = self._tables.get(plan.table)
        if table is None:
            folder = self.out / table_folder(plan.table) / self._partition
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
        table.rows += data.num_rows
        self._buffered -= table.pending_bytes
        table.pending, table.pending_rows, table.pending_bytes = [], 0, 0

    def close(self) -> dict[str, int]:
        """Write what is buffered, complete every file; rows written per table."""
        rows: dict[str, int] = {}
        for name, table in self._tables.items():
            self._flush(table)
            if table.writer is not None:
                table.writer.close()
                os.replace(table.temporary, table.final)
            rows[name] = table.rows
        self._tables.clear()
        return rows

    def abort(self) -> None:
        """Drop what this capture wrote (used when nothing of it should be kept)."""
        for table in self._tables.values():
            if table.writer is not None:
                table.writer.close()
            table.temporary.unlink(missing_ok=True)
        self._tables.clear()
