"""A query's Arrow result as bounded JSON rows: sized in Arrow before any value becomes Python.

A single row can hold a list of millions of elements or a string of a gigabyte; turning it into
Python objects would cost more time and memory than the query itself. So each row's smallest
possible JSON size is computed first, column by column with Arrow's own lengths (one character
per number, a quarter per byte of text, the elements of lists, maps and structs summed through
their offsets), and only the rows that can fit the character budget are converted; their real
JSON size then decides exactly where the answer is cut.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

__all__ = ["bounded_rows", "json_row", "json_value", "row_costs"]

_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1
_NULL = 4.0  # len("null")


def json_value(value: Any) -> Any:
    """A query result value as JSON: times as ISO 8601 (UTC), non-finite floats as null,
    integers past 64 bits as their exact decimal text (JSON readers cannot hold them)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _UINT64_MAX else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        if value == value.to_integral_value():
            return json_value(int(value))
        return float(value)
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


def _nulls(array: pa.Array) -> npt.NDArray[np.bool_]:
    if array.null_count == 0:
        return np.zeros(len(array), np.bool_)
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), np.bool_)


def _per_row(child: npt.NDArray[np.float64], offsets: npt.NDArray[np.int64]) -> Any:
    """Sum of child costs between consecutive offsets, and the brackets."""
    sums = np.concatenate([[0.0], np.cumsum(child)])
    start = offsets[:-1] - offsets[0]
    end = offsets[1:] - offsets[0]
    return sums[end] - sums[start] + 2.0


def _costs(array: pa.Array) -> npt.NDArray[np.float64]:
    """A lower bound of each element's JSON size, in characters."""
    kind = array.type
    n = len(array)
    if n == 0:
        return np.zeros(0)
    if pa.types.is_dictionary(kind):
        values = _costs(array.dictionary)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        costs = values[indices] if len(values) else np.zeros(n)
    elif (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_binary_view(kind)
    ):
        lengths = pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False)
        per_byte = 0.25 if pa.types.is_string(kind) or pa.types.is_large_string(kind) else 2.0
        costs = lengths.astype(np.float64) * per_byte + 2.0
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), np.int64)
        child = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        if pa.types.is_map(kind):  # entries become [key, value] pairs
            key, item = child.flatten()
            costs = _per_row(_costs(key) + _costs(item) + 2.0, offsets)
        else:
            costs = _per_row(_costs(child), offsets)
    elif pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        child = array.values.slice(array.offset * size, n * size)
        offsets = np.arange(n + 1, dtype=np.int64) * size
        costs = _per_row(_costs(child), offsets)
    elif pa.types.is_struct(kind):
        costs = np.full(n, 2.0)
        for field, values in zip(kind, array.flatten(), strict=True):
            costs += _costs(values) + len(field.name) + 3.0  # "name":
    else:
        costs = np.ones(n)
    nulls = _nulls(array)
    return np.where(nulls, _NULL, costs) if nulls.any() else costs


def row_costs(table: pa.Table) -> npt.NDArray[np.float64]:
    """Each row's smallest possible JSON size (a lower bound, computed without Python values)."""
    total = np.full(table.num_rows, 2.0)
    for column in table.columns:
        if column.num_chunks:
            total += np.concatenate([_costs(chunk) for chunk in column.chunks])
    return total


def _default(value: Any) -> Any:
    """The JSON form of what orjson does not know itself (decimals, intervals, bytes)."""
    converted = json_value(value)
    if converted is value:
        raise TypeError(f"{type(value).__name__} is not a JSON value")
    return converted


def json_row(values: Any) -> bytes:
    """One row as JSON, exactly as `json_value` would give it (times in UTC with Z)."""
    return orjson.dumps(values, default=_default, option=orjson.OPT_UTC_Z)


def bounded_rows(
    table: pa.Table, max_rows: int, max_chars: int, exact_ints: frozenset[int] = frozenset()
) -> tuple[bytes, int, bool]:
    """The first rows of `table` as JSON within `max_rows` and `max_chars` characters (each
    row counts its length and a separator): the rows joined by commas (the inside of a JSON
    array), how many there are, and whether anything was left out. Columns in `exact_ints`
    hold integers as decimal text (HUGEINT, UHUGEINT: Arrow has no type for them) and come
    back as exact integers."""
    truncated = table.num_rows > max_rows
    table = table.slice(0, max_rows)
    budget = max_chars
    costs = np.cumsum(row_costs(table)) if table.num_rows else np.zeros(0)
    fit = int(np.searchsorted(costs, budget, side="right"))
    if fit < table.num_rows:
        truncated = True
        table = table.slice(0, fit)
    if not table.num_rows:
        return b"", 0, truncated
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    for i in exact_ints:
        columns[i] = [None if v is None else json_value(int(v)) for v in columns[i]]
    rows = list(zip(*columns, strict=True))
    whole = json_row(rows)
    if len(whole) - 1 <= budget:  # the usual case: every row fits, one call encodes them all
        return whole[1:-1], len(rows), truncated
    kept: list[bytes] = []
    for row in rows:
        data = json_row(row)
        if len(data) + 1 > budget:
            truncated = True
            break
        budget -= len(data) + 1
        kept.append(data)
    return b",".join(kept), len(kept), truncated
