"""`hwbridge decode` interrupted at any moment leaves a dataset that tells the truth: every
capture in it whole (all its tables, all its rows) or absent, a line saying how many are in,
and the same command again completes it without a duplicated row. Interrupted as a terminal
does it (SIGINT to the whole process group, workers included), by SIGTERM, and by a worker
killed outright."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from hwbridge.captures.commit import DECODED, JOURNAL, STAGING
from hwbridge.captures.decode import STOP_GRACE_S, decode_captures
from tests.captures.conftest import FLEET_DBC, drive, write_capture
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CAPTURES = 14
Rows = dict[str, dict[str, int]]  # source -> table -> rows


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path, dict[str, int]]:
    """14 captures of 45,000 frames (copies of one), the database, and the tables and rows
    one capture decodes to."""
    folder = tmp_path_factory.mktemp("fleet")
    dbc = folder / "fleet.dbc"
    dbc.write_text(FLEET_DBC)
    first = write_capture(
        folder / "c00.log",
        itertools.chain.from_iterable(
            drive(seconds=70, period=0.01, start=1.7e9 + 70 * k) for k in range(3)
        ),
    )
    captures = [first]
    for i in range(1, CAPTURES):
        captures.append(Path(shutil.copy(first, folder / f"c{i:02d}.log")))
    one = decode_captures([first], [dbc], folder / "reference")
    return captures, dbc, dict(one.files[0].rows)


def dataset_rows(out: Path) -> Rows:
    """Rows per capture and table, read from the Parquet files a reader of the dataset sees."""
    found: Rows = {}
    for table in out.iterdir():
        if table.name.startswith((".", "_")) or not table.is_dir():
            continue
        for partition in table.iterdir():
            source = partition.name.removeprefix("source=")
            for part in partition.glob("*.parquet"):
                rows = pq.read_metadata(part).num_rows
                tables = found.setdefault(source, {})
                tables[table.name] = tables.get(table.name, 0) + rows
    return found


def assert_whole(out: Path, expected: dict[str, int]) -> set[str]:
    """Every capture in the dataset has all its tables with all their rows; the captures."""
    rows = dataset_rows(out)
    for source, tables in rows.items():
        assert tables == expected, f"{source} is in the dataset in part: {tables}"
    assert not (out / STAGING).exists() or not any((out / STAGING).iterdir())
    assert not (out / JOURNAL).exists() or not any((out / JOURNAL).iterdir())
    return set(rows)


def command(captures: list[Path], dbc: Path, out: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "hwbridge", "decode", *map(str, captures), "--dbc", str(dbc),
            "--out", str(out), "--workers", str(workers)]  # fmt: skip


def staged(out: Path) -> bool:
    """A capture is being written."""
    try:
        return any((out / STAGING).glob("*/*/*"))
    except FileNotFoundError:  # a folder went while it was walked
        return False


def committed(out: Path) -> bool:
    """At least two captures are in, and more are being written."""
    try:
        return len(list((out / DECODED).glob("*.json"))) >= 2 and staged(out)
    except FileNotFoundError:
        return False


def rerun_completes(captures: list[Path], dbc: Path, out: Path, before: set[str],
                    expected: dict[str, int]) -> None:  # fmt: skip
    again = subprocess.run(
        [*command(captures, dbc, out, 2), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    skipped = {f["source"] for f in summary["files"] if f["skipped"]}
    assert skipped == before  # what was in is not decoded again
    assert assert_whole(out, expected) == {p.name for p in captures}  # and no row twice


@pytest.mark.parametrize(
    ("workers", "moment", "signum", "rerun"),
    [
        (2, staged, signal.SIGINT, False),
        (2, committed, signal.SIGINT, True),  # the rerun once here: it costs the most CPU
        (2, committed, signal.SIGTERM, False),
        (1, committed, signal.SIGINT, False),
    ],
    ids=["ctrl-c-while-writing", "ctrl-c-after-some", "sigterm-after-some", "one-process"],
)
def test_an_interrupt_leaves_whole_captures_and_a_rerun_completes(
    fleet: tuple[list[Path], Path, dict[str, int]],
    tmp_path: Path,
    workers: int,
    moment: Callable[[Path], bool],
    signum: int,
    rerun: bool,
) -> None:
    captures, dbc, expected = fleet
    out = tmp_path / "ds"
    process = subprocess.Popen(
        command(captures, dbc, out, workers),
        start_new_session=True,  # its own process group, as a terminal's foreground job
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: moment(out) or process.poll() is not None, timeout_s=60)
        assert process.poll() is None, "the decode ended before it could be interrupted"
        os.killpg(process.pid, signum)  # every process of the group: the workers too
        signalled = time.monotonic()
        _, err = process.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 128 + signum, err
    assert took < STOP_GRACE_S + 1.0 + BUSY_MARGIN_S, took  # within 3 s, a busy machine aside
    inside = assert_whole(out, expected)
    assert 0 < len(inside) < CAPTURES if moment is committed else len(inside) < CAPTURES
    said = re.search(r"(\d+) of (\d+) captures are in .*, each whole", err)
    assert said is not None, err
    assert (int(said[1]), int(said[2])) == (len(inside), CAPTURES)
    missing = sorted({p.name for p in captures} - inside)
    assert ", ".join(missing[:5]) in err
    if rerun:
        rerun_completes(captures, dbc, out, inside, expected)


def test_a_worker_killed_outright_leaves_whole_captures(
    fleet: tuple[list[Path], Path, dict[str, int]], tmp_path: Path
) -> None:
    """SIGKILL gives a worker no chance to clean up: what it wrote is dropped, by the decode
    itself (the pool breaks, the decode ends with exit 1) or the next run."""
    captures, dbc, expected = fleet
    out = tmp_path / "ds"
    process = subprocess.Popen(
        command(captures, dbc, out, 2),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: committed(out) or process.poll() is not None, timeout_s=60)
        workers = [pid for pid in _children(process.pid) if b"spawn_main" in _cmdline(pid)]
        assert workers, "no worker process found"
        os.kill(workers[0], signal.SIGKILL)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, err
    assert "the worker decoding it failed" in err
    inside = assert_whole(out, expected)
    assert 0 < len(inside) < CAPTURES
    rerun_completes(captures, dbc, out, inside, expected)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        found += [int(p) for p in text.split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_swap_killed_at_any_step_is_finished_by_the_next_run(
    fleet: tuple[list[Path], Path, dict[str, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decode dies at each of its renames in turn (each staged table completed, the journal,
    each table swapped in, the record), as a process killed there would: the next decode
    finishes the swap from the journal or drops what was staged, and the capture is whole."""
    _, dbc, _ = fleet
    first = [write_capture(tmp_path / "c00.log", drive(seconds=20, period=0.01))]
    expected = dict(decode_captures(first, [dbc], tmp_path / "reference").files[0].rows)
    real_replace = os.replace
    for dies_after in range(2 * len(expected) + 2):  # 5 staged, journal, 5 swapped, record
        out = tmp_path / f"ds{dies_after}"
        decode_captures(first, [dbc], out)  # an earlier run's rows, to be replaced
        calls = [0]

        def dying(a: str, b: str, calls: list[int] = calls, n: int = dies_after) -> None:
            if calls[0] == n:
                raise SystemExit("killed")  # as abrupt as it gets in-process
            calls[0] += 1
            real_replace(a, b)

        monkeypatch.setattr(os, "replace", dying)  # every rename of the decode
        with pytest.raises(BaseException, match=r"killed|captures are in"):
            decode_captures(first, [dbc], out, force=True)
        monkeypatch.setattr(os, "replace", real_replace)
        again = decode_captures(first, [dbc], out)  # recovers, then finds it decoded
        assert assert_whole(out, expected) == {"c00.log"}
        assert again.files[0].rows == expected
