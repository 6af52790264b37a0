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
from tests.docs_produced import PRODUCERS, demo_transcript, marked, shown_block

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
    of the session; from a folder that is not the checkout, as after `pip install`. The
    transcript on the getting-started page is this run's, but for the values that vary."""
    out = demo_transcript(tmp_path)
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
    producer = PRODUCERS["demo"]
    shown = marked()["demo"]
    assert [page for page, _ in shown] == ["docs/getting-started.md"]
    for page, line in shown:
        assert producer.mask(shown_block(page, line)) == producer.mask(out), (
            f"{page}:{line} is stale: run `python -m tests.docs_produced --write demo`"
        )


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
