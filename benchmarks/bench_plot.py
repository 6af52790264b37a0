"""Pictures of a signal with ten million samples, and the series an LLM gets of it.

- `hwbridge plot --dataset DIR --signal Speed --out x.png`, the whole command in its own
  process as a user runs it (the signal downsampled in SQL in the query worker: per pixel
  column its first, last, minimum and maximum sample), against the obvious alternative in
  its own process: pyarrow reads the column and matplotlib draws every point into a PNG of
  the same size (Agg). Same run, alternating, best of `REPEATS`. Goals: at least 5x faster
  than matplotlib drawing every point, and under 3 s.

  The goal is judged against matplotlib with `path.simplify` off. With it on (matplotlib's
  default), Agg merges the segments of a line that stray less than a ninth of a pixel from
  it before drawing (`path.simplify_threshold`): matplotlib then no longer draws every
  point, it downsamples too, in its own way. Off, it draws every point, which is what the
  goal compares against. The default is measured in the same run and printed beside it,
  for reference. Each run's CPU seconds (the process and those it waited for: hwbridge
  plot's query worker) are printed too: on a machine shared with other work, where
  hwbridge plot's two processes lose their second core first, they say what each costs.
- `signal_timeseries` (200 points) through `CaptureDriver.process_llm_response` on the same
  10,000,000 rows, the worker started beforehand: best of `CALLS` (goal: under 0.5 s).

The dataset is written here with pyarrow (one table, a random walk at 1 kHz for 2.8 hours),
in a temporary folder.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from hwbridge.captures import CaptureDriver

ROWS = 10_000_000
REPEATS = 5
CALLS = 7
WIDTH_PX = 1200
ROOT = Path(__file__).resolve().parents[1]

EVERY_POINT = """
import sys
import matplotlib
import pyarrow.parquet as pq
from matplotlib.figure import Figure
from matplotlib.backends.backend_agg import FigureCanvasAgg
matplotlib.rcParams["path.simplify"] = sys.argv[3] == "simplify"
table = pq.read_table(sys.argv[1], columns=["timestamp", "Speed"])
t = table.column("timestamp").cast("int64").to_numpy() / 1e6
v = table.column("Speed").to_numpy()
fig = Figure(figsize=(12, 3.3), dpi=100, layout="constrained")
ax = fig.subplots()
ax.plot(t - t[0], v, linewidth=0.9)
ax.set_ylabel("km/h")
FigureCanvasAgg(fig)
fig.savefig(sys.argv[2], format="png")
"""


def _dataset(root: Path) -> Path:
    folder = root / "ds" / "Drive" / "source=long.blf"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    start = 1_700_000_000_000_000
    t = pa.array(start + np.arange(ROWS, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC"))
    speed = np.cumsum(rng.normal(size=ROWS)) / 10 + 80.0
    speed_field = pa.field("Speed", pa.float64(), metadata={"unit": "km/h"})
    schema = pa.schema([pa.field("timestamp", t.type), speed_field])
    pq.write_table(
        pa.table([t, pa.array(speed)], schema=schema),
        folder / "part-0.parquet",
        row_group_size=1_000_000,
    )
    return root / "ds"


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `command`: the CPU of the process and of every process it
    waited for (hwbridge plot's query worker is)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cpu = _cpu_of_children()
    started = time.perf_counter()
    done = subprocess.run(command, check=False, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed: {done.stderr.strip()[-400:]}")
    return elapsed, _cpu_of_children() - cpu


def _pictures(root: Path, ds: Path) -> None:
    ours_png, every_png = root / "ours.png", root / "every.png"
    part = next(ds.glob("Drive/*/part-0.parquet"))
    plot = [sys.executable, "-m", "hwbridge", "plot", "--dataset", str(ds), "--signal", "Speed"]
    plot += ["--width", str(WIDTH_PX), "--out", str(ours_png)]
    every = [sys.executable, "-c", EVERY_POINT, str(part), str(every_png), "every"]
    simplified = [*every[:3], str(part), str(root / "default.png"), "simplify"]
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "every": [], "default": []}
    for _ in range(REPEATS):
        runs["ours"].append(_timed(plot))
        runs["every"].append(_timed(every))
        runs["default"].append(_timed(simplified))
    best = {name: min(wall for wall, _ in times) for name, times in runs.items()}
    cpu = {name: min(used for _, used in times) for name, times in runs.items()}
    print(f"one signal of {ROWS:,} samples from a dataset into a {WIDTH_PX}-pixel PNG")
    for name, label in (
        ("ours", "hwbridge plot (SQL downsampling)        "),
        ("every", "pyarrow + matplotlib, every point drawn "),
        ("default", "the same, path.simplify on (the default)"),
    ):
        walls = [wall for wall, _ in runs[name]]
        print(f"  {label}  best {best[name]:6.2f} s  CPU {cpu[name]:5.2f} s   all {_list(walls)}")
    ours = best["ours"]
    print(
        f"  {best['every'] / ours:.1f}x faster than matplotlib drawing every point "
        f"(path.simplify off; goal: at least 5x); {cpu['every'] / cpu['ours']:.1f}x less CPU"
    )
    print(
        f"  {best['default'] / ours:.1f}x faster than matplotlib's default, whose path "
        "simplification leaves points out (reference, no goal)"
    )
    print(
        f"  hwbridge plot {ours:.2f} s (goal: under 3 s); "
        f"PNG {ours_png.stat().st_size:,} bytes against {every_png.stat().st_size:,} with every "
        "point drawn"
    )
    print(
        "  (wall times on two cores: hwbridge plot runs two processes at once, so other work "
        "on the machine slows it more than the one-process alternatives)"
    )


def _series(ds: Path) -> None:
    call = '{"tool": "signal_timeseries", "arguments": {"signal": "Speed", "max_points": 200}}'
    with CaptureDriver.from_dataset(ds, timeout_s=30.0) as driver:
        started = time.perf_counter()
        first = driver.process_llm_response(call)
        cold = time.perf_counter() - started
        assert first.call_executed, first.call_detail
        result = first.tool_call_result
        assert result["total"] == ROWS, result
        assert result["returned"] <= 200, result
        times = []
        for _ in range(CALLS):
            started = time.perf_counter()
            r = driver.process_llm_response(call)
            times.append(time.perf_counter() - started)
            assert r.call_executed, r.call_detail
    print(f"signal_timeseries, 200 points of {ROWS:,} rows, through process_llm_response")
    print(f"  first call (starts the worker) {cold:6.2f} s")
    print(f"  best of {CALLS} {min(times):6.3f} s, median {sorted(times)[CALLS // 2]:.3f} s")
    print(f"  goal: under 0.5 s: {min(times):.3f} s")


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        ds = _dataset(root)
        _pictures(root, ds)
        _series(ds)


if __name__ == "__main__":
    main()
