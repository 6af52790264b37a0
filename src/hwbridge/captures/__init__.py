"""Recorded buses at scale: decode captures into a Parquet dataset, and ask it in SQL.

    from hwbridge.captures import decode_captures, CaptureDriver
    summary = decode_captures(["truck.MF4"], ["j1939.dbc"], "dataset/")
    driver = CaptureDriver.from_dataset("dataset/")

Needs the `captures` extra (pyarrow, duckdb, numpy, asammdf); `--dask` needs `dask`. Nothing
heavy is imported until a name below is used, so `import hwbridge` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwbridge.captures.decode import DecodeProgress, decode_captures
    from hwbridge.captures.driver import CaptureDriver
    from hwbridge.captures.frames import CaptureError
    from hwbridge.captures.summary import DecodeSummary, FileSummary

_LAZY = {
    "decode_captures": "hwbridge.captures.decode",
    "DecodeProgress": "hwbridge.captures.decode",
    "CaptureDriver": "hwbridge.captures.driver",
    "CaptureError": "hwbridge.captures.frames",
    "DecodeSummary": "hwbridge.captures.summary",
    "FileSummary": "hwbridge.captures.summary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hwbridge.captures' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CaptureDriver",
    "CaptureError",
    "DecodeProgress",
    "DecodeSummary",
    "FileSummary",
    "decode_captures",
]
