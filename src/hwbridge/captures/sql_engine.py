"""DuckDB over a dataset, locked so that SQL written by a model reads the dataset and nothing else.

What keeps a query in (each layer alone would already refuse the attacks it is tested with):

1. The tables are pyarrow datasets registered on the connection: DuckDB reads them through
   Arrow, so its own file system is not needed at all and is shut: `enable_external_access`
   is false from the moment the database is created (no `read_csv`, `read_text`, `read_blob`,
   `glob`, `read_parquet` of any path, no `COPY`, `ATTACH`, `EXPORT`, `INSTALL`, no network),
   extensions are neither installed nor loaded automatically, there is no temporary
   directory, Python objects are not scanned by name, and then `lock_configuration` makes
   every setting final (no `SET`, `RESET`, `PRAGMA` or `enable_*()` can change one).
2. DuckDB's own parser splits the text: exactly one statement, of type SELECT, is run (a
   comment or a string cannot hide a second one, since the parser, not a regex, decides).
3. The statement's syntax tree (DuckDB's `json_serialize_sql`) may only use the table
   functions `range`, `generate_series` and `unnest`; any other (file readers, `query`,
   metadata and settings functions) is refused before anything runs.
4. A timer interrupts a query that runs longer than the timeout; results are cut to a number
   of rows and of characters; the connection is rebuilt after an interruption, so the tool
   serves the next call as if nothing happened.

Refusals raise `ToolError("QUERY_REFUSED")`, timeouts `QUERY_TIMEOUT`, other failures
`QUERY_FAILED` with DuckDB's message. Calls are serialised on one connection (a DuckDB
connection is not for concurrent use); waiting for it counts against the timeout.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import orjson
import pyarrow as pa  # type: ignore[import-untyped]

from hwbridge.captures.dataset import Dataset
from hwbridge.core.models import ToolError

__all__ = ["QueryLimits", "QueryResult", "SqlEngine"]

ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
_PREFIXES = ("main", "memory", "memory.main")  # ways to qualify a table of the dataset
MAX_MESSAGE_CHARS = 600


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """Bounds of the query tool: time, rows and characters of a result, text of a query."""

    timeout_s: float = 10.0
    max_rows: int = 200
    max_chars: int = 10_000
    max_sql_chars: int = 8_000
    memory_limit: str = "2GB"
    threads: int = 2


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "truncated": self.truncated,
        }


def _refused(message: str) -> ToolError:
    return ToolError("QUERY_REFUSED", message[:MAX_MESSAGE_CHARS])


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:MAX_MESSAGE_CHARS]


def json_value(value: Any) -> Any:
    """A query result value as JSON: times as ISO 8601 (UTC), non-finite floats as null."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex(" ").upper()
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return str(value)


def _references(tree: Any) -> tuple[set[str], set[str], set[str]]:
    """(table functions, tables, common table expression names) in a serialized statement."""
    functions: set[str] = set()
    tables: set[str] = set()
    ctes: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if kind == "TABLE_FUNCTION":
                function = node.get("function")
                name = function.get("function_name") if isinstance(function, dict) else None
                functions.add(str(name).lower() if name else "?")
            elif kind == "BASE_TABLE":
                parts = [str(node.get(k) or "") for k in ("catalog_name", "schema_name")]
                prefix = ".".join(p for p in parts if p)
                name = str(node.get("table_name") or "")
                tables.add(f"{prefix}.{name}" if prefix else name)
            cte_map = node.get("cte_map")
            if isinstance(cte_map, dict):
                for entry in cte_map.get("map") or []:
                    if isinstance(entry, dict) and entry.get("key"):
                        ctes.add(str(entry["key"]).lower())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return functions, tables, ctes


def _close_all(connections: list[duckdb.DuckDBPyConnection]) -> None:
    for con in connections:
        with contextlib.suppress(duckdb.Error):
            con.close()


class SqlEngine:
    """The dataset's tables as views on a locked, in-memory DuckDB; thread-safe."""

    def __init__(self, dataset: Dataset, limits: QueryLimits | None = None) -> None:
        self.dataset = dataset
        self.limits = limits or QueryLimits()
        self._arrow = {name: t.arrow_dataset() for name, t in dataset.tables.items()}
        names = {n.lower() for n in self._arrow}
        self._table_names = names | {f"{prefix}.{n}" for n in names for prefix in _PREFIXES}
        self._lock = threading.Lock()
        self._guard = threading.Lock()  # the running query's token, for the timer
        self._running: object | None = None
        self._con = self._connect()
        # a driver dropped without close() still releases its connection
        self._holder = [self._con]
        self._finalizer = weakref.finalize(self, _close_all, self._holder)

    # -- the connection ------------------------------------------------------------------

    def _connect(self) -> duckdb.DuckDBPyConnection:
        config: dict[str, Any] = {
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "python_enable_replacements": False,
            "temp_directory": "",
            "threads": self.limits.threads,
            "memory_limit": self.limits.memory_limit,
        }
        con = duckdb.connect(":memory:", config=config)
        try:
            for name, data in self._arrow.items():
                con.register(name, data)
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET lock_configuration = true")
        except BaseException:
            con.close()
            raise
        return con

    def _reconnect(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self._con.close()
        self._con = self._connect()
        self._holder[:] = [self._con]

    def close(self) -> None:
        with self._lock:
            self._finalizer()

    # -- checks ------------------------------------------------------------------------

    def check(self, sql: str) -> str:
        """The one SELECT statement in `sql`, or ToolError QUERY_REFUSED / QUERY_FAILED."""
        if not isinstance(sql, str) or not sql.strip():
            raise _refused("The query is empty; send one SELECT statement.")
        if len(sql) > self.limits.max_sql_chars:
            raise _refused(f"The query is longer than {self.limits.max_sql_chars} characters.")
        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as exc:
            raise ToolError("QUERY_FAILED", f"The SQL does not parse: {_short(exc)}") from None
        if len(statements) != 1:
            raise _refused(
                f"The query holds {len(statements)} statements; exactly one SELECT is run."
            )
        statement = statements[0]
        kind = str(statement.type).rsplit(".", 1)[-1]
        if kind != "SELECT":
            raise _refused(
                f"Only SELECT queries are answered; this statement is of type {kind}. "
                "The dataset is read-only: nothing can be created, changed, set or loaded."
            )
        return str(statement.query)

    def _check_functions(self, statement: str) -> None:
        try:
            text = self._con.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()
            tree = json.loads(text[0][0])
        except (duckdb.Error, ValueError, IndexError) as exc:
            raise _refused(f"The query cannot be checked: {_short(exc)}") from None
        if tree.get("error"):
            message = str(tree.get("error_message") or "not a plain SELECT")
            raise _refused(f"The query cannot be checked: {message}")
        functions, tables, ctes = _references(tree)
        other = sorted(functions - ALLOWED_TABLE_FUNCTIONS)
        if other:
            raise _refused(
                f"Table function(s) {', '.join(other)} are not allowed: a query reads the "
                "dataset's tables only (range, generate_series and unnest are allowed)."
            )
        known = self._table_names | ctes
        strangers = sorted(t for t in tables if t.lower() not in known)
        if strangers:
            listed = ", ".join(repr(t[:80]) for t in strangers[:5])
            raise _refused(
                f"{listed} is not a table of the dataset; describe_dataset lists the tables."
            )

    # -- running -----------------------------------------------------------------------

    def query(self, sql: str) -> QueryResult:
        """Run model-written SQL under every lock; ToolError on refusal, timeout or failure."""
        statement = self.check(sql)
        return self._run(statement, None, checked=False)

    def run(self, sql: str, params: Sequence[Any] | None = None) -> QueryResult:
        """Run our own SQL (names quoted, values as parameters) with the same bounds."""
        return self._run(sql, params, checked=True)

    def _run(self, sql: str, params: Sequence[Any] | None, *, checked: bool) -> QueryResult:
        limits = self.limits
        if not self._lock.acquire(timeout=limits.timeout_s):
            raise ToolError(
                "QUERY_TIMEOUT",
                f"Other queries kept the dataset busy for {limits.timeout_s:g} s; try again.",
                retryable=True,
            )
        token = object()
        timer = threading.Timer(limits.timeout_s, self._interrupt, (token,))
        timer.daemon = True
        try:
            with self._guard:
                self._running = token
            timer.start()
            if not checked:
                self._check_functions(sql)
            table = self._fetch(sql, params)
        except duckdb.InterruptException:
            self._reconnect()
            raise ToolError(
                "QUERY_TIMEOUT",
                f"The query was stopped after {limits.timeout_s:g} s. Ask for less: filter on "
                "source or timestamp, aggregate (count, avg, min, max) or add LIMIT.",
                retryable=True,
            ) from None
        except duckdb.PermissionException as exc:
            raise _refused(f"The query tried to reach outside the dataset: {_short(exc)}") from None
        except duckdb.InvalidInputException as exc:
            if "configuration has been locked" in str(exc):
                raise _refused(f"Settings are locked: {_short(exc)}") from None
            raise ToolError("QUERY_FAILED", _short(exc)) from None
        except duckdb.OutOfMemoryException:
            self._reconnect()
            raise ToolError(
                "QUERY_FAILED",
                f"The query needs more than {limits.memory_limit} of memory; ask for less.",
            ) from None
        except duckdb.Error as exc:
            if "Connection" in type(exc).__name__ or "ResourceInUse" in type(exc).__name__:
                self._reconnect()
            raise ToolError("QUERY_FAILED", _short(exc)) from None
        finally:
            timer.cancel()
            with self._guard:
                self._running = None
            self._lock.release()
        return self._rows(table)

    def _interrupt(self, token: object) -> None:
        with self._guard:
            if self._running is token:
                self._con.interrupt()

    def _fetch(self, sql: str, params: Sequence[Any] | None) -> pa.Table:
        relation = self._con.sql(sql, params=list(params) if params is not None else None)
        if relation is None:  # not a query after all
            raise _refused("Only SELECT queries are answered.")
        return relation.limit(self.limits.max_rows + 1).to_arrow_table()

    def _rows(self, table: pa.Table) -> QueryResult:
        limits = self.limits
        columns = [str(c) for c in table.column_names]
        budget = limits.max_chars - len(orjson.dumps(columns))
        rows: list[list[Any]] = []
        truncated = table.num_rows > limits.max_rows
        shown = table.slice(0, limits.max_rows)
        values_by_column = [shown.column(i).to_pylist() for i in range(shown.num_columns)]
        for row in zip(*values_by_column, strict=True):
            values = [json_value(v) for v in row]
            size = len(orjson.dumps(values)) + 1
            if size > budget:
                truncated = True
                break
            budget -= size
            rows.append(values)
        return QueryResult(columns, rows, truncated)
