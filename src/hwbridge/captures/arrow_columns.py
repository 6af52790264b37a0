"""numpy columns as Arrow arrays, built from their buffers.

`pyarrow.array()` asks pandas whether its argument is a pandas object, and so imports pandas
(about 45 MB and half a second) into a process that never uses it; decoding a capture only
ever hands pyarrow numpy arrays and a few label strings, which Arrow takes as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]

__all__ = ["column", "strings"]

_DTYPES: dict[Any, type[np.generic]] = {
    pa.float64(): np.float64,
    pa.float32(): np.float32,
    pa.int64(): np.int64,
    pa.int32(): np.int32,
    pa.int16(): np.int16,
    pa.int8(): np.int8,
    pa.uint64(): np.uint64,
    pa.uint32(): np.uint32,
    pa.uint16(): np.uint16,
    pa.uint8(): np.uint8,
}


def column(
    values: npt.NDArray[Any], type: Any, mask: npt.NDArray[np.bool_] | None = None
) -> pa.Array:
    """`values` (converted to the type's numpy dtype; they must fit it) as an Arrow array
    of `type`, null where `mask` is true. Numbers and timestamps only."""
    dtype = np.int64 if pa.types.is_timestamp(type) else _DTYPES[type]
    data = np.ascontiguousarray(values, dtype=dtype)
    validity = None
    nulls = 0
    if mask is not None:
        nulls = int(np.count_nonzero(mask))
        if nulls:
            validity = pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(type, len(data), [validity, pa.py_buffer(data)], null_count=nulls)


def strings(values: Sequence[str]) -> pa.Array:
    """Python strings as an Arrow string array."""
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )
