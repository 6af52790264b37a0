#!/usr/bin/env python3
"""Run the suite on a busy machine and report what it did not take.

    .ci/stress.py [RUNS] [-- PYTEST ARGS]     # default: 3 runs of `make pytest`'s command

CI machines and laptops are shared: a test that passes only while it has the cores to itself
fails for a user. This keeps one core busy with another process (a spinning Python loop)
while the suite runs, RUNS times, and reports each run's time, every test that failed, and
every test that took more than half of its timeout (pytest-timeout's, 120 s unless a test
says otherwise): the margin a loaded machine ate. Exits 1 if any run failed.

Run it before calling the suite steady; its numbers go in the note.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKERS = re.search(r"^WORKERS := (\d+)$", (ROOT / "Makefile").read_text(), re.M)
PYTEST = [
    str(ROOT / ".venv" / "bin" / "pytest"),
    *("-n", WORKERS.group(1) if WORKERS else "2"),
    *("--dist", "worksteal"),
]
DEFAULT_TIMEOUT_S = 120.0
PLUGIN = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    default = config.getini("timeout")
    for item in items:
        mark = item.get_closest_marker("timeout")
        value = mark.args[0] if mark and mark.args else mark.kwargs.get("timeout") if mark else None
        item.user_properties.append(("timeout", value if value is not None else default))
"""


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    """One core's worth of load, until told to stop."""
    while not stop.is_set():
        for _ in range(100_000):
            pass


def _results(report: Path) -> tuple[list[str], list[tuple[float, float, str]]]:
    """(the failed tests, (time, timeout, test) of those past half their timeout)."""
    failed: list[str] = []
    slow: list[tuple[float, float, str]] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            why = (problem.get("message") or "(no message)").splitlines()
            shown = "\n    ".join(line[:300] for line in why[:80])
            failed.append(f"{name}: {shown}")
        took = float(case.get("time") or 0.0)
        timeout = DEFAULT_TIMEOUT_S
        for prop in case.iter("property"):
            if prop.get("name") == "timeout":
                with contextlib.suppress(ValueError):
                    timeout = float(prop.get("value") or DEFAULT_TIMEOUT_S)
        if took > timeout / 2:
            slow.append((took, timeout, name))
    return failed, slow


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv and argv[0].isdigit() else 3
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    stop = multiprocessing.Event()
    busy = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    busy.start()
    bad = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plugin = Path(tmp) / "stress_timeouts.py"
            plugin.write_text(PLUGIN)
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")])),
                "PYTHONDONTWRITEBYTECODE": "",
            }
            for run in range(1, runs + 1):
                report = Path(tmp) / f"run{run}.xml"
                started = time.monotonic()
                done = subprocess.run(
                    [*PYTEST, "-p", "stress_timeouts", f"--junitxml={report}", *extra],
                    cwd=ROOT,
                    env=env,
                    check=False,
                    stdout=subprocess.DEVNULL,
                )
                took = time.monotonic() - started
                failed, slow = _results(report) if report.exists() else (["(no report)"], [])
                state = "passed" if done.returncode == 0 else f"FAILED (exit {done.returncode})"
                print(f"run {run}/{runs}: {state} in {took:.0f} s with one core kept busy")
                for name in failed:
                    print(f"  failed: {name}")
                for took_s, timeout_s, name in sorted(slow, reverse=True):
                    print(f"  slow: {name} took {took_s:.1f} s of its {timeout_s:g} s timeout")
                bad += done.returncode != 0
    finally:
        stop.set()
        busy.join(5)
    print(f"stress: {runs - bad} of {runs} runs passed under load")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
