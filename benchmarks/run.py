"""Run the benchmarks: every `benchmarks/bench_*.py` module's `main()`, in name order.

    python benchmarks/run.py            # all of them (this is what `make bench` runs)
    python benchmarks/run.py core       # only the modules whose name contains "core"

A module that fails prints its traceback and the run goes on; the exit status is 1 when
any module failed, 2 when the filters matched nothing.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# Run as a script, sys.path[0] is benchmarks/ itself: put the repo root first so the
# modules import as `benchmarks.bench_*` (the names mypy and ruff know them by).
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def discover(filters: list[str]) -> list[str]:
    """Module stems (`bench_core`...) in name order, keeping those matching any filter."""
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if filters:
        names = [n for n in names if any(f in n for f in filters)]
    return names


def run_one(name: str) -> bool:
    """Import `benchmarks.<name>` and call its `main()`; False (traceback printed) on failure."""
    print(f"=== {name} ===", flush=True)
    start = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.{name}")
        main = getattr(module, "main", None)
        if not callable(main):
            raise TypeError(f"benchmarks/{name}.py has no main() function")
        main()
    except (Exception, SystemExit) as exc:
        # A benchmark calling sys.exit() must not end the run; sys.exit(0) is a success.
        if not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            sys.stdout.flush()
            traceback.print_exc()
            sys.stderr.flush()
            print(f"=== {name}: FAILED after {time.perf_counter() - start:.1f} s ===\n", flush=True)
            return False
    print(f"=== {name}: done in {time.perf_counter() - start:.1f} s ===\n", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    filters = list(sys.argv[1:] if argv is None else argv)
    if any(f in {"-h", "--help"} for f in filters):
        print(__doc__)
        return 0
    names = discover(filters)
    if not names:
        available = ", ".join(discover([])) or "none"
        print(f"no benchmark matches {filters!r} (available: {available})", file=sys.stderr)
        return 2
    failed = [name for name in names if not run_one(name)]
    if failed:
        print(f"{len(failed)} of {len(names)} benchmark module(s) failed: {', '.join(failed)}")
        return 1
    print(f"all {len(names)} benchmark module(s) ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
