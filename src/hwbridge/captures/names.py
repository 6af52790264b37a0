"""Names in the dataset: columns, tables and source partitions that every reader accepts.

SQL engines (DuckDB, Spark, Trino, Athena) compare identifiers without regard to case, and
Hive-style readers skip folders that start with `_` or `.`; a signal called `Timestamp` or two
messages `Speed` and `SPEED` must still each get a column or table of their own.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

__all__ = [
    "RESERVED_COLUMNS",
    "ColumnNames",
    "partition_value",
    "source_from_partition",
    "table_folder",
]

RESERVED_COLUMNS = ("timestamp", "source")
_SAFE = "-_.~"  # everything else is %XX: no glob or path character reaches a folder name


class ColumnNames:
    """Hands out column names unique without regard to case; `timestamp`, `source` are taken."""

    def __init__(self, taken: tuple[str, ...] = RESERVED_COLUMNS) -> None:
        self._taken = {t.lower() for t in taken}

    def claim(self, wanted: str) -> str:
        name = wanted
        if name.lower() in self._taken:
            name = f"{wanted}_signal"
        n = 2
        while name.lower() in self._taken:
            name = f"{wanted}_{n}"
            n += 1
        self._taken.add(name.lower())
        return name


def table_folder(table: str) -> str:
    """The folder of a table: its name, escaped so no reader takes it for a hidden file."""
    folder = quote(table, safe=_SAFE)
    if folder[:1] in ("_", "."):
        folder = "%" + f"{ord(folder[0]):02X}" + folder[1:]
    return folder


def partition_value(source: str) -> str:
    """`source=<value>`: the capture's name percent-encoded, as Hive and pyarrow decode it."""
    return quote(source, safe=_SAFE)


def source_from_partition(value: str) -> str:
    return unquote(value)
