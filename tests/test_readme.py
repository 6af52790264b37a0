"""The README's quickstart runs as written and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
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


def test_demo_runs_to_the_end() -> None:
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "final answer: no call" in out.stdout
    assert "recorded" in out.stdout


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
