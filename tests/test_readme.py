"""The README is a front page: the two set-up commands first, one screen per main task, at
most 250 lines, links into docs/ that lead somewhere. Its examples run in
tests/test_docs_examples.py with those of every documentation page; `make demo` runs here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import DOCS, ROOT, blocks, text

README = text("README.md")


def test_readme_starts_with_the_two_commands() -> None:
    first = blocks("README.md")[0]
    assert first.line <= 5
    assert "make demo" in first.code and "make test" in first.code


def test_readme_is_a_front_page() -> None:
    assert len(README.splitlines()) <= 250
    tasks = re.findall(r"^## (.*)$", README, re.M)
    for task in ("Read live signals with your DBC", "Put the vehicle into an MCP client",
                 "Chat with a model", "Decode captures and ask them in SQL",
                 "Find signals without a DBC", "Diagnose the check-engine light"):  # fmt: skip
        assert task in tasks, task


def test_every_link_into_docs_leads_to_a_page() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)(?:#[\w-]+)?\)", README))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert linked <= pages, linked - pages
    assert pages - linked <= {"index.md"}, pages - linked  # every page is reachable from here


@pytest.mark.slow
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
    # the transcript on the getting-started page is this run's: the same tools and prompt,
    # the same steps in the same order, each with the same outcome
    page = (ROOT / "docs" / "getting-started.md").read_text()
    shown = page.split("```\nhwbridge demo: ", 1)[1].split("```", 1)[0]
    counts = re.compile(r"(\d+) tools, system prompt ([\d,]+) characters")
    documented, ran = counts.search(" ".join(shown.split())), counts.search(flat)
    assert documented is not None and ran is not None
    assert documented.groups() == ran.groups()
    steps = re.compile(r"╭─ (.+?) ─")
    assert steps.findall(shown) == steps.findall(out)
    outcomes = re.compile(r"status: (executed|failed|no call: final answer)")
    assert outcomes.findall(shown) == outcomes.findall(out)


def test_demo_opens_the_inspector_when_asked(tmp_path: Path) -> None:
    """HWBRIDGE_INSPECT=1 make demo, through the examples/demo.py script kept for it."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
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
