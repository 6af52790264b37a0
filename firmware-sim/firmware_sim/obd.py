"""An OBD-II engine ECU (ISO 15765-4, 11-bit ids) answering from the simulated vehicle.

Requests arrive functionally on 0x7DF or physically on 0x7E0; answers leave on 0x7E8. The
ISO-TP layer is can-isotp's `NotifierBasedCanStack` on the vehicle's own bus and notifier
(physical id 0x7E0, so the tester's flow control for a multi-frame answer reaches it);
functional requests are single frames by the standard and are read from the notifier
directly, then answered through the same stack. Sharing the vehicle's bus means the
responder never sees the vehicle's own periodic frames, only what testers send.

`answer()` is the pure part: request bytes and a `VehicleState` in, response bytes out.
Unsupported services and PIDs get no answer to a functional request, as J1979 requires;
a physical request gets a negative response `7F SID NRC` (0x11 service not supported,
0x12 PID not supported, 0x13 bad length).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Final, Protocol

import isotp

import can
from firmware_sim.model import VehicleState

__all__ = [
    "DEFAULT_VIN",
    "FUNCTIONAL_ID",
    "REQUEST_ID",
    "RESPONSE_ID",
    "ObdResponder",
    "ObdSource",
    "answer",
    "check_vin",
    "decode_dtc",
    "encode_dtc",
    "supported_pids",
]

log = logging.getLogger(__name__)

FUNCTIONAL_ID: Final = 0x7DF
REQUEST_ID: Final = 0x7E0
RESPONSE_ID: Final = 0x7E8
DEFAULT_VIN: Final = "5HWSM1DE8R0000817"  # with a valid check digit (position 9)
ECU_NAME: Final = b"ECM\x00-EngineControl".ljust(20, b"\x00")
PADDING: Final = 0x55
_MAX_PIDS = 6  # J1979: up to six PIDs in one mode 01 request
_VIN = re.compile(r"^[A-HJ-NPR-Z0-9]{17}$")
_NRC_SERVICE = 0x11
_NRC_PID = 0x12
_NRC_LENGTH = 0x13


def _byte(value: float) -> int:
    return int(min(max(round(value), 0), 0xFF))


def _word(value: float) -> bytes:
    return int(min(max(round(value), 0), 0xFFFF)).to_bytes(2, "big")


def _percent(value: float) -> bytes:
    return bytes([_byte(value * 255.0 / 100.0)])


def _temperature(value: float) -> bytes:
    return bytes([_byte(value + 40.0)])


def _monitor_status(s: VehicleState) -> bytes:
    # A: MIL and confirmed DTC count; B: spark ignition, misfire/fuel/components tests
    # available and complete; C/D: catalyst, evap, O2 sensor and heater available, complete
    count = min(len(s.stored_dtcs), 0x7F)
    return bytes([(0x80 if s.mil else 0) | count, 0x07, 0x65, 0x00])


_PIDS: Final[Mapping[int, Callable[[VehicleState], bytes]]] = {
    0x01: _monitor_status,
    0x04: lambda s: _percent(s.engine_load_pct),
    0x05: lambda s: _temperature(s.coolant_temp_c),
    0x0C: lambda s: _word(s.engine_speed_rpm * 4.0),
    0x0D: lambda s: bytes([_byte(s.vehicle_speed_kmh)]),
    0x0F: lambda s: _temperature(s.intake_air_temp_c),
    0x11: lambda s: _percent(s.throttle_pct),
    0x1C: lambda s: b"\x01",  # OBD-II as defined by the CARB
    0x1F: lambda s: _word(s.run_time_s),
    0x21: lambda s: _word(s.distance_mil_on_km),
    0x2F: lambda s: _percent(s.fuel_level_pct),
    0x31: lambda s: _word(s.distance_since_clear_km),
    0x42: lambda s: _word(s.module_voltage_v * 1000.0),
    0x46: lambda s: _temperature(s.outside_temp_c),
    0x51: lambda s: b"\x11",  # hybrid gasoline
    0x5B: lambda s: _percent(s.soc_pct),
}
_INFO_TYPES: Final = (0x02, 0x0A)


def check_vin(vin: str) -> str:
    """`vin` if it is a well-formed VIN (17 characters, no I, O or Q), else ValueError."""
    if not _VIN.match(vin):
        raise ValueError(f"a VIN has 17 characters, digits and A-Z without I, O, Q: {vin!r}")
    return vin


def supported_pids(base: int, pids: frozenset[int] | set[int]) -> bytes:
    """The 4-byte bitmap of PIDs base+1 .. base+0x20 (bit 7 of the first byte is base+1)."""
    bits = 0
    for pid in pids:
        if base < pid <= base + 0x20:
            bits |= 1 << (0x20 - (pid - base))
    return bits.to_bytes(4, "big")


def _mode01_supported() -> frozenset[int]:
    pids = set(_PIDS)
    highest = max(pids)
    # a range's bitmap PID is itself supported when a later range holds something
    pids.update(base for base in range(0x00, 0x100, 0x20) if base <= highest)
    return frozenset(pids)


_MODE01: Final = _mode01_supported()


def encode_dtc(code: str) -> bytes:
    """'P0217' -> b'\\x02\\x17' (two bits system, then the four digits as nibbles)."""
    systems = "PCBU"
    text = code.strip().upper()
    if len(text) != 5 or text[0] not in systems or text[1] not in "0123":
        raise ValueError(f"not a DTC: {code!r}")
    value = systems.index(text[0]) << 14 | int(text[1]) << 12 | int(text[2:], 16)
    return value.to_bytes(2, "big")


def decode_dtc(data: bytes) -> str:
    """b'\\x02\\x17' -> 'P0217'."""
    value = int.from_bytes(data[:2], "big")
    return f"{'PCBU'[value >> 14]}{value >> 12 & 3}{value & 0xFFF:03X}"


def _dtc_list(service: int, codes: tuple[str, ...]) -> bytes:
    return bytes([service + 0x40, min(len(codes), 0xFF)]) + b"".join(
        encode_dtc(c) for c in codes[:0xFF]
    )


def _negative(service: int, code: int, functional: bool) -> bytes | None:
    return None if functional else bytes([0x7F, service, code])


def answer(request: bytes, state: VehicleState, *, vin: str, functional: bool) -> bytes | None:
    """The response to one OBD request, or None when the ECU stays silent."""
    if not request:
        return None
    service, args = request[0], request[1:]
    if service == 0x01:
        if not 1 <= len(args) <= _MAX_PIDS:
            return _negative(service, _NRC_LENGTH, functional)
        out = bytearray([0x41])
        for pid in args:
            if pid in _MODE01:
                data = _PIDS[pid](state) if pid in _PIDS else supported_pids(pid, _MODE01)
                out += bytes([pid]) + data
        return bytes(out) if len(out) > 1 else _negative(service, _NRC_PID, functional)
    if service in (0x03, 0x07, 0x0A, 0x04):
        if args:
            return _negative(service, _NRC_LENGTH, functional)
        if service == 0x04:
            return b"\x44"
        codes = {
            0x03: state.stored_dtcs,
            0x07: state.pending_dtcs,
            0x0A: state.permanent_dtcs,
        }[service]
        return _dtc_list(service, codes)
    if service == 0x09:
        if len(args) != 1:
            return _negative(service, _NRC_LENGTH, functional)
        info = args[0]
        if info == 0x00:
            return b"\x49\x00" + supported_pids(0x00, set(_INFO_TYPES))
        if info == 0x02:
            return b"\x49\x02\x01" + vin.encode("ascii")
        if info == 0x0A:
            return b"\x49\x0a\x01" + ECU_NAME
        return _negative(service, _NRC_PID, functional)
    return _negative(service, _NRC_SERVICE, functional)


class ObdSource(Protocol):
    """What the responder needs from a vehicle."""

    @property
    def state(self) -> VehicleState: ...

    def clear_dtcs(self) -> None: ...


class ObdResponder:
    """Answers OBD-II requests on `bus` from `source`'s state; start() / stop()."""

    def __init__(
        self,
        bus: can.BusABC,
        notifier: can.Notifier,
        source: ObdSource,
        *,
        vin: str = DEFAULT_VIN,
    ) -> None:
        self.vin = check_vin(vin)
        self.source = source
        self._notifier = notifier
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests = 0  # answered or not, for tests and diagnostics
        self._count_lock = threading.Lock()
        self._stack = isotp.NotifierBasedCanStack(
            bus,
            notifier,
            address=isotp.Address(
                isotp.AddressingMode.Normal_11bits, txid=RESPONSE_ID, rxid=REQUEST_ID
            ),
            error_handler=self._on_isotp_error,
            params={
                "tx_padding": PADDING,
                "tx_data_min_length": 8,
                "blocksize": 0,
                "stmin": 0,
                "rx_flowcontrol_timeout": 1000,
                "rx_consecutive_frame_timeout": 1000,
            },
        )

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._stack.start()
        self._notifier.add_listener(self._on_frame)
        self._thread = threading.Thread(target=self._run, name="obd-responder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        with contextlib.suppress(ValueError):
            self._notifier.remove_listener(self._on_frame)
        self._thread.join(2.0)
        self._thread = None
        self._stack.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            request = self._stack.recv(block=True, timeout=0.1)
            if request is None:
                continue
            try:
                self._handle(bytes(request), functional=False)
            except Exception:  # one bad request must not end the responder
                log.exception("OBD request %s not answered", bytes(request).hex())

    def _on_frame(self, msg: can.Message) -> None:
        """Functional requests: single frames on 0x7DF (a notifier callback)."""
        if msg.arbitration_id != FUNCTIONAL_ID or msg.is_extended_id or msg.is_error_frame:
            return
        data = bytes(msg.data)
        if not data or data[0] >> 4 != 0:
            return  # only single frames may be sent functionally
        length = data[0] & 0x0F
        if 1 <= length <= len(data) - 1:
            try:
                self._handle(data[1 : 1 + length], functional=True)
            except Exception:  # an exception would end the notifier thread
                log.exception("OBD request %s not answered", data.hex())

    def _handle(self, request: bytes, *, functional: bool) -> None:
        with self._count_lock:
            self.requests += 1
        response = answer(request, self.source.state, vin=self.vin, functional=functional)
        if response is None:
            return
        if request[0] == 0x04 and response[0] == 0x44:
            self.source.clear_dtcs()
        self._stack.send(response)

    def _on_isotp_error(self, error: Exception) -> None:
        log.debug("OBD ISO-TP: %s", error)
