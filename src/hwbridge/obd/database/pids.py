"""The mode 01 / 02 parameter ids of SAE J1979: what each PID carries and how to decode it.

Every PID has a short name (the ones OBD software uses: `RPM`, `SPEED`, `COOLANT_TEMP`), a
description, its data length and a decoder from the data bytes to a JSON value: a number in
the PID's unit, a label, or a small object for PIDs that carry several quantities (an O2
sensor's voltage and trim). Mode 02 (freeze frames) uses the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from hwbridge.obd.database.dtcs import decode_dtc

__all__ = [
    "PIDS",
    "Pid",
    "decode_monitor_status",
    "decode_supported",
    "find_pid",
    "supported_ranges",
]

Decoded = Any  # a JSON value


@dataclass(frozen=True, slots=True)
class Pid:
    """One mode 01 PID: `decode(data)` reads exactly `length` data bytes."""

    pid: int
    name: str
    description: str
    length: int
    unit: str | None
    decode: Callable[[bytes], Decoded]

    @property
    def hex(self) -> str:
        return f"{self.pid:02X}"


def _word(d: bytes) -> int:
    return d[0] << 8 | d[1]


def _signed_word(d: bytes) -> int:
    value = _word(d)
    return value - 0x10000 if value & 0x8000 else value


def _r(value: float, digits: int = 2) -> float:
    return round(value, digits)


def _percent(d: bytes) -> float:
    return _r(d[0] * 100 / 255)


def _temperature(d: bytes) -> int:
    return d[0] - 40


def _trim(d: bytes) -> float:
    return _r((d[0] - 128) * 100 / 128)


def _ratio(d: bytes) -> float:
    return _r(_word(d) * 2 / 65536, 4)


def decode_supported(base: int, data: bytes) -> list[str]:
    """PIDs base+1 .. base+0x20 set in a 4-byte support bitmap, as hex strings."""
    bits = int.from_bytes(data[:4], "big")
    return [f"{base + n:02X}" for n in range(1, 33) if bits >> (32 - n) & 1]


_SPARK_MONITORS: tuple[str | None, ...] = (
    "catalyst",
    "heated_catalyst",
    "evaporative_system",
    "secondary_air_system",
    "ac_refrigerant",
    "oxygen_sensor",
    "oxygen_sensor_heater",
    "egr_system",
)
_COMPRESSION_MONITORS: tuple[str | None, ...] = (
    "nmhc_catalyst",
    "nox_scr_monitor",
    None,
    "boost_pressure",
    None,
    "exhaust_gas_sensor",
    "pm_filter",
    "egr_vvt_system",
)
_CONTINUOUS = ("misfire", "fuel_system", "components")


def _monitor(available: bool, incomplete: bool) -> str:
    if not available:
        return "not_supported"
    return "incomplete" if incomplete else "complete"


def decode_monitor_status(d: bytes) -> dict[str, Any]:
    """PID 01 (and 41): MIL, confirmed DTC count, and the readiness of each monitor."""
    a, b, c, e = d[0], d[1], d[2], d[3]
    compression = bool(b & 0x08)
    monitors: dict[str, str] = {}
    for bit, name in enumerate(_CONTINUOUS):
        monitors[name] = _monitor(bool(b >> bit & 1), bool(b >> (bit + 4) & 1))
    names = _COMPRESSION_MONITORS if compression else _SPARK_MONITORS
    for bit, label in enumerate(names):
        if label is not None:
            monitors[label] = _monitor(bool(c >> bit & 1), bool(e >> bit & 1))
    return {
        "mil": bool(a & 0x80),
        "dtc_count": a & 0x7F,
        "ignition": "compression" if compression else "spark",
        "monitors": monitors,
    }


_FUEL_SYSTEM = {
    0: "not_present",
    1: "open_loop_insufficient_temperature",
    2: "closed_loop",
    4: "open_loop_engine_load_or_fuel_cut",
    8: "open_loop_system_failure",
    16: "closed_loop_with_fault",
}
_SECONDARY_AIR = {
    1: "upstream",
    2: "downstream_of_catalyst",
    4: "outside_or_off",
    8: "pump_diagnostics",
}
_OBD_STANDARDS = {
    1: "OBD-II as defined by the CARB",
    2: "OBD as defined by the EPA",
    3: "OBD and OBD-II",
    4: "OBD-I",
    5: "not OBD compliant",
    6: "EOBD (Europe)",
    7: "EOBD and OBD-II",
    8: "EOBD and OBD",
    9: "EOBD, OBD and OBD II",
    10: "JOBD (Japan)",
    11: "JOBD and OBD II",
    12: "JOBD and EOBD",
    13: "JOBD, EOBD, and OBD II",
    17: "Engine Manufacturer Diagnostics (EMD)",
    18: "Engine Manufacturer Diagnostics Enhanced (EMD+)",
    19: "Heavy Duty On-Board Diagnostics (Child/Partial) (HD OBD-C)",
    20: "Heavy Duty On-Board Diagnostics (HD OBD)",
    21: "World Wide Harmonized OBD (WWH OBD)",
    23: "Heavy Duty Euro OBD Stage I without NOx control (HD EOBD-I)",
    24: "Heavy Duty Euro OBD Stage I with NOx control (HD EOBD-I N)",
    25: "Heavy Duty Euro OBD Stage II without NOx control (HD EOBD-II)",
    26: "Heavy Duty Euro OBD Stage II with NOx control (HD EOBD-II N)",
    28: "Brazil OBD Phase 1 (OBDBr-1)",
    29: "Brazil OBD Phase 2 (OBDBr-2)",
    30: "Korean OBD (KOBD)",
    31: "India OBD I (IOBD I)",
    32: "India OBD II (IOBD II)",
    33: "Heavy Duty Euro OBD Stage VI (HD EOBD-IV)",
}
_FUEL_TYPES = {
    0: "not available",
    1: "gasoline",
    2: "methanol",
    3: "ethanol",
    4: "diesel",
    5: "LPG",
    6: "CNG",
    7: "propane",
    8: "electric",
    9: "bifuel running gasoline",
    10: "bifuel running methanol",
    11: "bifuel running ethanol",
    12: "bifuel running LPG",
    13: "bifuel running CNG",
    14: "bifuel running propane",
    15: "bifuel running electricity",
    16: "bifuel running electric and combustion engine",
    17: "hybrid gasoline",
    18: "hybrid ethanol",
    19: "hybrid diesel",
    20: "hybrid electric",
    21: "hybrid running electric and combustion engine",
    22: "hybrid regenerative",
    23: "bifuel running diesel",
}


def _labelled(table: Mapping[int, str]) -> Callable[[bytes], Decoded]:
    def decode(d: bytes) -> Decoded:
        label = table.get(d[0])
        return {"value": d[0], "label": label} if label else d[0]

    return decode


def _fuel_status(d: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"system_1": _FUEL_SYSTEM.get(d[0], f"0x{d[0]:02X}")}
    if d[1]:
        out["system_2"] = _FUEL_SYSTEM.get(d[1], f"0x{d[1]:02X}")
    return out


def _o2_sensor(d: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"voltage_v": _r(d[0] / 200, 3)}
    if d[1] != 0xFF:  # 0xFF: the sensor is not used in the trim calculation
        out["short_term_fuel_trim_pct"] = _trim(d[1:])
    return out


def _o2_wide_voltage(d: bytes) -> dict[str, Any]:
    return {"equivalence_ratio": _ratio(d), "voltage_v": _r(_word(d[2:]) * 8 / 65536, 3)}


def _o2_wide_current(d: bytes) -> dict[str, Any]:
    return {"equivalence_ratio": _ratio(d), "current_ma": _r(_word(d[2:]) / 256 - 128, 3)}


def _o2_present(d: bytes) -> list[str]:
    return [
        f"B{bank + 1}S{sensor + 1}"
        for bank in range(2)
        for sensor in range(4)
        if d[0] >> (bank * 4 + sensor) & 1
    ]


def _gear(d: bytes) -> Decoded:
    if not d[0] & 0x02:
        return None
    out: dict[str, Any] = {"gear": d[1] >> 4}
    if d[0] & 0x01:
        out["ratio"] = _r(_word(d[2:]) / 1000, 3)
    return out


def _odometer(d: bytes) -> float:
    return _r(int.from_bytes(d[:4], "big") / 10, 1)


_N = None  # no unit
_PID_ROWS: Final[tuple[tuple[int, str, str, int, str | None, Callable[[bytes], Decoded]], ...]] = (
    (
        0x01,
        "STATUS",
        "Monitor status since DTCs cleared (MIL, DTC count, readiness)",
        4,
        _N,
        decode_monitor_status,
    ),
    (
        0x02,
        "FREEZE_DTC",
        "DTC that caused the freeze frame",
        2,
        _N,
        lambda d: decode_dtc(d) if any(d) else None,
    ),
    (0x03, "FUEL_STATUS", "Fuel system status", 2, _N, _fuel_status),
    (0x04, "ENGINE_LOAD", "Calculated engine load", 1, "%", _percent),
    (0x05, "COOLANT_TEMP", "Engine coolant temperature", 1, "degC", _temperature),
    (0x06, "SHORT_FUEL_TRIM_1", "Short term fuel trim, bank 1", 1, "%", _trim),
    (0x07, "LONG_FUEL_TRIM_1", "Long term fuel trim, bank 1", 1, "%", _trim),
    (0x08, "SHORT_FUEL_TRIM_2", "Short term fuel trim, bank 2", 1, "%", _trim),
    (0x09, "LONG_FUEL_TRIM_2", "Long term fuel trim, bank 2", 1, "%", _trim),
    (0x0A, "FUEL_PRESSURE", "Fuel pressure (gauge)", 1, "kPa", lambda d: d[0] * 3),
    (0x0B, "INTAKE_PRESSURE", "Intake manifold absolute pressure (MAP)", 1, "kPa", lambda d: d[0]),
    (0x0C, "RPM", "Engine speed", 2, "rpm", lambda d: _word(d) / 4),
    (0x0D, "SPEED", "Vehicle speed", 1, "km/h", lambda d: d[0]),
    (0x0E, "TIMING_ADVANCE", "Timing advance before TDC", 1, "deg", lambda d: d[0] / 2 - 64),
    (0x0F, "INTAKE_TEMP", "Intake air temperature", 1, "degC", _temperature),
    (0x10, "MAF", "Mass air flow rate", 2, "g/s", lambda d: _r(_word(d) / 100)),
    (0x11, "THROTTLE_POS", "Throttle position", 1, "%", _percent),
    (0x12, "AIR_STATUS", "Commanded secondary air status", 1, _N, _labelled(_SECONDARY_AIR)),
    (0x13, "O2_SENSORS", "Oxygen sensors present (2 banks)", 1, _N, _o2_present),
    *(
        (
            0x14 + i,
            f"O2_B{i // 4 + 1}S{i % 4 + 1}",
            f"Oxygen sensor {i % 4 + 1}, bank {i // 4 + 1}: voltage and short term fuel trim",
            2,
            _N,
            _o2_sensor,
        )
        for i in range(8)
    ),
    (
        0x1C,
        "OBD_COMPLIANCE",
        "OBD standard this vehicle conforms to",
        1,
        _N,
        _labelled(_OBD_STANDARDS),
    ),
    (0x1E, "AUX_INPUT_STATUS", "Power take-off (PTO) active", 1, _N, lambda d: bool(d[0] & 1)),
    (0x1F, "RUN_TIME", "Run time since engine start", 2, "s", _word),
    (0x21, "DISTANCE_W_MIL", "Distance traveled with the MIL on", 2, "km", _word),
    (
        0x22,
        "FUEL_RAIL_PRESSURE_VAC",
        "Fuel rail pressure relative to manifold vacuum",
        2,
        "kPa",
        lambda d: _r(_word(d) * 0.079, 3),
    ),
    (
        0x23,
        "FUEL_RAIL_PRESSURE_DIRECT",
        "Fuel rail gauge pressure (diesel or direct injection)",
        2,
        "kPa",
        lambda d: _word(d) * 10,
    ),
    *(
        (
            0x24 + i,
            f"O2_S{i + 1}_WR_VOLTAGE",
            f"Wide-range oxygen sensor {i + 1}: equivalence ratio and voltage",
            4,
            _N,
            _o2_wide_voltage,
        )
        for i in range(8)
    ),
    (0x2C, "COMMANDED_EGR", "Commanded EGR", 1, "%", _percent),
    (0x2D, "EGR_ERROR", "EGR error", 1, "%", _trim),
    (0x2E, "EVAPORATIVE_PURGE", "Commanded evaporative purge", 1, "%", _percent),
    (0x2F, "FUEL_LEVEL", "Fuel tank level input", 1, "%", _percent),
    (0x30, "WARMUPS_SINCE_DTC_CLEAR", "Warm-ups since codes cleared", 1, _N, lambda d: d[0]),
    (0x31, "DISTANCE_SINCE_DTC_CLEAR", "Distance traveled since codes cleared", 2, "km", _word),
    (
        0x32,
        "EVAP_VAPOR_PRESSURE",
        "Evaporative system vapor pressure",
        2,
        "Pa",
        lambda d: _signed_word(d) / 4,
    ),
    (0x33, "BAROMETRIC_PRESSURE", "Absolute barometric pressure", 1, "kPa", lambda d: d[0]),
    *(
        (
            0x34 + i,
            f"O2_S{i + 1}_WR_CURRENT",
            f"Wide-range oxygen sensor {i + 1}: equivalence ratio and current",
            4,
            _N,
            _o2_wide_current,
        )
        for i in range(8)
    ),
    (
        0x3C,
        "CATALYST_TEMP_B1S1",
        "Catalyst temperature, bank 1, sensor 1",
        2,
        "degC",
        lambda d: _r(_word(d) / 10 - 40, 1),
    ),
    (
        0x3D,
        "CATALYST_TEMP_B2S1",
        "Catalyst temperature, bank 2, sensor 1",
        2,
        "degC",
        lambda d: _r(_word(d) / 10 - 40, 1),
    ),
    (
        0x3E,
        "CATALYST_TEMP_B1S2",
        "Catalyst temperature, bank 1, sensor 2",
        2,
        "degC",
        lambda d: _r(_word(d) / 10 - 40, 1),
    ),
    (
        0x3F,
        "CATALYST_TEMP_B2S2",
        "Catalyst temperature, bank 2, sensor 2",
        2,
        "degC",
        lambda d: _r(_word(d) / 10 - 40, 1),
    ),
    (0x41, "STATUS_DRIVE_CYCLE", "Monitor status this drive cycle", 4, _N, decode_monitor_status),
    (
        0x42,
        "CONTROL_MODULE_VOLTAGE",
        "Control module voltage",
        2,
        "V",
        lambda d: _r(_word(d) / 1000, 3),
    ),
    (0x43, "ABSOLUTE_LOAD", "Absolute load value", 2, "%", lambda d: _r(_word(d) * 100 / 255)),
    (0x44, "COMMANDED_EQUIV_RATIO", "Commanded air-fuel equivalence ratio", 2, _N, _ratio),
    (0x45, "RELATIVE_THROTTLE_POS", "Relative throttle position", 1, "%", _percent),
    (0x46, "AMBIENT_AIR_TEMP", "Ambient air temperature", 1, "degC", _temperature),
    (0x47, "THROTTLE_POS_B", "Absolute throttle position B", 1, "%", _percent),
    (0x48, "THROTTLE_POS_C", "Absolute throttle position C", 1, "%", _percent),
    (0x49, "ACCELERATOR_POS_D", "Accelerator pedal position D", 1, "%", _percent),
    (0x4A, "ACCELERATOR_POS_E", "Accelerator pedal position E", 1, "%", _percent),
    (0x4B, "ACCELERATOR_POS_F", "Accelerator pedal position F", 1, "%", _percent),
    (0x4C, "THROTTLE_ACTUATOR", "Commanded throttle actuator", 1, "%", _percent),
    (0x4D, "RUN_TIME_MIL", "Time run with the MIL on", 2, "min", _word),
    (0x4E, "TIME_SINCE_DTC_CLEARED", "Time since trouble codes cleared", 2, "min", _word),
    (0x50, "MAX_MAF", "Maximum value for the mass air flow sensor", 4, "g/s", lambda d: d[0] * 10),
    (0x51, "FUEL_TYPE", "Fuel type", 1, _N, _labelled(_FUEL_TYPES)),
    (0x52, "ETHANOL_PERCENT", "Ethanol fuel percentage", 1, "%", _percent),
    (
        0x53,
        "EVAP_VAPOR_PRESSURE_ABS",
        "Absolute evaporative system vapor pressure",
        2,
        "kPa",
        lambda d: _r(_word(d) / 200, 3),
    ),
    (0x54, "EVAP_VAPOR_PRESSURE_ALT", "Evaporative system vapor pressure", 2, "Pa", _signed_word),
    (0x55, "SHORT_O2_TRIM_B1", "Short term secondary oxygen sensor trim, bank 1", 2, "%", _trim),
    (0x56, "LONG_O2_TRIM_B1", "Long term secondary oxygen sensor trim, bank 1", 2, "%", _trim),
    (0x57, "SHORT_O2_TRIM_B2", "Short term secondary oxygen sensor trim, bank 2", 2, "%", _trim),
    (0x58, "LONG_O2_TRIM_B2", "Long term secondary oxygen sensor trim, bank 2", 2, "%", _trim),
    (
        0x59,
        "FUEL_RAIL_PRESSURE_ABS",
        "Fuel rail absolute pressure",
        2,
        "kPa",
        lambda d: _word(d) * 10,
    ),
    (0x5A, "RELATIVE_ACCEL_POS", "Relative accelerator pedal position", 1, "%", _percent),
    (0x5B, "HYBRID_BATTERY_REMAINING", "Hybrid battery pack remaining life", 1, "%", _percent),
    (0x5C, "OIL_TEMP", "Engine oil temperature", 1, "degC", _temperature),
    (
        0x5D,
        "FUEL_INJECT_TIMING",
        "Fuel injection timing",
        2,
        "deg",
        lambda d: _r(_word(d) / 128 - 210, 3),
    ),
    (0x5E, "FUEL_RATE", "Engine fuel rate", 2, "L/h", lambda d: _r(_word(d) / 20)),
    (
        0x61,
        "DRIVER_DEMAND_TORQUE",
        "Driver's demand engine percent torque",
        1,
        "%",
        lambda d: d[0] - 125,
    ),
    (0x62, "ACTUAL_TORQUE", "Actual engine percent torque", 1, "%", lambda d: d[0] - 125),
    (0x63, "REFERENCE_TORQUE", "Engine reference torque", 2, "Nm", _word),
    (0xA4, "TRANSMISSION_GEAR", "Transmission actual gear", 4, _N, _gear),
    (0xA6, "ODOMETER", "Odometer", 4, "km", _odometer),
)

_ALIASES: Final = {
    "ENGINE_RPM": 0x0C,
    "ENGINE_SPEED": 0x0C,
    "VEHICLE_SPEED": 0x0D,
    "COOLANT": 0x05,
    "ENGINE_COOLANT_TEMP": 0x05,
    "INTAKE_AIR_TEMP": 0x0F,
    "THROTTLE": 0x11,
    "FUEL_LEVEL_INPUT": 0x2F,
    "AMBIANT_AIR_TEMP": 0x46,  # python-OBD's spelling
    "AMBIENT_TEMP": 0x46,
    "MAP": 0x0B,
    "ENGINE_OIL_TEMP": 0x5C,
}


def _table() -> dict[int, Pid]:
    table = {row[0]: Pid(*row) for row in _PID_ROWS}
    for base in range(0x00, 0x100, 0x20):  # the support bitmaps 00, 20, 40, ...
        letter = "ABCDEFGH"[base // 0x20]
        table[base] = Pid(
            base,
            f"PIDS_{letter}",
            f"Supported PIDs {base + 1:02X}-{base + 0x20:02X}",
            4,
            None,
            lambda d, b=base: decode_supported(b, d),  # type: ignore[misc]
        )
    return dict(sorted(table.items()))


PIDS: Final[Mapping[int, Pid]] = MappingProxyType(_table())
"""Every mode 01 PID hwbridge decodes, by number."""

_BY_NAME: Final[Mapping[str, Pid]] = MappingProxyType(
    {**{p.name: p for p in PIDS.values()}, **{k: PIDS[v] for k, v in _ALIASES.items()}}
)


def find_pid(text: str) -> Pid | int | None:
    """A PID from a hex string ("0C", "0x0C") or a name ("RPM", "rpm"); a number hwbridge
    cannot decode comes back as an int; None when `text` names nothing."""
    key = text.strip()
    named = _BY_NAME.get(key.upper().replace(" ", "_").replace("-", "_"))
    if named is not None:
        return named
    digits = key[2:] if key[:2].lower() == "0x" else key
    if 1 <= len(digits) <= 2 and all(c in "0123456789abcdefABCDEF" for c in digits):
        number = int(digits, 16)
        return PIDS.get(number, number)
    return None


def supported_ranges(pids: Iterable[int]) -> list[int]:
    """The support-bitmap PIDs (00, 20, 40...) whose range covers any of `pids`."""
    return sorted({(p - 1) // 0x20 * 0x20 if p else 0 for p in pids})
