"""Every command that writes a file checks where before any long work (`plot --bus` recorded
for its whole duration, then failed), and says which path, what it was to write there, why
not. A draft or a picture is written whole: an interrupt leaves the old file or the new."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hwbridge.cli.errors import EXIT_RUNTIME
from hwbridge.cli.main import main
from hwbridge.cli.out_paths import write_whole
from tests.cli.conftest import DEMO

LONG = "600"  # seconds of recording asked for: a command that waits them fails the test


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, float]:
    capsys.readouterr()
    started = time.monotonic()
    code = main(list(argv))
    took = time.monotonic() - started
    return code, capsys.readouterr().err, took


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["plot", "--bus", "virtual:out-paths", "--signal", "EngineSpeed", "--duration", LONG],
         "the picture"),
        (["record", "--bus", "virtual:out-paths", "--duration", LONG], "the recording"),
        (["discover", "--bus", "virtual:out-paths", "--duration", LONG], "the draft DBC"),
    ],
    ids=["plot", "record", "discover"],
)  # fmt: skip
def test_a_missing_folder_is_said_before_the_recording(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], what: str
) -> None:
    suffix = {"the picture": "x.png", "the recording": "x.blf", "the draft DBC": "x.dbc"}[what]
    out = tmp_path / "missing" / suffix
    code, err, took = run(capsys, *argv, "--out", str(out))
    assert code == EXIT_RUNTIME, err
    assert took < 30  # not the 600 s recording first
    assert f"--out {out}: cannot write {what} there: the folder {out.parent} does not exist" in err
    assert not out.parent.exists()


def test_a_dataset_folder_that_cannot_be_made_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    capture = tmp_path / "drive.log"
    capture.write_text("(1700000000.000000) vcan0 100#0000000000000000\n")
    code, err, _ = run(capsys, "decode", str(capture), "--dbc", str(DEMO), "--out", "/proc/nope")
    assert code == EXIT_RUNTIME, err
    assert "--out /proc/nope: cannot write the dataset there: the folder cannot be made" in err
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    code, err, _ = run(capsys, "decode", str(capture), "--dbc", str(DEMO), "--out", str(a_file))
    assert code == EXIT_RUNTIME
    assert f"--out {a_file}: cannot write the dataset there: it is a file, not a folder" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any folder")
def test_a_folder_without_write_permission_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, err, _ = run(
            capsys, "plot", str(DEMO), "--signal", "X", "--out", str(locked / "a.png")
        )
        assert code == EXIT_RUNTIME
        assert f"the folder {locked} is not writable" in err
    finally:
        locked.chmod(0o700)


def test_a_file_is_written_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "draft.dbc"
    out.write_text("the old draft")
    real_replace = os.replace

    def killed(a: str, b: str) -> None:
        raise KeyboardInterrupt  # the interrupt lands between writing and renaming

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_whole(out, b"a new draft", "the draft DBC")
    monkeypatch.setattr(os, "replace", real_replace)
    assert out.read_text() == "the old draft"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft.dbc"]  # no temporary left
    write_whole(out, b"a new draft", "the draft DBC")
    assert out.read_text() == "a new draft"
