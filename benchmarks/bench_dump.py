"""`hwbridge dump` against `cantools dump` on the same database, side by side.

    python benchmarks/run.py dump

Each command prints the whole database into a pipe, as a separate process (best of 3,
alternating), on opendbc's `ford_lincoln_base_pt.dbc` (331 messages; from ../shared, or the
bundled demo database when it is absent, said so). The goal: hwbridge at most as slow as
cantools (ratio = hwbridge / cantools <= 1.00x). Only the ratio carries over to another
machine. Before the signal tables were drawn by hand instead of rich Tables, the ratio was
about 1.9x.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORD = ROOT.parent / "shared" / "data" / "opendbc" / "ford_lincoln_base_pt.dbc"
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
REPEATS = 3
GOAL = 1.0


def _seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {done.stderr.decode()[-500:]}")
    return took


def main() -> None:
    database = FORD if FORD.is_file() else DEMO
    if database is DEMO:
        print(f"{FORD} is not there (../shared absent): timing the demo database instead")
    bin_dir = Path(sys.executable).parent
    hwbridge = [str(bin_dir / "hwbridge"), "dump", str(database)]
    cantools_exe = bin_dir / "cantools"
    cantools = [str(cantools_exe) if cantools_exe.exists() else shutil.which("cantools") or
                "cantools", "dump", str(database)]  # fmt: skip
    ours, theirs = [], []
    for _ in range(REPEATS):
        ours.append(_seconds(hwbridge))
        theirs.append(_seconds(cantools))
    best_ours, best_theirs = min(ours), min(theirs)
    ratio = best_ours / best_theirs
    print(f"database: {database.name}")
    print(f"{'hwbridge dump':<16} {best_ours:7.3f} s (best of {REPEATS})")
    print(f"{'cantools dump':<16} {best_theirs:7.3f} s (best of {REPEATS})")
    verdict = "meets" if ratio <= GOAL else "misses"
    print(f"ratio hwbridge / cantools: {ratio:.2f}x ({verdict} the goal of {GOAL:.2f}x)")
