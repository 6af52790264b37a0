"""Every failure a user can meet: one `hwbridge: ...` line on stderr, exit 2 or 1, no trace."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import DEMO, REPO, Run


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hwbridge: "), err
    assert "Traceback" not in err
    return lines[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def broken_dbc(tmp_path: Path) -> Path:
    path = tmp_path / "broken.dbc"
    path.write_text('VERSION ""\n\nBO_ 100 Msg: 8 ECU\n SG_ Sig : 0|8@1+ (1,0) [0|255 "" X\n')
    return path


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["tools", "--dbc", "missing.dbc"], 2, "missing.dbc: cannot read the file"),
        (["prompt", "--dbc", "README.md"], 2, "unknown database format '.md'"),
        (
            ["tools", "--dbc", str(DEMO), "--allow", "ClimateComand"],
            2,
            "did you mean ClimateCommand",
        ),
        (
            ["tools", "--dbc", str(DEMO), "--allow", "Wiper*"],
            2,
            "--allow Wiper*: matches no message",
        ),
        (["prompt", "--dbc", str(DEMO), "--pack", "yaml"], 2, "unknown prompt pack 'yaml'"),
        (["inspect", "--dbc", str(DEMO), "--bus", "nonsense"], 2, "invalid CAN bus 'nonsense'"),
        (["inspect", "--dbc", str(DEMO), "--bus", "replay:nowhere.log"], 2, "nowhere.log"),
    ],
)
def test_usage_errors_exit_2(run: Run, argv: list[str], code: int, words: str) -> None:
    r = run(*argv)
    assert r.code == code
    assert words in one_line(r.err)
    assert r.out == ""


def test_database_that_fails_to_load_names_file_and_line(run: Run, broken_dbc: Path) -> None:
    r = run("tools", "--dbc", str(broken_dbc))
    assert r.code == 2
    assert one_line(r.err).startswith(f"hwbridge: {broken_dbc}:")


def test_an_error_quoting_a_huge_hostile_line_is_cut_and_escaped(run: Run, tmp_path: Path) -> None:
    """cantools quotes the line it cannot parse: 3 MB of it with an ESC sequence in it went to
    the terminal whole. The error line is at most 500 characters, its ESC escaped."""
    dbc = tmp_path / "bigline.dbc"
    dbc.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\nBO_ 256 MSG1: 8 ECU\n'
        ' SG_ SIG1 : 0|16@1+ (0.1,0) [0|6553.5] "\x1b[2J'
        + "u" * 300_000
        + "\n"  # the unit never ends: a syntax error that quotes the line
    )
    r = run("tools", "--dbc", str(dbc))
    assert r.code == 2
    line = one_line(r.err)
    assert line.startswith(f"hwbridge: {dbc}:")
    assert len(line) <= len("hwbridge: ") + 500
    assert "\x1b" not in line and "\\x1b" in line  # shown, not obeyed
    assert line.endswith("...")


def test_one_line_bounds_and_escapes_any_text() -> None:
    from hwbridge.cli.errors import MAX_LINE_CHARS
    from hwbridge.cli.errors import one_line as shown

    assert MAX_LINE_CHARS == 500
    assert shown("first\n\n  second  \r\nthird") == "first second third"
    assert shown("bell\x07 and \x1b]0;title\x07") == "bell\\x07 and \\x1b]0;title\\x07"
    huge = shown("x" * 3_000_000)
    assert huge == "x" * 497 + "..."
    assert shown("\n" * 1_000_000 + "late") == "late"
    assert len(shown("\x00" * 10_000)) == MAX_LINE_CHARS


def test_bus_that_does_not_answer_exits_1(run: Run) -> None:
    bus = f"socketcand://127.0.0.1:{closed_port()}/vcan0"
    r = run("inspect", "--dbc", str(DEMO), "--bus", bus)
    assert r.code == 1
    line = one_line(r.err)
    assert line.endswith("(BUS_DOWN)") and "cannot open" in line


def test_debug_shows_the_traceback(run: Run) -> None:
    r = run("--debug", "inspect", "--dbc", str(DEMO), "--bus", "nonsense")
    assert r.code == 2
    assert "Traceback" in r.err and r.err.rstrip().splitlines()[-1].startswith("hwbridge: ")
    after = run("inspect", "--dbc", str(DEMO), "--bus", "nonsense", "--debug")
    assert "Traceback" in after.err


def test_unwritable_schema_dir_is_a_runtime_error(run: Run, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run("schema", str(blocker / "sub"))
    assert r.code == 1
    one_line(r.err)


def test_missing_option_is_argparse_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "decode", "drive.blf"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "the following arguments are required: --dbc, --out" in proc.stderr


def test_subprocess_error_has_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "prompt", "--dbc", "nowhere.dbc"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert one_line(proc.stderr) == (
        "hwbridge: nowhere.dbc: cannot read the file: No such file or directory"
    )


def test_help_documents_exit_codes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    for command in ("tools", "prompt", "inspect", "sim", "schema"):
        assert command in proc.stdout
    assert "exit status:" in proc.stdout and "BUS_DOWN" in proc.stdout


def test_the_command_skips_the_last_collection_of_its_own_process_only() -> None:
    """`hwbridge ...` (argv from the command line) freezes the objects it made before the
    process ends, so the interpreter's last collection does not walk them; an embedding
    program (main with a list) keeps its collector as it was. Either way atexit runs."""
    code = (
        "import atexit, gc, sys; from hwbridge.cli.main import main;"
        "atexit.register(lambda: print('atexit ran'));"
        "main(['tools', '--json']); print('after main([...])', gc.get_freeze_count());"
        "sys.argv = ['hwbridge', 'tools', '--json']; rc = main();"
        "print('after main()', gc.get_freeze_count() > 0, rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith(("after", "atexit"))]
    assert lines == ["after main([...]) 0", "after main() True 0", "atexit ran"]
