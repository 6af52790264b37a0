"""Diagnostic trouble codes: the two-byte J1979 form, the three-byte UDS form, and the generic
SAE J2012 descriptions (data in `prompts/obd_dtc_descriptions.toml`, shipped in the wheel).

Only generic codes have a standard meaning: the second character 0 (P0xxx, C0xxx, B0xxx,
U0xxx), and P2xxx, P34xx and U3xxx. A manufacturer-specific code (P1xxx...) gets no
description rather than a guessed one.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = [
    "DTC_PATTERN",
    "decode_dtc",
    "describe_dtc",
    "dtc_descriptions",
    "encode_dtc",
    "is_generic",
    "parse_dtc",
]

DTC_PATTERN: Final = r"^[PCBUpcbu][0-3][0-9A-Fa-f]{3}$"
_DTC = re.compile(DTC_PATTERN)
_SYSTEMS = "PCBU"
_SYSTEM_NAMES = {"P": "powertrain", "C": "chassis", "B": "body", "U": "network"}


def decode_dtc(data: bytes) -> str:
    """b'\\x02\\x17' -> 'P0217' (two bits system, then the digits as nibbles)."""
    value = int.from_bytes(data[:2], "big")
    return f"{_SYSTEMS[value >> 14]}{value >> 12 & 3}{value & 0xFFF:03X}"


def encode_dtc(code: str) -> bytes:
    """'P0217' -> b'\\x02\\x17'; ValueError for anything that is not a DTC."""
    text = parse_dtc(code)
    value = _SYSTEMS.index(text[0]) << 14 | int(text[1]) << 12 | int(text[2:], 16)
    return value.to_bytes(2, "big")


def parse_dtc(code: str) -> str:
    """A DTC as written by a person ("p0217 ") in its canonical form ("P0217")."""
    text = code.strip().upper() if isinstance(code, str) else ""
    if not _DTC.match(text):
        raise ValueError(f"not a trouble code (a letter P, C, B or U and four digits): {code!r}")
    return text


def is_generic(code: str) -> bool:
    """Whether SAE J2012 defines the code's meaning (not a manufacturer's own code)."""
    system, digit, rest = code[0], code[1], code[2:]
    if digit == "0":
        return True
    if system == "P" and (digit == "2" or (digit == "3" and rest[0] == "4")):
        return True
    return system == "U" and digit == "3"


@cache
def dtc_descriptions(path: Path | None = None) -> MappingProxyType[str, str]:
    """Code -> generic description, from the packaged data file unless `path` is given."""
    source = path or packs_dir() / "obd_dtc_descriptions.toml"
    try:
        raw: dict[str, Any] = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    table: dict[str, str] = {}
    for section in raw.values():
        if not isinstance(section, dict):
            raise PromptPackError(f"{source}: codes belong in tables such as [powertrain]")
        for code, text in section.items():
            if not _DTC.match(code) or not isinstance(text, str) or not text:
                raise PromptPackError(f"{source}: bad entry {code!r}")
            table[code.upper()] = text
    return MappingProxyType(table)


def describe_dtc(code: str) -> dict[str, Any]:
    """A code with its system, whether it is generic, and its J2012 description (or None)."""
    text = parse_dtc(code)
    generic = is_generic(text)
    return {
        "code": text,
        "system": _SYSTEM_NAMES[text[0]],
        "generic": generic,
        "description": dtc_descriptions().get(text) if generic else None,
    }
