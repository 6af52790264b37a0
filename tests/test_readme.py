"""The README's quickstart runs as written and prints what the README says it prints."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make demo" in first_block
    assert "make test" in first_block


def test_quickstart_runs_as_written() -> None:
    section = README.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S)
    assert code is not None and printed is not None
    assert len(code.group(1).strip().splitlines()) <= 24
    out = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True
    )
    assert out.stdout == printed.group(1)


def test_demo_runs_to_the_end(tmp_path: Path) -> None:
    """make demo is `hwbridge demo`: the simulator in its own process, socketcand, each step
    of the session; from a folder that is not the checkout, as after `pip install`."""
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-m", "hwbridge", "demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    ).stdout
    flat = " ".join(out.split())
    assert "socketcand://127.0.0.1:" in flat
    assert "recorded, not produced by a live model" in flat
    assert '"EngineSpeed": {"value":' in flat
    assert '"met": true, "signal": "VehicleDynamics.VehicleSpeed"' in flat
    assert "detail: SEND_NOT_ALLOWED" in flat
    assert "detail: OUT_OF_RANGE" in flat
    assert '"met": true, "signal": "ClimateStatus.ActiveSetpoint", "value": 22.5' in flat
    assert "status: no call: final answer" in flat
    assert "demo finished" in flat


def test_can_example_runs_as_written() -> None:
    section = README.split("## The CAN bridge", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True, cwd=root
    )
    assert "read_signals" in out.stdout
    assert "not_received" in out.stdout  # nothing sends on the demo channel in this example


def _run_section(title: str) -> str:
    section = README.split(title, 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(
        [sys.executable, "-c", code.group(1)],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        timeout=60,
    ).stdout


def test_simulator_and_replay_examples_run_as_written() -> None:
    _run_section("## The simulated vehicle")
    out = _run_section("## Replaying real captures")
    assert "3D-fix" in out
    assert "41.41" in out


def test_demo_opens_the_inspector_when_asked(tmp_path: Path) -> None:
    """HWBRIDGE_INSPECT=1 make demo, through the examples/demo.py script kept for it."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "demo.py")],
        input='{"tool": "read_signals", "arguments": {"signals": ["EngineSpeed"]}}\nquit\n',
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "HWBRIDGE_INSPECT": "1", "COLUMNS": "200"},
        cwd=tmp_path,
    ).stdout
    assert "EngineSpeed" in out
    assert "executed" in out.lower()


def test_composition_example_runs_as_written() -> None:
    section = README.split("## Composing drivers", 1)[1]
    printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S)
    assert printed is not None
    assert _run_section("## Composing drivers") == printed.group(1)


def test_install_section_shows_pip_install_then_the_demo() -> None:
    block = README.split("## Install from PyPI", 1)[1].split("```")[1]
    assert block.index("pip install mcs-hwbridge") < block.index("hwbridge demo")


def test_every_extra_the_readme_names_exists() -> None:
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    named = set(re.findall(r"mcs-hwbridge\[([a-z0-9_-]+)\]", README))
    assert named, "the README shows no extra"
    assert named <= set(project["optional-dependencies"]) - {"dev"}


def test_cli_table_lists_every_command() -> None:
    from hwbridge.cli.main import build_parser

    section = README.split("## The `hwbridge` command", 1)[1].split("\n## ", 1)[0]
    commands = next(
        action.choices
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    for name in commands:
        assert f"| `hwbridge {name}" in section, name


def test_diagnostics_session_runs_as_written() -> None:
    out = _run_section("## Vehicle diagnostics: OBD-II and UDS")
    blocks = out.split("ELM327\n")
    assert len(blocks) == 2 and blocks[0].startswith("ISO 15765-4 (can-isotp)\n")
    over_can = blocks[0].split("\n", 1)[1]
    assert over_can == blocks[1]  # the same answers over both adapters
    assert "  MIL on: True | codes: 1\n" in over_can
    assert "  P0217 Engine coolant over temperature condition (engine)\n" in over_can
    assert "  freeze frame of P0217: coolant 12" in over_can
    assert "  clear: SEND_NOT_ALLOWED: Clearing trouble codes" in over_can


def test_discovery_example_runs_as_written() -> None:
    section = README.split("## A bus without a DBC", 1)[1].split("\n## ", 1)[0]
    printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S)
    assert printed is not None
    assert _run_section("## A bus without a DBC") == printed.group(1)
    for name in ("survey_bus(duration_ms)", "snapshot_bus(name, duration_ms)",
                 "diff_snapshots(a, b)", "correlate_signal(signal, duration_ms)",
                 "define_signal(name, id, start_bit, length, byte_order, signed, scale, offset, unit)",
                 "draft_dbc()", "examples/discover_demo.py", "--gnss-can"):  # fmt: skip
        assert name in section or name in README, name
