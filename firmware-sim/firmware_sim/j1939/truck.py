"""`VirtualTruck`: a simulated J1939 truck on a python-can `virtual` channel.

Three controllers share the bus: the engine (source address 0x00), the transmission (0x03)
and the brake controller (0x0B). At start each claims its address; then the parameter
groups of the database with a cycle time go out at it (from the controller whose address is
their source address; a longer one by BAM), each controller sends DM1 every second, and
requests, transport protocol connections and address claims of other nodes are answered as
`firmware_sim.j1939.node` describes. `python -m firmware_sim --j1939` serves it over
socketcand like the car; tests and demos drive it through small thread-safe methods
(`inject_fault`, `end_fault`, `set_throttle`, ...) and read `state`.

This is an implementation of J1939-21/-73/-81 of its own: nothing here imports
`hwbridge.j1939`, so client and simulator do not share their mistakes.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import can
from firmware_sim.j1939.controllers import CONTROLLERS, DEFAULT_TRUCK_VIN, ENGINE, ControllerSpec
from firmware_sim.j1939.diagnostics import TRUCK_FAULTS, TruckFault
from firmware_sim.j1939.ids import (
    GLOBAL,
    PGN_ACKNOWLEDGEMENT,
    PGN_ADDRESS_CLAIMED,
    PGN_COMPONENT_ID,
    PGN_DM1,
    PGN_DM2,
    PGN_DM3,
    PGN_DM11,
    PGN_REQUEST,
    PGN_SOFTWARE_ID,
    PGN_TP_CM,
    PGN_TP_DT,
    PGN_VEHICLE_ID,
    frame,
    parse_id,
)
from firmware_sim.j1939.model import TruckModel, TruckState
from firmware_sim.j1939.node import Node
from firmware_sim.j1939.periodic import PgnPlan
from firmware_sim.j1939.scheduler import Scheduler
from firmware_sim.j1939.transport import BAM_GAP_S, Transport
from firmware_sim.obd import check_vin

__all__ = ["VirtualTruck"]

log = logging.getLogger(__name__)

# handled by the controllers themselves, never sent from the database's definition
_NETWORK_PGNS: Final = frozenset(
    {
        PGN_REQUEST,
        PGN_ACKNOWLEDGEMENT,
        PGN_ADDRESS_CLAIMED,
        PGN_TP_CM,
        PGN_TP_DT,
        PGN_DM1,
        PGN_DM2,
        PGN_DM3,
        PGN_DM11,
    }
)
_DM1_PERIOD_S: Final = 1.0
_DM1_FIRST_S: Final = 0.1  # the first DM1 shortly after the address claims
_STATE_EVERY_S: Final = 0.005  # messages due together share one step of the model
_NOTIFIER_TIMEOUT_S: Final = 0.1
_PRIORITY: Final = 6


def _load(dbc: str | Path | Any | None) -> Any:
    """A cantools database: the bundled truck for None, loaded from a path, or given."""
    if dbc is None:
        from hwbridge.resources import J1939_TRUCK_DBC, bundled_dbc

        dbc = bundled_dbc(J1939_TRUCK_DBC)
    if isinstance(dbc, str | Path):
        import cantools

        return cantools.database.load_file(str(dbc), strict=False)
    return getattr(dbc, "cantools", dbc)


class VirtualTruck:
    """A simulated J1939 truck on virtual `channel`.

    `dbc` is a J1939 database (path or loaded; None: the bundled `j1939_truck.dbc`): its
    extended-frame messages are what the controllers send and answer, their signals filled
    by SPN. `seed` makes the model reproducible, `drive=False` keeps it parked at idle,
    `vin` is what the engine answers for PGN 65260.
    """

    def __init__(
        self,
        dbc: str | Path | Any | None = None,
        *,
        channel: str = "sim",
        seed: int = 0,
        drive: bool = True,
        vin: str = DEFAULT_TRUCK_VIN,
        model: TruckModel | None = None,
        bam_gap_s: float = BAM_GAP_S,
    ) -> None:
        self.db = _load(dbc)
        self.channel = channel
        self.vin = check_vin(vin)
        self._model = model if model is not None else TruckModel(seed, driving=drive)
        self._plans: list[PgnPlan] = []
        self._answers: dict[tuple[int, int], PgnPlan] = {}
        for message in self.db.messages:
            if not message.is_extended_frame:
                continue
            plan = PgnPlan(message)
            if plan.pgn in _NETWORK_PGNS:
                continue
            self._plans.append(plan)
            self._answers.setdefault((plan.pgn, plan.sa), plan)
        self._lock = threading.Lock()
        self._last_step = 0.0
        self._state: TruckState | None = None
        self._scheduler = Scheduler("j1939-truck")
        self.transport = Transport(self._send, self._scheduler, bam_gap_s=bam_gap_s)
        self.nodes: dict[str, Node] = {
            spec.key: Node(
                spec,
                send=self._send,
                transport=self.transport,
                answer=functools.partial(self._answer, spec),
                on_cleared=functools.partial(self._cleared, spec.key),
            )
            for spec in CONTROLLERS
        }
        self._by_address = {node.address: node for node in self.nodes.values()}
        self._bus: can.BusABC | None = None
        self._notifier: can.Notifier | None = None
        self._stops: list[Callable[[], None]] = []
        self.frames_sent = 0
        self.send_errors = 0

    # -- lifetime -------------------------------------------------------------------------

    def start(self) -> Self:
        """Open the bus, claim the addresses and start sending; returns self."""
        if self._bus is not None:
            raise RuntimeError("truck already started")
        self._bus = can.Bus(interface="virtual", channel=self.channel)
        try:
            self._last_step = time.monotonic()
            self._notifier = can.Notifier(self._bus, [self._on_frame], timeout=_NOTIFIER_TIMEOUT_S)
            for node in self.nodes.values():  # first, before anything else they send
                node.claim()
            every = self._scheduler.every
            for plan in self._plans:
                if plan.period_s:
                    self._stops.append(
                        every(plan.period_s, functools.partial(self._send_plan, plan))
                    )
            for node in self.nodes.values():
                self._stops.append(every(_DM1_PERIOD_S, node.send_dm1, first_s=_DM1_FIRST_S))
            self._scheduler.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop sending, join the threads, close the bus; idempotent."""
        for stop in self._stops:
            stop()
        self._stops.clear()
        self.transport.stop()
        self._scheduler.stop()
        if self._notifier is not None:
            self._notifier.stop(2.0)
            self._notifier = None
        if self._bus is not None:
            self._bus.shutdown()
            self._bus = None

    @property
    def running(self) -> bool:
        return self._bus is not None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- reading --------------------------------------------------------------------------

    @property
    def state(self) -> TruckState:
        """The truck now."""
        return self._current_state()

    @property
    def periodic_messages(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._plans if p.period_s)

    @property
    def faults(self) -> tuple[str, ...]:
        """Active faults by name, e.g. ("coolant_temp_high", "wheel_speed_sensor")."""
        return tuple(
            dtc.fault for node in self.nodes.values() for dtc in node.dtcs.active if dtc.fault
        )

    # -- controls -------------------------------------------------------------------------

    def set_throttle(self, pct: float) -> None:
        """Accelerator pedal 0-100 %; takes over from the drive cycle."""
        with self._lock:
            self._model.car.set_throttle(pct)
            self._state = None

    def set_brake(self, on: bool) -> None:
        """Service brake; takes over from the drive cycle."""
        with self._lock:
            self._model.car.set_brake(on)
            self._state = None

    def set_gear(self, lever: str) -> None:
        """Gear lever P, R, N, D, S or L; takes over from the drive cycle."""
        with self._lock:
            self._model.car.set_gear(lever)
            self._state = None

    def pause_driving(self) -> None:
        with self._lock:
            self._model.car.pause_driving()
            self._state = None

    def resume_driving(self) -> None:
        with self._lock:
            self._model.car.resume_driving()
            self._state = None

    # -- faults ---------------------------------------------------------------------------

    def inject_fault(self, name: str) -> None:
        """Raise a fault of `TRUCK_FAULTS`: its DTC becomes active on its controller (once
        more if it already was: its occurrence count goes up) and its sensors show it."""
        fault = _fault(name)
        self.nodes[fault.controller].dtcs.raise_fault(fault)
        with self._lock:
            self._model.set_condition(fault.name, True)
            self._state = None  # what is sent from now on shows it

    def end_fault(self, name: str) -> None:
        """The fault goes away: its DTC becomes previously active (DM2)."""
        fault = _fault(name)
        self.nodes[fault.controller].dtcs.end_fault(fault)
        with self._lock:
            self._model.set_condition(fault.name, False)
            self._state = None

    def _cleared(self, controller: str) -> None:
        """After a DM11: the cleared faults' conditions end too (the simulator has no fault
        that survives a repair)."""
        with self._lock:
            for fault in TRUCK_FAULTS.values():
                if fault.controller == controller:
                    self._model.set_condition(fault.name, False)
            self._state = None
            self._state = None

    # -- sending --------------------------------------------------------------------------

    def _send(self, msg: can.Message) -> None:
        bus = self._bus
        if bus is None:
            return
        try:
            bus.send(msg)
        except can.CanError as exc:
            self.send_errors += 1
            log.warning("0x%08X not sent: %s", msg.arbitration_id, exc)
            return
        self.frames_sent += 1

    def _current_state(self) -> TruckState:
        with self._lock:
            now = time.monotonic()
            if self._state is None or now - self._last_step >= _STATE_EVERY_S:
                self._model.step(now - self._last_step)
                self._last_step = now
                self._state = self._model.snapshot()
            return self._state

    def _send_plan(self, plan: PgnPlan) -> None:
        node = self._by_address.get(plan.sa)
        if node is not None and not node.active:
            return
        payload = plan.payload(self._current_state())
        if len(payload) <= 8:
            self._send(frame(plan.priority, plan.pgn, plan.sa, payload, plan.da))
        elif plan.da == GLOBAL:
            self.transport.broadcast(plan.sa, plan.pgn, payload)
        else:
            self.transport.send_to(plan.sa, plan.da, plan.pgn, payload)

    def _answer(self, spec: ControllerSpec, pgn: int) -> tuple[bytes, int] | None:
        """What controller `spec` answers to a request for `pgn` (None: not supported)."""
        if pgn == PGN_VEHICLE_ID and spec is ENGINE:
            return f"{self.vin}*".encode("ascii"), _PRIORITY
        if pgn == PGN_COMPONENT_ID:
            return spec.component_id(), _PRIORITY
        if pgn == PGN_SOFTWARE_ID:
            return spec.software_id(), _PRIORITY
        plan = self._answers.get((pgn, spec.address))
        if plan is None:
            return None
        return plan.payload(self._current_state()), plan.priority

    # -- receiving ------------------------------------------------------------------------

    def _on_frame(self, msg: can.Message) -> None:
        """Frames of other nodes (a notifier callback): requests, TP.CM, address claims."""
        if not msg.is_extended_id or msg.is_error_frame or msg.is_remote_frame:
            return
        try:
            self._dispatch(msg)
        except Exception:  # an exception would end the notifier thread
            log.exception("frame not handled: %s", msg)

    def _dispatch(self, msg: can.Message) -> None:
        ident = parse_id(msg.arbitration_id)
        data = bytes(msg.data)
        if ident.pgn == PGN_REQUEST:
            if len(data) < 3:
                return
            requested = int.from_bytes(data[:3], "little")
            targets = self.nodes.values() if ident.da == GLOBAL else self._addressed(ident.da)
            for node in targets:
                node.on_request(ident.sa, ident.da, requested)
        elif ident.pgn == PGN_TP_CM and ident.da in self._by_address:
            self.transport.on_cm(ident.sa, ident.da, data)
        elif ident.pgn == PGN_ADDRESS_CLAIMED and ident.sa in self._by_address:
            self._by_address[ident.sa].on_address_claimed(ident.sa, data)

    def _addressed(self, address: int) -> tuple[Node, ...]:
        node = self._by_address.get(address)
        return (node,) if node is not None else ()


def _fault(name: str) -> TruckFault:
    fault = TRUCK_FAULTS.get(name)
    if fault is None:
        raise ValueError(f"unknown truck fault {name!r}; known: {', '.join(TRUCK_FAULTS)}")
    return fault
