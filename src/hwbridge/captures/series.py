"""Signals of a dataset over time, downsampled in SQL: the rows never come to Python.

A window of a signal is cut into time buckets; per bucket DuckDB keeps the first, last,
minimum and maximum sample (`hwbridge.plot.series` says why that draws faithfully), so ten
million rows come back as a few thousand. A window that already fits comes back whole.
Names are resolved against the dataset before they reach SQL (quoted); times and counts
travel as parameters. The SQL runs on the dataset's engine (`SqlEngine.run`, the query
tool's worker and time and memory bounds), asking for answers with room for a series.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Sequence
from typing import Any

from hwbridge.captures.dataset import Dataset
from hwbridge.captures.questions import Questions, SignalRef, quote
from hwbridge.captures.sql.engine import SqlEngine
from hwbridge.core.errors import ToolError
from hwbridge.plot.series import Series, bucket_points

__all__ = ["MAX_SIGNALS", "SeriesReader"]

MAX_SIGNALS = 12
MAX_BUCKETS = 5_000
_ROWS = MAX_BUCKETS + 10
_CHARS = _ROWS * 200  # a bucket's row: seven numbers
_GLOB = frozenset("*?[")


def _us(value: dt.datetime) -> int:
    return round(value.timestamp() * 1_000_000)


class SeriesReader:
    """Signals of one dataset as `Series`, read through the dataset's engine."""

    def __init__(self, dataset: Dataset, engine: SqlEngine) -> None:
        self.dataset = dataset
        self.engine = engine
        self.questions = Questions(dataset, engine)

    def resolve(self, names: Sequence[str], limit: int = MAX_SIGNALS) -> list[SignalRef]:
        """Signals by name, `Table.Signal` or glob (`gnss_*.Lat*`, `*Speed`), each once, in
        the order named; UNKNOWN_SIGNAL for a name or glob that finds none, TOO_MANY_SIGNALS
        past `limit`."""
        found: dict[str, SignalRef] = {}
        for name in names:
            if _GLOB.isdisjoint(name):
                ref = self.questions.signal(name)
                found.setdefault(ref.qualified, ref)
                continue
            matched = self._glob(name.strip())
            if not matched:
                raise ToolError(
                    "UNKNOWN_SIGNAL",
                    f"no signal matches {name[:100]!r}; describe_dataset lists them",
                )
            for ref in matched:
                found.setdefault(ref.qualified, ref)
        refs = list(found.values())
        if len(refs) > limit:
            raise ToolError(
                "TOO_MANY_SIGNALS",
                f"{len(refs)} signals match; draw at most {limit} at once: "
                + ", ".join(r.qualified for r in refs[:limit])
                + ", ...",
            )
        return refs

    def _glob(self, pattern: str) -> list[SignalRef]:
        lowered = pattern.lower()
        out = []
        for table in self.dataset.tables.values():
            for column in table.columns:
                if column.labels_of is not None or column.name in ("timestamp", "source"):
                    continue
                if not column.numeric:
                    continue
                qualified = f"{table.name}.{column.name}".lower()
                target = qualified if "." in pattern else column.name.lower()
                if fnmatch.fnmatchcase(target, lowered):
                    out.append(SignalRef(table, column))
        return out

    def span(self, refs: Sequence[SignalRef]) -> tuple[float, float] | None:
        """The first and last time (seconds since the epoch) of the tables of `refs`."""
        starts = [r.table.start for r in refs if r.table.start is not None]
        ends = [r.table.end for r in refs if r.table.end is not None]
        if not starts or not ends:
            return None
        return min(starts).timestamp(), max(ends).timestamp()

    def series(
        self,
        ref: SignalRef,
        buckets: int,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        extremes_only: bool = False,
    ) -> Series:
        """`ref` from `since` to `until`, downsampled to `buckets` time buckets (per bucket
        first, last, minimum and maximum; only minimum and maximum with `extremes_only`)."""
        if not ref.column.numeric:
            raise ToolError("INVALID_VALUE", f"{ref.qualified} is not a number")
        buckets = max(1, min(int(buckets), MAX_BUCKETS))
        col = quote(ref.column.name)
        table = quote(ref.table.name)
        where = [f"{col} IS NOT NULL"]
        params: list[Any] = []
        if since is not None:
            where.append("timestamp >= ?")
            params.append(since)
        if until is not None:
            where.append("timestamp <= ?")
            params.append(until)
        condition = " AND ".join(where)
        column = ref.column
        labels = {k * column.scale + column.offset: v for k, v in column.labels.items()}
        # the buckets span the window within the table's time range (from the footers):
        # one scan of the rows, whatever their number
        low, high = ref.table.start, ref.table.end
        if low is None or high is None:
            return Series(ref.qualified, column.unit, [], [], 0, labels)
        if since is not None:
            low = max(low, since)
        if until is not None:
            high = min(high, until)
        first, last = _us(low), _us(high)
        span = max(last - first + 1, 1)
        edges = (
            f"min(epoch_us(timestamp)), arg_min({col}, timestamp), "
            f"max(epoch_us(timestamp)), arg_max({col}, timestamp), "
        )
        sql = f"""
            SELECT least(greatest((epoch_us(timestamp)::HUGEINT - ?) * ? // ?, 0), ?) AS k,
                   count(*),
                   {"NULL, NULL, NULL, NULL, " if extremes_only else edges}
                   epoch_us(arg_min(timestamp, {col})), min({col}),
                   epoch_us(arg_max(timestamp, {col})), max({col})
            FROM {table} WHERE {condition}
            GROUP BY k ORDER BY k
        """
        rows = self.engine.run(
            sql, [first, buckets, span, buckets - 1, *params], max_rows=_ROWS, max_chars=_CHARS
        ).rows
        total = sum(int(r[1]) for r in rows)
        per_bucket = 2 if extremes_only else 4
        if total <= buckets * per_bucket:
            rows = self.engine.run(  # it all fits: every sample
                f"SELECT epoch_us(timestamp), {col} FROM {table} "
                f"WHERE {condition} ORDER BY timestamp",
                params,
                max_rows=_ROWS,
                max_chars=_CHARS,
            ).rows
            return Series(
                ref.qualified,
                column.unit,
                [r[0] / 1e6 for r in rows],
                [float(r[1]) for r in rows],
                total,
                labels,
            )
        t, v = bucket_points([r[2:] for r in rows], extremes_only)
        return Series(ref.qualified, column.unit, t, v, total, labels)
