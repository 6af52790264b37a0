"""Driver trust (spec section 14): drivers found by entry point, checked before they load.

A driver distribution registers its driver in the entry point group `hwbridge.drivers`:

    [project.entry-points."hwbridge.drivers"]
    thermostat = "thermo_driver:Thermostat"

`load_driver("thermostat", sha256=...)` then checks, before anything of the distribution
is imported, that every file its RECORD lists is on disk with the recorded hash, that no
module sits beside them unrecorded, and that the distribution's digest equals the pinned
`sha256`; it refuses with `DriverTrustError` otherwise, or when there is no RECORD.

The digest is the sha256 of the RECORD lines (path and hash, sorted) of the files that
come from the wheel: the same on every machine that installs that wheel, and computed from
the wheel itself by `wheel_digest(path)`, so a publisher can print it beside the upload.
The installer's own files (INSTALLER, REQUESTED, direct_url.json, RECORD, console
scripts, bytecode caches) vary by installation and are left out. Console scripts live
outside the distribution (where the installer put them, `../../bin/...`) and are not
checked: loading a driver never runs them. Bytecode caches (`__pycache__`) are not in
RECORD and cannot be checked: whoever can write them can write anything else in
site-packages too.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from email.utils import parseaddr
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.core.models import DriverMeta, TrustManifest

__all__ = [
    "ENTRY_POINT_GROUP",
    "DriverEntry",
    "DriverTrustError",
    "TrustStatus",
    "Verification",
    "installed_drivers",
    "load_driver",
    "verify_distribution",
    "wheel_digest",
]

ENTRY_POINT_GROUP = "hwbridge.drivers"
HWBRIDGE_DISTRIBUTION = "mcs-hwbridge"

TrustStatus = Literal["verified", "intact", "built-in", "tampered", "no-record", "editable"]
"""verified: files match RECORD and the pinned digest; intact: files match RECORD (no pin
given); built-in: a driver of hwbridge itself, whose code is already running; tampered: a
file differs from RECORD, is missing or unrecorded, or the digest is not the pinned one;
no-record: the distribution has no RECORD to check; editable: an editable install (`pip
install -e`), whose code lives outside the recorded files."""

_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})
_HASHES = frozenset({"sha256", "sha384", "sha512"})
_CODE_SUFFIXES = frozenset({".py", ".so", ".pyd", ".pth"})
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_MAX_PROBLEMS = 20


class DriverTrustError(Exception):
    """A driver was refused before anything of it was imported; the message says why."""


class Verification(BaseModel):
    """What checking a distribution found (nothing of it imported)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    distribution: str
    version: str
    status: TrustStatus
    digest: str | None = Field(
        default=None, description="sha256 over the recorded wheel files; pin this"
    )
    files: int = Field(default=0, description="files checked against RECORD")
    problems: list[str] = Field(default_factory=list)

    @property
    def trusted(self) -> bool:
        return self.status in ("verified", "intact", "built-in")


class DriverEntry(BaseModel):
    """A driver registered under `hwbridge.drivers`, found without importing it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: str = Field(description="module:attribute the entry point names")
    distribution: str | None = None
    version: str | None = None


def installed_drivers() -> list[DriverEntry]:
    """Every driver registered under `hwbridge.drivers` in this environment, by name."""
    found: dict[str, DriverEntry] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        found.setdefault(
            ep.name,
            DriverEntry(
                name=ep.name,
                value=ep.value,
                distribution=_field(dist, "Name") if dist is not None else None,
                version=dist.version if dist is not None else None,
            ),
        )
    return sorted(found.values(), key=lambda e: e.name)


def load_driver(name: str, sha256: str | None = None) -> Any:
    """The driver registered as `name` (usually a driver class), once its distribution has
    been checked: files against RECORD, digest against `sha256` when pinned. Nothing of the
    distribution is imported before that. Its `meta.trust` then carries the author, the
    source repository and the verified digest.

    hwbridge's own drivers (`can`, `captures`, ...) are part of the code already running
    and load unchecked unless a `sha256` is pinned. Raises `DriverTrustError` on any
    refusal and `LookupError` when no driver has that name.
    """
    ep = _entry_point(name)
    dist = ep.dist
    if dist is None:
        raise DriverTrustError(
            f"driver {name!r} ({ep.value}) belongs to no installed distribution, so it "
            "cannot be verified"
        )
    if sha256 is not None and not _HEX64.match(sha256):
        raise ValueError("sha256 must be 64 hexadecimal characters")
    verification = verify_distribution(dist, sha256)
    if not verification.trusted:
        raise DriverTrustError(_refusal(name, verification))
    loaded = ep.load()
    if verification.status != "built-in" or sha256 is not None:
        _attach_trust(loaded, dist, verification.digest)
    return loaded


def verify_distribution(
    distribution: str | metadata.Distribution, sha256: str | None = None
) -> Verification:
    """Check an installed distribution against its RECORD (and `sha256`, when given)."""
    dist = metadata.distribution(distribution) if isinstance(distribution, str) else distribution
    name, version = _field(dist, "Name") or "unknown", str(dist.version)

    def result(status: TrustStatus, **fields: Any) -> Verification:
        return Verification(distribution=name, version=version, status=status, **fields)

    if _is_editable(dist):
        if sha256 is None and _canonical(name) == HWBRIDGE_DISTRIBUTION:
            return result("built-in")
        problems = ["an editable install keeps its code outside the recorded files"]
        return result("editable", problems=problems)
    record = dist.read_text("RECORD")
    if record is None:
        return result("no-record", problems=["the distribution has no RECORD file"])
    entries = list(_record_entries(record))
    problems = list(_check_files(dist, entries))
    digest = _digest(entries)
    if not problems and sha256 is not None and digest != sha256.lower():
        problems.append(f"its digest is {digest}, not the pinned {sha256.lower()}")
    if problems:
        return result("tampered", digest=digest, files=len(entries), problems=problems)
    if sha256 is not None:
        return result("verified", digest=digest, files=len(entries))
    status: TrustStatus = "built-in" if _canonical(name) == HWBRIDGE_DISTRIBUTION else "intact"
    return result(status, digest=digest, files=len(entries))


def wheel_digest(path: str | Path) -> str:
    """The digest `load_driver` pins, computed from a wheel file (after checking the
    wheel's own files against its RECORD): what a publisher prints beside the upload."""
    with zipfile.ZipFile(path) as wheel:
        records = [n for n in wheel.namelist() if _is_record(n)]
        if len(records) != 1:
            raise ValueError(f"{path} has {len(records)} RECORD files, not one")
        entries = list(_record_entries(wheel.read(records[0]).decode()))
        for file, algorithm, expected in entries:
            if expected is None:
                continue
            try:
                data = wheel.read(file)
            except KeyError:
                raise ValueError(f"{path}: {file} is in RECORD but not in the wheel") from None
            if _hash(data, algorithm) != expected:
                raise ValueError(f"{path}: {file} does not match its RECORD hash")
    return _digest(entries)


# -- internals ------------------------------------------------------------------------------

_Entry = tuple[str, str, str | None]  # path, algorithm, urlsafe-base64 hash (None: no hash)


def _entry_point(name: str) -> metadata.EntryPoint:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep
    known = ", ".join(e.name for e in installed_drivers()) or "none"
    raise LookupError(f"no driver named {name!r} is installed (installed: {known})")


def _record_entries(text: str) -> Iterator[_Entry]:
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0]:
            continue
        path = row[0]
        algorithm, _, value = (row[1] if len(row) > 1 else "").partition("=")
        yield path, algorithm, value or None


def _check_files(dist: metadata.Distribution, entries: list[_Entry]) -> Iterator[str]:
    """Every recorded file on disk with its hash; nothing unrecorded beside them."""
    problems = 0
    recorded: set[Path] = set()
    folders: set[Path] = set()
    for path, algorithm, expected in entries:
        if _outside(path):
            continue  # console scripts: the installer writes them, where it decides
        located = Path(str(dist.locate_file(path))).resolve()
        recorded.add(located)
        if not _is_installer_file(path):
            folders.add(located.parent)
        problem = _check_one(located, path, algorithm, expected)
        if problem is not None:
            problems += 1
            if problems <= _MAX_PROBLEMS:
                yield problem
    site = Path(str(dist.locate_file(""))).resolve()
    for folder in sorted(folders - {site}):
        for child in sorted(folder.iterdir()) if folder.is_dir() else ():
            if child.suffix in _CODE_SUFFIXES and child.is_file() and child not in recorded:
                yield f"{child.relative_to(site)} is not in RECORD"


def _check_one(file: Path, path: str, algorithm: str, expected: str | None) -> str | None:
    if expected is None:
        if _is_installer_file(path) or "__pycache__" in PurePosixPath(path).parts:
            return None
        if file.suffix in _CODE_SUFFIXES:
            return f"{path} is recorded without a hash"
        return None
    if algorithm not in _HASHES:
        return f"{path} is recorded with {algorithm or 'no'} hash, which proves nothing"
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return f"{path} is missing"
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if _hash(data, algorithm) != expected:
        return f"{path} differs from its RECORD hash"
    return None


def _hash(data: bytes, algorithm: str) -> str:
    digest = hashlib.new(algorithm, data).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _digest(entries: Iterable[_Entry]) -> str:
    lines = sorted(
        f"{path},{algorithm}={value}"
        for path, algorithm, value in entries
        if value is not None and _from_wheel(path)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _outside(path: str) -> bool:
    """A path outside the distribution's root (`../../bin/tool`): an installer's script."""
    return path.startswith(("..", "/")) or PurePosixPath(path).is_absolute()


def _from_wheel(path: str) -> bool:
    """True for files the wheel itself carries (installer output varies by machine)."""
    parts = PurePosixPath(path).parts
    if _outside(path) or "__pycache__" in parts or _is_installer_file(path):
        return False
    return not any(p.endswith(".data") for p in parts[:1])


def _is_installer_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in _INSTALLER_FILES


def _is_record(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "RECORD"


def _is_editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        info = json.loads(text)
    except ValueError:
        return False
    return bool(isinstance(info, dict) and (info.get("dir_info") or {}).get("editable"))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _refusal(name: str, verification: Verification) -> str:
    what = f"driver {name!r} ({verification.distribution} {verification.version})"
    reasons = "; ".join(verification.problems[:5])
    more = len(verification.problems) - 5
    if more > 0:
        reasons += f"; and {more} more"
    if verification.status == "editable":
        return (
            f"{what} is refused: {reasons}, so it cannot be verified; install it from a "
            "wheel (or import it directly while you develop it)"
        )
    if verification.status == "no-record":
        return f"{what} is refused: {reasons}, so its files cannot be verified"
    return f"{what} is refused, nothing of it was imported: {reasons}"


def _attach_trust(loaded: Any, dist: metadata.Distribution, digest: str | None) -> None:
    """Give the loaded driver's DriverMeta its manifest: the author and source the driver
    declares (else its distribution's metadata) and the verified digest."""
    meta = getattr(loaded, "meta", None)
    if not isinstance(meta, DriverMeta):
        return
    declared = meta.trust
    manifest = TrustManifest(
        author=declared.author if declared is not None else _author(dist),
        source_url=declared.source_url if declared is not None else _source(dist),
        sha256=digest,
    )
    with contextlib.suppress(AttributeError, TypeError):  # else it keeps its meta
        loaded.meta = meta.model_copy(update={"trust": manifest})


def _field(dist: metadata.Distribution, key: str) -> str | None:
    values = dist.metadata.get_all(key)
    return str(values[0]) if values else None


def _author(dist: metadata.Distribution) -> str:
    for key in ("Author", "Maintainer"):
        value = _field(dist, key)
        if value and value.strip() and value.strip().upper() != "UNKNOWN":
            return value.strip()
    for key in ("Author-email", "Maintainer-email"):
        value = _field(dist, key)
        if value:
            person, address = parseaddr(value.split(",")[0])
            if person or address:
                return person or address
    return "unknown"


def _source(dist: metadata.Distribution) -> str | None:
    urls: dict[str, str] = {}
    for entry in dist.metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        urls[label.strip().lower()] = url.strip()
    for label in ("source", "repository", "source code", "code", "homepage"):
        if urls.get(label):
            return urls[label]
    home = _field(dist, "Home-page")
    return home.strip() if home else None
