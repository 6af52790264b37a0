"""Reading a database file through cantools: format by suffix, DBC repairs, clear errors.

A user who points hwbridge at a DBC wants it loaded or told exactly what is wrong (file,
line, problem), never a cantools traceback. DBC text that cantools refuses is repaired in
memory (see `dbc_repair`) and loaded with a `DatabaseRepairWarning` listing every change.

A database is data from anywhere: before cantools sees a DBC, its sizes are checked, so a
150-byte file cannot make cantools build a codec for a 100 MB message (2.85 GB), a signal
of 100 million bits, or a message of tens of thousands of multiplexed signals (cantools'
work grows with their square).
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

from hwbridge.can.database.repair import Repair, RepairResult, repair_dbc

__all__ = [
    "FORMATS",
    "DatabaseError",
    "DatabaseImportWarning",
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
_IMPORT = re.compile(r'CM_\s+"IMPORT\s+([^"]*)"')
_IMPORTS_LISTED = 5
_REPAIRS_LISTED = 40
_UNUSED = re.compile(r"unused (VAL_|SIG_VALTYPE_) entries in DBC:\s+\S+ (\d+) ([A-Za-z0-9_]+)")
MAX_MESSAGE_BYTES = 1785
"""The longest message a database may describe: a J1939 transport-protocol message (CAN FD
frames carry 64 bytes; ISO-TP transfers are decoded by service, not by database)."""
MAX_SIGNAL_BITS = 512
"""The longest signal: a whole CAN FD frame."""
MAX_SIGNALS_PER_MESSAGE = 4096
"""Signals one message may define (multiplexed ones included; the busiest real databases
have a few hundred)."""
MAX_MESSAGES = 16_384
"""Messages one database may define (a J1939 database of every PGN has a few thousand;
loading 100,000 took cantools 24 s and 1.1 GB)."""
_MESSAGE_LINE = re.compile(r"^[ \t]*BO_[ \t]+\d+[ \t]+([^\s:]+)[ \t]*:[ \t]*(\d+)", re.MULTILINE)
_SIGNAL_LINE = re.compile(r"^[ \t]*SG_[ \t].*?:[ \t]*(\d+)[ \t]*\|[ \t]*(\d+)[ \t]*@", re.MULTILINE)


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
        count = len(self.repairs)
        listed = "\n".join(f"  {r}" for r in self.repairs[:_REPAIRS_LISTED])
        if count > _REPAIRS_LISTED:
            listed += f"\n  ... and {count - _REPAIRS_LISTED} more (all in .repairs)"
        super().__init__(
            f"{self.path}: loaded after {count} repair{'s' if count != 1 else ''}"
            f" of defects cantools refuses:\n{listed}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.repairs))


class DatabaseImportWarning(UserWarning):
    """A DBC that imports files it does not contain: only its own messages were loaded.

    opendbc's generator templates start with `CM_ "IMPORT _common.dbc";` lines; the DBC
    generated from a template contains the imported files, the template does not.
    """

    def __init__(self, path: str | Path, imports: Sequence[str], messages: int) -> None:
        self.path = str(path)
        self.imports = tuple(imports)
        self.messages = messages
        listed = ", ".join(self.imports[:_IMPORTS_LISTED])
        if len(self.imports) > _IMPORTS_LISTED:
            listed += f" and {len(self.imports) - _IMPORTS_LISTED} more"
        super().__init__(
            f"{self.path}: imports files it does not contain ({listed}); only its own"
            f" {messages} message{'s' if messages != 1 else ''} loaded. It is an opendbc"
            " generator template: load the DBC generated from it for the whole database."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.imports, self.messages))


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


def _imports(text: str) -> list[str]:
    """The files an opendbc generator template imports (`CM_ "IMPORT _honda_common.dbc";`)."""
    return [name.strip() for name in _IMPORT.findall(text)]


def _no_messages(path: Path, fmt: str, text: str) -> DatabaseError:
    imports = _imports(text) if fmt == "dbc" else []
    if imports:
        listed = ", ".join(imports[:_IMPORTS_LISTED])
        if len(imports) > _IMPORTS_LISTED:
            listed += f" and {len(imports) - _IMPORTS_LISTED} more"
        return DatabaseError(
            path,
            None,
            f"defines no messages, only imports other files ({listed}): it is an opendbc"
            " generator template; load the DBC generated from it, which contains them",
        )
    what = "no BO_ definition" if fmt == "dbc" else "no frame definition"
    return DatabaseError(path, None, f"defines no messages ({what}); there is nothing to load")


def _check_sizes(path: Path, text: str) -> None:
    """DatabaseError (with the line) for a message, a signal, or a count of messages or of a
    message's signals beyond what a CAN database can mean, before cantools builds anything."""
    marks = sorted(
        [(m.start(), "message", m) for m in _MESSAGE_LINE.finditer(text)]
        + [(m.start(), "signal", m) for m in _SIGNAL_LINE.finditer(text)]
    )
    name, signals, messages = "", 0, 0
    for at, kind, found in marks:
        if kind == "message":
            name, signals, messages = found.group(1)[:64], 0, messages + 1
            if messages > MAX_MESSAGES:
                raise DatabaseError(
                    path,
                    text.count("\n", 0, at) + 1,
                    f"the database defines more than {MAX_MESSAGES} messages",
                )
            if int(found.group(2)) > MAX_MESSAGE_BYTES:
                raise DatabaseError(
                    path,
                    text.count("\n", 0, at) + 1,
                    f"message {name} is {found.group(2)[:20]} bytes long "
                    f"(at most {MAX_MESSAGE_BYTES}, a J1939 transport-protocol message)",
                )
            continue
        signals += 1
        if signals > MAX_SIGNALS_PER_MESSAGE:
            raise DatabaseError(
                path,
                text.count("\n", 0, at) + 1,
                f"message {name} defines more than {MAX_SIGNALS_PER_MESSAGE} signals",
            )
        start, length = int(found.group(1)), int(found.group(2))
        if length > MAX_SIGNAL_BITS or start >= 8 * MAX_MESSAGE_BYTES:
            raise DatabaseError(
                path,
                text.count("\n", 0, at) + 1,
                f"a signal of message {name} starts at bit {str(start)[:20]} and is "
                f"{str(length)[:20]} bits long (at most {MAX_SIGNAL_BITS} bits, in a message "
                f"of at most {MAX_MESSAGE_BYTES} bytes)",
            )


def _parse_dbc(path: Path, text: str, strict: bool) -> tuple[Any, RepairResult]:
    """Repair the known defects, then parse once; a failure may still be one we can repair."""
    _check_sizes(path, text)
    result = repair_dbc(text, quick=True)
    try:
        return parse_database(result.text, "dbc", strict=strict), result
    except Exception as exc:  # cantools raises many types; all become a DatabaseError
        error: BaseException = exc
    if not result.complete:  # a digit-led identifier only where the quick repair did not look
        full = repair_dbc(text)
        if full.text != result.text:
            try:
                return parse_database(full.text, "dbc", strict=strict), full
            except Exception as exc:
                error, result = exc, full
    line, problem = locate(error, result.text)  # the repaired text keeps every line in place
    if result.refused:
        named = _IN_MESSAGE.search(problem)
        prefix = f"message {named.group(1)}: " if named else "\0"
        related = [r.removeprefix(prefix) for r in result.refused if r.startswith(prefix)]
        problem += f" (not repaired: {(related or list(result.refused))[0]})"
    raise DatabaseError(path, line, problem) from error


def load_database(
    path: str | Path, *, strict: bool = False, encoding: str | None = None
) -> LoadedDatabase:
    """Load `path`; repair a refused DBC and warn; raise DatabaseError if it cannot load.

    A DBC is repaired in memory before its one parse (every repair fixes something cantools
    refuses, so a file cantools loads is parsed unchanged). A file that defines no message
    raises DatabaseError: there is nothing a driver could read or send. A DBC that still
    imports other files (an opendbc generator template) loads what it defines, with a
    `DatabaseImportWarning`.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(FORMATS)
        raise DatabaseError(
            path, None, f"unknown database format {path.suffix or '(no suffix)'!r}; use {known}"
        )
    text = _read(path, fmt, encoding)
    if not text.strip():
        raise DatabaseError(path, None, "the file is empty")
    if fmt == "dbc":
        db, result = _parse_dbc(path, text, strict)
    else:
        try:
            db = parse_database(text, fmt, strict=strict)
        except Exception as exc:  # cantools raises many types; all become a DatabaseError
            line, problem = locate(exc, text)
            raise DatabaseError(path, line, problem) from exc
        result = None
    if not db.messages:
        raise _no_messages(path, fmt, text)
    if result is None:
        return LoadedDatabase(db)
    if result.repairs:
        warnings.warn(DatabaseRepairWarning(path, result.repairs), stacklevel=3)
    imports = _imports(text)
    if imports:
        warnings.warn(DatabaseImportWarning(path, imports, len(db.messages)), stacklevel=3)
    return LoadedDatabase(db, result.repairs, result.renamed)
