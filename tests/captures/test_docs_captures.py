"""The command of docs/captures.md runs as written and prints the summary the page shows (its
Python example runs in tests/test_docs_examples.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs_pages import block_under, command_lines, section
from tests.shared_data import needs_shared

from .conftest import REPO

HEADING = "From a capture to an answer"


@needs_shared
def test_cli_example_runs_and_prints_the_summary(tmp_path: Path) -> None:
    block = block_under("docs/captures.md", HEADING, "bash")
    words = command_lines(block.code)[0].split()
    assert words[:2] == ["hwbridge", "decode"]
    words[words.index("--out") + 1] = str(tmp_path / "truck_dataset")
    hwbridge = Path(sys.executable).with_name("hwbridge")
    out = subprocess.run(
        [str(hwbridge), *words[1:]], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    after = section("docs/captures.md", HEADING).split("then\n\n", 1)[1]
    shown = after.split("```\n", 1)[1].split("```")[0]  # past a `produced` mark, if any
    for line in shown.splitlines()[1:]:
        if line.strip() != "...":
            assert " ".join(line.split()) in " ".join(out.split())
