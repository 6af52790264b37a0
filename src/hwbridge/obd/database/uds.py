"""ISO 14229 (UDS) names and rules: negative response codes, data identifiers, services, and
which requests change an ECU's state (those the send policy must allow by name).

The names are data in `prompts/uds_identifiers.toml`, shipped in the wheel.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from hwbridge.core.prompts import PromptPackError, packs_dir
from hwbridge.obd.database.pids import PIDS

__all__ = [
    "READ_ONLY_SERVICES",
    "DidInfo",
    "UdsNames",
    "decode_did",
    "find_did",
    "nrc_name",
    "policy_service",
    "service_name",
    "uds_names",
]

Encoding = Literal["ascii", "hex", "session", "bcd_date"]

READ_ONLY_SERVICES: Final = frozenset({0x19, 0x22, 0x23, 0x24, 0x3E})
"""Services that only read (ReadDTCInformation, ReadDataByIdentifier, ReadMemoryByAddress,
ReadScalingDataByIdentifier, TesterPresent); 0x10 is read-only for the default session."""
_SESSIONS = {1: "default", 2: "programming", 3: "extended", 4: "safetySystem"}
_OBD_DIDS = range(0xF400, 0xF500)  # F4xx: the mode 01 PID xx as a data identifier


@dataclass(frozen=True, slots=True)
class DidInfo:
    did: int
    name: str
    encoding: Encoding


@dataclass(frozen=True)
class UdsNames:
    nrc: MappingProxyType[int, str]
    did: MappingProxyType[int, DidInfo]
    service: MappingProxyType[int, str]


def _hex_keys(source: Path, raw: dict[str, Any], section: str) -> dict[int, Any]:
    table = raw.get(section)
    if not isinstance(table, dict):
        raise PromptPackError(f"{source}: no [{section}] table")
    out: dict[int, Any] = {}
    for key, value in table.items():
        try:
            out[int(key, 16)] = value
        except ValueError:
            raise PromptPackError(f"{source}: [{section}] key {key!r} is not hex") from None
    return out


@cache
def uds_names(path: Path | None = None) -> UdsNames:
    """The names, from the packaged data file unless `path` is given."""
    source = path or packs_dir() / "uds_identifiers.toml"
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    dids = {}
    for did, value in _hex_keys(source, raw, "did").items():
        if not (isinstance(value, list) and len(value) == 2):
            raise PromptPackError(f"{source}: [did] {did:04X} must be [name, encoding]")
        name, encoding = value
        if encoding not in ("ascii", "hex", "session", "bcd_date"):
            raise PromptPackError(f"{source}: [did] {did:04X}: unknown encoding {encoding!r}")
        dids[did] = DidInfo(did, str(name), encoding)
    return UdsNames(
        MappingProxyType({k: str(v) for k, v in _hex_keys(source, raw, "nrc").items()}),
        MappingProxyType(dids),
        MappingProxyType({k: str(v) for k, v in _hex_keys(source, raw, "service").items()}),
    )


def nrc_name(code: int) -> str:
    """`0x31` -> "requestOutOfRange"; an unknown code as its hex value."""
    return uds_names().nrc.get(code, f"0x{code:02X}")


def service_name(sid: int) -> str:
    return uds_names().service.get(sid, f"0x{sid:02X}")


def find_did(text: str | int) -> int | None:
    """A data identifier from "F190", "0xF190", 61840 or a name ("VIN"); None if none."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text <= 0xFFFF else None
    if not isinstance(text, str):
        return None
    key = text.strip()
    lowered = key.lower()
    for info in uds_names().did.values():
        if info.name.lower() == lowered:
            return info.did
    digits = key[2:] if lowered.startswith("0x") else key
    if 1 <= len(digits) <= 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
        return int(digits, 16)
    return None


def _bcd(data: bytes) -> str:
    return data.hex()


def decode_did(did: int, data: bytes) -> dict[str, Any]:
    """A DID's value as JSON: its name where the standard names it, and the data read as the
    identifier's encoding (text, a session, a date), always with the raw hex."""
    out: dict[str, Any] = {"did": f"{did:04X}", "raw": data.hex(" ").upper()}
    info = uds_names().did.get(did)
    if did in _OBD_DIDS and (pid := PIDS.get(did & 0xFF)) is not None:
        out["name"] = pid.name
        if len(data) >= pid.length:
            out["value"] = pid.decode(data[: pid.length])
            if pid.unit:
                out["unit"] = pid.unit
        return out
    if info is None:
        return out
    out["name"] = info.name
    if info.encoding == "ascii":
        out["value"] = data.decode("ascii", "replace").rstrip("\x00 ").replace("\ufffd", "?")
    elif info.encoding == "session" and data:
        out["value"] = _SESSIONS.get(data[0], f"0x{data[0]:02X}")
    elif info.encoding == "bcd_date" and len(data) >= 3:
        digits = _bcd(data[:3])
        out["value"] = f"20{digits[0:2]}-{digits[2:4]}-{digits[4:6]}"
    return out


def policy_service(request: bytes) -> str | None:
    """The send policy's name for a request that changes an ECU's state or security
    (`uds_0x2E`), or None when it only reads."""
    if not request:
        return None
    sid = request[0]
    if sid in READ_ONLY_SERVICES:
        return None
    if sid == 0x10 and len(request) >= 2 and request[1] & 0x7F == 0x01:
        return None  # back to (or staying in) the default session
    return f"uds_0x{sid:02X}"
