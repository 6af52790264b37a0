"""The databases a capture can be matched against: opendbc's, and any the user names.

opendbc (`pip install 'mcs-hwbridge[opendbc]'`) ships two kinds of DBC: ready files in
`opendbc/dbc/` (`opendbc.DBC_PATH`: vw_mqb.dbc, toyota_prius_2010_pt.dbc, ...), and the
`*_generated` ones (honda_civic_touring_2016_can_generated, toyota_nodsu_pt_generated, ...)
that `opendbc.get_generated_dbcs()` assembles in memory from the templates under
`opendbc/dbc/generator/`, as openpilot names them. Both are used, under opendbc's own names.
A file or a folder (its database files, not its subfolders) named by the user adds more.

Each candidate is first read cheaply: `index_of` takes, from the DBC text alone, every
message's id, length and cycle time (no cantools parse), so hundreds of databases are ranked
in well under a second; only the best few are loaded with cantools (`load_known`). Both are
cached per file (size and modification time) for the process. Everything is bounded: a file
above `MAX_DATABASE_BYTES` or past `MAX_DATABASES` is skipped with a note, never read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from hwbridge.can.database.database import CanDatabase

__all__ = [
    "FORMATS",
    "MAX_DATABASES",
    "MAX_DATABASE_BYTES",
    "OPENDBC_HINT",
    "DatabaseIndex",
    "KnownDatabase",
    "SkippedDatabase",
    "candidates",
    "index_of",
    "known_databases",
    "load_known",
    "opendbc_available",
    "opendbc_databases",
]

MAX_DATABASES = 1000
"""Candidate databases considered at most (the rest are named in a note)."""
MAX_DATABASE_BYTES = 4 * 1024 * 1024
"""A database file larger than this is skipped (opendbc's largest is 0.8 MB)."""
FORMATS = (".dbc", ".kcd", ".sym", ".arxml")
OPENDBC_HINT = "pip install 'mcs-hwbridge[opendbc]'"
_EXTENDED = 1 << 31
_ID_MASK = 0x1FFFFFFF
_BO = re.compile(r"^[ \t]*BO_[ \t]+(\d+)[ \t]+\w+[ \t]*:[ \t]*(\d+)", re.MULTILINE)
_CYCLE = re.compile(r'^[ \t]*BA_[ \t]+"GenMsgCycleTime"[ \t]+BO_[ \t]+(\d+)[ \t]+(\d+)', re.M)


@dataclass(frozen=True, slots=True)
class KnownDatabase:
    """A candidate: its name, where it comes from, and its file or (generated) text."""

    name: str
    source: str  # "opendbc" or the file's path
    path: Path | None = None
    text: str | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str, ...]:
        """What the caches know it by: the file as it is now, or the text's digest."""
        if self.path is not None:
            stat = self.path.stat()
            return (str(self.path), str(stat.st_size), str(stat.st_mtime_ns))
        digest = hashlib.sha1((self.text or "").encode(), usedforsecurity=False).hexdigest()
        return (self.name, digest)

    def read(self) -> str:
        if self.text is not None:
            return self.text
        assert self.path is not None
        data = self.path.read_bytes()
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return data.decode("cp1252", errors="replace")  # DBCs written on Windows


@dataclass(frozen=True, slots=True)
class DatabaseIndex:
    """A database's messages as the cheap ranking needs them: per frame key (id, plus bit
    31 for a 29-bit id) and, for J1939 databases, per PGN: (length, cycle time in ms or 0)."""

    messages: int
    by_key: dict[int, tuple[int, int]]
    by_pgn: dict[int, tuple[int, int]]

    def near(self, extended: bool) -> list[tuple[int, int]]:
        """(id or, for a J1939 database's 29-bit messages, PGN; length), sorted: where its
        messages lie, for the chance that one lies on a capture's id by coincidence."""
        if not extended:
            table = {k: v for k, v in self.by_key.items() if not k & _EXTENDED}
        elif self.by_pgn:
            table = self.by_pgn
        else:
            table = {k & _ID_MASK: v for k, v in self.by_key.items() if k & _EXTENDED}
        return sorted((k, v[0]) for k, v in table.items())

    def place(self, frame_id: int, extended: bool) -> int:
        """Where a frame's id lies in `near(extended)`'s numbering."""
        return _pgn(frame_id) if extended and self.by_pgn else frame_id

    def lookup(self, frame_id: int, extended: bool) -> tuple[int, int] | None:
        key = frame_id | _EXTENDED if extended else frame_id
        found = self.by_key.get(key)
        if found is not None or not extended or not self.by_pgn:
            return found
        return self.by_pgn.get(_pgn(frame_id))


def _pgn(frame_id: int) -> int:
    pgn = (frame_id >> 8) & 0x3FFFF
    if (pgn >> 8) & 0xFF < 240:  # PDU1: the low byte is a destination address
        pgn &= 0x3FF00
    return pgn


def opendbc_available() -> bool:
    """Whether the opendbc package is installed (found without importing it)."""
    return importlib.util.find_spec("opendbc") is not None


def opendbc_databases() -> tuple[list[KnownDatabase], list[str]]:
    """opendbc's DBC files and generated DBCs (none when it is not installed), and notes."""
    if not opendbc_available():
        return [], []
    notes: list[str] = []
    try:
        import opendbc
    except Exception as exc:  # installed but broken: say so, match the rest
        return [], [f"opendbc could not be imported ({type(exc).__name__}: {exc})"]
    folder = Path(getattr(opendbc, "DBC_PATH", Path(opendbc.__file__).parent / "dbc"))
    found = [
        KnownDatabase(p.stem, "opendbc", path=p)
        for p in sorted(folder.glob("*.dbc"))
        if p.is_file()
    ]
    generate = getattr(opendbc, "get_generated_dbcs", None)
    if generate is not None:
        try:
            generated = dict(generate())
        except Exception as exc:
            notes.append(f"opendbc's generated DBCs could not be built ({exc}); its files are")
            generated = {}
        names = {k.name for k in found}
        found += [
            KnownDatabase(str(name), "opendbc", text=str(text))
            for name, text in sorted(generated.items())
            if str(name) not in names
        ]
    return found, notes


def known_databases(
    paths: Sequence[str | Path] = (), *, opendbc: bool = True
) -> tuple[list[KnownDatabase], list[str]]:
    """The candidates: opendbc's (when `opendbc` and installed), then each file of `paths`
    (a folder: its database files, sorted). Raises FileNotFoundError for a path that does
    not exist; returns notes on what was left out."""
    found, notes = opendbc_databases() if opendbc else ([], [])
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files += sorted(
                p for p in path.iterdir() if p.is_file() and p.suffix.lower() in FORMATS
            )
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such database file or folder: {given}")
    names = {k.name for k in found}
    seen: dict[str, str] = {}  # content -> name: a copy of a database is not a rival
    for path in files:
        if not seen and found:
            seen = {d: k.name for k in found if (d := _digest(k)) is not None}
        known = KnownDatabase(path.name if path.name not in names else str(path), str(path), path)
        digest = _digest(known)
        if digest is not None and digest in seen:
            notes.append(f"{path} is the same as {seen[digest]}, matched once")
            continue
        if digest is not None:
            seen[digest] = known.name
        names.add(known.name)
        found.append(known)
    if len(found) > MAX_DATABASES:
        notes.append(
            f"{len(found) - MAX_DATABASES} database(s) past the first {MAX_DATABASES} were not"
            " matched"
        )
        found = found[:MAX_DATABASES]
    return found, notes


def candidates(known: Sequence[str | Path] = ()) -> tuple[list[KnownDatabase], list[str]]:
    """What `--match-known` matches: opendbc's databases and those of `known`, with notes.
    Raises ValueError when there is nothing to match (no opendbc, nothing given) and
    FileNotFoundError for a path that does not exist."""
    notes: list[str] = []
    if not opendbc_available():
        if not known:
            raise ValueError(
                f"matching known databases needs the opendbc package ({OPENDBC_HINT}) or"
                " databases of your own to match"
            )
        notes.append(f"opendbc is not installed ({OPENDBC_HINT}); only your databases were matched")
    found, more = known_databases(known)
    return found, notes + more


def _digest(known: KnownDatabase) -> str | None:
    """The content's digest (None when it cannot be read or is too large to match)."""
    try:
        return _digest_of(known.key, known)
    except (OSError, SkippedDatabase):
        return None


@lru_cache(maxsize=4096)
def _digest_of(key: tuple[str, ...], known: KnownDatabase) -> str:
    if known.text is not None:
        return key[-1]
    _check_size(known)
    assert known.path is not None
    return hashlib.sha1(known.path.read_bytes(), usedforsecurity=False).hexdigest()


class SkippedDatabase(Exception):
    """A candidate that cannot be used, with the reason in a sentence."""


def index_of(known: KnownDatabase) -> DatabaseIndex:
    """The cheap table of `known` (cached). Raises SkippedDatabase with the reason."""
    try:
        return _index(known.key, known)
    except OSError as exc:
        raise SkippedDatabase(f"cannot be read ({exc.strerror or exc})") from None


@lru_cache(maxsize=4096)
def _index(key: tuple[str, ...], known: KnownDatabase) -> DatabaseIndex:
    _check_size(known)
    suffix = known.path.suffix.lower() if known.path is not None else ".dbc"
    if suffix != ".dbc":  # KCD, SYM, ARXML: read by cantools (small, and few)
        db = load_known(known)
        by_key: dict[int, tuple[int, int]] = {}
        by_pgn: dict[int, tuple[int, int]] = {}
        for m in db.messages:
            entry = (int(m.length), int(m.cycle_time or 0))
            fid = int(m.frame_id)
            by_key.setdefault(fid | _EXTENDED if m.is_extended_frame else fid, entry)
            if m.is_extended_frame and m.protocol == "j1939":
                by_pgn.setdefault(_pgn(fid), entry)
        return DatabaseIndex(len(db.messages), by_key, by_pgn)
    text = known.read()
    cycles = {int(i): int(c) for i, c in _CYCLE.findall(text)}
    j1939 = "J1939PG" in text
    by_key, by_pgn = {}, {}
    count = 0
    for raw_id, raw_length in _BO.findall(text):
        dbc_id, length = int(raw_id), int(raw_length)
        if dbc_id == 0xC0000000:  # VECTOR__INDEPENDENT_SIG_MSG: not a message on a bus
            continue
        extended = bool(dbc_id & 0x80000000) or (dbc_id & _ID_MASK) > 0x7FF
        fid = dbc_id & _ID_MASK
        entry = (length, cycles.get(dbc_id, 0))
        count += 1
        by_key.setdefault(fid | _EXTENDED if extended else fid, entry)
        if extended and j1939:
            by_pgn.setdefault(_pgn(fid), entry)
    if not count:
        raise SkippedDatabase("defines no message (no BO_ line)")
    return DatabaseIndex(count, by_key, by_pgn)


def _check_size(known: KnownDatabase) -> None:
    size = known.path.stat().st_size if known.path is not None else len(known.text or "")
    if size > MAX_DATABASE_BYTES:
        raise SkippedDatabase(
            f"is {size / 1e6:.1f} MB, above the {MAX_DATABASE_BYTES / 1e6:.1f} MB a database"
            " may have to be matched"
        )


def load_known(known: KnownDatabase) -> CanDatabase:
    """`known` loaded with cantools, through hwbridge's repairs (cached; warnings about
    repairs are not repeated). Raises SkippedDatabase with the reason."""
    try:
        return _load(known.key, known)
    except SkippedDatabase:
        raise
    except OSError as exc:
        raise SkippedDatabase(f"cannot be read ({exc.strerror or exc})") from None


@lru_cache(maxsize=16)
def _load(key: tuple[str, ...], known: KnownDatabase) -> CanDatabase:
    _check_size(known)
    quiet = logging.getLogger("cantools")
    was = quiet.disabled
    quiet.disabled = True  # its lines about overwritten messages are not the user's concern
    try:
        return _parse(known)
    finally:
        quiet.disabled = was


def _parse(known: KnownDatabase) -> CanDatabase:
    from hwbridge.can.database.loader import DatabaseError, parse_database
    from hwbridge.can.database.repair import repair_dbc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if known.path is not None:
                db = CanDatabase.load(known.path)
            else:
                result = repair_dbc(known.read())
                loaded = parse_database(result.text, "dbc")
                db = CanDatabase(loaded, repairs=result.repairs, renamed=result.renamed)
        except DatabaseError as exc:
            raise SkippedDatabase(f"does not load: {_one_line(str(exc))}") from None
        except Exception as exc:  # cantools raises many types; none may end the matching
            raise SkippedDatabase(
                f"does not load: {type(exc).__name__}: {_one_line(str(exc))}"
            ) from None
    if not db.messages:
        raise SkippedDatabase("defines no message")
    return db


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
