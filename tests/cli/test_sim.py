"""`hwbridge sim ...` hands every argument to `firmware_sim.cli.main`, unchanged."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import types

import pytest

from tests.cli.conftest import DEMO, REPO, Run


@pytest.fixture
def fake_simulator(monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """A stand-in firmware_sim.cli recording what it was given (the delegation, not the sim)."""
    calls: list[list[str] | None] = []

    def fake_main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
        assert prog == "hwbridge sim"
        calls.append(argv)
        return 7

    module = types.ModuleType("firmware_sim.cli")
    module.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "firmware_sim.cli", module)
    return calls


def test_arguments_pass_through_unchanged(run: Run, fake_simulator: list[list[str] | None]) -> None:
    argv = ["--help", "--debug", "vehicle", "--bus", "virtual:x", "--", "-x"]
    assert run("sim", *argv).code == 7
    assert run("--debug", "sim").code == 7
    assert fake_simulator == [argv, []]


def test_missing_simulator_is_one_line(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "firmware_sim.cli", None)
    r = run("sim", "--help")
    assert r.code == 1
    assert r.err.startswith("hwbridge: the simulator is not available") and r.err.count("\n") == 1


def test_sim_help_is_the_simulators_help(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    cli = pytest.importorskip("firmware_sim.cli", reason="firmware_sim/cli.py is not written yet")
    assert cli.main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m firmware_sim")
    assert cli.main(["--help"], prog="hwbridge sim") == 0
    expected = capsys.readouterr().out
    assert expected.startswith("usage: hwbridge sim [-h]")
    assert "python -m firmware_sim" not in expected
    r = run("sim", "--help")
    assert (r.code, r.out) == (0, expected)
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "sim", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, expected)


def test_sim_errors_keep_the_simulators_exit_status(run: Run) -> None:
    pytest.importorskip("firmware_sim.cli", reason="firmware_sim/cli.py is not written yet")
    r = run("sim", "--dbc", "nowhere.dbc")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "nowhere.dbc" in r.err


def test_inspect_reads_the_simulated_vehicle_started_by_hwbridge_sim(run: Run) -> None:
    pytest.importorskip("firmware_sim.cli", reason="firmware_sim/cli.py is not written yet")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwbridge", "sim", "--dbc", str(DEMO)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready, "the simulator printed nothing"
        line = proc.stdout.readline().strip()
        assert line.startswith("socketcand: socketcand://"), line
        url = line.removeprefix("socketcand: ")
        script = 'read_signals {"signals": ["EngineSpeed"], "timeout_ms": 2000}\n'
        r = run("inspect", "--dbc", str(DEMO), "--bus", url, stdin=script)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    assert r.code == 0, r.err
    assert "executed" in r.out and '"unit": "rpm"' in r.out
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
