"""Without --dbc every command uses the bundled demo vehicle and says so in one stderr line."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hwbridge import resources
from hwbridge.can.database.database import CanDatabase
from tests.cli.conftest import DEMO, REPO, Run

NOTICE = f"hwbridge: no --dbc given, using the bundled demo vehicle ({DEMO})"


def test_the_bundled_database_is_the_repositorys_demo_vehicle() -> None:
    assert resources.bundled_dbc() == DEMO
    assert resources.bundled_dbc("demo_vehicle") == DEMO
    assert "demo_vehicle.dbc" in resources.bundled_dbcs()
    assert len(CanDatabase.load(resources.bundled_dbc()).messages) == 11


def test_device_specs_are_listed_from_devices_folder() -> None:
    assert resources.bundled_specs() == tuple(
        sorted(p.name for p in (REPO / "devices").glob("*.toml"))
    )


@pytest.mark.parametrize("name", ["../README.md", "/etc/passwd", "dbc\\demo_vehicle.dbc", ""])
def test_bundled_names_are_file_names_not_paths(name: str) -> None:
    with pytest.raises(ValueError, match="file name"):
        resources.bundled_dbc(name)
    with pytest.raises(ValueError, match="file name"):
        resources.bundled_spec(name)


def test_an_unknown_bundled_file_names_those_that_exist() -> None:
    with pytest.raises(FileNotFoundError, match=r"bundled: demo_vehicle\.dbc"):
        resources.bundled_dbc("vw_golf")
    with pytest.raises(FileNotFoundError, match="no bundled device spec 'nope'"):
        resources.bundled_spec("nope")


@pytest.mark.parametrize("command", [["tools"], ["tools", "--json"], ["prompt"]])
def test_offline_commands_default_to_the_demo_vehicle(run: Run, command: list[str]) -> None:
    default = run(*command)
    explicit = run(*command, "--dbc", str(DEMO))
    assert default.code == 0, default.err
    assert default.err.splitlines() == [NOTICE]
    assert explicit.err == ""  # a database given: nothing to say
    assert default.out == explicit.out


def test_inspect_defaults_to_the_demo_vehicle(run: Run, channel: str) -> None:
    r = run("inspect", "--bus", f"virtual:{channel}", stdin="tools read_Engine\nquit\n")
    assert r.code == 0, r.err
    assert r.err.splitlines() == [NOTICE]
    assert f"{DEMO} (11 messages)" in r.out and "read_EngineData" in r.out


def test_hwbridge_sim_defaults_to_the_demo_vehicle(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwbridge", "sim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready, "the simulator printed nothing"
        line = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert line.startswith("socketcand: socketcand://127.0.0.1:"), (line, err)
    assert proc.returncode == 0
    assert err.splitlines() == [
        f"hwbridge sim: no --dbc given, using the bundled demo vehicle ({DEMO})"
    ]


def test_help_says_what_the_default_is(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run("tools", "--help")
    assert "default: the bundled demo vehicle" in " ".join(capsys.readouterr().out.split())
