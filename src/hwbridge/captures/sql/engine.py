"""Model-written SQL over a dataset, run where it can be stopped for certain.

What keeps a query in (each layer alone would already refuse the attacks it is tested with):

1. It runs in a worker process (`sql_worker`), never in this one. The worker's DuckDB is
   locked: the tables are pyarrow datasets registered on it, its own file system is shut
   (`enable_external_access` false: no `read_csv`, `read_text`, `glob`, `COPY`, `ATTACH`,
   `INSTALL`, no network), no extension loads, no temporary directory, and
   `lock_configuration` makes every setting final.
2. Allow-lists judged by DuckDB itself (`sql_checks`): exactly one SELECT (DuckDB's parser
   splits the text); every table it names is the dataset's or a CTE in scope, every function
   one an analyst needs (`sql_allowlist`), and DuckDB's bound plan scans nothing else.
3. Bounds the operating system enforces (`sql_sandbox`): the worker is killed at the timeout
   (SIGKILL, whatever function is running) and when its resident memory passes
   `memory_limit` plus a margin; it runs under an address-space limit; its result is sized in
   Arrow and cut to `max_rows`, `max_columns` and `max_chars` before any value becomes Python
   (`sql_results`). A spare worker takes over after a kill, so the next query answers normally.

Refusals raise `ToolError("QUERY_REFUSED")` naming what was refused, timeouts
`QUERY_TIMEOUT`, other failures `QUERY_FAILED` with DuckDB's message. Calls are serialised on
one worker; waiting for it counts against the timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hwbridge.captures.dataset import Dataset
from hwbridge.captures.sql.process import WorkerProcess
from hwbridge.captures.sql.results import json_value
from hwbridge.captures.sql.sandbox import QuerySandbox, SandboxLimits
from hwbridge.core.errors import ToolError

__all__ = ["QueryLimits", "QueryResult", "SqlEngine", "json_value"]

MAX_MESSAGE_CHARS = 600
MAX_RUN_ROWS = 100_000  # what our own SQL may ask for at most in one answer
MAX_RUN_CHARS = 8_000_000


@dataclass(frozen=True, slots=True)
class QueryLimits:
    """Bounds of the query tool: time, memory, rows, columns and characters of a result, text
    of a query."""

    timeout_s: float = 10.0
    max_rows: int = 200
    max_chars: int = 10_000
    max_sql_chars: int = 8_000
    memory_limit: str = "2GB"
    threads: int = 2
    max_columns: int = 100
    # a second worker kept started, so the query after a kill answers at once (a one-shot
    # command that asks once has no use for it)
    spare_worker: bool = True
    count_timeout_s: float = 2.0
    """How long counting a query's rows past `max_rows` may take (`total`); beyond it,
    or past 80% of `timeout_s` (at least 1 s before it), `total` is null and
    `total_at_least` says what is known."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    column_count: int | None = None
    total: int | None = None
    """The rows the query produces (counted, not fetched); None when not known."""
    total_at_least: int | None = None
    """When `total` is None: how many rows it is known to have at least."""

    def to_dict(self) -> dict[str, Any]:
        """`rows` with `returned` (and `row_count`, the same number, as before) and `total`:
        `truncated` says rows or columns were cut. `total` is null when counting did not
        end in time; then `total_at_least` bounds it from below."""
        out: dict[str, Any] = {
            "columns": self.columns,
            "rows": self.rows,
            "row_count": len(self.rows),
            "returned": len(self.rows),
            "total": self.total,
            "truncated": self.truncated,
        }
        if self.total is None and self.total_at_least is not None:
            out["total_at_least"] = self.total_at_least
        if self.column_count is not None and self.column_count > len(self.columns):
            out["column_count"] = self.column_count  # the columns not shown were cut
        return out


def _refused(message: str) -> ToolError:
    return ToolError("QUERY_REFUSED", message[:MAX_MESSAGE_CHARS])


def _short(text: str) -> str:
    return " ".join(text.split())[:MAX_MESSAGE_CHARS]


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


class SqlEngine:
    """The dataset's tables behind a sandboxed query worker; thread-safe."""

    def __init__(
        self,
        dataset: Dataset,
        limits: QueryLimits | None = None,
        *,
        worker: WorkerProcess | None = None,
    ) -> None:
        """`worker`: a worker process started beforehand (`WorkerProcess.start()`, while
        the caller imported and opened the dataset), which serves the first queries; the
        engine owns it from here on."""
        self.dataset = dataset
        self.limits = limits or QueryLimits()
        self.sandbox = QuerySandbox(
            list(dataset.tables.values()),
            SandboxLimits(
                memory_limit=self.limits.memory_limit,
                threads=self.limits.threads,
                max_rows=self.limits.max_rows,
                max_chars=self.limits.max_chars,
                max_columns=self.limits.max_columns,
                spare=self.limits.spare_worker,
            ),
            worker=worker,
        )

    def close(self) -> None:
        self.sandbox.close()

    def stop(self) -> None:
        """Kill the query worker now, from any thread: the query in progress fails at once
        (QUERY_FAILED) instead of running to its timeout; `close()` still follows."""
        self.sandbox.stop()

    def check(self, sql: str) -> str:
        """`sql` if it is worth sending to the worker; ToolError QUERY_REFUSED otherwise."""
        if not isinstance(sql, str) or not sql.strip():
            raise _refused("The query is empty; send one SELECT statement.")
        if len(sql) > self.limits.max_sql_chars:
            raise _refused(f"The query is longer than {self.limits.max_sql_chars} characters.")
        return sql

    def query(self, sql: str) -> QueryResult:
        """Run model-written SQL under every check and bound; ToolError on refusal, timeout or
        failure."""
        request = {
            "kind": "query",
            "sql": self.check(sql),
            "count_s": self.limits.count_timeout_s,
            "timeout_s": self.limits.timeout_s,
        }
        return self._call(request)

    def run(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        max_rows: int | None = None,
        max_chars: int | None = None,
    ) -> QueryResult:
        """Run our own SQL (names quoted, values as parameters) with the same bounds; a tool
        whose answers need more room (a series of points) may ask for more rows and
        characters, up to MAX_RUN_ROWS and MAX_RUN_CHARS."""
        request: dict[str, Any] = {"kind": "run", "sql": sql, "params": list(params or [])}
        if max_rows is not None:
            request["max_rows"] = max(1, min(int(max_rows), MAX_RUN_ROWS))
        if max_chars is not None:
            request["max_chars"] = max(1, min(int(max_chars), MAX_RUN_CHARS))
        return self._call(request)

    def _call(self, request: dict[str, Any]) -> QueryResult:
        answer = self.sandbox.call(request, self.limits.timeout_s)
        if not answer.get("ok"):
            code = str(answer.get("code") or "QUERY_FAILED")
            if code not in ("QUERY_REFUSED", "QUERY_FAILED"):
                code = "QUERY_FAILED"
            raise ToolError(code, _short(str(answer.get("message") or "the query failed")))
        try:
            columns = [str(c) for c in answer["columns"]]
            rows = [list(r) for r in answer["rows"]]
            return QueryResult(
                columns,
                rows,
                bool(answer["truncated"]),
                int(answer.get("column_count") or 0),
                _count(answer.get("total")),
                _count(answer.get("total_at_least")),
            )
        except (KeyError, TypeError, ValueError):
            raise ToolError("QUERY_FAILED", "The query worker gave no usable answer.") from None
