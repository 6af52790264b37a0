"""`hwbridge schema DIR` keeps working after the split into modules."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Run


def test_schema_writes_one_file_per_model(run: Run, tmp_path: Path) -> None:
    r = run("schema", str(tmp_path / "out"))
    assert r.code == 0, r.err
    written = [Path(line) for line in r.out.splitlines()]
    names = {p.name for p in written}
    assert {"DriverMeta.schema.json", "Tool.schema.json", "DriverResponse.schema.json"} <= names
    for path in written:
        assert json.loads(path.read_text())["title"]
