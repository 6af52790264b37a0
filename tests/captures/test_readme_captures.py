"""The README's "Captures at scale" examples run as written and print what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .conftest import REPO

SECTION = (REPO / "README.md").read_text().split("## Captures at scale", 1)[1].split("\n## ")[0]


def test_python_example_prints_what_the_readme_says(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", SECTION, re.S)
    printed = re.search(r"prints\n\n```\n(.*?)```", SECTION, re.S)
    assert code is not None and printed is not None
    source = code.group(1).replace('"truck_dataset"', repr(str(tmp_path / "truck_dataset")))
    out = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout == printed.group(1)


def test_cli_example_runs_and_prints_the_summary(tmp_path: Path) -> None:
    block = re.search(r"```bash\n(.*?)```", SECTION, re.S)
    assert block is not None
    command = block.group(1).split("\n")[0:2]
    words = " ".join(line.rstrip("\\").strip() for line in command).split()
    assert words[:2] == ["hwbridge", "decode"]
    words[words.index("--out") + 1] = str(tmp_path / "truck_dataset")
    hwbridge = Path(sys.executable).with_name("hwbridge")
    out = subprocess.run(
        [str(hwbridge), *words[1:]], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    shown = re.search(r"then\n\n```\n(.*?)```", SECTION, re.S)
    assert shown is not None
    for line in shown.group(1).splitlines()[1:]:
        if line.strip() != "...":
            assert " ".join(line.split()) in " ".join(out.split())
