"""Which ECU a tool argument means: a name the driver reports (`engine`) or a request
address (`0x7E0`, `7E1`, `0x18DA10F1`)."""

from __future__ import annotations

from hwbridge.core.models import ToolError
from hwbridge.obd.transport.base import Ecu

__all__ = ["resolve_ecu"]


def _from_address(text: str) -> Ecu | None:
    digits = text[2:] if text.lower().startswith("0x") else text
    if not digits or len(digits) > 8 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        return None
    value = int(digits, 16)
    if 0x7E0 <= value <= 0x7E7:
        return Ecu(value, value + 8, False)
    if 0x7E8 <= value <= 0x7EF:
        return Ecu(value - 8, value, False)
    if (value & 0x1FFF00FF) == 0x18DA00F1:  # 18 DA <target> F1: a request to <target>
        return Ecu.from_response(0x18DAF100 | (value >> 8 & 0xFF), True)
    if (value & 0x1FFFFF00) == 0x18DAF100:
        return Ecu.from_response(value, True)
    return None


def resolve_ecu(text: str, known: list[Ecu]) -> Ecu:
    """The ECU `text` names; UNKNOWN_ECU (listing the known ones) when it names none."""
    key = text.strip()
    for ecu in known:
        if ecu.name == key.lower():
            return ecu
    found = _from_address(key)
    if found is not None:
        for ecu in known:  # the same ECU as found on the bus, if it answered before
            if (ecu.request_id, ecu.extended) == (found.request_id, found.extended):
                return ecu
        return found
    names = ", ".join(f"{e.name} ({e.address})" for e in known) or "none found yet"
    raise ToolError(
        "UNKNOWN_ECU",
        f"No ECU is called {key[:40]!r}. Name one of the ECUs that answered ({names}) or give "
        "a request address such as 0x7E0.",
    )
