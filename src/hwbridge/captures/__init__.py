"""Recorded buses at scale: decode captures into a Parquet dataset, and ask it in SQL.

    from hwbridge.captures import decode_captures, CaptureDriver
    summary = decode_captures(["truck.MF4"], ["j1939.dbc"], "dataset/")
    driver = CaptureDriver.from_dataset("dataset/")

Needs the `captures` extra (pyarrow, duckdb, numpy, asammdf); `--dask` needs `dask`. Nothing
heavy is imported until a name below is used, so `import hwbridge` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbridge._lazy import lazy_package

if TYPE_CHECKING:
    from hwbridge.can.io.frames import CaptureError
    from hwbridge.captures.decode import DecodeProgress, decode_captures
    from hwbridge.captures.driver import CaptureDriver
    from hwbridge.captures.summary import DecodeSummary, FileSummary

# the public names are the imports above (written once): loaded on first use
__getattr__, __dir__ = lazy_package(globals())
