"""What each simulated ECU reports for the mode 01 (and mode 02) PIDs of SAE J1979.

Every value comes from the same `VehicleState` the DBC signals are filled from, encoded with
the standard's formulas; a few quantities the model does not have (oxygen sensors, fuel
trims, MAF, manifold pressure) are derived from it plausibly. The engine ECU answers 40
PIDs, the transmission ECU a handful, as real ones do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from firmware_sim.model import VehicleState

__all__ = ["ENGINE_PIDS", "TRANSMISSION_PIDS", "PidTable", "supported_pids", "with_bitmaps"]

PidTable = Mapping[int, Callable[[VehicleState], bytes]]


def _byte(value: float) -> int:
    return int(min(max(round(value), 0), 0xFF))


def _word(value: float) -> bytes:
    return int(min(max(round(value), 0), 0xFFFF)).to_bytes(2, "big")


def _percent(value: float) -> bytes:
    return bytes([_byte(value * 255.0 / 100.0)])


def _temperature(value: float) -> bytes:
    return bytes([_byte(value + 40.0)])


def _trim(pct: float) -> bytes:
    return bytes([_byte(pct * 128.0 / 100.0 + 128.0)])


def _monitor_status(s: VehicleState) -> bytes:
    # A: MIL and confirmed DTC count; B: spark ignition, misfire/fuel/components tests
    # available and complete; C/D: catalyst, evap, O2 sensor and heater available, complete
    count = min(len(s.stored_dtcs), 0x7F)
    return bytes([(0x80 if s.mil else 0) | count, 0x07, 0x65, 0x00])


def _drive_cycle_status(s: VehicleState) -> bytes:
    # this drive cycle: the same monitors enabled; evap still incomplete early in the drive
    evap_pending = 0x04 if s.run_time_s < 600 else 0x00
    return bytes([0x00, 0x07, 0x65, evap_pending])


def _maf(s: VehicleState) -> float:
    """g/s of a 2.0 l engine: displacement per second times air density times load."""
    return s.engine_speed_rpm * 0.02 * max(s.engine_load_pct, 5.0) / 100.0


def _closed_loop(s: VehicleState) -> bool:
    return s.coolant_temp_c > 40.0


def _o2_front(s: VehicleState) -> bytes:
    # a narrow-band sensor switching around stoichiometry in closed loop, lean when open
    volts = 0.45 + 0.4 * math.sin(s.time_s * 6.0) if _closed_loop(s) else 0.1
    return bytes([_byte(volts * 200.0)]) + _trim(_short_trim(s))


def _short_trim(s: VehicleState) -> float:
    return 3.0 * math.sin(s.time_s * 0.7) if _closed_loop(s) else 0.0


def _timing(s: VehicleState) -> bytes:
    degrees = 8.0 + s.engine_speed_rpm / 300.0 - s.engine_load_pct / 8.0
    return bytes([_byte((degrees + 64.0) * 2.0)])


def _odometer(s: VehicleState) -> bytes:
    return int(max(s.odometer_km, 0.0) * 10).to_bytes(4, "big")


def _gear(s: VehicleState) -> bytes:
    gear = s.current_gear if 1 <= s.current_gear <= 10 else 0
    return bytes([0x02, gear << 4, 0x00, 0x00])


ENGINE_PIDS: Final[PidTable] = {
    0x01: _monitor_status,
    0x03: lambda s: bytes([0x02 if _closed_loop(s) else 0x01, 0x00]),
    0x04: lambda s: _percent(s.engine_load_pct),
    0x05: lambda s: _temperature(s.coolant_temp_c),
    0x06: lambda s: _trim(_short_trim(s)),
    0x07: lambda s: _trim(1.6),
    0x0B: lambda s: bytes([_byte(20.0 + 0.8 * s.engine_load_pct)]),
    0x0C: lambda s: _word(s.engine_speed_rpm * 4.0),
    0x0D: lambda s: bytes([_byte(s.vehicle_speed_kmh)]),
    0x0E: _timing,
    0x0F: lambda s: _temperature(s.intake_air_temp_c),
    0x10: lambda s: _word(_maf(s) * 100.0),
    0x11: lambda s: _percent(s.throttle_pct),
    0x13: lambda s: b"\x03",  # bank 1 sensors 1 and 2
    0x14: _o2_front,
    0x15: lambda s: bytes([_byte(0.65 * 200.0), 0xFF]),  # downstream: not used for trim
    0x1C: lambda s: b"\x01",  # OBD-II as defined by the CARB
    0x1F: lambda s: _word(s.run_time_s),
    0x21: lambda s: _word(s.distance_mil_on_km),
    0x2E: lambda s: _percent(12.0 if _closed_loop(s) else 0.0),
    0x2F: lambda s: _percent(s.fuel_level_pct),
    0x30: lambda s: b"\x03",
    0x31: lambda s: _word(s.distance_since_clear_km),
    0x33: lambda s: b"\x65",  # 101 kPa
    0x3C: lambda s: _word((350.0 + s.engine_load_pct * 4.0 + 40.0) * 10.0),
    0x41: _drive_cycle_status,
    0x42: lambda s: _word(s.module_voltage_v * 1000.0),
    0x43: lambda s: _word(s.engine_load_pct * 255.0 / 100.0),
    0x44: lambda s: _word(32768.0),  # lambda 1.0
    0x45: lambda s: _percent(s.throttle_pct * 0.9),
    0x46: lambda s: _temperature(s.outside_temp_c),
    0x47: lambda s: _percent(s.throttle_pct * 0.9 + 8.0),
    0x49: lambda s: _percent(s.throttle_pct * 0.8 + 15.0),
    0x4A: lambda s: _percent(s.throttle_pct * 0.4 + 7.5),
    0x4C: lambda s: _percent(s.throttle_pct),
    0x51: lambda s: b"\x11",  # hybrid gasoline
    0x5B: lambda s: _percent(s.soc_pct),
    0x5C: lambda s: _temperature(s.coolant_temp_c - 4.0),
    0x5E: lambda s: _word(_maf(s) / 14.7 / 745.0 * 3600.0 * 20.0),
    0xA6: _odometer,
}

TRANSMISSION_PIDS: Final[PidTable] = {
    0x01: lambda s: b"\x00\x00\x00\x00",  # no MIL request, no codes, no monitors of its own
    0x1C: lambda s: b"\x01",
    0xA4: _gear,
}


def supported_pids(base: int, pids: frozenset[int] | set[int]) -> bytes:
    """The 4-byte bitmap of PIDs base+1 .. base+0x20 (bit 7 of the first byte is base+1)."""
    bits = 0
    for pid in pids:
        if base < pid <= base + 0x20:
            bits |= 1 << (0x20 - (pid - base))
    return bits.to_bytes(4, "big")


def with_bitmaps(table: Iterable[int]) -> frozenset[int]:
    """The PIDs an ECU answers: its PIDs plus the bitmap PIDs (00, 20, ...) that lead to
    them (a range's bitmap PID is itself supported when a later range holds something)."""
    pids = set(table)
    highest = max(pids)
    pids.update(base for base in range(0x00, 0x100, 0x20) if base < highest)
    return frozenset(pids)
