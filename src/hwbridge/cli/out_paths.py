"""Where a command will write, checked before it does any work, and files written whole.

A command that records a bus for a minute and then finds its output folder missing has wasted
the minute: `check_out_file` and `check_out_folder` run first, and their errors name the
option, the path, what was to be written there and why it cannot be. `write_whole` writes a
file under a temporary name beside it and renames it into place, so an interrupted command
leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from hwbridge.cli.errors import EXIT_RUNTIME, CliError

__all__ = ["check_out_file", "check_out_folder", "write_whole"]


def check_out_file(path: Path, what: str, option: str = "--out") -> Path:
    """`path` can take `what` (a file): its folder exists and is writable, it is no folder
    itself and, if it exists, may be replaced."""
    if path.is_dir():
        raise _cannot(option, path, what, "it is a folder")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise _cannot(option, path, what, f"the folder {folder} does not exist")
    if not folder.is_dir():
        raise _cannot(option, path, what, f"{folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _cannot(option, path, what, f"the folder {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise _cannot(option, path, what, "the file exists and is not writable")
    return path


def check_out_folder(path: Path, what: str, option: str = "--out") -> Path:
    """`path` can hold `what` (a folder): it is one and is writable, or it can be made."""
    if path.exists():
        if not path.is_dir():
            raise _cannot(option, path, what, "it is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise _cannot(option, path, what, "the folder is not writable")
        return path
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        return check_out_folder(path, what, option)
    except OSError as exc:
        raise _cannot(option, path, what, f"the folder cannot be made ({_reason(exc)})") from None
    return path


def write_whole(path: Path, data: bytes, what: str, option: str = "--out") -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed into place)."""
    folder = path.parent if str(path.parent) else Path(".")
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise _cannot(option, path, what, _reason(exc)) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _cannot(option: str, path: Path, what: str, why: str) -> CliError:
    return CliError(f"{option} {path}: cannot write {what} there: {why}", EXIT_RUNTIME)
