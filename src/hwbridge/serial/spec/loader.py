"""Loading a device spec: TOML in, a checked DeviceSpec out, or SpecError naming the file,
the key and the problem (`bench.toml: commands.set_voltage.params.volts.maximum: Input
should be a valid number`)."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from hwbridge.serial.spec.models import DeviceSpec

__all__ = ["LoadedSpec", "SpecError", "load_spec", "parse_spec"]

_MAX_BYTES = 1_000_000  # a spec is a page of configuration, never megabytes
_MAX_LISTED = 5


class SpecError(ValueError):
    """A device spec that cannot be used: unreadable, not TOML, or not a valid spec."""


@dataclass(frozen=True, slots=True)
class LoadedSpec:
    """A spec with where it came from (for raw_spec and messages)."""

    spec: DeviceSpec
    source: str
    text: str
    sha256: str


def _key(location: tuple[str | int, ...]) -> str:
    parts = [str(p) for p in location if not str(p).startswith("function-")]
    return ".".join(parts) or "(top level)"


def parse_spec(text: str, source: str = "<spec>") -> DeviceSpec:
    """A DeviceSpec from TOML text; SpecError naming `source`, the key and the problem."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML: {exc}") from None
    try:
        return DeviceSpec.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{_key(e['loc'])}: {e['msg']}" for e in exc.errors()]
        more = len(problems) - _MAX_LISTED
        text = "; ".join(problems[:_MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")
        raise SpecError(f"{source}: {text}") from None


def load_spec(path: str | Path) -> LoadedSpec:
    """Read and check a spec file."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise SpecError(f"{file}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > _MAX_BYTES:
        raise SpecError(f"{file}: {len(data):,} bytes; a device spec is at most {_MAX_BYTES:,}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{file}: not UTF-8 (byte {exc.start})") from None
    spec = parse_spec(text, str(file))
    return LoadedSpec(spec, str(file), text, hashlib.sha256(data).hexdigest())
