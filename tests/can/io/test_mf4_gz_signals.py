"""A `.mf4.gz` is inflated to a temporary copy: an interrupt (Ctrl-C, SIGTERM's exception)
that lands at any point while the copy is made leaves no copy behind."""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import pytest

from hwbridge.can.io.mf4_gz import spool


def test_an_interrupt_as_the_copy_is_created_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interrupt lands the instant the file exists, before its name is handed back (inside
    `tempfile.mkstemp` it left the file behind: a stress run found one in TMPDIR)."""
    packed = tmp_path / "drive.mf4.gz"
    with gzip.open(packed, "wb") as out:
        out.write(b"MDF     4.10    " + bytes(64))
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_dir))
    real_open = os.open

    def interrupted(path: str, flags: int, mode: int = 0o777, *args: object) -> int:
        fd = real_open(path, flags, mode)
        os.close(fd)
        raise KeyboardInterrupt  # as a signal's exception raised right after the call

    monkeypatch.setattr(os, "open", interrupted)
    made: list[Path] = []
    with pytest.raises(KeyboardInterrupt):
        spool(packed, made)
    monkeypatch.setattr(os, "open", real_open)
    assert list(spool_dir.iterdir()) == []
