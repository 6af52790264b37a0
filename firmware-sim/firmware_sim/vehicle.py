"""`VirtualVehicle`: a simulated car on a python-can `virtual` channel.

Every periodic message of the database goes out at its cycle time, filled from a
`VehicleModel` stepped on the vehicle's clock: in real time (the default) one scheduler
thread sleeps until the next frame is due, steps the model, sends what is due; on a
`SimulatedClock` the test's `clock.advance(seconds)` does the same in its own thread, and
nothing moves in between. Every frame carries the timestamp of the moment its values are
from. A notifier on the same bus takes climate
commands from testers and feeds the OBD-II responder, so the vehicle answers OBD requests
from the very state it broadcasts. Tests and demos drive it through small, thread-safe
methods (`set_throttle`, `set_gear`, `inject_fault`, ...) and read `state`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Self

import can
from firmware_sim.checksums import scheme_of
from firmware_sim.clock import Clock, RealClock, SimulatedClock
from firmware_sim.faults import FAULTS
from firmware_sim.live_plan import REFRESH_S, SLOW_REFRESH_S, LivePlan, Moment
from firmware_sim.model import VehicleModel, VehicleState
from firmware_sim.obd import DEFAULT_VIN, ObdResponder, check_vin
from firmware_sim.periods import Period, choose_period, period_summary
from firmware_sim.schedule import Schedule
from firmware_sim.signals import (
    SIGNALS,
    MessagePlan,
    SignalValue,
    climate_request,
    find_message,
    find_signal,
    out_of_range_raw,
)
from firmware_sim.walk_bank import WalkBank

if TYPE_CHECKING:
    from firmware_sim.scenario import Scenario, ScenarioCycle

__all__ = ["FAULTS", "VirtualVehicle"]

log = logging.getLogger(__name__)


class _Loud:
    """A slot whose frames always need a call (`VirtualVehicle._frame`)."""

    quiet = -math.inf
    out = can.Message()
    restamp = None
    payload_at = None
    name = ""


_LOUD = _Loud()

_ERROR_PERIOD_S = 0.05
_TICK_S = 0.05  # the model advances at least this often, whatever the database sends
_NOTIFIER_TIMEOUT_S = 0.1
_CLIMATE_COMMAND = "ClimateCommand"
# A protocol (stuff) error as SocketCAN reports it: class CAN_ERR_PROT | CAN_ERR_BUSERROR.
_ERROR_ID = 0x088
_ERROR_DATA = bytes([0, 0, 0x04, 0, 0, 0, 0, 0])


def _cantools_db(dbc: str | Path | Any) -> Any:
    """A cantools database: loaded by cantools from a path, or the one a loaded database
    holds (a cantools `Database`, or anything with a `.cantools` one, as hwbridge's). A
    list or tuple of them is one bus: their messages together (the first of two with the
    same frame id wins)."""
    if isinstance(dbc, list | tuple):
        from cantools.database.can import Database

        if not dbc:
            raise ValueError("a vehicle needs at least one database")
        parts = [_cantools_db(one) for one in dbc]
        seen: set[tuple[int, bool]] = set()
        messages = []
        for part in parts:
            for message in part.messages:
                key = (int(message.frame_id), bool(message.is_extended_frame))
                if key not in seen:
                    seen.add(key)
                    messages.append(message)
        return Database(messages=messages, strict=False)
    if isinstance(dbc, str | Path):
        import cantools

        return cantools.database.load_file(str(dbc), strict=False)
    return getattr(dbc, "cantools", dbc)


def _database_name(dbc: Any) -> str | None:
    """The file name a database was given by (its make decides its checksums), if any."""
    if isinstance(dbc, list | tuple):
        return next((n for n in map(_database_name, dbc) if n), None)
    if isinstance(dbc, str | Path):
        return Path(dbc).name
    return None


def _bank_key(period: float, interval: float, group: str) -> tuple[str, float]:
    """Which walk bank a message of `period` takes for a group refreshed every `interval`:
    one shared by every period that divides the interval (their frames fall on its
    multiples), or its own period's."""
    steps = interval / period
    if period <= interval and abs(steps - round(steps)) < 1e-9:
        return group, interval
    return group + " period", period


def written_for_demo_model(db: Any) -> bool:
    """Whether a database is one the demo model was written for (the demo vehicle, the GNSS
    module): every message has a cycle time and most of its signals are named in `SIGNALS`.
    Such a database keeps its exact frames (signals the model does not name stay at their
    initial values); any other database comes alive signal by signal."""
    messages = [m for m in db.messages if not getattr(m, "is_container", False)]
    if not messages or not all(m.cycle_time for m in messages):
        return False
    signals = [s.name for m in messages for s in m.signals]
    named = sum(1 for name in signals if name in SIGNALS)
    return named * 2 > len(signals)


class VirtualVehicle:
    """A simulated vehicle sending the periodic messages of `dbc` on virtual `channel`.

    `dbc` is a path or a loaded database, or a list of them sharing the bus (e.g. the demo
    vehicle and `dbc/gnss_module.dbc`, a GNSS module whose speed is a reference for
    discovering the others: the client needs only that one).

    `seed` makes the model reproducible; `drive=False` keeps it parked at idle instead of
    running the drive cycle; `model` replaces the default `VehicleModel(seed)` (e.g. to
    start with a warm engine); `obd=False` leaves out the OBD-II responder.

    `clock` is the time the vehicle lives in: real by default; a `SimulatedClock` makes the
    run reproducible (see `firmware_sim.clock`): frames go out only while the test advances
    the clock, stamped with their simulated times. The OBD-II responder answers on either
    from the state at the clock's now; its own delays (a routine's 0.3 s) stay real.

    Any database comes alive: every message is sent, at its cycle time or at a period chosen
    from the database (`period_summary` says how), and every signal moves as its kind would
    (`firmware_sim.live_plan`). `animate=False` sends only the messages with a cycle time and
    moves only the signals the demo model names (`SIGNALS`), as databases written for the
    demo model do by default (`written_for_demo_model`).

    `scenario` (a `Scenario`, a TOML file or a bundled scenario's name) scripts the drive in
    phases (`firmware_sim.scenario`); its `signals` are held during their phase.
    `dbc_name` is the database's file name when `dbc` is a loaded database: opendbc names
    files by make, and the make says how its checksums are computed.
    """

    def __init__(
        self,
        dbc: str | Path | Any | list[str | Path | Any],
        *,
        channel: str = "sim",
        seed: int = 0,
        drive: bool | None = None,
        model: VehicleModel | None = None,
        obd: bool = True,
        vin: str = DEFAULT_VIN,
        clock: Clock | None = None,
        scenario: Scenario | str | Path | None = None,
        animate: bool | None = None,
        dbc_name: str | None = None,
    ) -> None:
        self.db = _cantools_db(dbc)
        self.clock: Clock = clock if clock is not None else RealClock()
        self.channel = channel
        self.vin = check_vin(vin)
        self._model = model if model is not None else VehicleModel(seed)
        if drive is not None and drive != self._model.driving:
            if drive:
                self._model.resume_driving()
            else:
                self._model.pause_driving()
        self.animated = not written_for_demo_model(self.db) if animate is None else animate
        self._plans, periods = self._build_plans(seed, scheme_of(dbc_name or _database_name(dbc)))
        self.period_summary: str | None = period_summary(periods)
        """One line saying how many periods were chosen and how (None: all had one)."""
        self.scenario: Scenario | None = None
        self._scenario_cycle: ScenarioCycle | None = None
        self._phase_index = -1
        self._phase_holds: list[dict[LivePlan, dict[str, SignalValue]]] = []
        if scenario is not None:
            self._use_scenario(scenario)
        climate = next((m for m in self.db.messages if m.name == _CLIMATE_COMMAND), None)
        self._climate = climate
        self._climate_key = (
            (int(climate.frame_id), bool(climate.is_extended_frame)) if climate else None
        )
        self._want_obd = obd
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bus: can.BusABC | None = None
        self._notifier: can.Notifier | None = None
        self._obd: ObdResponder | None = None
        # faults: immutable values swapped under the lock, read without it by the sender
        self._silenced: frozenset[str] = frozenset()
        self._out_of_range: MappingProxyType[str, dict[str, int | float]] = MappingProxyType({})
        self._error_frames = False
        self._obd_stall = False
        # frames sent per plan: counted by the sender alone, read without a lock
        # frames sent per plan: the times its slot was due (the schedule counts them), less
        # those not sent (counted by the sender alone), plus those of earlier runs
        self._missed = [0] * len(self._plans)
        self._sent_before = [0] * len(self._plans)
        self._errors_sent = 0
        self._commands = 0
        self._stepped_at: float | None = None  # when the model was last stepped (monotonic)
        # the schedule's slots: every message, the model tick and the error frames
        self._periods = [p.period_s for p in self._plans] + [_TICK_S, _ERROR_PERIOD_S]
        self._schedule: Schedule | None = None
        # what the sender reads of each slot: a live plan, that says until when its frame
        # goes out as it is (`LivePlan.quiet`), or something whose frames always need a call
        # (the demo model's plans, the model's tick, the error frames); the message's name
        self._quiet: list[LivePlan | _Loud] = [
            plan if isinstance(plan, LivePlan) else _LOUD for plan in self._plans
        ] + [_LOUD, _LOUD]
        self._names: list[str | None] = [plan.name for plan in self._plans] + [None, None]
        self._error_slot = len(self._plans) + 1
        self._started = False

    def _build_plans(
        self, seed: int, scheme: str | None
    ) -> tuple[list[MessagePlan | LivePlan], list[Period]]:
        """A plan for every message sent, and the periods chosen for those without one."""
        plans: list[MessagePlan | LivePlan] = []
        periods: list[Period] = []
        # the walks of the messages whose values come due at the same moments, computed
        # together (`WalkBank`): those of one period, and those of every period a refresh
        # interval is a whole multiple of (their refreshes land on the same frames)
        banks: dict[tuple[str, float], WalkBank] = {}
        for message in self.db.messages:
            if getattr(message, "is_container", False):
                continue
            if not self.animated:
                if message.cycle_time:
                    plans.append(MessagePlan(self.db, message))
                continue
            period = choose_period(message)
            periods.append(period)
            walks = (
                banks.setdefault(_bank_key(period.seconds, REFRESH_S, "fast"), WalkBank()),
                banks.setdefault(_bank_key(period.seconds, SLOW_REFRESH_S, "slow"), WalkBank()),
            )
            plans.append(
                LivePlan(message, period.seconds, seed=seed, checksum_scheme=scheme, walks=walks)
            )
        for bank in (bank for bank in banks.values() if len(bank)):
            bank.build()  # with the plans, not on the first frames
        return plans, periods

    def _use_scenario(self, scenario: Scenario | str | Path) -> None:
        """Drive by `scenario`: check its signals against the database, take the pedals."""
        # pydantic only when a scenario is given: `python -m firmware_sim` starts in 0.35 s
        from firmware_sim.scenario import Scenario, ScenarioCycle, ScenarioError, load_scenario

        loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        holds: list[dict[LivePlan, dict[str, SignalValue]]] = []
        for index, phase in enumerate(loaded.phase):
            per_plan: dict[LivePlan, dict[str, SignalValue]] = {}
            for name, value in phase.signals.items():
                targets = self._hold_targets(name)
                if not targets:
                    raise ScenarioError(
                        f"{loaded.phase_name(index)}: no signal {name!r} in the database"
                        + ("" if self.animated else " that the vehicle sends and moves")
                    )
                for plan, signal_name in targets:
                    held = value if not isinstance(value, bool) else int(value)
                    per_plan.setdefault(plan, {})[signal_name] = held
            holds.append(per_plan)
        self.scenario = loaded
        self._phase_holds = holds
        self._scenario_cycle = ScenarioCycle(loaded)
        self._model.cycle = self._scenario_cycle
        self._model.driving = True

    def _hold_targets(self, name: str) -> list[tuple[LivePlan, str]]:
        """The (plan, signal) pairs a scenario's `Message.Signal` or `Signal` names."""
        message_name, _, signal_name = name.rpartition(".")
        found = []
        for plan in self._plans:
            if not isinstance(plan, LivePlan):
                continue
            if message_name and plan.name != message_name:
                continue
            if signal_name in plan.by_name:
                found.append((plan, signal_name))
        return found

    def _follow_scenario(self) -> None:
        """Apply what the scenario's current phase holds, once when it begins (caller holds
        the lock)."""
        cycle = self._scenario_cycle
        if cycle is None or cycle.index == self._phase_index:
            return
        scenario = cycle.scenario
        if 0 <= self._phase_index < len(scenario.phase):
            left = scenario.phase[self._phase_index].fault_call()
            if left is not None:
                self._phase_fault(left, on=False)
        self._phase_index = cycle.index
        phase = scenario.phase[cycle.index]
        for plan in self._plans:
            if isinstance(plan, LivePlan) and (plan.held or plan in self._phase_holds[cycle.index]):
                plan.hold(self._phase_holds[cycle.index].get(plan, {}))
        for door in self._model.doors:
            self._model.set_door(door, phase.doors.get(door, False))  # type: ignore[call-overload]
        self._model.set_lights(headlights=phase.headlights or "Auto", turn=phase.turn or "Off")
        entered = phase.fault_call()
        if entered is not None:
            self._phase_fault(entered, on=True)

    def _phase_fault(self, call: tuple[str, dict[str, str]], *, on: bool) -> None:
        """Start or end a scenario phase's fault (caller holds the lock)."""
        name, target = call
        if name == "overheat":
            self._model.set_overheat(on)
        elif name == "silence":
            plan = self._plan_of(target.get("message"), "silence needs message=NAME")
            changed = self._silenced | {plan.name} if on else self._silenced - {plan.name}
            self._silenced = frozenset(changed)
        elif name == "out_of_range":
            message, found = find_signal(self.db, target.get("signal", ""))
            plan = self._plan_of(message.name, "")
            faults = {k: dict(v) for k, v in self._out_of_range.items()}
            raw = out_of_range_raw(found)
            if on and raw is not None:
                faults.setdefault(plan.name, {})[found.name] = raw
            elif not on:
                faults.get(plan.name, {}).pop(found.name, None)
            self._out_of_range = MappingProxyType(faults)
        elif name == "error_frames":
            self._error_frames = on
        elif name == "obd_stall":
            self._set_obd_stall(on)

    # -- lifetime -------------------------------------------------------------------------

    def start(self) -> Self:
        """Open the bus and start sending; returns self."""
        if self._started:
            raise RuntimeError("vehicle already started")
        self._stop.clear()
        # frames keep the timestamp they are sent with: the moment their values are from
        bus = self._bus = can.Bus(
            interface="virtual", channel=self.channel, preserve_timestamps=True
        )
        try:
            self._notifier = can.Notifier(bus, [self._on_frame], timeout=_NOTIFIER_TIMEOUT_S)
            if self._want_obd:
                self._obd = ObdResponder(bus, self._notifier, self, vin=self.vin, clock=self.clock)
                self._obd.stalled = self._obd_stall
                self._obd.start()
            now = self.clock.monotonic()
            with self._lock:
                self._stepped_at = now
                if self._schedule is not None:  # started again: the frames sent so far
                    sent = self._schedule.times()
                    for slot, missed in enumerate(self._missed):
                        self._sent_before[slot] += sent[slot] - missed
                    self._missed = [0] * len(self._plans)
                self._schedule = Schedule(self._periods, now)  # every slot due now
            self._started = True
            if isinstance(self.clock, SimulatedClock):
                self.clock.attach(self)
            else:
                self._thread = threading.Thread(
                    target=self._run, name="vehicle-sender", daemon=True
                )
                self._thread.start()
        except BaseException:
            self._started = False
            self._close()
            raise
        return self

    def stop(self) -> None:
        """Stop sending, join every thread, close the bus; idempotent."""
        self._stop.set()
        if isinstance(self.clock, SimulatedClock):
            self.clock.detach(self)
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        with self._lock:
            self._stepped_at = None  # stopped: the model stands still
        self._started = False
        self._close()

    def _close(self) -> None:
        if self._obd is not None:
            self._obd.stop()
            self._obd = None
        if self._notifier is not None:
            self._notifier.stop(2.0)
            self._notifier = None
        if self._bus is not None:
            self._bus.shutdown()
            self._bus = None

    @property
    def running(self) -> bool:
        if isinstance(self.clock, SimulatedClock):
            return self._started
        return self._thread is not None and self._thread.is_alive()

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
    def state(self) -> VehicleState:
        """A consistent snapshot of the vehicle now: while it runs, the model is stepped to
        this moment first, so an answer built from it (OBD-II) is as fresh as its timestamp
        however late the sender thread is on a busy machine."""
        with self._lock:
            if self._stepped_at is not None:
                self._step_to(self.clock.monotonic())
            return self._model.snapshot()

    def _snapshot(self) -> VehicleState:
        with self._lock:
            return self._model.snapshot()

    def _step_to(self, now: float) -> None:
        """Step the model to `now` (caller holds the lock)."""
        if self._stepped_at is not None and now > self._stepped_at:
            self._model.step(now - self._stepped_at)
            self._stepped_at = now
        if self._scenario_cycle is not None:
            self._follow_scenario()

    @property
    def obd(self) -> ObdResponder | None:
        return self._obd

    @property
    def periodic_messages(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._plans)

    @property
    def frames_sent(self) -> dict[str, int]:
        """Frames sent so far, per message."""
        sent: dict[str, int] = {}
        schedule = self._schedule
        due = schedule.times() if schedule is not None else [0] * len(self._plans)
        counts = zip(self._plans, self._sent_before, due, self._missed, strict=False)
        for plan, before, times, missed in counts:
            sent[plan.name] = sent.get(plan.name, 0) + before + times - missed
        return sent

    @property
    def error_frames_sent(self) -> int:
        return self._errors_sent

    @property
    def commands_received(self) -> int:
        """Climate commands taken from the bus so far."""
        return self._commands

    # -- controls -------------------------------------------------------------------------

    def set_throttle(self, pct: float) -> None:
        """Throttle 0-100 %; takes over from the drive cycle."""
        with self._lock:
            self._model.set_throttle(pct)

    def set_brake(self, on: bool) -> None:
        """Brake pedal; takes over from the drive cycle."""
        with self._lock:
            self._model.set_brake(on)

    def set_gear(self, lever: str) -> None:
        """Gear lever P, R, N, D, S or L; takes over from the drive cycle."""
        with self._lock:
            self._model.set_gear(lever)

    def set_idle_rpm(self, rpm: float) -> None:
        """The engine's idle speed target (what the engine ECU's DID 0x0101 writes)."""
        with self._lock:
            self._model.set_idle_rpm(rpm)

    def pause_driving(self) -> None:
        """Stop the drive cycle: throttle released, the vehicle coasts."""
        with self._lock:
            self._model.pause_driving()

    def resume_driving(self) -> None:
        """Hand the pedals back to the drive cycle."""
        with self._lock:
            self._model.resume_driving()

    def set_door(self, name: str, open_: bool) -> None:
        """front_left, front_right, rear_left, rear_right, tailgate or hood."""
        with self._lock:
            self._model.set_door(name, open_)

    def set_lock(self, state: str) -> None:
        """Unlocked, Locked or DoubleLocked."""
        with self._lock:
            self._model.set_lock(state)

    def set_lights(
        self, headlights: str | None = None, turn: str | None = None, fog: bool | None = None
    ) -> None:
        with self._lock:
            self._model.set_lights(headlights, turn, fog)

    def set_climate(
        self,
        *,
        setpoint_c: float | None = None,
        fan_level: int | None = None,
        ac: bool | None = None,
        recirculation: bool | None = None,
        air_distribution: int | None = None,
        rear_defrost: bool | None = None,
    ) -> None:
        """Change the climate request as the head unit would; None keeps a field."""
        given = {
            "setpoint_c": setpoint_c,
            "fan_level": fan_level,
            "ac": ac,
            "recirculation": recirculation,
            "air_distribution": air_distribution,
            "rear_defrost": rear_defrost,
        }
        changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        with self._lock:
            self._model.set_climate(dataclasses.replace(self._model.climate, **changes))

    def clear_dtcs(self) -> None:
        """Clear stored and pending trouble codes and the MIL (what OBD mode 04 does)."""
        with self._lock:
            self._model.clear_dtcs()

    # -- faults ---------------------------------------------------------------------------

    def inject_fault(
        self, name: str, *, message: str | None = None, signal: str | None = None
    ) -> None:
        """Start a fault: overheat, silence (message=), out_of_range (signal=), error_frames,
        obd_stall (the diagnostic ECUs send the first frame of a long answer, then nothing)."""
        if name == "overheat":
            with self._lock:
                self._model.set_overheat(True)
        elif name == "silence":
            plan = self._plan_of(message, "silence needs message=NAME")
            with self._lock:
                self._silenced = self._silenced | {plan.name}
        elif name == "out_of_range":
            self._inject_out_of_range(signal)
        elif name == "error_frames":
            self._error_frames = True
        elif name == "obd_stall":
            self._set_obd_stall(True)
        else:
            raise ValueError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")

    def _plan_of(self, message: str | None, missing: str) -> MessagePlan | LivePlan:
        if not message:
            raise ValueError(missing)
        found = find_message(self.db, message)
        for plan in self._plans:
            if plan.message is found:
                return plan
        raise ValueError(f"{found.name} is not a periodic message; the vehicle never sends it")

    def _inject_out_of_range(self, signal: str | None) -> None:
        if not signal:
            raise ValueError("out_of_range needs signal=NAME")
        message, found = find_signal(self.db, signal)
        plan = self._plan_of(message.name, "")
        raw = out_of_range_raw(found)
        if raw is None:
            raise ValueError(f"every value {found.name} can carry is within its range")
        with self._lock:
            faults = {k: dict(v) for k, v in self._out_of_range.items()}
            faults.setdefault(plan.name, {})[found.name] = raw
            self._out_of_range = MappingProxyType(faults)

    def clear_faults(self) -> None:
        """End every fault (stored trouble codes stay until cleared, as in a real ECU)."""
        with self._lock:
            self._model.set_overheat(False)
            self._silenced = frozenset()
            self._out_of_range = MappingProxyType({})
            self._error_frames = False
        self._set_obd_stall(False)

    @property
    def faults(self) -> tuple[str, ...]:
        """Active faults, e.g. ("overheat", "silence:EngineData")."""
        with self._lock:
            active = ["overheat"] if self._model.overheat else []
            active += [f"silence:{m}" for m in sorted(self._silenced)]
            active += [
                f"out_of_range:{m}.{s}" for m, sigs in self._out_of_range.items() for s in sigs
            ]
        if self._error_frames:
            active.append("error_frames")
        if self._obd_stall:
            active.append("obd_stall")
        return tuple(active)

    def _set_obd_stall(self, on: bool) -> None:
        self._obd_stall = on
        if self._obd is not None:
            self._obd.stalled = on

    # -- threads --------------------------------------------------------------------------

    def _run(self) -> None:
        """The sender thread on real time: sleep until the next frame is due, send it."""
        clock, stop = self.clock, self._stop
        while not stop.is_set():
            due = self.next_due()
            if due is None:
                return
            delay = due - clock.monotonic()
            if delay > 0.0 and stop.wait(delay):
                return
            self.run_due(clock.monotonic())

    # -- the schedule (a `firmware_sim.clock.Timed`) -----------------------------------------

    def next_due(self) -> float | None:
        """When the next frame (or model tick) is due, on the vehicle's clock."""
        schedule = self._schedule
        return schedule.next_due() if schedule is not None and self._bus is not None else None

    def run_due(self, now: float) -> None:
        """Step the model to `now` and send every frame due by then, stamped with now."""
        bus, schedule = self._bus, self._schedule
        if bus is None or schedule is None:
            return
        with self._lock:
            self._step_to(now)
            # the state is snapshot only if a frame needs it (a plan's values are due)
            moment = Moment(self._model.time_s, self._snapshot)
        stamp = self.clock.time()
        due = schedule.due(now)
        # faults as they are now (swapped whole by the controls, never changed in place)
        silenced, faults = self._silenced, self._out_of_range
        if silenced or faults:
            self._send_faulty(due, moment, stamp, silenced, faults)
            return
        missed, send, quiet, time_s = self._missed, bus.send, self._quiet, moment.time_s
        prepared = False
        for index in due:  # the one loop every frame goes through: kept lean
            plan = quiet[index]
            if plan.quiet > time_s:  # a plain message between refreshes: its frame as it is
                frame, restamp = plan.out, plan.restamp
            else:
                if not prepared and plan.payload_at is not None:  # the pages due: all first
                    prepared = True
                    self._prepare(due, moment)
                if plan.quiet > time_s:  # brought up to date just now
                    frame, restamp = plan.out, plan.restamp
                else:
                    found = self._made(index, moment, stamp)
                    if found is None:
                        continue
                    frame, restamp = found, None
            frame.timestamp = stamp
            try:
                if restamp is not None:  # this frame's own counter and checksum
                    restamp()
                send(frame)
            except Exception as exc:  # keep the other messages going
                self._not_sent(index, exc)
                missed[index] += 1

    def _send_faulty(
        self,
        due: Sequence[int],
        moment: Moment,
        stamp: float,
        silenced: frozenset[str],
        faults: Mapping[str, Mapping[str, int | float]],
    ) -> None:
        """`run_due`'s loop while a fault is on: every frame asks its plan."""
        bus = self._bus
        if bus is None:
            return
        missed, send, plans = self._missed, bus.send, len(self._plans)
        for index in due:
            name = self._names[index]
            if name is not None and name in silenced:
                missed[index] += 1
                continue
            frame = self._frame(index, moment, stamp, faults.get(name) if name else None)
            sent = frame is not None and self._send(send, frame, stamp, index)
            if not sent and index < plans:
                missed[index] += 1

    def _made(self, index: int, moment: Moment, stamp: float) -> can.Message | None:
        """Slot `index`'s frame made by its plan (None: nothing to send, or it could not be
        made: counted as not sent)."""
        plan = self._quiet[index]
        if plan.payload_at is not None:  # a live plan's payload, in its frame
            frame = self._payload_frame(plan, moment)
        else:
            frame = self._frame(index, moment, stamp, None)
        if frame is None and index < len(self._plans):
            self._missed[index] += 1
        return frame

    def _payload_frame(self, plan: LivePlan, moment: Moment) -> can.Message | None:
        """A live plan's frame with its payload at `moment` (None: it could not be made)."""
        try:
            plan.out.data = plan.payload_at(moment, None)
        except Exception:  # keep the other messages going
            log.exception("%s not sent", plan.name)
            return None
        return plan.out

    def _prepare(self, due: Sequence[int], moment: Moment) -> None:
        """Bring the pages due at `moment` up to it first, one after the other, before any
        of their frames goes out: the work of a moment done together, then its sends."""
        quiet, time_s = self._quiet, moment.time_s
        for index in due:
            plan = quiet[index]
            if plan.quiet <= time_s and plan.payload_at is not None:
                try:
                    plan.prepare(moment)
                except Exception:  # its frame asks again, and says what is wrong
                    continue

    def _frame(
        self,
        index: int,
        moment: Moment,
        stamp: float,
        out_of_range: Mapping[str, int | float] | None,
    ) -> can.Message | None:
        """The frame of slot `index` (None: nothing to send: the model's tick, the error
        frames' turn, sent here, or a frame that could not be made)."""
        if index >= len(self._plans):
            bus = self._bus
            if index == self._error_slot and self._error_frames and bus is not None:
                self._send_error(bus, stamp)
            return None
        plan = self._plans[index]
        try:
            if isinstance(plan, LivePlan):
                plan.out.data = plan.payload_at(moment, out_of_range)
                return plan.out
            return plan.frame(moment.state(), out_of_range)
        except Exception:  # keep the other messages going
            log.exception("%s not sent", plan.name)
            return None

    def _send(
        self, send: Callable[[can.Message], None], frame: can.Message, stamp: float, index: int
    ) -> bool:
        """Send slot `index`'s `frame` stamped `stamp`; whether it went."""
        frame.timestamp = stamp
        try:
            send(frame)
        except Exception as exc:  # keep the other messages going
            self._not_sent(index, exc)
            return False
        return True

    def _not_sent(self, index: int, exc: Exception) -> None:
        if isinstance(exc, can.CanError):
            log.warning("%s not sent: %s", self._names[index], exc)
        else:
            log.error("%s not sent", self._names[index], exc_info=exc)

    def _send_error(self, bus: can.BusABC, stamp: float) -> None:
        msg = can.Message(
            timestamp=stamp,
            arbitration_id=_ERROR_ID,
            is_error_frame=True,
            is_extended_id=False,
            data=_ERROR_DATA,
        )
        try:
            bus.send(msg)
        except can.CanError as exc:
            log.warning("error frame not sent: %s", exc)
            return
        self._errors_sent += 1

    def _on_frame(self, msg: can.Message) -> None:
        """Frames from other nodes (a notifier callback): climate commands."""
        climate = self._climate
        if msg.is_error_frame or msg.is_remote_frame or climate is None:
            return
        if (msg.arbitration_id, msg.is_extended_id) != self._climate_key:
            return
        try:
            decoded = climate.decode(bytes(msg.data), decode_choices=False)
            with self._lock:
                self._model.set_climate(climate_request(decoded, self._model.climate))
                self._commands += 1
        except Exception:  # an exception would end the notifier thread, and OBD with it
            log.exception("climate command not applied: %s", msg)
