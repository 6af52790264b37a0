"""The query worker started before its tables are known (`WorkerProcess.start()`), as
`hwbridge plot` starts it: it serves the engine it is handed to with every bound as before,
it is ended when nobody takes it, and no worker loads pandas."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hwbridge.captures.dataset import Dataset
from hwbridge.captures.decode import decode_captures
from hwbridge.captures.sql.engine import QueryLimits, SqlEngine
from hwbridge.captures.sql.process import WorkerProcess, site_flags
from hwbridge.core.models import ToolError
from tests.captures.conftest import FLEET_DBC, drive, write_capture


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("early")
    dbc = root / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    decode_captures([write_capture(root / "drive.blf", drive(5.0))], [dbc], root / "ds")
    return root / "ds"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(worker: WorkerProcess) -> bool:
    return worker.proc.poll() is not None or not _alive(worker.pid)


def test_a_worker_started_early_serves_the_engine_within_its_bounds(dataset: Path) -> None:
    worker = WorkerProcess.start()
    limits = QueryLimits(timeout_s=1.0, spare_worker=False)
    engine = SqlEngine(Dataset.open(dataset), limits, worker=worker)
    try:
        assert engine.query("SELECT count(*) AS n FROM Engine").rows == [[50]]
        assert engine.sandbox.worker_pid == worker.pid  # the early process, no other
        with pytest.raises(ToolError) as stopped:  # still killed at the timeout
            engine.run("SELECT count(*) FROM range(100000000000) a")
        assert stopped.value.code == "QUERY_TIMEOUT"
        assert engine.sandbox.kills == 1 and _gone(worker)
        assert engine.query("SELECT 1 AS one").rows == [[1]]  # a new worker took over
    finally:
        engine.close()
    worker.discard()  # taken: the engine ended it, discarding does nothing more
    assert _gone(worker)


def test_a_worker_nobody_takes_is_ended(dataset: Path) -> None:
    worker = WorkerProcess.start()
    assert not _gone(worker)
    worker.discard()
    assert _gone(worker)


def test_the_engine_closes_a_worker_it_was_given_before_it_answered(dataset: Path) -> None:
    worker = WorkerProcess.start()
    engine = SqlEngine(Dataset.open(dataset), QueryLimits(spare_worker=False), worker=worker)
    engine.close()
    deadline = time.monotonic() + 10
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(worker)


def test_a_worker_process_is_handed_over_once(dataset: Path) -> None:
    worker = WorkerProcess.start()
    try:
        worker.take()
        with pytest.raises(RuntimeError, match="already"):
            worker.take()
    finally:
        worker.kill()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_the_worker_never_loads_pandas(dataset: Path) -> None:
    """pyarrow.dataset would import pandas as it loads (0.2 s of each start); the worker
    has no use for it. Its shared libraries would show in the worker's memory map."""
    engine = SqlEngine(Dataset.open(dataset), QueryLimits(spare_worker=False))
    try:
        answer = engine.run(
            "SELECT min(timestamp), arg_max(EngineSpeed, timestamp) FROM Engine", []
        )
        assert answer.rows[0][0].startswith("2023-11-14T22:13:20")
        pid = engine.sandbox.worker_pid
        assert pid is not None
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "pyarrow" in maps and "duckdb" in maps
        assert "/pandas/" not in maps
    finally:
        engine.close()


def test_stop_ends_the_query_in_progress_at_once(dataset: Path) -> None:
    """A caller that gives up (a command on Ctrl-C) kills the worker from another thread:
    the query fails now, not at its timeout, and the next query gets a new worker."""
    engine = SqlEngine(Dataset.open(dataset), QueryLimits(timeout_s=60.0, spare_worker=False))
    failed: list[str] = []

    def endless() -> None:
        try:
            engine.run("SELECT max(a.range + b.range) FROM range(1000000) a, range(1000000) b")
        except ToolError as exc:
            failed.append(exc.code)

    try:
        engine.query("SELECT 1 AS one")
        thread = threading.Thread(target=endless)
        thread.start()
        time.sleep(0.5)  # the query runs
        engine.stop()
        thread.join(timeout=10)
        assert not thread.is_alive() and failed == ["QUERY_FAILED"]
        assert engine.query("SELECT 2 AS two").rows == [[2]]
    finally:
        engine.close()


def test_stop_ends_a_worker_still_starting(dataset: Path) -> None:
    worker = WorkerProcess.start()
    engine = SqlEngine(Dataset.open(dataset), QueryLimits(spare_worker=False), worker=worker)
    try:
        engine.stop()  # the worker may not even have read its tables yet
        deadline = time.monotonic() + 10
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(worker)
    finally:
        engine.close()


def test_the_worker_skips_site_only_when_hwbridge_is_on_its_search_path() -> None:
    import hwbridge

    home = str(Path(hwbridge.__file__).resolve().parents[1])
    assert site_flags([home, "/elsewhere"]) == ["-S"]
    assert site_flags(["/elsewhere"]) == []  # reached through a hook of site: site stays
    assert site_flags() == ["-S"]  # this checkout: hwbridge is found by path
