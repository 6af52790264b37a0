"""Reading a database file through cantools: format by suffix, DBC repairs, clear errors.

A user who points hwbridge at a DBC wants it loaded or told exactly what is wrong (file,
line, problem), never a cantools traceback. DBC text that cantools refuses is repaired in
memory (see `dbc_repair`) and loaded with a `DatabaseRepairWarning` listing every change.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from xml.etree.ElementTree import ParseError as XmlParseError

import cantools

from hwbridge.can.dbc_repair import Repair, repair_dbc

__all__ = [
    "FORMATS",
    "DatabaseError",
    "DatabaseRepairWarning",
    "LoadedDatabase",
    "load_database",
    "parse_database",
]

FORMATS: Mapping[str, str] = MappingProxyType(
    {".dbc": "dbc", ".kcd": "kcd", ".sym": "sym", ".arxml": "arxml"}
)
_SYNTAX = re.compile(r"^Invalid syntax at line \d+, column (\d+): ")
_IN_MESSAGE = re.compile(r"in message '?([A-Za-z0-9_]+)'?")
_SIGNAL = re.compile(r"[Ss]ignals? '?\"?([A-Za-z0-9_]+)")
_UNUSED = re.compile(r"unused (VAL_|SIG_VALTYPE_) entries in DBC:\s+\S+ (\d+) ([A-Za-z0-9_]+)")


class DatabaseError(Exception):
    """A database that cannot be loaded: which file, which line (if known), what is wrong."""

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.problem))


class DatabaseRepairWarning(UserWarning):
    """A database loaded only after repairs; `repairs` says what was changed and where."""

    def __init__(self, path: str | Path, repairs: Sequence[Repair]) -> None:
        self.path = str(path)
        self.repairs = tuple(repairs)
        listed = "\n".join(f"  {r}" for r in self.repairs)
        count = len(self.repairs)
        super().__init__(
            f"{self.path}: loaded after {count} repair{'s' if count != 1 else ''}"
            f" of defects cantools refuses:\n{listed}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.repairs))


@dataclass(frozen=True, slots=True)
class LoadedDatabase:
    """A cantools database and what had to be repaired to load it."""

    db: Any
    repairs: tuple[Repair, ...] = ()
    renamed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def parse_database(text: str, fmt: str, *, strict: bool = False) -> Any:
    """Parse `text` in format `fmt` with cantools; exceptions are cantools' own."""
    db = cantools.database.can.Database(strict=strict)
    adders = {
        "dbc": db.add_dbc_string,
        "kcd": db.add_kcd_string,
        "sym": db.add_sym_string,
        "arxml": db.add_arxml_string,
    }
    adders[fmt](text)
    return db


def _read(path: Path, fmt: str, encoding: str | None) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatabaseError(path, None, f"cannot read the file: {exc.strerror or exc}") from exc
    if encoding is not None:
        return data.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # DBC and SYM files written by Windows tools are cp1252 (cantools' default too)
        return data.decode("cp1252" if fmt in ("dbc", "sym") else "utf-8", errors="replace")


def _line_of(text: str, pattern: str) -> int | None:
    mo = re.search(pattern, text, re.MULTILINE)
    return text.count("\n", 0, mo.start()) + 1 if mo else None


def locate(exc: BaseException, text: str) -> tuple[int | None, str]:
    """The line of `text` an exception from cantools is about, and its problem in words."""
    message = str(exc).strip() or type(exc).__name__
    offset = getattr(exc, "offset", None)
    if isinstance(offset, int) and "Invalid syntax" in message:
        return text.count("\n", 0, offset) + 1, _SYNTAX.sub(
            r"invalid syntax at column \1: ", message
        )
    if isinstance(exc, XmlParseError):
        return exc.position[0], f"invalid XML: {message}"
    unused = _UNUSED.search(message)
    if unused:
        keyword, frame_id, name = unused.groups()
        line_of_entry = _line_of(text, rf"^\s*{keyword}\s+{frame_id}\s+{name}\b")
        return line_of_entry, " ".join(message.split())
    in_message = _IN_MESSAGE.search(message)
    if in_message:
        line_of_message = _line_of(text, rf"^BO_\s+\d+\s+{in_message.group(1)}\s*:")
        signal = _SIGNAL.search(message)
        if line_of_message is not None and signal:
            line_of_message = (
                _signal_line(text, line_of_message, signal.group(1)) or line_of_message
            )
        return line_of_message, message.rstrip(".")
    return None, message.rstrip(".")


def _signal_line(text: str, message_line: int, signal: str) -> int | None:
    """The line of `SG_ signal` in the message defined at `message_line`."""
    lines = text.splitlines()
    for number in range(message_line, len(lines)):
        stripped = lines[number].strip()
        if not stripped.startswith("SG_"):
            return None
        if re.match(rf"SG_\s+{signal}\b", stripped):
            return number + 1
    return None


def load_database(
    path: str | Path, *, strict: bool = False, encoding: str | None = None
) -> LoadedDatabase:
    """Load `path`; repair a refused DBC and warn; raise DatabaseError if it cannot load."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(FORMATS)
        raise DatabaseError(
            path, None, f"unknown database format {path.suffix or '(no suffix)'!r}; use {known}"
        )
    text = _read(path, fmt, encoding)
    try:
        return LoadedDatabase(parse_database(text, fmt, strict=strict))
    except Exception as exc:  # cantools raises many types; all become a DatabaseError
        first_error = exc
    if fmt != "dbc":
        line, problem = locate(first_error, text)
        raise DatabaseError(path, line, problem) from first_error
    result = repair_dbc(text)
    error: BaseException = first_error
    if result.repairs:
        try:
            db = parse_database(result.text, fmt, strict=strict)
        except Exception as exc:  # the repaired text keeps every line where it was
            error = exc
        else:
            warnings.warn(DatabaseRepairWarning(path, result.repairs), stacklevel=3)
            return LoadedDatabase(db, result.repairs, result.renamed)
    line, problem = locate(error, text if error is first_error else result.text)
    if result.refused:
        named = _IN_MESSAGE.search(problem)
        prefix = f"message {named.group(1)}: " if named else "\0"
        related = [r.removeprefix(prefix) for r in result.refused if r.startswith(prefix)]
        problem += f" (not repaired: {(related or list(result.refused))[0]})"
    raise DatabaseError(path, line, problem) from error
