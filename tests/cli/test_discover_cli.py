"""`hwbridge discover`: the table, the JSON report, the draft DBC, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import cantools
import pytest
from benchmarks.drives import Drive

from tests.cli.conftest import Run
from tests.discovery.test_discover import make_drive


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Drive, Path, Path]:
    return make_drive(tmp_path_factory.mktemp("cli-drive"))


@pytest.mark.slow
def test_the_command_prints_writes_and_answers_json(
    run: Run, drive: tuple[Drive, Path, Path], tmp_path: Path
) -> None:
    _, capture, gnss = drive
    out = tmp_path / "draft.dbc"
    result = run("discover", str(capture), "--reference", str(gnss), "--out", str(out))
    assert result.code == 0, result.err
    assert "11-bit  8 bytes" in result.out
    assert "~ gnss_speed.Speed r=" in result.out
    assert "decoded with the reference, not rediscovered: gnss_speed" in result.out
    assert f"draft DBC written to {out}" in result.out
    cantools.database.load_file(out, strict=True)
    as_json = run("discover", str(capture), "--json")
    assert as_json.code == 0
    assert json.loads(as_json.out)["messages"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["discover", "missing.blf"], "capture not found"),
        (["discover", "README.md"], "unknown capture format"),
        (["discover", "x.blf", "--min-r", "2"], "--min-r must be above 0 and at most 1"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(run: Run, argv: list[str], words: str) -> None:
    result = run(*argv)
    assert result.code == 2
    assert result.err.startswith("hwbridge: ") and words in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_truncated_gzip_capture_is_a_note_with_the_frames_before_it(
    run: Run, tmp_path: Path
) -> None:
    """`discover` on a .log.gz cut at 60% printed `unexpected error: EOFError`; now the frames
    before the cut are analysed and a note names the cut."""
    import gzip

    from tests.captures.conftest import drive, write_capture

    plain = write_capture(tmp_path / "drive.log", drive(30.0))
    packed = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(packed[: len(packed) * 6 // 10])
    result = run("discover", str(cut), "--json")
    assert result.code == 1  # a capture that broke: reported, and the report still written
    assert "unexpected error" not in result.err
    assert result.err.startswith("hwbridge: cut.log.gz: truncated gzip stream")
    report = json.loads(result.out)
    assert [m["id"] for m in report["messages"]]  # the frames before the cut, analysed
    notes = [n for n in report["notes"] if n["message"] == "cut.log.gz"]
    assert len(notes) == 1 and "the frames before it were used" in notes[0]["text"]


def test_a_note_on_the_whole_capture_names_no_place() -> None:
    """The report marks a note about the whole capture (a database matched, frames left out)
    with the message `*`: the table printed it as `note: *: ...`."""
    import io

    from hwbridge.cli.console import make_console
    from hwbridge.cli.discover import show_report
    from hwbridge.discovery.report.models import DiscoveryReport, Note

    report = DiscoveryReport(
        messages=[],
        notes=[
            Note(message="*", text="the best match, vw_mlb, was not decoded with"),
            Note(message="drive.blf", text="the file ends in the middle of a frame"),
        ],
    )
    out = io.StringIO()
    show_report(make_console(out), report)
    notes = [line for line in out.getvalue().splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: the best match, vw_mlb, was not decoded with",
        "note: drive.blf: the file ends in the middle of a frame",
    ]
