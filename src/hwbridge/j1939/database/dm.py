"""Diagnostic messages DM1 (active) and DM2 (previously active) of SAE J1939-73.

Bytes 1-2 are the lamps (malfunction indicator, red stop, amber warning, protect: two bits
each for the state, then two bits each for flashing); then four bytes per trouble code:
SPN (19 bits), FMI (5 bits), the conversion method bit and the occurrence count (7 bits).
A message with no active fault carries one code of SPN 0, FMI 0; a single-frame DM1 pads
with 0xFF. Conversion method 1 marks an ECU on the SPN layout of J1939-73 versions 1-3 (SPN
most significant bits first); 0 is the layout of version 4, which nearly every ECU sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.j1939.database.tables import fmi_text, spn_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "LAMPS",
    "MAX_DTCS",
    "NOT_AVAILABLE_SPN",
    "DiagnosticMessage",
    "Dtc",
    "LampState",
    "Lamps",
    "code_fields",
    "dtc_bytes",
    "parse_dm",
    "parse_dtc",
]

LampState = Literal["off", "on", "not_available"]
Flash = Literal["slow", "fast"]
LAMPS = ("mil", "red_stop", "amber_warning", "protect")
MAX_DTCS = 446  # (1,785 - 2) / 4: the most a transport-protocol message can carry
_STATE: dict[int, LampState] = {0: "off", 1: "on", 2: "not_available", 3: "not_available"}
_FLASH: dict[int, Flash] = {0: "slow", 1: "fast"}
_STATE_BITS: dict[LampState, int] = {"off": 0, "on": 1, "not_available": 3}
_FLASH_BITS: dict[Flash, int] = {"slow": 0, "fast": 1}
NOT_AVAILABLE_SPN = 0x7FFFF
"""The SPN of a code that says no SPN is available (not a fault)."""

SpnNamer = Callable[[int], str | None]


class Lamps(BaseModel):
    """The four lamps: off, on or not_available (J1939-73 sends 11 for a lamp it lacks)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mil: LampState
    red_stop: LampState
    amber_warning: LampState
    protect: LampState


class Dtc(BaseModel):
    """One trouble code: what failed (SPN), how (FMI), how often (occurrence count)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spn: int = Field(ge=0, le=0x7FFFF)
    fmi: int = Field(ge=0, le=31)
    occurrence_count: int | None = Field(description="0-126; None when the ECU sends 127")
    conversion_method: int = Field(ge=0, le=1)
    spn_name: str | None = None
    fmi_text: str | None = None


class DiagnosticMessage(BaseModel):
    """A DM1 or DM2 from one source address."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lamps: Lamps
    flashing: dict[str, Flash] = Field(
        default_factory=dict, description="lamps that are on and flash: slow (1 Hz), fast (2 Hz)"
    )
    dtcs: list[Dtc]

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lamps": self.lamps.model_dump()}
        if self.flashing:
            out["flashing"] = dict(self.flashing)
        out["dtcs"] = [d.model_dump(exclude_none=True) for d in self.dtcs]
        return out

    def to_bytes(self) -> bytes:
        """The payload as an ECU sends it: lamps, then the codes (conversion method 0 unless a
        code says 1); no code is sent as SPN 0, FMI 0; a single frame is padded to 8 bytes
        with 0xFF."""
        state = flash = 0
        for i, lamp in enumerate(LAMPS):
            shift = 6 - 2 * i
            state |= _STATE_BITS[getattr(self.lamps, lamp)] << shift
            how = self.flashing.get(lamp)
            flash |= (3 if how is None else _FLASH_BITS[how]) << shift
        codes = [dtc_bytes(d) for d in self.dtcs[:MAX_DTCS]] or [b"\x00\x00\x00\x00"]
        data = bytes([state, flash]) + b"".join(codes)
        return data.ljust(8, b"\xff")


def dtc_bytes(dtc: Dtc) -> bytes:
    """The 4 bytes of one code (the inverse of `parse_dtc`)."""
    spn = dtc.spn
    count = 0x7F if dtc.occurrence_count is None else dtc.occurrence_count & 0x7F
    if dtc.conversion_method:
        b0, b1, b2 = (spn >> 11) & 0xFF, (spn >> 3) & 0xFF, (spn & 0x7) << 5
    else:
        b0, b1, b2 = spn & 0xFF, (spn >> 8) & 0xFF, (spn >> 16) << 5
    return bytes([b0, b1, b2 | dtc.fmi, dtc.conversion_method << 7 | count])


Code = TypeVar("Code", int, "npt.NDArray[np.int64]")


def code_fields(b0: Code, b1: Code, b2: Code, b3: Code) -> tuple[Code, Code, Code, Code]:
    """(spn, fmi, conversion method, occurrence count) of a code's four bytes: of one code
    (ints) or of many at once (int64 arrays: the `j1939_dm` table of a capture)."""
    method = b3 >> 7
    spn = method * (b0 << 11 | b1 << 3 | b2 >> 5) + (1 - method) * (b0 | b1 << 8 | b2 >> 5 << 16)
    return spn, b2 & 0x1F, method, b3 & 0x7F


def parse_dtc(data: bytes, namer: SpnNamer | None = None) -> Dtc | None:
    """The code in 4 bytes; None for padding, SPN 0/FMI 0 (no fault) or SPN 'not available'."""
    spn, fmi, method, count = code_fields(data[0], data[1], data[2], data[3])
    if (spn == 0 and fmi == 0) or spn == NOT_AVAILABLE_SPN:
        return None
    name = (namer(spn) if namer is not None else None) or spn_name(spn)
    return Dtc(
        spn=spn,
        fmi=fmi,
        occurrence_count=None if count == 0x7F else count,
        conversion_method=method,
        spn_name=name,
        fmi_text=fmi_text(fmi),
    )


def parse_dm(data: bytes, namer: SpnNamer | None = None) -> DiagnosticMessage:
    """A DM1/DM2 payload (2 lamp bytes, then 4 bytes per code); ValueError if shorter than
    6 bytes. Trailing bytes short of a whole code are ignored."""
    if len(data) < 6:
        raise ValueError(f"a DM1/DM2 is at least 6 bytes, not {len(data)}")
    state, flash = data[0], data[1]
    lamps: dict[str, LampState] = {}
    flashing: dict[str, Flash] = {}
    for i, lamp in enumerate(LAMPS):
        shift = 6 - 2 * i
        lamps[lamp] = _STATE[(state >> shift) & 3]
        how = _FLASH.get((flash >> shift) & 3)
        if how is not None and lamps[lamp] == "on":
            flashing[lamp] = how
    dtcs: list[Dtc] = []
    for offset in range(2, min(len(data), 2 + 4 * MAX_DTCS) - 3, 4):
        dtc = parse_dtc(data[offset : offset + 4], namer)
        if dtc is not None:
            dtcs.append(dtc)
    return DiagnosticMessage(lamps=Lamps(**lamps), flashing=flashing, dtcs=dtcs)
