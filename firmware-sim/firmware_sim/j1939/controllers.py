"""Who the simulated truck's controllers are: address, NAME and identification.

The NAME (SAE J1939-81) is 64 bits, sent little endian as the 8 data bytes of Address
Claimed: identity number (bits 0-20), manufacturer code (21-31), ECU instance (32-34),
function instance (35-39), function (40-47), a reserved bit (48), vehicle system (49-55),
vehicle system instance (56-59), industry group (60-62) and arbitrary address capable (63).
A lower NAME wins an address contest.

The identification answers follow J1939-71: component identification (PGN 65259) is
`make*model*serial*unit*`, software identification (PGN 65242) a count of fields and then
each field ended by `*`; the engine also answers vehicle identification (PGN 65260),
`VIN*`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "BRAKES",
    "CONTROLLERS",
    "DEFAULT_TRUCK_VIN",
    "ENGINE",
    "MANUFACTURER_CODE",
    "TRANSMISSION",
    "ControllerSpec",
    "encode_name",
]

DEFAULT_TRUCK_VIN: Final = "5HWTK1J39R0001939"  # with a valid check digit (position 9)
MANUFACTURER_CODE: Final = 2047
"""The simulator's manufacturer code: the top of the 11-bit field, picked for the simulator
(not taken from SAE's list of assignments)."""
ON_HIGHWAY: Final = 1  # industry group 1: on-highway equipment


def encode_name(
    *,
    identity: int,
    manufacturer: int,
    function: int,
    industry_group: int = ON_HIGHWAY,
    vehicle_system: int = 0,
    vehicle_system_instance: int = 0,
    function_instance: int = 0,
    ecu_instance: int = 0,
    arbitrary_address: bool = False,
) -> bytes:
    """The 8 bytes of a J1939-81 NAME."""
    fields = (
        (identity, 21, 0),
        (manufacturer, 11, 21),
        (ecu_instance, 3, 32),
        (function_instance, 5, 35),
        (function, 8, 40),
        (vehicle_system, 7, 49),
        (vehicle_system_instance, 4, 56),
        (industry_group, 3, 60),
        (int(arbitrary_address), 1, 63),
    )
    value = 0
    for field_value, bits, shift in fields:
        if not 0 <= field_value < 1 << bits:
            raise ValueError(f"NAME field {field_value} does not fit {bits} bits")
        value |= field_value << shift
    return value.to_bytes(8, "little")


@dataclass(frozen=True, slots=True)
class ControllerSpec:
    """One controller of the truck."""

    key: str  # "engine", "transmission", "brakes": how faults and the API name it
    address: int
    function: int  # J1939-81 function: 0 engine, 3 transmission, 9 brakes system controller
    identity: int
    make: str
    model: str
    serial: str
    unit: str
    software: tuple[str, ...]

    @property
    def name(self) -> bytes:
        return encode_name(
            identity=self.identity, manufacturer=MANUFACTURER_CODE, function=self.function
        )

    def component_id(self) -> bytes:
        """PGN 65259: `make*model*serial*unit*`."""
        return f"{self.make}*{self.model}*{self.serial}*{self.unit}*".encode("ascii")

    def software_id(self) -> bytes:
        """PGN 65242: the number of fields, then each field ended by `*`."""
        return bytes([len(self.software)]) + "".join(f"{s}*" for s in self.software).encode("ascii")


ENGINE: Final = ControllerSpec(
    key="engine",
    address=0x00,
    function=0,
    identity=0x01001,
    make="HWBSM",
    model="HD13-ECM",
    serial="ECM0001939",
    unit="UNIT01",
    software=("ECM 4.12.0", "CAL 2024-03A"),
)
TRANSMISSION: Final = ControllerSpec(
    key="transmission",
    address=0x03,
    function=3,
    identity=0x01003,
    make="HWBSM",
    model="AT6-TCM",
    serial="TCM0001939",
    unit="UNIT01",
    software=("TCM 2.7.1",),
)
BRAKES: Final = ControllerSpec(
    key="brakes",
    address=0x0B,
    function=9,
    identity=0x0100B,
    make="HWBSM",
    model="EBS5-ABS",
    serial="EBS0001939",
    unit="UNIT01",
    software=("EBS 5.0.3", "ABS PARAM 11"),
)
CONTROLLERS: Final = (ENGINE, TRANSMISSION, BRAKES)
