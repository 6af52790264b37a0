"""A decoded dataset as the query side sees it: tables, their columns, rows, sources, time span.

Everything here comes from the Parquet files' footers and the folders, never from scanning
the rows: row counts and the time range are in the footers' statistics, units, ranges and
labels in the schema's field metadata that `decode_captures` wrote. A dataset written by
another tool (plain Hive-style Parquet with a `timestamp` column) opens too, just with fewer
descriptions.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from hwbridge.captures.names import source_from_partition

if TYPE_CHECKING:
    import pyarrow.dataset as pads  # type: ignore[import-untyped]

__all__ = ["Column", "Dataset", "NotADatasetError", "Table"]

SOURCE = "source"
TIMESTAMP = "timestamp"
_HIDDEN = ("_", ".")


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a table and what the database said about it."""

    name: str
    type: str
    signal: str | None = None
    unit: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    scale: float = 1.0
    offset: float = 0.0
    labels: dict[int, str] = field(default_factory=dict)  # raw value -> label
    label_column: str | None = None
    labels_of: str | None = None
    multiplexer: str | None = None
    comment: str | None = None

    @classmethod
    def of(cls, f: pa.Field) -> Column:
        meta = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}

        def number(key: str) -> float | None:
            try:
                return float(meta[key]) if key in meta else None
            except ValueError:
                return None

        labels: dict[int, str] = {}
        if "labels" in meta:
            try:
                labels = {int(k): str(v) for k, v in json.loads(meta["labels"]).items()}
            except (ValueError, TypeError, AttributeError):
                labels = {}
        type_text = "string" if pa.types.is_dictionary(f.type) else str(f.type)
        return cls(
            name=f.name,
            type=type_text,
            signal=meta.get("signal"),
            unit=meta.get("unit") or None,
            minimum=number("minimum"),
            maximum=number("maximum"),
            scale=number("scale") or 1.0,
            offset=number("offset") or 0.0,
            labels=labels,
            labels_of=meta.get("labels_of"),
            multiplexer=meta.get("multiplexer"),
            comment=meta.get("comment"),
        )

    @property
    def numeric(self) -> bool:
        return self.type.startswith(("int", "uint", "double", "float", "decimal"))


@dataclass(frozen=True, slots=True)
class Table:
    """One message's table: a view named `name` over the Parquet files under `folder`."""

    name: str
    folder: Path
    files: tuple[Path, ...]
    schema: pa.Schema
    columns: tuple[Column, ...]
    rows: int
    sources: tuple[str, ...]
    start: dt.datetime | None
    end: dt.datetime | None
    message: dict[str, str]

    def column(self, name: str) -> Column | None:
        lowered = name.lower()
        for column in self.columns:
            if column.name.lower() == lowered:
                return column
        return None

    def arrow_dataset(self) -> pads.Dataset:
        """The table as a pyarrow dataset (the `source` partition decoded from its folder).

        pyarrow.dataset is imported here, where the tables are registered (the query
        worker): importing it costs a third of a second, pandas included, which opening a
        dataset from its footers never needs. Column chunks are read as they are decoded,
        not pre-buffered whole (pre-buffering coalesces reads for object stores; on a local
        folder it only holds each row group's raw bytes in memory as well): a scan of ten
        million rows then peaks about 60 MB lower, and its first run in a process spends
        several times less time in the kernel mapping fresh memory."""
        import pyarrow.dataset as pads

        partitioning = pads.partitioning(pa.schema([(SOURCE, pa.string())]), flavor="hive")
        scan = pads.ParquetFragmentScanOptions(pre_buffer=False)
        return pads.dataset(
            [str(f) for f in self.files],
            schema=self.schema,
            format=pads.ParquetFileFormat(default_fragment_scan_options=scan),
            partitioning=partitioning,
            partition_base_dir=str(self.folder),
        )


_PER_US = {"milliseconds": (1000, 1), "microseconds": (1, 1), "nanoseconds": (1, 1000)}


def _raw_scale(meta: pq.FileMetaData, index: int) -> tuple[int, int] | None:
    """(multiply, divide) from the column's raw statistics to microseconds, for a timestamp
    stored as INT64 (what every writer of Parquet 2 does); None for anything else."""
    column = meta.schema.column(index)
    if column.physical_type != "INT64" or column.logical_type.type != "TIMESTAMP":
        return None
    try:
        unit = json.loads(column.logical_type.to_json()).get("timeUnit")
    except (ValueError, AttributeError):
        return None
    return _PER_US.get(unit)


def _timestamp_range(meta: pq.FileMetaData, index: int) -> tuple[Any, Any]:
    """The lowest and highest time in the footer's statistics: raw microseconds (int) where
    the column is an INT64 timestamp, else what pyarrow makes of them. Raw, because turning
    a timestamp with a zone into a datetime makes pyarrow import pandas (0.2 s) to ask
    whether it should be a pandas Timestamp."""
    scale = _raw_scale(meta, index)
    low = high = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max:
            return None, None
        if scale is None:
            lo, hi = stats.min, stats.max
        else:
            times, per = scale
            lo, hi = stats.min_raw * times // per, -(-stats.max_raw * times // per)
        low = lo if low is None else min(low, lo)
        high = hi if high is None else max(high, hi)
    return low, high


def _as_utc(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int):  # raw microseconds
        try:
            return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=value)
        except OverflowError:  # past year 9999: no time range rather than no dataset
            return None
    return None


class NotADatasetError(FileNotFoundError):
    """A folder that is not a dataset root; `found` is the root nearby, when there is one."""

    def __init__(self, message: str, found: Path | None = None) -> None:
        super().__init__(message)
        self.found = found


def _is_partition(name: str) -> bool:
    """`source=truck.MF4`: a Hive partition folder, never a table."""
    key, sep, _ = name.partition("=")
    return bool(sep and key) and not name.startswith(_HIDDEN)


def _table_files(folder: Path) -> list[Path]:
    """The Parquet files of a table folder: in it, or under `key=value` partition folders
    only. Files anywhere else (a virtual environment's test data, a nested dataset) are not
    the table's, so they are never read."""
    found: list[Path] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            entries = list(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(_HIDDEN):
                continue
            if entry.suffix == ".parquet" and entry.is_file():
                found.append(entry)
            elif _is_partition(entry.name) and entry.is_dir():
                pending.append(entry)
    return sorted(found)


def _table_folders(root: Path) -> list[Path]:
    """The sub-folders of `root` that hold a table (partition folders are no tables)."""
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    return [
        p
        for p in children
        if not p.name.startswith(_HIDDEN) and not _is_partition(p.name) and _table_files(p)
    ]


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(_HIDDEN))
    except OSError:
        return []


def _refusal(path: Path) -> NotADatasetError:
    """Why `path` is not a dataset root, naming the root nearby when there is one."""
    resolved = path.resolve()
    for ancestor in list(resolved.parents)[:3]:
        tables = _table_folders(ancestor)
        inside = next((t for t in tables if t == resolved or t in resolved.parents), None)
        if inside is not None:
            return NotADatasetError(
                f"{path} is not a dataset root: it is inside the table {inside.name} of the "
                f"dataset at {ancestor}; open that folder",
                ancestor,
            )
    below = [c for c in _children(resolved) if _table_folders(c)]
    if len(below) == 1:
        return NotADatasetError(
            f"{path} is not a dataset root: the dataset is one level below, at {below[0]}; "
            "open that folder",
            below[0],
        )
    if below:
        shown = ", ".join(str(b) for b in below[:5])
        more = f" and {len(below) - 5} more" if len(below) > 5 else ""
        return NotADatasetError(
            f"{path} is not a dataset root: it holds {len(below)} datasets ({shown}{more}); "
            "open one of them"
        )
    return NotADatasetError(
        f"{path} is not a dataset root: no table folder (<Table>/source=<capture>/*.parquet) "
        "in it; decode captures into it first (hwbridge decode ... --out DIR)"
    )


def _read_table(folder: Path) -> Table | None:
    files = _table_files(folder)
    if not files:
        return None
    schemas: list[pa.Schema] = []
    rows = 0
    sources: set[str] = set()
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    for path in files:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
        schemas.append(schema)
        rows += meta.num_rows
        for part in path.relative_to(folder).parts[:-1]:
            key, sep, value = part.partition("=")
            if sep and key == SOURCE:
                sources.add(source_from_partition(value))
        if TIMESTAMP in schema.names and meta.num_rows:
            low, high = _timestamp_range(meta, schema.names.index(TIMESTAMP))
            low_t, high_t = _as_utc(low), _as_utc(high)
            if low_t is not None and (start is None or low_t < start):
                start = low_t
            if high_t is not None and (end is None or high_t > end):
                end = high_t
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    if SOURCE not in schema.names:
        schema = schema.append(pa.field(SOURCE, pa.string()))
    meta_b = schemas[0].metadata or {}
    message = {
        k.decode().removeprefix("hwbridge."): v.decode()
        for k, v in meta_b.items()
        if k.startswith(b"hwbridge.")
    }
    name = message.get("table") or source_from_partition(folder.name)
    columns = {f.name: Column.of(f) for f in schema}
    for column in list(columns.values()):
        target = columns.get(column.labels_of or "")
        if target is not None:
            columns[target.name] = replace(target, label_column=column.name)
    return Table(
        name=name,
        folder=folder,
        files=tuple(files),
        schema=schema,
        columns=tuple(columns.values()),
        rows=rows,
        sources=tuple(sorted(sources)),
        start=start,
        end=end,
        message=message,
    )


class Dataset:
    """The tables of a dataset folder (one sub-folder per message), read from footers."""

    def __init__(self, root: Path, tables: list[Table]) -> None:
        self.root = root
        self.tables = {t.name: t for t in tables}
        self._lower = {t.name.lower(): t for t in tables}

    @classmethod
    def open(cls, root: str | Path) -> Dataset:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"no dataset folder at {path}")
        tables: list[Table] = []
        names: set[str] = set()
        for folder in _table_folders(path):
            try:
                table = _read_table(folder)
            except (pa.ArrowException, OSError) as exc:
                raise NotADatasetError(
                    f"{folder}: a table whose Parquet files cannot be read together: {exc}"
                ) from exc
            if table is None:
                continue
            if table.name.lower() in names:  # SQL names ignore case: keep them apart
                n = 2
                while f"{table.name}_{n}".lower() in names:
                    n += 1
                table = Table(**{**_fields(table), "name": f"{table.name}_{n}"})
            names.add(table.name.lower())
            tables.append(table)
        if not tables:
            raise _refusal(path)
        return cls(path, tables)

    def table(self, name: str) -> Table | None:
        return self.tables.get(name) or self._lower.get(name.lower())

    @property
    def sources(self) -> list[str]:
        return sorted({s for t in self.tables.values() for s in t.sources})

    @property
    def start(self) -> dt.datetime | None:
        starts = [t.start for t in self.tables.values() if t.start is not None]
        return min(starts) if starts else None

    @property
    def end(self) -> dt.datetime | None:
        ends = [t.end for t in self.tables.values() if t.end is not None]
        return max(ends) if ends else None


def _fields(table: Table) -> dict[str, Any]:
    return {name: getattr(table, name) for name in Table.__slots__}
