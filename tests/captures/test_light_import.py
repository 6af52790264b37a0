"""The runtime install stays light: importing hwbridge (or the CLI) loads no captures extra."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "duckdb", "dask", "distributed", "numpy", "asammdf")


def test_importing_hwbridge_does_not_import_the_captures_extras() -> None:
    code = (
        "import sys, hwbridge, hwbridge.captures, hwbridge.cli.main;"
        "hwbridge.cli.main.build_parser();"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
