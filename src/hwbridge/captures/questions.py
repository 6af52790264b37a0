"""The questions the capture tools answer with SQL of their own: a signal's statistics, the
intervals in which a condition holds, the dataset's description.

Names the model gives (signals, sources) are resolved against the dataset first and only then
put into SQL, quoted; values travel as parameters. So these tools cannot be steered into
arbitrary SQL, and they run under the same time and size bounds as `query`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from hwbridge.captures.dataset import Column, Dataset, Table
from hwbridge.captures.sql.engine import SqlEngine
from hwbridge.captures.sql.results import json_value
from hwbridge.core.errors import ToolError

__all__ = ["OPS", "Condition", "Questions", "SignalRef"]

OPS = (">", ">=", "<", "<=", "==", "!=")
_SQL_OPS = {
    ">": ">",
    ">=": ">=",
    "<": "<",
    "<=": "<=",
    "==": "=",
    "!=": "<>",
    "<>": "<>",
    "=": "=",
}
_CONDITION = re.compile(
    r"^\s*(?P<signal>[^\s<>=!]+)\s*(?P<op>>=|<=|==|!=|<>|>|<|=)\s*(?P<value>.+?)\s*$", re.S
)
MAX_EVENTS = 100
MAX_LISTED = 10
_DESCRIBE_CHARS = 11_000
_MAX_LABELS_SHOWN = 16


def quote(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class SignalRef:
    table: Table
    column: Column

    @property
    def qualified(self) -> str:
        return f"{self.table.name}.{self.column.name}"


@dataclass(frozen=True, slots=True)
class Condition:
    signal: SignalRef
    op: str  # SQL operator
    value: float
    text: str


def _utc(text: str | None, name: str) -> dt.datetime | None:
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(
            "INVALID_VALUE",
            f"{name} must be an ISO 8601 time such as 2021-10-25T19:01:00Z, not {text[:60]!r}",
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else json_value(value)


class Questions:
    """signal_stats, find_events and describe_dataset over one dataset and engine."""

    def __init__(self, dataset: Dataset, engine: SqlEngine) -> None:
        self.dataset = dataset
        self.engine = engine
        self._signals: dict[str, list[SignalRef]] = {}
        for table in dataset.tables.values():
            for column in table.columns:
                if column.labels_of is not None or column.name in ("timestamp", "source"):
                    continue
                self._signals.setdefault(column.name.lower(), []).append(SignalRef(table, column))

    # -- names ---------------------------------------------------------------------------

    def signal(self, name: str) -> SignalRef:
        """`Table.Signal` or a signal name found in one table only."""
        text = name.strip()
        found = self._signals.get(text.lower(), [])
        if not found and "." in text:
            table_name, _, column_name = text.rpartition(".")
            table = self.dataset.table(table_name)
            column = table.column(column_name) if table is not None else None
            if table is not None and column is not None and column.labels_of is None:
                return SignalRef(table, column)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            listed = ", ".join(r.qualified for r in found[:MAX_LISTED])
            raise ToolError(
                "AMBIGUOUS_SIGNAL", f"{text} is in {len(found)} tables; name one of {listed}"
            )
        names = sorted({refs[0].column.name for refs in self._signals.values()})
        close = difflib.get_close_matches(text.rpartition(".")[2], names, n=5, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; describe_dataset lists them"
        raise ToolError("UNKNOWN_SIGNAL", f"no signal named {text[:100]!r} in the dataset{hint}")

    def source(self, name: str | None, table: Table) -> str | None:
        if name is None:
            return None
        if name in table.sources:
            return name
        for known in table.sources:
            if known.lower() == name.strip().lower():
                return known
        listed = ", ".join(table.sources[:MAX_LISTED]) or "none"
        raise ToolError(
            "UNKNOWN_SOURCE",
            f"{table.name} has no rows from {name[:200]!r}; its sources: {listed}",
        )

    def condition(self, text: str) -> Condition:
        match = _CONDITION.match(text)
        if match is None:
            raise ToolError(
                "INVALID_VALUE",
                "condition must be SIGNAL OP VALUE with OP one of "
                f"{', '.join(OPS)}, e.g. EngineSpeed > 1500 or Gear == D",
            )
        ref = self.signal(match["signal"])
        column = ref.column
        if not column.numeric:
            raise ToolError("INVALID_VALUE", f"{ref.qualified} is not a number")
        raw = match["value"].strip().strip("'\"")
        value = _number(raw)
        if value is None:
            labels = {label.lower(): key for key, label in column.labels.items()}
            key = labels.get(raw.lower())
            if key is None:
                known = ", ".join(list(column.labels.values())[:24]) or "none"
                raise ToolError(
                    "INVALID_VALUE",
                    f"{ref.qualified} has no label {raw[:100]!r}; its labels are: {known}",
                )
            value = key * column.scale + column.offset  # the label's physical value
        op = match["op"]
        return Condition(ref, _SQL_OPS[op], value, f"{column.name} {op} {raw}")

    # -- tools ---------------------------------------------------------------------------

    def signal_stats(
        self,
        signal: str,
        source: str | None = None,
        start: str | None = None,
        end: str | None = None,
    ) -> dict[str, Any]:
        ref = self.signal(signal)
        if not ref.column.numeric:
            raise ToolError("INVALID_VALUE", f"{ref.qualified} is not a number")
        src = self.source(source, ref.table)
        since, until = _utc(start, "start"), _utc(end, "end")
        col = quote(ref.column.name)
        where: list[str] = [f"{col} IS NOT NULL"]
        params: list[Any] = []
        if src is not None:
            where.append("source = ?")
            params.append(src)
        if since is not None:
            where.append("timestamp >= ?")
            params.append(since)
        if until is not None:
            where.append("timestamp <= ?")
            params.append(until)
        sql = (
            f"SELECT count({col}), min({col}), max({col}), avg({col}), "
            f"min(timestamp), max(timestamp) FROM {quote(ref.table.name)} "
            f"WHERE {' AND '.join(where)}"
        )
        row = self.engine.run(sql, params).rows[0]
        out: dict[str, Any] = {
            "signal": ref.qualified,
            "count": row[0],
            "min": row[1],
            "max": row[2],
            "mean": row[3],
            "unit": ref.column.unit,
        }
        if src is not None:
            out["source"] = src
        out["first"], out["last"] = row[4], row[5]
        return out

    def find_events(
        self, condition: str, min_duration_ms: float, source: str | None = None
    ) -> dict[str, Any]:
        cond = self.condition(condition)
        ref = cond.signal
        src = self.source(source, ref.table)
        col = quote(ref.column.name)
        params: list[Any] = [cond.value]
        only = ""
        if src is not None:
            only = "AND source = ?"
            params.append(src)
        params += [float(min_duration_ms), MAX_EVENTS]
        sql = f"""
            WITH samples AS (
                SELECT source, timestamp, ({col} {cond.op} ?) AS hit
                FROM {quote(ref.table.name)}
                WHERE {col} IS NOT NULL {only}
            ), runs AS (
                SELECT source, timestamp, hit,
                       row_number() OVER (PARTITION BY source ORDER BY timestamp)
                     - row_number() OVER (PARTITION BY source, hit ORDER BY timestamp) AS run
                FROM samples
            ), events AS (
                SELECT source, min(timestamp) AS first, max(timestamp) AS last,
                       (epoch_us(max(timestamp)) - epoch_us(min(timestamp))) / 1000.0 AS ms
                FROM runs WHERE hit GROUP BY source, run
            )
            SELECT source, first, last, ms, count(*) OVER () AS total
            FROM events WHERE ms >= ?
            ORDER BY source, first
            LIMIT ?
        """
        result = self.engine.run(sql, params)
        events = [
            {"source": r[0], "start": r[1], "end": r[2], "duration_ms": round(r[3], 3)}
            for r in result.rows
        ]
        total = result.rows[0][4] if result.rows else 0
        return {
            "events": events,
            "signal": ref.qualified,
            "condition": cond.text,
            "unit": ref.column.unit,
            "total": total,
            "returned": len(events),
            "truncated": total > len(events),
        }

    def describe(self) -> dict[str, Any]:
        dataset = self.dataset
        head: dict[str, Any] = {
            "root": dataset.root.name,
            "sources": dataset.sources[:50],
            "source_count": len(dataset.sources),
            "start": _time(dataset.start),
            "end": _time(dataset.end),
            "common_columns": {"timestamp": "UTC time of the frame", "source": "capture file"},
        }
        tables = [self._table(t, detail=2) for t in dataset.tables.values()]
        text_size = len(str(tables))
        detail = 2
        while text_size > _DESCRIBE_CHARS and detail > -1:
            detail -= 1
            tables = [self._table(t, detail=detail) for t in dataset.tables.values()]
            text_size = len(str(tables))
        head["tables"] = tables
        if detail < 2:
            head["note"] = (
                "shortened to fit; query DESCRIBE <table> for one table's columns and types"
            )
        return head

    def _table(self, table: Table, detail: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": table.name, "rows": table.rows}
        if detail < 0:
            return out
        if "frame_id" in table.message:
            out["id"] = table.message["frame_id"]
        if "about" in table.message:  # a table hwbridge writes itself (j1939_dm)
            out["about"] = table.message["about"]
        out["sources"] = len(table.sources)
        out["start"], out["end"] = _time(table.start), _time(table.end)
        columns: list[Any] = []
        for column in table.columns:
            if column.name in ("timestamp", "source") or column.labels_of is not None:
                continue
            if detail == 0:
                columns.append(column.name)
                continue
            entry: dict[str, Any] = {"name": column.name, "type": column.type}
            if column.unit:
                entry["unit"] = column.unit
            if column.minimum is not None and detail > 1:
                entry["min"], entry["max"] = column.minimum, column.maximum
            if column.label_column:
                entry["label_column"] = column.label_column
                if detail > 1:
                    shown = list(column.labels.items())[:_MAX_LABELS_SHOWN]
                    entry["labels"] = {str(k): v for k, v in shown}
            if column.multiplexer and detail > 1:
                entry["multiplexed_by"] = column.multiplexer
            columns.append(entry)
        out["columns"] = columns
        return out
