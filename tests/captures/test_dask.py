"""`decode_captures(..., dask=ADDRESS)` on a real dask.distributed cluster on loopback:
a `dask scheduler` and a `dask worker` process, and the same dataset as a local run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwbridge.captures import decode_captures

from .checks import read_table
from .conftest import drive, write_capture

DASK = Path(sys.executable).with_name("dask")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    info = tmp_path / "scheduler.json"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": tmp_path}
    scheduler = subprocess.Popen(
        [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(info)],
        **common,  # type: ignore[call-overload]
    )  # fmt: skip
    worker = None
    try:
        deadline = time.monotonic() + 30
        while not info.exists() or not info.read_text().strip():
            assert time.monotonic() < deadline, "the dask scheduler did not start"
            assert scheduler.poll() is None, "the dask scheduler exited"
            time.sleep(0.05)
        address = json.loads(info.read_text())["address"]
        worker = subprocess.Popen(
            [str(DASK), "worker", address, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard", "--host", "127.0.0.1", "--memory-limit", "1GB"],
            **common,  # type: ignore[call-overload]
        )  # fmt: skip
        yield address
    finally:
        if worker is not None:
            _stop(worker)
        _stop(scheduler)


def test_dask_writes_the_same_dataset_as_a_local_run(
    tmp_path: Path, fleet_dbc: Path, cluster: str
) -> None:
    captures = [write_capture(tmp_path / f"d{i}.blf", drive(3.0, start=1e9 + i)) for i in (1, 2)]
    local = decode_captures(captures, [fleet_dbc], tmp_path / "local")
    remote = decode_captures(captures, [fleet_dbc], tmp_path / "remote", dask=cluster)
    assert remote.ok and remote.rows == local.rows
    assert [f.source for f in remote.files] == ["d1.blf", "d2.blf"]
    for table in local.rows:
        assert read_table(tmp_path / "remote", table) == read_table(tmp_path / "local", table)


def test_no_scheduler_is_a_clear_error(
    tmp_path: Path, fleet_dbc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hwbridge.captures.decode.DASK_CONNECT_S", 1.0)
    capture = write_capture(tmp_path / "x.blf", drive(1.0))
    with pytest.raises(ConnectionError, match=r"no Dask scheduler answers at tcp://127\.0\.0\.1:9"):
        decode_captures([capture], [fleet_dbc], tmp_path / "ds", dask="tcp://127.0.0.1:9")
