"""Trouble codes of the simulated truck and the DM1/DM2 messages of SAE J1939-73.

A DM1 (active DTCs, PGN 65226) or DM2 (previously active, PGN 65227) is two lamp bytes and
then four bytes per DTC:

- byte 1: lamp status, two bits each, MIL (bits 8-7), red stop (6-5), amber warning (4-3),
  protect (2-1): 00 off, 01 on;
- byte 2: the same lamps' flash, 00 slow (1 Hz), 01 fast (2 Hz), 11 do not flash;
- each DTC: SPN bits 1-8, SPN bits 9-16, then SPN bits 17-19 in bits 8-6 of the third
  byte with the FMI in its bits 5-1, then the conversion method (bit 8, 0) and the
  occurrence count (bits 7-1, 1-126).

No DTC is sent as SPN 0, FMI 0, OC 0 and `FF FF` after it (8 bytes); one DTC pads the
frame with `FF FF`; two or more make a 2 + 4n byte message that travels by the transport
protocol. A lamp is on when any active DTC lights it, and flashes (fast over slow) when any
of them asks for it. DM2 carries the same lamp bytes as DM1: the lamps as they are now.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

__all__ = [
    "LAMPS",
    "TRUCK_FAULTS",
    "Dtc",
    "DtcStore",
    "LampState",
    "TruckFault",
    "combined_lamps",
    "dm_payload",
    "encode_dtc",
    "encode_lamps",
]

LampState = Literal["off", "on", "slow_flash", "fast_flash"]
LAMPS: Final = ("mil", "red_stop", "amber_warning", "protect")
"""The lamps of J1939-73 in the order of their bits, from bit 8 down."""
_SHIFT: Final = {"mil": 6, "red_stop": 4, "amber_warning": 2, "protect": 0}
_FLASH_BITS: Final = {"slow_flash": 0b00, "fast_flash": 0b01}
_STRENGTH: Final = {"off": 0, "on": 1, "slow_flash": 2, "fast_flash": 3}
_MAX_OC: Final = 126  # 127 means "not available"
_CONTROLLERS: Final = ("engine", "transmission", "brakes")


@dataclass(frozen=True, slots=True)
class TruckFault:
    """A fault `--fault NAME` raises: the controller reporting it, its SPN and FMI (J1939-73)
    and the lamps it lights."""

    name: str
    controller: str
    spn: int
    fmi: int
    lamps: Mapping[str, LampState]
    description: str

    def __post_init__(self) -> None:
        if self.controller not in _CONTROLLERS:
            raise ValueError(f"unknown controller {self.controller!r}")
        if not 0 <= self.spn < 1 << 19 or not 0 <= self.fmi <= 31:
            raise ValueError(f"SPN {self.spn} FMI {self.fmi} out of range")
        if not set(self.lamps) <= set(LAMPS):
            raise ValueError(f"unknown lamps {sorted(set(self.lamps) - set(LAMPS))}")

    def lamp_text(self) -> str:
        """`amber_warning + red_stop`, `mil slow_flash`: what the fault lights."""
        return " + ".join(
            lamp if state == "on" else f"{lamp} {state}" for lamp, state in self.lamps.items()
        )


def _faults(*faults: TruckFault) -> Mapping[str, TruckFault]:
    return MappingProxyType({f.name: f for f in faults})


TRUCK_FAULTS: Final = _faults(
    TruckFault(
        "coolant_temp_high",
        "engine",
        110,
        0,  # data valid but above normal operational range, most severe level
        {"amber_warning": "on", "red_stop": "on"},
        "engine coolant temperature above its range, most severe level: the coolant climbs"
        " past 120 degC (ET1)",
    ),
    TruckFault(
        "oil_pressure_low",
        "engine",
        100,
        1,  # data valid but below normal operational range, most severe level
        {"red_stop": "on"},
        "engine oil pressure below its range, most severe level (EFL_P1 about 40 kPa)",
    ),
    TruckFault(
        "nox_sensor",
        "engine",
        3216,
        20,  # data drifted high
        {"mil": "on"},
        "aftertreatment 1 intake NOx sensor drifted high (an emissions fault: MIL on)",
    ),
    TruckFault(
        "misfire",
        "engine",
        1322,
        31,  # condition exists
        {"mil": "slow_flash"},
        "misfire in several cylinders, severe enough to damage the aftertreatment: the MIL flashes",
    ),
    TruckFault(
        "transmission_oil_temp_high",
        "transmission",
        177,
        16,  # data valid but above normal operational range, moderately severe level
        {"amber_warning": "on"},
        "transmission oil temperature above its range, moderately severe (TRF1 about 130 degC)",
    ),
    TruckFault(
        "wheel_speed_sensor",
        "brakes",
        84,
        2,  # data erratic, intermittent or incorrect
        {"amber_warning": "on"},
        "wheel-based speed erratic (a wheel speed sensor): ABS not fully operational, its"
        " amber warning on (EBC1)",
    ),
)
"""The faults of the simulated truck by name: `python -m firmware_sim --j1939 --fault NAME`."""


@dataclass(frozen=True, slots=True)
class Dtc:
    """One diagnostic trouble code with its occurrence count and the lamps it lights."""

    spn: int
    fmi: int
    occurrences: int
    lamps: Mapping[str, LampState] = field(default_factory=dict)
    fault: str = ""


def encode_dtc(spn: int, fmi: int, occurrences: int) -> bytes:
    """The four DTC bytes of J1939-73 (conversion method 0)."""
    if not 0 <= spn < 1 << 19 or not 0 <= fmi <= 31 or not 0 <= occurrences <= 127:
        raise ValueError(f"SPN {spn}, FMI {fmi}, OC {occurrences} out of range")
    return bytes([spn & 0xFF, (spn >> 8) & 0xFF, ((spn >> 16) & 0x7) << 5 | fmi, occurrences])


def encode_lamps(lamps: Mapping[str, LampState]) -> bytes:
    """The lamp status and flash bytes; lamps not given are off and do not flash."""
    status, flash = 0, 0xFF
    for lamp, state in lamps.items():
        shift = _SHIFT[lamp]
        if state != "off":
            status |= 0b01 << shift
        if state in _FLASH_BITS:
            flash &= ~(0b11 << shift) & 0xFF
            flash |= _FLASH_BITS[state] << shift
    return bytes([status, flash])


def combined_lamps(dtcs: Iterable[Dtc]) -> dict[str, LampState]:
    """Each lamp as the strongest request of any of `dtcs`."""
    lamps: dict[str, LampState] = dict.fromkeys(LAMPS, "off")
    for dtc in dtcs:
        for lamp, state in dtc.lamps.items():
            if _STRENGTH[state] > _STRENGTH[lamps[lamp]]:
                lamps[lamp] = state
    return lamps


def dm_payload(lamps: Mapping[str, LampState], dtcs: Iterable[Dtc]) -> bytes:
    """A DM1 or DM2 payload: 8 bytes for none or one DTC, 2 + 4n bytes for more."""
    codes = [encode_dtc(d.spn, d.fmi, min(d.occurrences, _MAX_OC)) for d in dtcs]
    head = encode_lamps(lamps)
    if not codes:
        return head + bytes(4) + b"\xff\xff"
    if len(codes) == 1:
        return head + codes[0] + b"\xff\xff"
    return head + b"".join(codes)


class DtcStore:
    """The active and previously active DTCs of one controller; thread-safe.

    `raise_fault` makes a fault's DTC active: new with occurrence count 1, or counted once
    more when it was active or previously active (it occurred again). `end_fault` moves it
    to the previously active ones, count kept. DM11 (`clear_active`) erases the active
    ones and DM3 (`clear_previous`) the previously active ones, as J1939-73 has them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[tuple[int, int], Dtc] = {}
        self._previous: dict[tuple[int, int], Dtc] = {}

    def raise_fault(self, fault: TruckFault) -> Dtc:
        key = (fault.spn, fault.fmi)
        with self._lock:
            before = self._active.get(key) or self._previous.pop(key, None)
            count = min(before.occurrences + 1, _MAX_OC) if before is not None else 1
            dtc = Dtc(fault.spn, fault.fmi, count, MappingProxyType(dict(fault.lamps)), fault.name)
            self._active[key] = dtc
            return dtc

    def end_fault(self, fault: TruckFault) -> bool:
        """Move the fault's DTC to the previously active ones; False if it was not active."""
        key = (fault.spn, fault.fmi)
        with self._lock:
            dtc = self._active.pop(key, None)
            if dtc is None:
                return False
            self._previous[key] = dtc
            return True

    def clear_active(self) -> tuple[Dtc, ...]:
        """DM11: forget the active DTCs; returns them."""
        with self._lock:
            cleared = tuple(self._active.values())
            self._active.clear()
            return cleared

    def clear_previous(self) -> tuple[Dtc, ...]:
        """DM3: forget the previously active DTCs; returns them."""
        with self._lock:
            cleared = tuple(self._previous.values())
            self._previous.clear()
            return cleared

    @property
    def active(self) -> tuple[Dtc, ...]:
        with self._lock:
            return tuple(self._active.values())

    @property
    def previous(self) -> tuple[Dtc, ...]:
        with self._lock:
            return tuple(self._previous.values())

    def lamps(self) -> dict[str, LampState]:
        return combined_lamps(self.active)

    def dm1(self) -> bytes:
        with self._lock:
            active = tuple(self._active.values())
        return dm_payload(combined_lamps(active), active)

    def dm2(self) -> bytes:
        with self._lock:
            active, previous = tuple(self._active.values()), tuple(self._previous.values())
        return dm_payload(combined_lamps(active), previous)
