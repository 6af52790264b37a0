"""SAE J1939 reference tables (FMI texts, common SPN and PGN names, NAME functions,
industry groups, preferred addresses), read once from `prompts/j1939_data.toml`, which
ships in the wheel."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hwbridge.core.prompts import PromptPackError, packs_dir

__all__ = [
    "address_name",
    "fmi_text",
    "function_name",
    "industry_group_name",
    "j1939_tables",
    "pgn_name",
    "spn_name",
]

_SECTIONS = ("fmi", "spn", "pgn", "function", "function_global", "industry_group", "address")


@cache
def j1939_tables(path: Path | None = None) -> MappingProxyType[str, MappingProxyType[int, str]]:
    """Section -> number -> text, from the packaged data file unless `path` is given."""
    source = path or packs_dir() / "j1939_data.toml"
    try:
        raw: dict[str, Any] = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PromptPackError(f"{source}: {exc}") from None
    out: dict[str, MappingProxyType[int, str]] = {}
    for section in _SECTIONS:
        entries = raw.get(section)
        if not isinstance(entries, dict):
            raise PromptPackError(f"{source}: the [{section}] table is missing")
        table: dict[int, str] = {}
        for key, text in entries.items():
            if not key.isdigit() or not isinstance(text, str) or not text:
                raise PromptPackError(f"{source}: bad entry {key!r} in [{section}]")
            table[int(key)] = text
        out[section] = MappingProxyType(table)
    return MappingProxyType(out)


def fmi_text(fmi: int) -> str | None:
    return j1939_tables()["fmi"].get(fmi)


def spn_name(spn: int) -> str | None:
    return j1939_tables()["spn"].get(spn)


def pgn_name(pgn: int) -> str | None:
    return j1939_tables()["pgn"].get(pgn)


def function_name(function: int, industry_group: int = 0) -> str | None:
    """Functions 0-127 mean the same everywhere; 128 and above only the global group's."""
    if function < 128:
        return j1939_tables()["function"].get(function)
    if industry_group == 0:
        return j1939_tables()["function_global"].get(function)
    return None


def industry_group_name(group: int) -> str | None:
    return j1939_tables()["industry_group"].get(group)


def address_name(address: int) -> str | None:
    """What an address is preferred for (J1939 Appendix B), where the table says."""
    return j1939_tables()["address"].get(address)
