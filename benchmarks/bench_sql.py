"""The query tool under hostile SQL, and what the sandbox costs an ordinary query.

- Bombs: SQL that DuckDB does not interrupt, that allocates outside its `memory_limit`, or
  whose result is huge, each sent twice: through the `query` tool (where the allow-lists
  refuse some at once) and straight to the worker (`SqlEngine.run`, the checks bypassed, so
  the worker's own bounds are measured). For each: how long until it answered, how far the
  memory of this process and its workers grew over their idle size, and how long the next
  ordinary query took. Goals: within timeout + 1 s, within memory_limit + 200 MB, under 1 s.
- Cost: a plain query answering 1,000 rows through the worker (checks, process hop, rows
  sized and converted to JSON, decoded here) against the same query on DuckDB in this
  process, fetched as Python rows and encoded to the same JSON with the same encoder (goal:
  at most 1.5x), and against a bare `fetchall()` for reference.

The dataset is decoded here from a generated capture, in a temporary folder.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import orjson

from benchmarks.bench_captures import _dbc, _messages, _write
from hwbridge.captures import CaptureDriver, decode_captures
from hwbridge.captures.sql.results import json_row
from hwbridge.core.models import ToolError

TIMEOUT_S = 1.0
MEMORY_LIMIT = "256MB"
MEMORY_LIMIT_BYTES = 256 * 1000**2
FRAMES = 200_000
REPEATS = 30
PAGE = os.sysconf("SC_PAGE_SIZE")

BOMBS = [
    ("regexp over 50 MB", "SELECT length(regexp_replace(repeat('a', 50000000), 'a', 'bb', 'g'))"),
    (
        "regexp, allowed functions",
        "SELECT length(regexp_replace(string_agg('a', ''), 'a', 'bb', 'g')) FROM range(50000000)",
    ),
    ("lpad 1.5 GB", "SELECT lpad('x', 1500000000, 'y')"),
    ("list_sort 150M", "SELECT list_sort(range(150000000))"),
    ("list_distinct 100M", "SELECT list_distinct(range(100000000))"),
    ("huge result", "SELECT list({'a': true}) FROM range(4000000)"),
    ("wide rows", "SELECT string_agg('x', '') AS s FROM range(200000000)"),
    ("damerau 12k", "SELECT damerau_levenshtein(repeat('ab', 6000), repeat('ba', 6000))"),
    ("cross join", "SELECT count(*) FROM Msg1 a, Msg2 b, Msg4 c, Msg5 d"),
]


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as kids:
                found += [int(k) for k in kids.read().split()]
    except OSError:
        pass
    return found


def _total_rss() -> int:
    """This process and its workers (the active one, the spare)."""
    me = os.getpid()
    return _rss(me) + sum(_rss(child) for child in _children(me))


class _Peak:
    def __init__(self) -> None:
        self.base = _total_rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _total_rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


def _attempt(call: Callable[[], Any]) -> str:
    try:
        call()
    except ToolError as exc:
        return exc.code
    return "answered"


def _bombs(driver: CaptureDriver) -> None:
    engine = driver.engine
    ordinary = "SELECT count(*) FROM Msg1"
    engine.query(ordinary)  # the worker is up
    print(
        f"timeout {TIMEOUT_S:g} s, memory_limit {MEMORY_LIMIT}; growth = peak resident memory "
        "of this process and its workers over their idle size"
    )
    print(f"{'bomb':<26} {'path':<7} {'answer':<14} {'time':>7} {'growth':>9} {'next':>7}")
    worst_time = worst_growth = worst_next = 0.0
    for label, sql in BOMBS:
        for path, call in (
            ("tool", lambda sql=sql: engine.query(sql)),
            ("worker", lambda sql=sql: engine.run(sql)),
        ):
            peak = _Peak()
            started = time.perf_counter()
            answer = _attempt(call)
            elapsed = time.perf_counter() - started
            growth = peak.stop() / 1e6
            started = time.perf_counter()
            engine.query(ordinary)
            after = time.perf_counter() - started
            worst_time, worst_growth = max(worst_time, elapsed), max(worst_growth, growth)
            worst_next = max(worst_next, after)
            print(
                f"{label:<26} {path:<7} {answer:<14} {elapsed:>6.2f}s {growth:>6.0f} MB "
                f"{after:>6.3f}s"
            )
    limit_mb = MEMORY_LIMIT_BYTES / 1e6
    print(
        f"worst: {worst_time:.2f} s (goal <= {TIMEOUT_S + 1:g} s), growth {worst_growth:.0f} MB "
        f"(goal <= {limit_mb + 200:.0f} MB), next query {worst_next:.3f} s (goal < 1 s)"
    )


def _best(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _cost(driver: CaptureDriver) -> None:
    sql = "SELECT timestamp, source, A1, B1, C1, D1, E1, F1 FROM Msg1 ORDER BY timestamp LIMIT 1000"
    con = duckdb.connect(":memory:", config={"threads": 2})
    for name, table in driver.dataset.tables.items():
        con.register(name, table.arrow_dataset())
    con.execute("SET TimeZone = 'UTC'")

    def in_process() -> list[bytes]:
        return [json_row(row) for row in con.sql(sql).fetchall()]

    def bare() -> int:
        return len(con.sql(sql).fetchall())

    def sandboxed() -> list[list[Any]]:
        return driver.engine.query(sql).rows

    ours = sandboxed()
    assert len(ours) == 1000, len(ours)
    assert ours == [orjson.loads(r) for r in in_process()], "the worker and DuckDB disagree"
    t_ours, t_in, t_bare = _best(sandboxed), _best(in_process), _best(bare)
    print(f"1,000-row query, best of {REPEATS}:")
    print(f"  through the worker            {t_ours * 1e3:7.2f} ms")
    print(f"  DuckDB in process + JSON      {t_in * 1e3:7.2f} ms   ratio {t_ours / t_in:.2f}x")
    print(f"  DuckDB in process, fetchall() {t_bare * 1e3:7.2f} ms   ratio {t_ours / t_bare:.2f}x")
    print(f"  goal: at most 1.5x against DuckDB in process + JSON: {t_ours / t_in:.2f}x")
    con.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        dbc = root / "bench.dbc"
        dbc.write_text(_dbc())
        capture = _write(root / "drive.blf", _messages(FRAMES))
        decode_captures([capture], [dbc], root / "ds")
        with CaptureDriver.from_dataset(
            root / "ds", timeout_s=TIMEOUT_S, memory_limit=MEMORY_LIMIT
        ) as driver:
            _bombs(driver)
        with CaptureDriver.from_dataset(
            root / "ds", timeout_s=10.0, max_rows=1000, max_chars=1_000_000
        ) as driver:
            _cost(driver)


if __name__ == "__main__":
    main()
