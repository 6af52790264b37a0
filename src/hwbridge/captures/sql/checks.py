"""The checks model-written SQL passes before it runs, each an allow-list judged by DuckDB itself.

1. DuckDB's parser splits the text: exactly one statement, of type SELECT (a comment or a string
   cannot hide a second one: the parser decides, not a regex).
2. The statement's syntax tree (`json_serialize_sql`) is walked with scope: every table it names
   is a table of the dataset or a common table expression visible where it is named (a CTE
   declared in a subquery does not cover the outer query, a CTE does not cover its own body),
   every function is in `sql_allowlist.ALLOWED_FUNCTIONS`, every table function in
   `ALLOWED_TABLE_FUNCTIONS`.
3. DuckDB binds the statement (`EXPLAIN (FORMAT JSON)`): every scan in the bound plan reads one
   of the dataset's Arrow tables or a row generator. This is the name resolution DuckDB will
   really use, so a name the walk above misjudged still cannot reach a system view.

Each refusal names what was refused. These run inside the query worker, under its limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb
import orjson

from hwbridge.captures.sql.allowlist import (
    ALLOWED_FUNCTIONS,
    ALLOWED_PLAN_FUNCTIONS,
    ALLOWED_TABLE_FUNCTIONS,
)

__all__ = ["CheckFailed", "Refused", "check_plan", "check_tree", "one_select"]

MAX_LISTED = 5
_TABLE_PREFIXES = ("", "main", "memory", "memory.main")  # ways to qualify a table of the dataset
# operators with no table or function inside them that a bound plan may start from
_PLAN_LEAVES = frozenset(
    {
        "DUMMY_SCAN",
        "EMPTY_RESULT",
        "COLUMN_DATA_SCAN",
        "CTE_SCAN",
        "REC_CTE_SCAN",
        "DELIM_SCAN",
        "CHUNK_SCAN",
        "EXPRESSION_SCAN",
    }
)


class Refused(Exception):
    """The query is not answered: it reaches for something outside the allow-lists."""


class CheckFailed(Exception):
    """The query does not parse or bind: DuckDB's own message, for the model to fix."""


def _listed(names: Iterable[str], *, quoted: bool = False) -> str:
    ordered = sorted(names)
    shown = ", ".join(repr(n[:60]) if quoted else n[:60] for n in ordered[:MAX_LISTED])
    more = len(ordered) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def one_select(sql: str) -> str:
    """The one SELECT statement in `sql`; Refused or CheckFailed otherwise."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise CheckFailed(f"The SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise Refused(f"The query holds {len(statements)} statements; exactly one SELECT is run.")
    statement = statements[0]
    kind = str(statement.type).rsplit(".", 1)[-1]
    if kind != "SELECT":
        raise Refused(
            f"Only SELECT queries are answered; this statement is of type {kind}. "
            "The dataset is read-only: nothing can be created, changed, set or loaded."
        )
    return str(statement.query)


def _tree(con: duckdb.DuckDBPyConnection, statement: str) -> Any:
    try:
        rows = con.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()
        tree = orjson.loads(rows[0][0]) if rows else None
    except duckdb.Error as exc:
        raise Refused(f"The query cannot be checked: {exc}") from None
    except orjson.JSONDecodeError:
        # orjson stops at 1,024 levels: deeper nesting is not checked, so not run
        raise CheckFailed("The query is nested too deeply; write it flatter.") from None
    if not isinstance(tree, dict):
        raise Refused("The query cannot be checked.")
    if tree.get("error"):
        message = str(tree.get("error_message") or "not a plain SELECT")
        raise Refused(f"The query cannot be checked: {message}")
    return tree


# what a FROM clause may hold (a node with a "sample" field is a table reference or a query)
_TABLE_REFS = frozenset(
    {"BASE_TABLE", "JOIN", "SUBQUERY", "TABLE_FUNCTION", "EXPRESSION_LIST", "EMPTY", "PIVOT"}
)
# SHOW_REF kinds that describe a query whose own tree is checked (DESCRIBE t, SUMMARIZE t)
_DESCRIBING = frozenset({"DESCRIBE", "SUMMARY"})
# functions that call an aggregate named by a string: the name must be allowed too
_NAMING_AGGREGATES = frozenset({"list_aggr", "list_aggregate", "array_aggr", "array_aggregate"})


class _Names:
    """What a statement's tree refers to that the allow-lists do not cover."""

    def __init__(self, tables: frozenset[str]) -> None:
        self.tables = tables
        self.functions: set[str] = set()
        self.table_functions: set[str] = set()
        self.strangers: set[str] = set()
        self.other: set[str] = set()
        self.parameters = False

    def visit(self, node: dict[str, Any], visible: frozenset[str]) -> None:
        kind = node.get("type")
        if kind == "TABLE_FUNCTION":
            function = node.get("function")
            name = function.get("function_name") if isinstance(function, dict) else None
            name = str(name or "?").lower()
            if name not in ALLOWED_TABLE_FUNCTIONS:
                self.table_functions.add(name)
        elif kind == "BASE_TABLE":
            self._table(node, visible)
        elif kind == "VALUE_PARAMETER":
            self.parameters = True
        elif kind == "SHOW_REF":
            # SHOW <setting> is bound to the setting's value: only DESCRIBE / SUMMARIZE of a
            # query (whose tree is walked like any other) are answered
            if node.get("show_type") not in _DESCRIBING or not node.get("query"):
                self.other.add(f"SHOW {str(node.get('table_name') or '')[:60]}".strip())
        elif "sample" in node and not str(kind).endswith("_NODE") and kind not in _TABLE_REFS:
            self.other.add(str(kind))  # a kind of table reference this check does not know
        if "function_name" in node and kind != "TABLE_FUNCTION":
            name = str(node.get("function_name") or "?").lower()
            if name not in ALLOWED_FUNCTIONS:
                self.functions.add(name)
            elif name in _NAMING_AGGREGATES:
                self._named_aggregate(node)

    def _named_aggregate(self, node: dict[str, Any]) -> None:
        arguments = node.get("arguments") or []
        expression = arguments[1].get("expression") if len(arguments) > 1 else None
        literal = expression.get("literal") if isinstance(expression, dict) else None
        name = literal.get("text") if isinstance(literal, dict) else None
        if not isinstance(name, str) or name.lower() not in ALLOWED_FUNCTIONS:
            self.functions.add(f"{node.get('function_name')} of {str(name)[:40]}")

    def _table(self, node: dict[str, Any], visible: frozenset[str]) -> None:
        catalog = str(node.get("catalog_name") or "").lower()
        schema = str(node.get("schema_name") or "").lower()
        name = str(node.get("table_name") or "")
        prefix = ".".join(p for p in (catalog, schema) if p)
        if not prefix and name.lower() in visible:
            return  # a common table expression in scope
        if prefix in _TABLE_PREFIXES and name.lower() in self.tables:
            return
        self.strangers.add(f"{prefix}.{name}" if prefix else name)


def _children(node: dict[str, Any], visible: frozenset[str]) -> list[tuple[Any, frozenset[str]]]:
    """The node's children with the names each may use: CTE scope as DuckDB binds it."""
    out: list[tuple[Any, frozenset[str]]] = []
    cte_map = node.get("cte_map")
    entries = cte_map.get("map") if isinstance(cte_map, dict) else None
    inner = visible
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("key") or "").lower()
        out.append((entry.get("value"), inner))  # a body sees the CTEs before it, not itself
        inner = inner | {name}
    if node.get("type") == "RECURSIVE_CTE_NODE":  # a recursive body sees itself
        inner = inner | {str(node.get("cte_name") or "").lower()}
    out.extend((value, inner) for key, value in node.items() if key != "cte_map")
    return out


def check_tree(con: duckdb.DuckDBPyConnection, statement: str, tables: frozenset[str]) -> None:
    """Refused unless every table, function and table function the statement names is allowed.

    `tables` are the dataset's table names, lower case."""
    names = _Names(tables)
    stack: list[tuple[Any, frozenset[str]]] = [(_tree(con, statement), frozenset())]
    while stack:
        node, visible = stack.pop()
        if isinstance(node, dict):
            names.visit(node, visible)
            stack.extend(_children(node, visible))
        elif isinstance(node, list):
            stack.extend((item, visible) for item in node)
    if names.parameters:
        raise Refused("The query has parameters ($1, ?); write the values into the SQL.")
    if names.other:
        raise Refused(
            f"{_listed(names.other)} is not answered: a query reads the dataset's tables "
            "(DESCRIBE <table> shows a table's columns)."
        )
    if names.table_functions:
        raise Refused(
            f"Table function(s) {_listed(names.table_functions)} are not allowed: a query reads "
            "the dataset's tables only (range, generate_series and unnest are allowed)."
        )
    if names.strangers:
        raise Refused(
            f"{_listed(names.strangers, quoted=True)}: not a table of the dataset; "
            "describe_dataset lists the tables."
        )
    if names.functions:
        raise Refused(
            f"Function(s) {_listed(names.functions)} are not allowed here: queries may use "
            "aggregates, window functions and the usual math, string, date/time, list and "
            "struct functions."
        )


def check_plan(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    """Refused unless DuckDB's bound plan reads only the dataset's tables and row generators."""
    prefix = "EXPLAIN (FORMAT JSON) "
    try:
        rows = con.execute(prefix + statement).fetchall()
    except duckdb.Error as exc:
        raise CheckFailed(str(exc).replace(prefix, "")) from None
    try:
        plans = [orjson.loads(row[1]) for row in rows]
    except (orjson.JSONDecodeError, IndexError, TypeError) as exc:
        raise Refused(f"The query plan cannot be checked: {exc}") from None
    outside: set[str] = set()
    stack: list[Any] = list(plans)
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        name = str(node.get("name") or "?")
        extra = node.get("extra_info")
        function = extra.get("Function") if isinstance(extra, dict) else None
        children = node.get("children") or []
        if function is not None and str(function) not in ALLOWED_PLAN_FUNCTIONS:
            outside.add(str(function))
        elif not children and function is None and name not in _PLAN_LEAVES:
            outside.add(name)
        stack.extend(children)
    if outside:
        raise Refused(
            f"The query reads {_listed(outside, quoted=True)}, which is not a table of the "
            "dataset; describe_dataset lists the tables."
        )
