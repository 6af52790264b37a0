"""`hwbridge prompt`: exactly the library's system prompt, plain text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hwbridge.can import CanDriver, SendPolicy
from hwbridge.core.prompts import estimate_tokens
from tests.cli.conftest import DEMO, REPO, Run


def test_prompt_is_the_library_prompt_exactly(run: Run) -> None:
    r = run("prompt", "--dbc", str(DEMO))
    assert r.code == 0, r.err
    with CanDriver.from_dbc(DEMO) as driver:
        assert r.out == driver.get_driver_system_message() + "\n"


def test_options_reach_the_driver(run: Run, channel: str) -> None:
    r = run(
        "prompt",
        "--dbc",
        str(DEMO),
        "--bus",
        f"virtual:{channel}",
        "--allow",
        "Climate*",
        "--model",
        "claude-sonnet-4",
    )
    assert r.code == 0, r.err
    policy = SendPolicy(allow_messages=["Climate*"])
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}-2", policy=policy) as driver:
        assert r.out == driver.get_driver_system_message("claude-sonnet-4") + "\n"
    assert "<tools>" in r.out  # the json pack picks xml for Claude


def test_pack_option(run: Run, tmp_path: Path) -> None:
    assert "<tools>" in run("prompt", "--dbc", str(DEMO), "--pack", "xml").out
    custom = tmp_path / "mine.toml"
    custom.write_text('[meta]\nname = "mine"\nversion = "1.0.0"\nextends = "compact"\n')
    r = run("prompt", "--dbc", str(DEMO), "--pack", str(custom))
    assert r.code == 0, r.err
    assert r.out.startswith("Tools (name(argument")  # compact's one-line tools


def test_large_database_prompt_fits(run: Run, ford: Path) -> None:
    r = run("prompt", "--dbc", str(ford))
    assert r.code == 0, r.err
    assert estimate_tokens(r.out) < 4000


def test_piped_output_has_no_markup_even_with_force_color() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hwbridge", "prompt", "--dbc", str(DEMO)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"FORCE_COLOR": "1", "PATH": ""},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    with CanDriver.from_dbc(DEMO) as driver:
        assert proc.stdout == driver.get_driver_system_message() + "\n"
