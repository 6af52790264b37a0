"""The simulated vehicle's diagnostic ECUs: OBD-II (SAE J1979) and read-only UDS over ISO
15765-4, answering from the vehicle's state.

Two ECUs answer, as in a real car: the engine ECU (11-bit 0x7E0/0x7E8, 29-bit
0x18DA10F1/0x18DAF110) and the transmission ECU (0x7E1/0x7E9, 0x18DA18F1/0x18DAF118).
A functional request (0x7DF, or 0x18DB33F1) reaches both, so it gets two answers when both
support it. Modes 01 (current data), 02 (freeze frame), 03/07/0A (stored, pending and
permanent codes), 04 (clear) and 09 (vehicle information) are served, and the UDS services
of `firmware_sim.uds`; the engine ECU's `UdsServer` (`firmware_sim.uds_server`, one per ECU
with `changes_things`, shared by its two addressings) keeps its session and security state
and takes its requests first.

`answer()` is the pure part: request bytes, a `VehicleState` and an ECU profile in, response
bytes out. Unsupported services and PIDs get no answer to a functional request, as J1979
requires; a physical request gets a negative response `7F SID NRC` (0x11 service not
supported, 0x12 PID not supported, 0x13 bad length).

`ObdResponder` puts the ECUs on a python-can bus: one can-isotp `TransportLayer` per ECU and
addressing, all driven by one thread (can-isotp's v1 style `process()`), fed by a listener on
the vehicle's notifier; sharing the vehicle's bus means the responder never sees the
vehicle's own periodic frames, only what testers send. A request that takes time (the self
test, `uds.takes_time`) is answered "response pending" (`7F 31 78`) at once and again every
`pending_every_s` while it runs (ISO 14229-2: within P2*server), then with its answer after
`routine_s`; meanwhile that ECU answers other requests `7F xx 21` (busyRepeatRequest).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol

import isotp

import can
from firmware_sim.clock import Clock, RealClock
from firmware_sim.model import VehicleState
from firmware_sim.obd_pids import (
    ENGINE_PIDS,
    TRANSMISSION_PIDS,
    PidTable,
    supported_pids,
    with_bitmaps,
)
from firmware_sim.uds import PENDING, UdsIdentity, answer_uds, takes_time
from firmware_sim.uds_server import IdleTarget, UdsServer

__all__ = [
    "DEFAULT_VIN",
    "ENGINE",
    "FUNCTIONAL_ID",
    "FUNCTIONAL_ID_29",
    "REQUEST_ID",
    "RESPONSE_ID",
    "TRANSMISSION",
    "EcuProfile",
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
FUNCTIONAL_ID_29: Final = 0x18DB33F1
REQUEST_ID: Final = 0x7E0
RESPONSE_ID: Final = 0x7E8
DEFAULT_VIN: Final = "5HWSM1DE8R0000817"  # with a valid check digit (position 9)
PADDING: Final = 0x55
_MAX_PIDS = 6  # J1979: up to six PIDs in one mode 01 request
_MAX_FREEZE_PAIRS = 3  # ... and three PID/frame pairs in mode 02
_VIN = re.compile(r"^[A-HJ-NPR-Z0-9]{17}$")
_NRC_SERVICE = 0x11
_NRC_PID = 0x12
_NRC_LENGTH = 0x13
_FREEZE_NOT_WITH = frozenset({0x01, 0x41})  # readiness is not frozen
_BUSY = 0x21  # busyRepeatRequest


@dataclass(frozen=True)
class EcuProfile:
    """One simulated ECU: its addresses, what it answers and what it says about itself."""

    name: str
    index: int  # 11-bit ids: request 0x7E0 + index, response 0x7E8 + index
    address: int  # 29-bit ids: request 0x18DA<address>F1, response 0x18DAF1<address>
    pids: PidTable
    info_types: frozenset[int]
    ecu_name: str
    calibration_id: str
    cvn: bytes
    identity: UdsIdentity
    reports_dtcs: bool
    changes_things: bool = False  # sessions, security, writes, reset: `uds_server`
    mode01: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode01", with_bitmaps(self.pids))

    def ids(self, extended: bool) -> tuple[int, int]:
        """(request id, response id) in 11-bit or 29-bit addressing."""
        if extended:
            return 0x18DA00F1 | self.address << 8, 0x18DAF100 | self.address
        return REQUEST_ID + self.index, RESPONSE_ID + self.index


ENGINE: Final = EcuProfile(
    name="engine",
    index=0,
    address=0x10,
    pids=ENGINE_PIDS,
    info_types=frozenset({0x02, 0x04, 0x06, 0x0A}),
    ecu_name="ECM\x00-EngineControl",
    calibration_id="HWB-ECM-0417",
    cvn=bytes.fromhex("1A2B3C4D"),
    identity=UdsIdentity(
        "HWB ECM 2.0 MHEV",
        "ECM0000817",
        "HWB-0417-ECM",
        "4.1.7",
        "hwbridge-sim",
        hardware_number="HWB-0417-H02",
        hardware_version="H02",
        boot_software="HWB-BOOT-2.3.1",
        odx_file="HWB_ECM_0417.pdx",
    ),
    reports_dtcs=True,
    changes_things=True,
)
TRANSMISSION: Final = EcuProfile(
    name="transmission",
    index=1,
    address=0x18,
    pids=TRANSMISSION_PIDS,
    info_types=frozenset({0x04, 0x06, 0x0A}),
    ecu_name="TCM\x00-TransmissionCtl",
    calibration_id="HWB-TCM-0206",
    cvn=bytes.fromhex("5E6F7A8B"),
    identity=UdsIdentity(
        "HWB 6AT",
        "TCM0000817",
        "HWB-0206-TCM",
        "2.0.6",
        "hwbridge-sim",
        hardware_number="HWB-0206-H01",
        hardware_version="H01",
        boot_software="HWB-BOOT-1.4.0",
        odx_file="HWB_TCM_0206.pdx",
    ),
    reports_dtcs=False,
)
ECUS: Final = (ENGINE, TRANSMISSION)


def check_vin(vin: str) -> str:
    """`vin` if it is a well-formed VIN (17 characters, no I, O or Q), else ValueError."""
    if not _VIN.match(vin):
        raise ValueError(f"a VIN has 17 characters, digits and A-Z without I, O, Q: {vin!r}")
    return vin


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


def _mode01(args: bytes, state: VehicleState, ecu: EcuProfile, functional: bool) -> bytes | None:
    if not 1 <= len(args) <= _MAX_PIDS:
        return _negative(0x01, _NRC_LENGTH, functional)
    out = bytearray([0x41])
    for pid in args:
        if pid in ecu.mode01:
            data = ecu.pids[pid](state) if pid in ecu.pids else supported_pids(pid, ecu.mode01)
            out += bytes([pid]) + data
    return bytes(out) if len(out) > 1 else _negative(0x01, _NRC_PID, functional)


def _mode02(args: bytes, state: VehicleState, ecu: EcuProfile, functional: bool) -> bytes | None:
    """Freeze frame 0: PID 02 names the code that stored it (00 00: none stored).

    One PID without its frame number (`02 0C`, as python-OBD asks) reads frame 0, as ECUs
    commonly allow, and is answered in the shape it was asked (`42 0C A B`)."""
    short = len(args) == 1
    if short:
        args += b"\x00"
    if not args or len(args) % 2 or len(args) // 2 > _MAX_FREEZE_PAIRS:
        return _negative(0x02, _NRC_LENGTH, functional)
    frame = state.freeze_frame if ecu.reports_dtcs else None
    frozen = {0x02} | (set(ecu.pids) - _FREEZE_NOT_WITH if frame is not None else set())
    supported = with_bitmaps(frozen)
    out = bytearray([0x42])
    for i in range(0, len(args), 2):
        pid, number = args[i], args[i + 1]
        if number != 0 or pid not in supported:
            continue
        if pid == 0x02:
            code = state.freeze_dtc if frame is not None else None
            data = encode_dtc(code) if code else b"\x00\x00"
        elif pid % 0x20 == 0:
            data = supported_pids(pid, supported)
        else:
            assert frame is not None
            data = ecu.pids[pid](frame)
        out += (bytes([pid]) if short else bytes([pid, number])) + data
    return bytes(out) if len(out) > 1 else _negative(0x02, _NRC_PID, functional)


def _mode09(args: bytes, ecu: EcuProfile, vin: str, functional: bool) -> bytes | None:
    if len(args) != 1:
        return _negative(0x09, _NRC_LENGTH, functional)
    info = args[0]
    if info == 0x00:
        return b"\x49\x00" + supported_pids(0x00, set(ecu.info_types))
    if info not in ecu.info_types:
        return _negative(0x09, _NRC_PID, functional)
    if info == 0x02:
        return b"\x49\x02\x01" + vin.encode("ascii")
    if info == 0x04:
        return b"\x49\x04\x01" + ecu.calibration_id.encode("ascii").ljust(16, b"\x00")
    if info == 0x06:
        return b"\x49\x06\x01" + ecu.cvn
    return b"\x49\x0a\x01" + ecu.ecu_name.encode("ascii").ljust(20, b"\x00")


def answer(
    request: bytes,
    state: VehicleState,
    *,
    vin: str,
    functional: bool,
    ecu: EcuProfile = ENGINE,
) -> bytes | None:
    """The response of `ecu` to one request, or None when it stays silent."""
    if not request:
        return None
    service, args = request[0], request[1:]
    if service == 0x01:
        return _mode01(args, state, ecu, functional)
    if service == 0x02:
        return _mode02(args, state, ecu, functional)
    if service in (0x03, 0x07, 0x0A, 0x04):
        if args:
            return _negative(service, _NRC_LENGTH, functional)
        if service == 0x04:
            return b"\x44"
        if not ecu.reports_dtcs:
            return _dtc_list(service, ())
        codes = {
            0x03: state.stored_dtcs,
            0x07: state.pending_dtcs,
            0x0A: state.permanent_dtcs,
        }[service]
        return _dtc_list(service, codes)
    if service == 0x09:
        return _mode09(args, ecu, vin, functional)
    if service >= 0x10:
        codes = tuple(dict.fromkeys(state.pending_dtcs + state.stored_dtcs))
        return answer_uds(
            request,
            state,
            identity=ecu.identity,
            vin=vin,
            pids=ecu.pids,
            codes=codes if ecu.reports_dtcs else (),
            functional=functional,
        )
    return _negative(service, _NRC_SERVICE, functional)


class ObdSource(Protocol):
    """What the responder needs from a vehicle."""

    @property
    def state(self) -> VehicleState: ...

    def clear_dtcs(self) -> None: ...


@dataclass
class _Work:
    """A request an ECU is working on: when it says "pending" again, when it is done."""

    request: bytes
    next_pending: float
    done: float


class _EcuLink:
    """One ECU in one addressing: a can-isotp layer fed by the notifier listener."""

    def __init__(self, ecu: EcuProfile, extended: bool, bus: can.BusABC, clock: Clock) -> None:
        self.ecu = ecu
        self.extended = extended
        self.frames: collections.deque[isotp.CanMessage] = collections.deque(maxlen=1024)
        self.request_id, self.response_id = ecu.ids(extended)
        self.work: _Work | None = None
        mode = (
            isotp.AddressingMode.Normal_29bits if extended else isotp.AddressingMode.Normal_11bits
        )

        def tx(msg: isotp.CanMessage) -> None:
            bus.send(
                can.Message(
                    timestamp=clock.time(),
                    arbitration_id=msg.arbitration_id,
                    data=bytes(msg.data),
                    is_extended_id=extended,
                )
            )

        self.bus = bus
        self.clock = clock
        self.layer = isotp.TransportLayer(
            rxfn=lambda timeout: self.frames.popleft() if self.frames else None,
            txfn=tx,
            address=isotp.Address(mode, txid=self.response_id, rxid=self.request_id),
            error_handler=lambda error: log.debug("OBD ISO-TP %s: %s", ecu.name, error),
            params={
                "tx_padding": PADDING,
                "tx_data_min_length": 8,
                "blocksize": 0,
                "stmin": 0,
                "rx_flowcontrol_timeout": 1000,
                "rx_consecutive_frame_timeout": 1000,
            },
        )

    def send_first_frame_only(self, response: bytes) -> None:
        """A stalled ECU: the first frame of a long answer, then nothing."""
        frame = bytes([0x10 | len(response) >> 8, len(response) & 0xFF]) + response[:6]
        self.bus.send(
            can.Message(
                timestamp=self.clock.time(),
                arbitration_id=self.response_id,
                data=frame,
                is_extended_id=self.extended,
            )
        )


class ObdResponder:
    """Answers diagnostic requests on `bus` from `source`'s state; start() / stop().

    `ecus` are the ECUs that answer; `extended` the addressings they answer in (11-bit
    and 29-bit by default: a tester finds whichever it tries first). Frames are stamped from
    `clock` (real by default), for a bus that keeps the timestamps it is given.
    """

    def __init__(
        self,
        bus: can.BusABC,
        notifier: can.Notifier,
        source: ObdSource,
        *,
        vin: str = DEFAULT_VIN,
        ecus: Iterable[EcuProfile] = ECUS,
        extended: Iterable[bool] = (False, True),
        clock: Clock | None = None,
    ) -> None:
        self.vin = check_vin(vin)
        clock = clock if clock is not None else RealClock()
        self.source = source
        self._notifier = notifier
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests = 0  # answered or not, for tests and diagnostics
        self.stalled = False  # fault: long answers stop after their first frame
        self.routine_s = 0.3  # how long the self test runs
        self.pending_every_s = 2.0  # how often an ECU at work repeats "response pending"
        self._functional: collections.deque[tuple[bool, bytes]] = collections.deque(maxlen=64)
        self._links = {
            (link.request_id, ext): link
            for ext in extended
            for link in (_EcuLink(ecu, ext, bus, clock) for ecu in ecus)
        }
        self._extended = frozenset(extended)
        idle = source if isinstance(source, IdleTarget) else None
        self.servers = {
            ecu.name: UdsServer(
                clock=clock, identity=ecu.identity, vin=self.vin, pids=ecu.pids, idle=idle
            )
            for ecu in {link.ecu.name: link.ecu for link in self._links.values()}.values()
            if ecu.changes_things
        }
        """The ECUs that keep diagnostic state (the engine), by name."""

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._notifier.add_listener(self._on_frame)
        self._thread = threading.Thread(target=self._run, name="obd-responder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        with contextlib.suppress(ValueError):
            self._notifier.remove_listener(self._on_frame)
        self._thread.join(2.0)
        self._thread = None

    def _on_frame(self, msg: can.Message) -> None:
        """Requests from testers (a notifier callback: it must never raise)."""
        if msg.is_error_frame or msg.is_remote_frame:
            return
        extended = bool(msg.is_extended_id)
        ident = msg.arbitration_id
        if ident == (FUNCTIONAL_ID_29 if extended else FUNCTIONAL_ID):
            data = bytes(msg.data)
            if extended not in self._extended or not data or data[0] >> 4 != 0:
                return  # only single frames may be sent functionally
            length = data[0] & 0x0F
            if 1 <= length <= len(data) - 1:
                self._functional.append((extended, data[1 : 1 + length]))
                self._wake.set()
            return
        link = self._links.get((ident, extended))
        if link is not None:
            link.frames.append(
                isotp.CanMessage(arbitration_id=ident, data=bytes(msg.data), extended_id=extended)
            )
            self._wake.set()

    def _run(self) -> None:
        links = list(self._links.values())
        while not self._stop.is_set():
            sending = any(link.layer.transmitting() for link in links)
            self._wake.wait(0.001 if sending else self._idle_wait(links))
            self._wake.clear()
            try:
                self._work_on(links)
                while self._functional:
                    extended, request = self._functional.popleft()
                    self._handle(request, extended, None)
                for link in links:
                    link.layer.process()
                    while link.layer.available():
                        received = link.layer.recv()
                        if received:
                            self._handle(bytes(received), link.extended, link)
                    link.layer.process()  # send what was just queued at once
            except Exception:  # one bad request must not end the responder
                log.exception("OBD request not answered")

    @staticmethod
    def _idle_wait(links: list[_EcuLink]) -> float:
        """Until the next thing an ECU at work has to say (at most 0.1 s)."""
        due = [min(w.next_pending, w.done) for link in links if (w := link.work) is not None]
        return max(0.0, min([0.1, *(t - time.monotonic() for t in due)]))

    def _work_on(self, links: list[_EcuLink]) -> None:
        """ECUs at work: "response pending" again when due, the answer when done."""
        now = time.monotonic()
        for link in links:
            work = link.work
            if work is None:
                continue
            if now >= work.done:
                link.work = None
                response = self._respond(link, work.request, functional=False)
                if response is not None:
                    self._send(link, response)
            elif now >= work.next_pending:
                work.next_pending = now + self.pending_every_s
                link.layer.send(bytes([0x7F, work.request[0], PENDING]))
                link.layer.process()

    def _handle(self, request: bytes, extended: bool, physical: _EcuLink | None) -> None:
        self.requests += 1
        if physical is not None and physical.work is not None:
            physical.layer.send(bytes([0x7F, request[0], _BUSY]))
            physical.layer.process()
            return
        server = self.servers.get(physical.ecu.name) if physical is not None else None
        if physical is not None and takes_time(request) and not (server and server.rebooting()):
            now = time.monotonic()
            physical.work = _Work(request, now, now + self.routine_s)
            self._work_on([physical])  # the first "response pending" goes out now
            return
        targets = (
            [physical]
            if physical is not None
            else [link for link in self._links.values() if link.extended == extended]
        )
        cleared = False
        for link in targets:
            response = self._respond(link, request, functional=physical is None)
            if response is None:
                continue
            if request[0] == 0x04 and response[0] == 0x44 and not cleared:
                self.source.clear_dtcs()
                cleared = True
            self._send(link, response)

    def _respond(self, link: _EcuLink, request: bytes, functional: bool) -> bytes | None:
        """What `link`'s ECU answers to `request`: its UDS server's answer if it keeps
        diagnostic state, else the stateless one."""
        state = self.source.state

        def read_only() -> bytes | None:
            return answer(request, state, vin=self.vin, functional=functional, ecu=link.ecu)

        server = self.servers.get(link.ecu.name)
        if server is None:
            return read_only()
        return server.answer(request, state, functional, read_only)

    def _send(self, link: _EcuLink, response: bytes) -> None:
        if self.stalled and len(response) > 7:
            link.send_first_frame_only(response)
        else:
            link.layer.send(response)
        link.layer.process()
