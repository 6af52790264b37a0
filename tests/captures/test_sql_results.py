"""Result sizing: the Arrow-side size of a row never exceeds its JSON, so a cut made before
conversion never drops a row that would have fitted, and the JSON is always within budget."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.captures.sql.results import bounded_rows, json_value, row_costs

_SCALARS: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    (pa.bool_(), st.booleans()),
    (pa.string(), st.text(max_size=40)),
    (pa.binary(), st.binary(max_size=20)),
]


@st.composite
def typed_values(draw: st.DrawFn, depth: int = 2) -> tuple[pa.DataType, st.SearchStrategy[Any]]:
    kind = draw(st.sampled_from(["scalar", "list", "struct", "map"] if depth else ["scalar"]))
    if kind == "scalar":
        chosen: tuple[pa.DataType, st.SearchStrategy[Any]] = draw(st.sampled_from(_SCALARS))
        return chosen
    inner_type, inner = draw(typed_values(depth - 1))
    if kind == "list":
        return pa.list_(inner_type), st.lists(st.none() | inner, max_size=6)
    if kind == "map":
        return pa.map_(pa.string(), inner_type), st.dictionaries(
            st.text(max_size=5), st.none() | inner, max_size=4
        ).map(lambda d: list(d.items()))
    return pa.struct([("a", inner_type), ("bb", pa.int32())]), st.fixed_dictionaries(
        {"a": st.none() | inner, "bb": st.integers(-5, 5)}
    )


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    columns = {}
    rows = draw(st.integers(0, 12))
    for i in range(draw(st.integers(1, 4))):
        kind, values = draw(typed_values())
        data = draw(st.lists(st.none() | values, min_size=rows, max_size=rows))
        columns[f"c{i}"] = pa.array(data, type=kind)
    table = pa.table(columns)
    start = draw(st.integers(0, rows))
    return table.slice(start)  # sliced arrays keep their offsets: the sizing must respect them


def _json_size(table: pa.Table, row: int) -> int:
    values = [json_value(table.column(i)[row].as_py()) for i in range(table.num_columns)]
    return len(orjson.dumps(values))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(tables())
def test_the_arrow_size_of_a_row_is_at_most_its_json(table: pa.Table) -> None:
    costs = row_costs(table)
    assert len(costs) == table.num_rows
    for row in range(table.num_rows):
        assert costs[row] <= _json_size(table, row) + 1


@settings(max_examples=100, deadline=None)
@given(tables(), st.integers(1, 20), st.integers(10, 2000))
def test_bounded_rows_fit_and_say_when_cut(table: pa.Table, max_rows: int, chars: int) -> None:
    data, count, truncated = bounded_rows(table, max_rows, chars)
    rows = orjson.loads(b"[" + data + b"]")
    assert len(rows) == count <= max_rows
    assert sum(len(orjson.dumps(r)) + 1 for r in rows) <= chars
    if not truncated:
        assert len(rows) == table.num_rows
    for i, row in enumerate(rows):  # the rows shown are the table's first, exactly
        expected = [json_value(table.column(c)[i].as_py()) for c in range(table.num_columns)]
        assert row == orjson.loads(orjson.dumps(expected))
