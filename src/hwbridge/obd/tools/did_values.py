"""What a model writes for a DID, a routine or a range of DIDs, parsed into bytes or refused.

`DidValueEncoder` is the seam for typed writes: `HexDidValues` takes the value as hex bytes
(`"02BC"`); `DefinedDidValues` takes a defined DID's value as a number in its unit or a label
(DID definitions, `hwbridge.obd.database.did_definitions`), refusing a value out of range
before anything is sent, and any other DID's as hex bytes.
"""

from __future__ import annotations

import re
from typing import Any, Final, Protocol

from hwbridge.core.models import ToolError
from hwbridge.obd.database.did_definitions import DefinedDid, DidDefinitions
from hwbridge.obd.database.uds import find_did

__all__ = [
    "MAX_SCAN_DIDS",
    "MAX_WRITE_BYTES",
    "DefinedDidValues",
    "DidValueEncoder",
    "HexDidValues",
    "parse_data_identifier",
    "parse_did_range",
    "parse_hex_bytes",
    "parse_routine",
]

MAX_WRITE_BYTES: Final = 4093  # a request carries 4095 bytes: 2E and the DID take 3 of them
MAX_SCAN_DIDS: Final = 256
_HEX: Final = re.compile(r"(?:0x)?([0-9a-fA-F]{1,4})")


def parse_hex_bytes(text: Any, what: str, *, limit: int, empty: bool = False) -> bytes:
    """`"02BC"`, `"02 BC"` or `"0x02BC"` as bytes; INVALID_VALUE (what it wants) otherwise."""
    if not isinstance(text, str):
        raise ToolError("INVALID_VALUE", f'{what} is hex bytes as a string, e.g. "02BC".')
    digits = "".join(text.split())
    if digits[:2].lower() == "0x":
        digits = digits[2:]
    try:
        data = bytes.fromhex(digits)
    except ValueError:
        raise ToolError(
            "INVALID_VALUE",
            f'{what} must be hex bytes, two digits a byte, e.g. "02BC"; got {text[:40]!r}.',
        ) from None
    if not data and not empty:
        raise ToolError("INVALID_VALUE", f'{what} needs at least one byte, e.g. "02BC".')
    if len(data) > limit:
        raise ToolError("INVALID_VALUE", f"{what} has at most {limit} bytes; got {len(data)}.")
    return data


def parse_data_identifier(text: Any, dids: DidDefinitions | None = None) -> int:
    """A DID from hex (`0101`, `0xF190`), a name `dids` defines (`IdleSpeedTarget`) or a
    name the UDS table knows (`VIN`)."""
    defined = dids.find(text) if dids is not None else None
    if defined is not None:
        return defined.did
    did = find_did(text) if isinstance(text, str | int) else None
    if did is None:
        raise ToolError(
            "INVALID_VALUE",
            f"Not a data identifier: {str(text)[:40]!r}. Give 4 hex digits such as 0101 or "
            "F190, or a name such as VIN.",
        )
    return did


def parse_routine(text: Any) -> int:
    """A routine identifier: 4 hex digits (`0203`, `0x0203`)."""
    match = _HEX.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ToolError(
            "INVALID_VALUE",
            f"Not a routine identifier: {str(text)[:40]!r}. Give 4 hex digits such as 0203.",
        )
    return int(match.group(1), 16)


def parse_did_range(start: Any, end: Any) -> range:
    """The DIDs from `start` to `end` (both included, hex), at most MAX_SCAN_DIDS of them."""
    first, last = parse_data_identifier(start), parse_data_identifier(end)
    if last < first:
        raise ToolError(
            "INVALID_VALUE", f"end ({last:04X}) comes before start ({first:04X}): swap them."
        )
    if last - first + 1 > MAX_SCAN_DIDS:
        raise ToolError(
            "INVALID_VALUE",
            f"A scan covers at most {MAX_SCAN_DIDS} DIDs a call; {first:04X}-{last:04X} has "
            f"{last - first + 1}. Scan {first:04X}-{first + MAX_SCAN_DIDS - 1:04X}, then the "
            "next range.",
        )
    return range(first, last + 1)


class DidValueEncoder(Protocol):
    """Turns what a model wrote for a DID into the bytes WriteDataByIdentifier carries."""

    def encode(self, did: int, value: Any) -> bytes:
        """The data record for `did`; ToolError (INVALID_VALUE, OUT_OF_RANGE) to refuse."""
        ...


class HexDidValues:
    """Every DID's value as hex bytes: the model gives the bytes themselves."""

    def encode(self, did: int, value: Any) -> bytes:
        return parse_hex_bytes(value, "value", limit=MAX_WRITE_BYTES)


class DefinedDidValues:
    """A defined DID's value in its own terms (a number in its unit, a label, text), any
    other DID's as hex bytes; a DID defined as not writable is refused."""

    def __init__(self, dids: DidDefinitions) -> None:
        self.dids = dids
        self._hex = HexDidValues()

    def encode(self, did: int, value: Any) -> bytes:
        defined: DefinedDid | None = self.dids.by_did.get(did)
        if defined is None:
            return self._hex.encode(did, value)
        if not defined.spec.writable:
            raise ToolError(
                "NOT_WRITABLE",
                f"{defined.name} ({did:04X}) is not writable by its definition "
                f"({self.dids.source}); nothing was sent.",
            )
        return defined.encode(value)
