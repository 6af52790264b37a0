"""`hwbridge decode` and `hwbridge inspect --dataset` as a user types them."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hwbridge.cli.main import main
from tests.conftest import wait_until
from tests.shared_data import needs_shared

from .conftest import GPS_DBC, J1939_DBC, TRUCK, drive, write_capture


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@needs_shared
def test_decode_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "decode", str(TRUCK), "--dbc", str(GPS_DBC), "--dbc", str(J1939_DBC),
        "--out", str(tmp_path / "ds"),
    )  # fmt: skip
    assert code == 0, err
    flat = " ".join(out.split())
    assert "decoded 1 of 1 capture(s)" in flat
    assert "frames read 57,849, decoded 26,269, unknown frames 31,580" in flat
    assert "EEC1 12,719" in flat and "gnss_imu 11,358" in flat
    assert (tmp_path / "ds" / "EEC1" / "source=truck_j1939_gps.MF4" / "part-0.parquet").is_file()


def test_a_broken_capture_exits_1_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fleet_dbc: Path
) -> None:
    good = write_capture(tmp_path / "good.blf", drive(2.0))
    broken = tmp_path / "broken.blf"
    broken.write_bytes(good.read_bytes()[:300])
    code, out, err = run(
        capsys, "decode", str(good), str(broken), "--dbc", str(fleet_dbc),
        "--out", str(tmp_path / "ds"), "--json",
    )  # fmt: skip
    assert code == 1
    summary = json.loads(out)
    assert summary["rows"]["Engine"] == 20
    assert [Path(p).name for p in summary["failed"]] == ["broken.blf"]
    assert "broken.blf" in err and "truncated" in err and "byte" in err


def test_malformed_lines_and_frames_are_printed_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fleet_dbc: Path
) -> None:
    """Counted and the first of each named; a note quoting the capture is text, not markup."""
    log = write_capture(tmp_path / "drive.log", drive(1.0))
    log.write_text(log.read_text() + "(1.5) can0 [/bold]#00\n")
    trc = write_capture(tmp_path / "drive.trc", drive(1.0))
    lines = trc.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if " 0100 Rx" in line)
    stamp = lines[at].split()[1]
    lines[at] = lines[at].replace(stamp, "nan".rjust(len(stamp)), 1)
    trc.write_text("\n".join(lines) + "\n")
    code, out, err = run(
        capsys, "decode", str(log), str(trc), "--dbc", str(fleet_dbc), "--out", str(tmp_path / "ds")
    )
    assert code == 0, err
    flat = " ".join(out.split())
    assert "malformed lines skipped: 1 (first: drive.log line " in flat
    assert "[/bold]" in flat
    assert (
        "malformed frames dropped: 1 (first: drive.trc frame 1: timestamp nan out of range)" in flat
    )


def test_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fleet_dbc: Path
) -> None:
    capture = write_capture(tmp_path / "drive.blf", drive(1.0))
    bad = tmp_path / "bad.dbc"
    bad.write_text("BO_ x")
    code, _, err = run(
        capsys, "decode", str(capture), "--dbc", str(bad), "--out", str(tmp_path / "ds")
    )
    assert code == 2 and "bad.dbc" in err
    with pytest.raises(SystemExit) as caught:
        main(["decode", str(capture), "--dbc", str(fleet_dbc), "--out", "x", "--workers", "2",
              "--dask", "tcp://127.0.0.1:1"])  # fmt: skip
    assert caught.value.code == 2


def test_inspect_a_dataset(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fleet_dbc: Path,
) -> None:
    import io

    capture = write_capture(tmp_path / "drive.blf", drive(5.0))
    main(["decode", str(capture), "--dbc", str(fleet_dbc), "--out", str(tmp_path / "ds")])
    commands = (
        "tools\n"
        'call signal_stats {"signal": "CoolantTemp"}\n'
        'call query {"sql": "COPY Engine TO \'/tmp/x.csv\'"}\n'
        "status\n"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(commands))
    capsys.readouterr()
    code = main(["inspect", "--dataset", str(tmp_path / "ds")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "hwbridge inspect: dataset" in out and "6 tools, read-only" in out
    assert '"signal": "Engine.CoolantTemp"' in out
    assert "QUERY_REFUSED" in out
    assert '"name": "Engine"' in out


def test_inspect_a_dataset_that_is_not_there(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "inspect", "--dataset", "/nonexistent/dataset")
    assert code == 2 and "no dataset folder" in err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_during_a_compressed_mf4_leaves_no_temporary_copy(
    tmp_path: Path, fleet_dbc: Path, how: signal.Signals
) -> None:
    """A .mf4.gz is inflated to a temporary file to be read: SIGTERM (timeout, systemd,
    docker stop) or SIGHUP (a closed terminal) ends the command as Ctrl-C does, its copy
    deleted (it was left behind, up to 4 GiB each time)."""
    plain = write_capture(tmp_path / "drive.mf4", drive(5.0))
    packed = tmp_path / "drive.mf4.gz"
    with gzip.open(packed, "wb", compresslevel=1) as out:
        out.write(plain.read_bytes())
        out.write(bytes(400 * 1024 * 1024))  # inflating takes a while: time to signal
    spool = tmp_path / "tmp"
    spool.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwbridge", "decode", str(packed), "--dbc", str(fleet_dbc),
         "--out", str(tmp_path / "out")],
        env={**os.environ, "TMPDIR": str(spool)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        # the copy being written (not the probe file Python's tempfile writes first)
        assert wait_until(lambda: any(spool.glob("hwbridge-*")) or proc.poll() is not None, 60)
        proc.send_signal(how)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + how, err
    assert "terminated" in err
    assert list(spool.iterdir()) == []
