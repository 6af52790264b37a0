"""`hwbridge discover --match-known [--dbc PATH]`: the ranking in the table and the JSON, the
best match decoded with, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.drives import generate

from tests.cli.conftest import DEMO, Run


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("match-cli")
    return generate(DEMO, 6.0, seed=4).write(folder / "demo.blf")


def test_the_best_match_is_shown_and_decoded_with(run: Run, capture: Path) -> None:
    table = run("discover", str(capture), "--match-known", "--dbc", str(DEMO.parent))
    assert table.code == 0, table.err
    assert "known databases, best first:" in table.out
    first = table.out.split("known databases, best first:\n", 1)[1].splitlines()[0]
    assert first.split()[0] == DEMO.name and "length_ok 100%" in first
    assert f"decoded with {DEMO.name}" in table.out
    as_json = run("discover", str(capture), "--match-known", "--dbc", str(DEMO), "--json")
    report = json.loads(as_json.out)
    assert report["matches"][0]["database"] == DEMO.name
    assert report["matches"][0]["source"] == str(DEMO)
    assert report["decoded_with"] == [DEMO.name]
    assert "EngineData" in report["reference_messages"]
    # the drive's GNSS module is all that is left to discover
    assert [m["id"] for m in report["messages"]] == [0x7E5]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--dbc", "x.dbc"], "--dbc names databases to match: add --match-known"),
        (["--match-known", "--dbc", "missing.dbc"], "no such database file or folder"),
    ],
)
def test_bad_database_options_are_one_line(
    run: Run, capture: Path, argv: list[str], words: str
) -> None:
    result = run("discover", str(capture), *argv)
    assert result.code == 2
    assert result.err.startswith("hwbridge: ") and words in result.err
    assert len(result.err.strip().splitlines()) == 1
