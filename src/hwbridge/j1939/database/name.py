"""The 64-bit J1939 NAME an ECU claims its address with (SAE J1939-81).

Lower NAME wins an address contest. Function codes 0-127 mean the same in every industry
group; 128 and above depend on the industry group and vehicle system, so only their number
is given unless the table knows the group's meaning.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hwbridge.j1939.database.tables import function_name, industry_group_name

__all__ = ["J1939Name"]


class J1939Name(BaseModel):
    """A NAME, field by field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    identity_number: int = Field(0, ge=0, lt=1 << 21)
    manufacturer_code: int = Field(0, ge=0, lt=1 << 11)
    ecu_instance: int = Field(0, ge=0, lt=1 << 3)
    function_instance: int = Field(0, ge=0, lt=1 << 5)
    function: int = Field(0, ge=0, lt=1 << 8)
    reserved: bool = Field(False, description="bit 48; kept so that two NAMEs compare whole")
    vehicle_system: int = Field(0, ge=0, lt=1 << 7)
    vehicle_system_instance: int = Field(0, ge=0, lt=1 << 4)
    industry_group: int = Field(0, ge=0, lt=1 << 3)
    arbitrary_address_capable: bool = False

    @classmethod
    def from_bytes(cls, data: bytes) -> J1939Name:
        """The NAME of an address claim's 8 data bytes (little endian)."""
        if len(data) < 8:
            raise ValueError(f"a NAME is 8 bytes, not {len(data)}")
        return cls.from_int(int.from_bytes(data[:8], "little"))

    @classmethod
    def from_int(cls, value: int) -> J1939Name:
        return cls(
            identity_number=value & 0x1FFFFF,
            manufacturer_code=(value >> 21) & 0x7FF,
            ecu_instance=(value >> 32) & 0x7,
            function_instance=(value >> 35) & 0x1F,
            function=(value >> 40) & 0xFF,
            reserved=bool((value >> 48) & 1),
            vehicle_system=(value >> 49) & 0x7F,
            vehicle_system_instance=(value >> 56) & 0xF,
            industry_group=(value >> 60) & 0x7,
            arbitrary_address_capable=bool(value >> 63),
        )

    def to_int(self) -> int:
        return (
            self.identity_number
            | self.manufacturer_code << 21
            | self.ecu_instance << 32
            | self.function_instance << 35
            | self.function << 40
            | int(self.reserved) << 48
            | self.vehicle_system << 49
            | self.vehicle_system_instance << 56
            | self.industry_group << 60
            | int(self.arbitrary_address_capable) << 63
        )

    def to_bytes(self) -> bytes:
        return self.to_int().to_bytes(8, "little")

    def describe(self) -> dict[str, Any]:
        """The fields with the names of the function and industry group where known."""
        out: dict[str, Any] = self.model_dump()
        out["name"] = f"0x{self.to_int():016X}"
        out["function_name"] = function_name(self.function, self.industry_group)
        out["industry_group_name"] = industry_group_name(self.industry_group)
        return out
