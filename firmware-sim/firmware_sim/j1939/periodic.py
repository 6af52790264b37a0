"""From the truck's state to the payloads of a J1939 database's parameter groups.

Signals are found by their `SPN` attribute, so any J1939 DBC that carries SPNs works (the
bundled `j1939_truck.dbc` or one given with `--dbc`): `SPN_SOURCES` gives the truck's value
of an SPN, and a signal without a source is sent as "not available", all its bits set, as
J1939-71 has it. Values are clamped into the signal's range. Payloads are encoded by cantools
itself (raw values, unused bits padded with 1), never by hwbridge's codec.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from firmware_sim.j1939.ids import parse_id
from firmware_sim.j1939.model import TruckState

__all__ = ["ENGINE_CONFIGURATION", "SPN_SOURCES", "PgnPlan"]

log = logging.getLogger(__name__)

Source = Callable[[TruckState], float | None]


def _bit(flag: bool) -> int:
    return 1 if flag else 0


def _constant(value: float) -> Source:
    return lambda s: value


ENGINE_CONFIGURATION: Final[Mapping[int, float]] = MappingProxyType(
    {
        188: 600.0,  # engine speed at idle, point 1 (rpm)
        539: 42.0,  # percent torque at idle, point 1
        528: 1000.0,  # speed at point 2: where full torque starts
        540: 100.0,
        529: 1400.0,  # point 3: the end of the torque plateau
        541: 100.0,
        530: 1600.0,  # point 4
        542: 92.0,
        531: 1800.0,  # point 5: rated speed
        543: 80.0,
        532: 2150.0,  # high idle, point 6
        545: 1.5,  # endspeed governor gain (%/rpm)
        544: 2500.0,  # reference torque (Nm)
        533: 2300.0,  # maximum momentary override speed, point 7
        534: 0.0,  # override time limit (s): no momentary override
        535: 600.0,  # requested speed control range, lower (rpm)
        536: 2100.0,  # ... upper
        537: -125.0,  # requested torque control range, lower (%)
        538: 125.0,  # ... upper
        1712: 2300.0,  # extended range requested speed control, upper (rpm)
        1794: 3.6,  # moment of inertia (kg m2)
        1846: 2500.0,  # default torque limit (Nm)
        166: 354.0,  # rated power (kW), EEC4
        189: 1800.0,  # rated speed (rpm), EEC4
    }
)
"""The engine's configuration (EC1, EEC4): a 13-litre, 354 kW, 2500 Nm diesel."""


def _build_sources() -> dict[int, Source]:
    table: dict[int, Source] = {
        # EEC1
        899: lambda s: s.torque_mode,
        4154: _constant(0.0),
        512: lambda s: s.drivers_demand_torque_pct,
        513: lambda s: s.actual_torque_pct,
        190: lambda s: s.engine_speed_rpm,
        1483: lambda s: s.controlling_address,
        1675: _constant(0),  # start not requested
        2432: lambda s: s.actual_torque_pct,
        # EEC2
        558: lambda s: _bit(s.accelerator_pct <= 0.0),
        559: _constant(0),
        1437: _constant(0),
        91: lambda s: s.accelerator_pct,
        92: lambda s: s.engine_load_pct,
        # ET1
        110: lambda s: s.coolant_temp_c,
        174: lambda s: s.fuel_temp_c,
        175: lambda s: s.oil_temp_c,
        176: lambda s: s.turbo_oil_temp_c,
        52: lambda s: s.intercooler_temp_c,
        # EFL_P1
        94: lambda s: s.fuel_delivery_kpa,
        98: lambda s: s.oil_level_pct,
        100: lambda s: s.oil_pressure_kpa,
        109: lambda s: s.coolant_pressure_kpa,
        111: lambda s: s.coolant_level_pct,
        # CCVS1
        70: lambda s: _bit(s.parking_brake),
        1633: _constant(0),
        84: lambda s: s.vehicle_speed_kmh,
        595: _constant(0),
        596: _constant(0),
        597: lambda s: _bit(s.brake_switch),
        598: _constant(0),
        # VEP1
        114: lambda s: s.net_battery_a,
        115: lambda s: s.alternator_a,
        167: lambda s: s.charging_v,
        168: lambda s: s.battery_v,
        158: lambda s: s.keyswitch_v,
        # HOURS
        247: lambda s: s.engine_hours,
        249: lambda s: s.engine_revolutions,
        # ETC2
        524: lambda s: s.selected_gear,
        526: lambda s: s.gear_ratio,
        523: lambda s: s.current_gear,
        # TRF1
        123: lambda s: s.clutch_pressure_kpa,
        124: lambda s: s.transmission_oil_level_pct,
        127: lambda s: s.transmission_oil_pressure_kpa,
        177: lambda s: s.transmission_oil_temp_c,
        # EBC1
        561: _constant(0),
        562: _constant(0),
        563: _constant(0),
        1121: lambda s: _bit(s.brake_switch),
        521: lambda s: s.brake_pedal_pct,
        973: _constant(0.0),
        1243: lambda s: _bit(s.abs_fully_operational),
        1439: _constant(0),
        1438: lambda s: _bit(s.abs_amber_warning),
    }
    for spn, value in ENGINE_CONFIGURATION.items():
        table[spn] = _constant(value)
    return table


SPN_SOURCES: Final[Mapping[int, Source]] = MappingProxyType(_build_sources())
"""The truck's value of each SPN it knows (None: not available now)."""


class PgnPlan:
    """How one message of a J1939 database is filled and sent."""

    def __init__(self, message: Any, sources: Mapping[int, Source] = SPN_SOURCES) -> None:
        ident = parse_id(int(message.frame_id))
        self.message = message
        self.name: str = message.name
        self.pgn = ident.pgn
        self.sa = ident.sa
        self.da = ident.da
        self.priority = ident.priority
        self.length = int(message.length)
        cycle = message.cycle_time
        self.period_s: float | None = float(cycle) / 1000.0 if cycle else None
        self._signals = list(message.signals)
        self._sources = [
            sources.get(int(s.spn)) if s.spn is not None else None for s in self._signals
        ]
        self._multiplexed = any(s.is_multiplexer or s.multiplexer_ids for s in self._signals)
        self._last_key: tuple[int | float, ...] | None = None
        self._last = b""
        self._warned = False

    def payload(self, state: TruckState) -> bytes:
        """The message's bytes for `state`."""
        raws = tuple(
            _raw(signal, source(state) if source is not None else None)
            for signal, source in zip(self._signals, self._sources, strict=True)
        )
        if raws != self._last_key:
            self._last = self._encode(raws)
            self._last_key = raws
        return self._last

    def _encode(self, raws: tuple[int | float, ...]) -> bytes:
        if self._multiplexed:  # J1939 groups have none; such a message is sent unfilled
            return b"\xff" * self.length
        values = {s.name: raw for s, raw in zip(self._signals, raws, strict=True)}
        try:
            data = self.message.encode(values, scaling=False, padding=True, strict=False)
        except Exception as exc:  # a database cantools cannot encode: send it unfilled
            if not self._warned:
                log.warning("%s: sent as not available (%s)", self.name, exc)
                self._warned = True
            return b"\xff" * self.length
        return bytes(data).ljust(self.length, b"\xff")


def _raw(signal: Any, value: float | None) -> int | float:
    """The raw value of `value` for `signal`: rounded to its scale, clamped to its range,
    all ones ("not available") for None."""
    bits = int(signal.length)
    low = -(1 << (bits - 1)) if signal.is_signed else 0
    high = (1 << (bits - 1)) - 1 if signal.is_signed else (1 << bits) - 1
    if signal.is_float:
        return float(value) if value is not None and math.isfinite(value) else 0.0
    if value is None or not math.isfinite(value):
        return -1 if signal.is_signed else high
    scale, offset = float(signal.scale) or 1.0, float(signal.offset)
    if signal.minimum is not None:
        value = max(value, float(signal.minimum))
    if signal.maximum is not None:
        value = min(value, float(signal.maximum))
    return min(max(round((value - offset) / scale), low), high)
