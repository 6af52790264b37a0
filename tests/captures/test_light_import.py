"""The runtime install stays light: importing hwbridge (or the CLI) loads no captures extra."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pyarrow", "duckdb", "dask", "distributed", "numpy", "asammdf")


def test_importing_hwbridge_does_not_import_the_captures_extras() -> None:
    code = (
        "import sys, hwbridge, hwbridge.captures, hwbridge.cli.main;"
        "hwbridge.cli.main.build_parser();"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _write_dataset(root: Path, unit: str, tz: str | None, values: list[int]) -> Path:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    folder = root / "Drive" / "source=a.blf"
    folder.mkdir(parents=True)
    table = pa.table(
        {"timestamp": pa.array(values, pa.timestamp(unit, tz=tz)), "Speed": [1.0] * len(values)}
    )
    pq.write_table(table, folder / "part-0.parquet", row_group_size=2)
    return root


def test_opening_a_dataset_imports_neither_pandas_nor_pyarrow_dataset(tmp_path: Path) -> None:
    """What `hwbridge plot --dataset` loads before its query worker answers: the footers are
    read raw (pyarrow imports pandas to make a datetime of a timestamp with a zone),
    pyarrow.dataset (which imports pandas too) is the worker's alone, and raising a
    ToolError needs no pydantic."""
    root = _write_dataset(tmp_path, "us", "UTC", [1_700_000_000_000_000, 1_700_000_001_000_000])
    code = (
        "import sys; from hwbridge.captures.dataset import Dataset;"
        "from hwbridge.captures.series import SeriesReader;"
        "from hwbridge.captures.sql.engine import SqlEngine;"
        "import hwbridge.cli.main, hwbridge.cli.plot;"
        f"d = Dataset.open({str(root)!r}); print(d.start.isoformat(), d.end.isoformat());"
        "print([m for m in ('pandas', 'pyarrow.dataset', 'pydantic') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == [
        "2023-11-14T22:13:20+00:00 2023-11-14T22:13:21+00:00",
        "[]",
    ]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Berlin"])
def test_the_time_range_from_raw_footers_in_every_unit(
    tmp_path: Path, unit: str, tz: str | None
) -> None:
    from hwbridge.captures.dataset import Dataset

    per_s = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    base = 1_700_000_000 * per_s
    step = max(per_s // 1000, 1)  # a millisecond (or a second)
    values = [base + 5 * step, base + 2 * step, base + 9 * step, base + 7 * step, base + 3 * step]
    ds = Dataset.open(_write_dataset(tmp_path, unit, tz, values))
    start = dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    assert ds.start == start + dt.timedelta(seconds=2 * step / per_s)
    assert ds.end == start + dt.timedelta(seconds=9 * step / per_s)
    assert ds.start is not None and ds.start.utcoffset() == dt.timedelta(0)


def test_a_time_range_in_nanoseconds_is_widened_to_whole_microseconds(tmp_path: Path) -> None:
    from hwbridge.captures.dataset import Dataset

    base = 1_700_000_000 * 10**9
    ds = Dataset.open(_write_dataset(tmp_path, "ns", "UTC", [base + 1_500, base + 7_200]))
    start = dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
    assert ds.start == start + dt.timedelta(microseconds=1)
    assert ds.end == start + dt.timedelta(microseconds=8)


def test_the_command_line_parser_loads_no_terminal_library() -> None:
    """Every command starts by importing the CLI and building its parser: rich waits for a
    command that prints with it (30 ms of every start, before `hwbridge plot` can start its
    query worker)."""
    code = (
        "import sys, hwbridge.cli.main; hwbridge.cli.main.build_parser();"
        "print([m for m in sys.modules if m.split('.')[0] in ('rich', 'concurrent')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


_DECODE_CHILD = """
import atexit, runpy, sys
atexit.register(lambda: print(sorted(m for m in ('pandas', 'asammdf') if sys.modules.get(m)),
                              file=sys.stderr))
sys.argv = ['hwbridge'] + sys.argv[1:]
runpy.run_module('hwbridge', run_name='__main__')
"""


@pytest.mark.parametrize("suffix", [".blf", ".log", ".asc", ".csv", ".mf4"])
def test_hwbridge_decode_loads_neither_pandas_nor_asammdf(tmp_path: Path, suffix: str) -> None:
    """`hwbridge decode` of these never needs them (nor of a sorted MF4 file, as python-can
    writes them): pyarrow asks pandas about every
    pyarrow.array() argument (so columns are built from their buffers), and python-can's MF4
    support waits for an MF4 file. Together 70 MB and half a second of every decode."""
    from .conftest import FLEET_DBC, drive, write_capture

    capture = write_capture(tmp_path / f"drive{suffix}", drive(5.0))
    dbc = tmp_path / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    command = [sys.executable, "-c", _DECODE_CHILD, "decode", str(capture), "--dbc", str(dbc)]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "out")], capture_output=True, text=True, check=True
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"
