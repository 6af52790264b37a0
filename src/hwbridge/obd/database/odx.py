"""Reading an ODX description (ASAM MCD-2 D, ISO 22901) through odxtools, bounded.

A PDX is a zip of ODX XML documents written by others, so before odxtools sees any of it the
file is held to what a diagnostic description can mean, as a DBC is
(`hwbridge.can.database.loader`): at most `MAX_PDX_BYTES` on disk, `MAX_MEMBERS` members,
`MAX_ODX_BYTES` of XML once inflated (counted from the zip's directory before anything is
inflated, so a zip bomb is refused at once, and counted again while inflating, so a member
that lies about its size gains nothing), `MAX_ELEMENTS` XML elements at most `MAX_DEPTH`
deep, and `MAX_LOAD_S` seconds of parsing and building, odxtools' work included (it walks a
layer's inheritance once per path, 2**n paths for n layers that each name their parent twice:
no bound on the XML bounds that). The XML is parsed by expat with no document type
declaration allowed (ODX needs none): no entity can be declared, so none can expand (billion
laughs) or fetch a file. Members that are not ODX (job code, flash data) are not read.

Every refusal is an `OdxError` naming the file, the member and the problem.
"""

from __future__ import annotations

import ctypes
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, TypeVar
from xml.etree.ElementTree import Element, TreeBuilder
from xml.parsers import expat

__all__ = [
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_LOAD_S",
    "MAX_MEMBERS",
    "MAX_ODX_BYTES",
    "MAX_PDX_BYTES",
    "OdxDescription",
    "OdxError",
    "load_odx",
    "parse_odx_xml",
]

MAX_PDX_BYTES: Final = 64 * 1024**2
"""The largest PDX (or single ODX file) read, on disk."""
MAX_ODX_BYTES: Final = 128 * 1024**2
"""The most XML a PDX may inflate to, all its ODX members together."""
MAX_MEMBERS: Final = 4096
"""Members a PDX may have (a vehicle's PDX has tens to hundreds)."""
MAX_ELEMENTS: Final = 1_000_000
"""XML elements, all ODX members together: odxtools builds objects for them at about 13 us
an element (measured on the 2-core machine: 820,000 elements, 20,000 services, 11 s and
650 MB), so this bounds its time and memory too (about 15 s and 800 MB at the limit)."""
MAX_DEPTH: Final = 256
"""How deep XML elements may nest (ODX nests a few tens deep)."""
MAX_LOAD_S: Final = 60.0
"""How long reading and parsing the XML, then odxtools' building of its objects, may take."""
_PIECE: Final = 1024 * 1024
_CHECK_EVERY: Final = 4096  # elements between two looks at the clock


class OdxError(ValueError):
    """An ODX description that cannot be used: which file, which member, what is wrong."""

    def __init__(self, path: str | Path, problem: str, member: str | None = None) -> None:
        self.path = str(path)
        self.member = member
        self.problem = problem
        where = f"{self.path} ({member})" if member else self.path
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem, self.member))


@dataclass
class _Budget:
    """What the XML of one description may still use: elements and time."""

    deadline: float
    elements: int = 0


class _Refused(Exception):
    """Raised inside expat's handlers to stop the parse; becomes an OdxError."""


class _OutOfTime(BaseException):
    """Set in the loading thread when odxtools runs past the deadline: a BaseException, so
    odxtools' own `except Exception` cannot swallow it."""


_T = TypeVar("_T")


def _delivered() -> None:
    """A Python call: a pending asynchronous exception is raised at the latest here."""


def _before(deadline: float, work: Callable[[], _T]) -> _T:
    """`work()` in this thread, stopped by `_OutOfTime` once `time.monotonic()` passes
    `deadline`. odxtools is pure Python: an exception set for this thread from a timer lands
    between two of its bytecodes, however it loops or recurses."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _OutOfTime
    thread = ctypes.c_ulong(threading.get_ident())

    def expire() -> None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(thread, ctypes.py_object(_OutOfTime))

    timer = threading.Timer(left, expire)
    timer.daemon = True
    timer.start()
    try:
        return work()
    finally:
        timer.cancel()
        timer.join()  # no exception can be set after this; one set just before is raised
        _delivered()  # here, inside this call's try, not later in the caller


def _no_dtd(*_: Any) -> None:
    raise _Refused(
        "has a document type declaration (<!DOCTYPE>); ODX needs none, and its entities "
        "could expand without bound, so it is not read"
    )


def _no_external(*_: Any) -> int:
    raise _Refused("refers to an external entity, which is never fetched")


def parse_odx_xml(
    chunks: Iterator[bytes], budget: _Budget | None = None, *, limit_s: float = MAX_LOAD_S
) -> Element:
    """The root element of one XML document fed in `chunks`, built by expat with no DTD,
    at most MAX_ELEMENTS elements (counted in `budget`, shared by a PDX's members), MAX_DEPTH
    deep, before `budget.deadline`. ValueError (the problem, in words) otherwise."""
    budget = budget or _Budget(time.monotonic() + limit_s)
    builder = TreeBuilder()
    parser = expat.ParserCreate(None, "}")
    parser.buffer_text = True
    parser.ordered_attributes = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _no_dtd
    parser.EntityDeclHandler = _no_dtd
    parser.ExternalEntityRefHandler = _no_external
    names: dict[str, str] = {}
    depth = 0

    def name(raw: str) -> str:
        fixed = names.get(raw)
        if fixed is None:
            fixed = names[raw] = "{" + raw if "}" in raw else raw
        return fixed

    def start(tag: str, attributes: list[str]) -> None:
        nonlocal depth
        depth += 1
        budget.elements += 1
        if depth > MAX_DEPTH:
            raise _Refused(f"nests elements more than {MAX_DEPTH} deep")
        if budget.elements > MAX_ELEMENTS:
            raise _Refused(f"has more than {MAX_ELEMENTS:,} XML elements")
        if budget.elements % _CHECK_EVERY == 0 and time.monotonic() > budget.deadline:
            raise _Refused(f"took more than {MAX_LOAD_S:g} s to parse")
        attrib = {name(attributes[i]): attributes[i + 1] for i in range(0, len(attributes), 2)}
        builder.start(name(tag), attrib)

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        builder.end(name(tag))

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    try:
        for chunk in chunks:
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except expat.ExpatError as exc:
        raise ValueError(f"not well-formed XML: {exc}") from None
    root = builder.close()
    if time.monotonic() > budget.deadline:
        raise ValueError(f"took more than {MAX_LOAD_S:g} s to parse")
    return root


def _pieces(stream: IO[bytes], counted: Callable[[int], None]) -> Iterator[bytes]:
    while piece := stream.read(_PIECE):
        counted(len(piece))
        yield piece


@dataclass(frozen=True)
class OdxDescription:
    """An odxtools Database and the file it came from."""

    path: Path
    database: Any  # odxtools.database.Database

    def variants(self) -> dict[str, Any]:
        """The diagnostic layers a tool set can be made from (ECU variants, then base
        variants), by short name."""
        db = self.database
        return {dl.short_name: dl for dl in [*db.ecu_variants, *db.base_variants]}

    def variant(self, name: str | None) -> Any:
        """The layer named `name`; without a name, the only ECU variant (or the only base
        variant when there is none). OdxError listing the names otherwise."""
        layers = self.variants()
        listed = ", ".join(list(layers)[:20]) or "none"
        if name is not None:
            if name in layers:
                return layers[name]
            raise OdxError(self.path, f"has no variant {name[:64]!r}; its variants: {listed}")
        ecus = list(self.database.ecu_variants)
        bases = list(self.database.base_variants)
        if len(ecus) == 1:
            return ecus[0]
        if not ecus and len(bases) == 1:
            return bases[0]
        if not layers:
            raise OdxError(self.path, "describes no ECU (no ECU or base variant)")
        raise OdxError(
            self.path, f"describes several variants; name one with odx_variant: {listed}"
        )


_END: Final = b"PK\x05\x06"  # end of central directory record
_END64_LOCATOR: Final = b"PK\x06\x07"  # ZIP64 end of central directory locator
_END64: Final = b"PK\x06\x06"  # ZIP64 end of central directory record
_TAIL: Final = 22 + 0xFFFF  # the end record and the longest comment it may carry


def _declared_members(path: Path) -> int | None:
    """How many members the zip's end record declares, read from its tail alone (`zipfile`
    reads the whole directory first: 1.2 million entries in a 60 MB file took 5.4 s and
    736 MB before they could be counted). None when the tail has no end record (then
    `zipfile` says what is wrong)."""
    with path.open("rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(max(0, size - _TAIL))
        tail = stream.read(_TAIL)
        at = tail.rfind(_END)
        if at < 0 or len(tail) < at + 22:
            return None
        count = int.from_bytes(tail[at + 10 : at + 12], "little")
        if count != 0xFFFF or at < 20 or tail[at - 20 : at - 16] != _END64_LOCATOR:
            return count
        record = int.from_bytes(tail[at - 12 : at - 4], "little")  # the ZIP64 end record
        if not 0 <= record <= size - 56:
            return None
        stream.seek(record)
        end64 = stream.read(56)
        if end64[:4] != _END64:
            return None
        return int.from_bytes(end64[32:40], "little")


def _members(path: Path, archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The ODX members of a PDX, after the checks that need no inflating."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise OdxError(path, f"has {len(infos):,} members; a PDX has at most {MAX_MEMBERS:,}")
    odx = [i for i in infos if not i.is_dir() and Path(i.filename).suffix.lower()[:4] == ".odx"]
    declared = sum(i.file_size for i in odx)
    if declared > MAX_ODX_BYTES:
        raise OdxError(
            path,
            f"its ODX documents inflate to {declared:,} bytes; at most {MAX_ODX_BYTES:,} are "
            "read (a zip bomb, or a description far beyond any ECU's)",
        )
    for info in odx:
        if info.flag_bits & 0x1:
            raise OdxError(path, "is encrypted", info.filename[:200])
    if not odx:
        raise OdxError(path, "holds no ODX document (.odx-d, .odx-c, .odx-cs...)")
    return odx


def load_odx(path: str | Path, *, limit_s: float = MAX_LOAD_S) -> OdxDescription:
    """Read a PDX (or one ODX file) within the bounds above, then hand its documents to
    odxtools. OdxError (file, member, problem) for anything that cannot be used."""
    try:
        from odxtools.database import Database
    except ImportError:
        raise OdxError(
            path, "reading ODX needs odxtools: pip install 'mcs-hwbridge[odx]'"
        ) from None
    file = Path(path)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise OdxError(file, f"cannot be read: {exc.strerror or exc}") from None
    if size > MAX_PDX_BYTES:
        raise OdxError(file, f"{size:,} bytes; an ODX description is read up to {MAX_PDX_BYTES:,}")
    budget = _Budget(time.monotonic() + limit_s)
    roots: list[tuple[str, Element]] = []
    inflated = 0

    def counted(n: int) -> None:
        nonlocal inflated
        inflated += n
        if inflated > MAX_ODX_BYTES:
            raise _Refused(f"inflates past {MAX_ODX_BYTES:,} bytes")

    try:
        if file.suffix.lower() == ".pdx":
            declared = _declared_members(file)
            if declared is not None and declared > MAX_MEMBERS:
                raise OdxError(file, f"has {declared:,} members; a PDX has at most {MAX_MEMBERS:,}")
            with zipfile.ZipFile(file) as archive:
                for info in _members(file, archive):
                    member = info.filename[:200]
                    try:
                        with archive.open(info) as stream:
                            roots.append((member, parse_odx_xml(_pieces(stream, counted), budget)))
                    except (ValueError, _Refused) as exc:
                        raise OdxError(file, str(exc), member) from None
        elif file.suffix.lower().startswith(".odx"):
            with file.open("rb") as stream:
                roots.append((file.name, parse_odx_xml(_pieces(stream, counted), budget)))
        else:
            raise OdxError(file, "is neither a PDX (.pdx) nor an ODX file (.odx, .odx-d, ...)")
    except (ValueError, _Refused) as exc:
        if isinstance(exc, OdxError):
            raise
        raise OdxError(file, str(exc)) from None
    except zipfile.BadZipFile as exc:
        raise OdxError(file, f"is not a readable zip (a PDX is one): {exc}") from None
    except (NotImplementedError, RuntimeError, EOFError, zipfile.LargeZipFile) as exc:
        raise OdxError(file, f"cannot be inflated: {exc}") from None
    except OSError as exc:
        raise OdxError(file, f"cannot be read: {exc.strerror or exc}") from None
    return OdxDescription(file, _internalize(file, roots, Database, budget.deadline, limit_s))


def _internalize(
    file: Path, roots: list[tuple[str, Element]], database: Any, deadline: float, limit_s: float
) -> Any:
    """odxtools' Database of the parsed documents, built before `deadline` (the end of the
    load's `limit_s`); its failures become OdxError."""
    db = database()
    member: str | None = None

    def build() -> None:
        nonlocal member
        for name, root in roots:
            member = name
            db.add_odx_xml_tree(root)
        member = None
        db.refresh()

    try:
        _before(deadline, build)
    except _OutOfTime:
        raise OdxError(
            file, f"took more than {limit_s:g} s to read (odxtools' part)", member
        ) from None
    except RecursionError:
        raise OdxError(file, "nests references too deeply for odxtools", member) from None
    except Exception as exc:  # odxtools raises many types for a bad document
        problem = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise OdxError(file, f"odxtools cannot use it: {problem}", member) from None
    return db
