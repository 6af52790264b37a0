"""Issue 37: any database comes alive in the simulator - every message on the bus at a period,
every signal moving as its kind would, within range, every frame decoded by cantools."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import cantools
import pytest
from cantools.database.conversion import BaseConversion
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import can
from firmware_sim import cli
from firmware_sim.clock import SimulatedClock
from firmware_sim.live_plan import LivePlan
from firmware_sim.model import VehicleModel
from firmware_sim.periods import choose_period, period_summary
from firmware_sim.signal_kinds import Kind, classify, signal_range
from firmware_sim.vehicle import VirtualVehicle
from tests.shared_data import DATA, needs_shared
from tests.sim.conftest import ObdTester

OPENDBC = DATA / "opendbc"

# A small car as a user's tool exports it: no cycle times, opendbc-style names and units.
USER_DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 512 WHEEL_SPEEDS: 8 ECU
 SG_ WHEEL_SPEED_FL : 7|16@0+ (0.01,0) [0|250] "kph" ECU
 SG_ WHEEL_SPEED_FR : 23|16@0+ (0.01,0) [0|250] "kph" ECU
 SG_ WHEEL_SPEED_RL : 39|16@0+ (0.01,0) [0|250] "kph" ECU
 SG_ WHEEL_SPEED_RR : 55|16@0+ (0.01,0) [0|250] "kph" ECU

BO_ 513 ENGINE: 8 ECU
 SG_ ENGINE_RPM : 7|16@0+ (0.25,0) [0|8000] "rpm" ECU
 SG_ COOLANT_TEMP : 23|8@0+ (1,-40) [-40|215] "degC" ECU
 SG_ GAS_PEDAL : 31|8@0+ (0.5,0) [0|100] "%" ECU
 SG_ COUNTER : 51|4@0+ (1,0) [0|15] "" ECU
 SG_ CHECKSUM : 63|8@0+ (1,0) [0|255] "" ECU

BO_ 514 BODY: 4 ECU
 SG_ DOOR_OPEN_FL : 0|1@1+ (1,0) [0|1] "" ECU
 SG_ SEATBELT_UNLATCHED : 1|1@1+ (1,0) [0|1] "" ECU
 SG_ GEAR_SHIFTER : 4|3@1+ (1,0) [0|7] "" ECU
 SG_ SET_ME_X2A : 8|8@1+ (1,0) [0|255] "" ECU
 SG_ HUMIDITY : 16|10@1+ (0.1,0) [0|100] "%" ECU

BO_ 515 RADAR: 8 ECU
 SG_ MUX M : 0|2@1+ (1,0) [0|3] "" ECU
 SG_ TRACK_DIST m0 : 8|12@1+ (0.05,0) [0|200] "m" ECU
 SG_ TRACK_SPEED m1 : 8|12@1- (0.05,0) [-100|100] "m/s" ECU

BA_DEF_ BO_ "GenMsgSendType" ENUM "Cyclic","OnEvent";
BA_DEF_DEF_ "GenMsgSendType" "Cyclic";
BA_ "GenMsgSendType" BO_ 514 1;

VAL_ 514 GEAR_SHIFTER 0 "P" 1 "R" 2 "N" 3 "D" 4 "S" ;
"""


def _load(path: Path) -> Any:
    """A database as plain cantools loads it (the simulator's own reading)."""
    return cantools.database.load_file(str(path), strict=False)


def _frames_by_message(
    db: Any, path: Path, seconds: float, **kwargs: Any
) -> tuple[VirtualVehicle, dict[str, list[dict[str, Any]]], int]:
    """Run the vehicle on simulated time; every frame decoded by cantools, per message."""
    clock = SimulatedClock()
    channel = f"any-{time.monotonic_ns()}"
    decoded: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_id = {m.frame_id: m for m in db.messages}
    frames = 0
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(str(path), channel=channel, clock=clock, obd=False, **kwargs) as car,
    ):
        for _ in range(round(seconds * 2)):
            clock.advance(0.5)
            for msg in iter(lambda: peer.recv(0), None):
                frames += 1
                message = by_id[msg.arbitration_id]
                decoded[message.name].append(message.decode(bytes(msg.data), decode_choices=False))
    return car, decoded, frames


@pytest.fixture
def user_dbc(tmp_path: Path) -> tuple[Any, Path]:
    path = tmp_path / "theirs.dbc"
    path.write_text(USER_DBC)
    return _load(path), path


def test_a_database_without_cycle_times_puts_every_message_on_the_bus(
    user_dbc: tuple[Any, Path],
) -> None:
    db, path = user_dbc
    car, decoded, _ = _frames_by_message(db, path, 2.0)
    assert set(decoded) == {m.name for m in db.messages}
    assert len(decoded["WHEEL_SPEEDS"]) == pytest.approx(20, abs=1)  # the default 100 ms
    assert len(decoded["BODY"]) == pytest.approx(4, abs=1)  # sent on events: every 0.5 s
    assert car.period_summary == (
        "firmware_sim: 4 messages have no cycle time: 1 at periods from their send type,"
        " 3 at the default 100 ms"
    )


def test_the_model_quantities_move_in_any_database(user_dbc: tuple[Any, Path]) -> None:
    db, path = user_dbc
    _, decoded, _ = _frames_by_message(db, path, 14.0)
    wheels = decoded["WHEEL_SPEEDS"]
    fastest = max(wheels, key=lambda d: d["WHEEL_SPEED_FL"])
    assert fastest["WHEEL_SPEED_FL"] > 20  # the drive cycle accelerates to 60 km/h
    corners = {fastest[f"WHEEL_SPEED_{c}"] for c in ("FL", "FR", "RL", "RR")}
    assert len(corners) == 4 and max(corners) - min(corners) < 0.02 * max(corners)
    engine = decoded["ENGINE"]
    assert (
        min(d["ENGINE_RPM"] for d in engine) >= 700 and max(d["ENGINE_RPM"] for d in engine) > 1200
    )
    assert max(d["GAS_PEDAL"] for d in engine) > 20
    assert engine[-1]["COOLANT_TEMP"] > engine[0]["COOLANT_TEMP"]  # the engine warms up
    counters = [d["COUNTER"] for d in engine]
    assert all(b == (a + 1) % 16 for a, b in itertools.pairwise(counters))
    body = decoded["BODY"]
    assert next(d["GEAR_SHIFTER"] for d in body) == 0 and 3 in {d["GEAR_SHIFTER"] for d in body}
    assert {d["DOOR_OPEN_FL"] for d in body} == {0, 1}  # the driver gets in
    assert {d["SET_ME_X2A"] for d in body} == {0x2A}
    assert len({d["HUMIDITY"] for d in body}) > 3  # an unknown value walks
    radar = decoded["RADAR"]
    assert {d["MUX"] for d in radar} == {0, 1}  # through its pages
    assert len({d["TRACK_DIST"] for d in radar if d["MUX"] == 0}) > 3


# Two signals on the same bits, as opendbc's vw_mqb PLA_01 has them (a brake torque and a
# deceleration on bits 36-48): cantools' one packing format for the message breaks.
OVERLAPPING_DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 304 PLA_01: 8 ECU
 SG_ CHECKSUM : 0|8@1+ (1,0) [0|255] "" ECU
 SG_ COUNTER : 8|4@1+ (1,0) [0|15] "" ECU
 SG_ PLA_LW_Soll : 16|13@1+ (0.1,0) [0|819.1] "deg" ECU
 SG_ PLA_Bremsmoment : 36|13@1+ (4,0) [0|32760] "Nm" ECU
 SG_ PLA_Bremsverzoegerung : 36|7@1+ (0.1,0) [0|12] "m/s2" ECU
 SG_ PLA_Anhalten : 51|1@1+ (1,0) [0|1] "" ECU
"""


def test_signals_that_overlap_are_sent_where_the_database_puts_them(tmp_path: Path) -> None:
    """cantools packed such a message at other bits than the database's, refusing its counter
    and checksum: vw_mqb's PLA_01 went out with both at zero (so discovery's --match-known
    found its counter not counting) and its steering angle at bits 3-15. The first of the
    signals that overlap is sent (counters and checksums first); the others read its bits."""
    path = tmp_path / "overlap.dbc"
    path.write_text(OVERLAPPING_DBC)
    clock = SimulatedClock()
    channel = f"overlap-{time.monotonic_ns()}"
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(str(path), channel=channel, clock=clock, obd=False),
    ):
        clock.advance(12.0)
        payloads = [bytes(m.data) for m in iter(lambda: peer.recv(0), None)]
    assert len(payloads) == pytest.approx(120, abs=2)  # the default 100 ms
    counters = [d[1] & 0x0F for d in payloads]
    assert all(b == (a + 1) % 16 for a, b in itertools.pairwise(counters))
    for d in payloads:
        assert d[0] == d[1] ^ d[2] ^ d[3] ^ d[4] ^ d[5] ^ d[6] ^ d[7]  # XOR of every byte
        bits = int.from_bytes(d, "little")
        used = sum(((1 << n) - 1) << start for start, n in [(0, 12), (16, 13), (36, 13), (51, 1)])
        assert bits & ~used == 0, d.hex()  # nothing outside the database's signals
    torque = {(int.from_bytes(d, "little") >> 36) & 0x1FFF for d in payloads}
    angle = {(int.from_bytes(d, "little") >> 16) & 0x1FFF for d in payloads}
    assert len(torque) > 3 and len(angle) > 1  # the kept signals move, at their own bits


def test_the_demo_vehicle_keeps_its_exact_frames() -> None:
    """Its database was written for the demo model: nothing it sends changes."""
    demo = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"
    db = _load(demo)
    car, decoded, _ = _frames_by_message(db, demo, 2.0)
    assert not car.animated and car.period_summary is None
    assert {d["Obj2Distance"] for d in decoded["AdasObjects"]} == {0}


@needs_shared
def test_an_opendbc_database_without_cycle_times_comes_alive() -> None:
    path = OPENDBC / "toyota_prius_2010_pt.dbc"
    db = _load(path)
    assert not any(m.cycle_time for m in db.messages)
    _, decoded, _ = _frames_by_message(db, path, 12.0)
    assert set(decoded) == {m.name for m in db.messages}
    speeds = [d["SPEED"] for d in decoded["SPEED"]]
    assert max(speeds) > 10  # mph, from the model's km/h
    rpm = {d["ENGINE_RPM"] for d in decoded["POWERTRAIN"]}
    assert len(rpm) > 20
    # Toyota's checksum: the sum of the id's bytes, the length and the payload
    db.get_message_by_name("GEAR_PACKET")
    assert {d["GEAR"] for d in decoded["GEAR_PACKET"]} >= {0, 3}  # P then D


@needs_shared
def test_toyota_frames_carry_toyota_checksums() -> None:
    path = OPENDBC / "toyota_prius_2010_pt.dbc"
    db = _load(path)
    clock = SimulatedClock()
    channel = f"toyota-{time.monotonic_ns()}"
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(str(path), channel=channel, clock=clock, obd=False),
    ):
        powertrain = db.get_message_by_name("POWERTRAIN")
        clock.advance(1.5)
        frames = [
            m for m in iter(lambda: peer.recv(0), None) if m.arbitration_id == powertrain.frame_id
        ]
    assert len(frames) == 16
    for msg in frames:  # the sum of the id's bytes, the length and the payload
        d = bytes(msg.data)
        ident = powertrain.frame_id
        expected = ((ident & 0xFF) + (ident >> 8) + len(d) + sum(d[:-1])) & 0xFF
        assert d[-1] == expected


def test_periods_come_from_what_the_database_says(tmp_path: Path) -> None:
    path = tmp_path / "p.dbc"
    path.write_text(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: A\n\n'
        'BO_ 1 Cyclic: 1 A\n SG_ a : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BO_ 2 Fast: 1 A\n SG_ b : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BO_ 3 Spontaneous: 1 A\n SG_ c : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BO_ 2364539904 EEC1: 8 A\n SG_ EngSpeed : 24|16@1+ (0.125,0) [0|8031.875] "rpm" A\n\n'
        'BO_ 5 Plain: 1 A\n SG_ e : 0|8@1+ (1,0) [0|255] "" A\n\n'
        'BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;\n'
        'BA_DEF_ BO_ "GenMsgCycleTimeFast" INT 0 65535;\n'
        'BA_DEF_ BO_ "GenMsgSendType" ENUM "Cyclic","Spontan","NoMsgSendType";\n'
        'BA_DEF_ BO_ "GenMsgDelayTime" INT 0 65535;\n'
        'BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","reserved","J1939PG";\n'
        'BA_DEF_DEF_ "GenMsgCycleTime" 0;\n'
        'BA_DEF_DEF_ "GenMsgCycleTimeFast" 0;\n'
        'BA_DEF_DEF_ "GenMsgSendType" "NoMsgSendType";\n'
        'BA_DEF_DEF_ "GenMsgDelayTime" 0;\n'
        'BA_DEF_DEF_ "VFrameFormat" "StandardCAN";\n'
        'BA_ "GenMsgCycleTime" BO_ 1 40;\n'
        'BA_ "GenMsgCycleTimeFast" BO_ 2 20;\n'
        'BA_ "GenMsgSendType" BO_ 3 1;\n'
        'BA_ "GenMsgDelayTime" BO_ 3 800;\n'
        'BA_ "VFrameFormat" BO_ 2364539904 3;\n'
    )
    db = _load(path)
    periods = {m.name: choose_period(m) for m in db.messages}
    assert {name: p.seconds for name, p in periods.items()} == {
        "Cyclic": 0.04,
        "Fast": 0.02,
        "Spontaneous": 0.8,  # an event message, no faster than its delay time allows
        "EEC1": 0.02,  # J1939-71's rate of PGN 61444
        "Plain": 0.1,
    }
    line = period_summary(periods.values())
    assert line is not None and "\n" not in line
    assert line.startswith("firmware_sim: 4 messages have no cycle time: 1 from another")


@pytest.mark.parametrize(
    ("name", "unit", "quantity", "corner"),
    [
        ("WHEEL_SPEED_RL", "mph", "wheel_speed", "rl"),
        ("WhlFr_W_Meas", "rad/s", "wheel_speed", "fr"),
        ("ESP_VL_Radgeschw_02", "Unit_KiloMeterPerHour", "wheel_speed", "fl"),
        ("ENGINE_RPM", "rpm", "engine_speed", None),
        ("MO_Drehzahl_01", "Unit_MinutInver", "engine_speed", None),
        ("MO_Kuehlmittel_Temp", "Unit_DegreCelsi", "coolant_temp", None),
        ("ApedPosScal_Pc_Actl", "%", "accelerator", None),
        ("STEER_ANGLE", "deg", "steering_angle", None),
        ("KBI_Kilometerstand", "Unit_KiloMeter", "odometer", None),
        ("BatteryVoltage", "V", "battery_voltage", None),
    ],
)
def test_quantities_are_recognised_by_the_names_real_databases_use(
    name: str, unit: str, quantity: str, corner: str | None
) -> None:
    signal = _signal(name, 32, scale=0.01, unit=unit, minimum=-1e6, maximum=1e6, signed=True)
    kind = classify(signal)
    assert (kind.kind, kind.quantity, kind.corner) == (Kind.QUANTITY, quantity, corner)


def test_bookkeeping_signals_are_told_apart() -> None:
    def kind_of(name: str, length: int = 8) -> Kind:
        return classify(_signal(name, length)).kind

    assert kind_of("COUNTER", 4) is Kind.COUNTER
    assert kind_of("Motor_11_BZ", 4) is Kind.COUNTER
    assert kind_of("CHECKSUM") is Kind.CHECKSUM
    assert kind_of("Airbag_03_CRC") is Kind.CHECKSUM
    assert kind_of("SET_ME_X80") is Kind.CONSTANT
    assert classify(_signal("SET_ME_X80", 8)).constant_raw == 0x80
    assert kind_of("NEW_SIGNAL_1", 1) is Kind.FLAG
    assert kind_of("NEW_SIGNAL_2", 12) is Kind.VALUE


def _signal(
    name: str,
    length: int,
    *,
    scale: float = 1,
    offset: float = 0,
    unit: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    signed: bool = False,
    big_endian: bool = False,
    choices: dict[int, str] | None = None,
) -> Any:
    labels: Any = choices
    conversion = BaseConversion.factory(scale=scale, offset=offset, choices=labels)
    return cantools.database.can.Signal(
        name,
        start=7 if big_endian else 0,
        length=length,
        byte_order="big_endian" if big_endian else "little_endian",
        is_signed=signed,
        conversion=conversion,
        minimum=minimum,
        maximum=maximum,
        unit=unit,
    )


@st.composite
def _signals(draw: st.DrawFn) -> Any:
    length = draw(st.integers(1, 32))
    signed = draw(st.booleans()) and length > 1
    scale = draw(st.sampled_from([1, 0.5, 0.1, 0.01, 0.005, 0.25, 2, 10, 1 / 3]))
    offset = draw(st.sampled_from([0, -40, 100, -1000, 0.5]))
    raw_lo, raw_hi = (
        (-(1 << (length - 1)), (1 << (length - 1)) - 1)
        if signed
        else (
            0,
            (1 << length) - 1,
        )
    )
    ranged = draw(st.booleans())
    minimum = maximum = None
    if ranged:
        a = draw(st.integers(raw_lo, raw_hi))
        b = draw(st.integers(raw_lo, raw_hi))
        minimum, maximum = (min(a, b) * scale + offset, max(a, b) * scale + offset)
    name = draw(st.sampled_from(["VEH_SPEED", "ENGINE_RPM", "FOO", "DOOR_OPEN_FL", "TEMP_X"]))
    choices = None
    if draw(st.booleans()) and length <= 4:
        choices = {i: f"L{i}" for i in range(0, min(raw_hi, 6) + 1, 2)}
    return _signal(
        name,
        length,
        scale=scale,
        offset=offset,
        minimum=minimum,
        maximum=maximum,
        signed=signed,
        big_endian=draw(st.booleans()),
        choices=choices,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(signal=_signals(), seed=st.integers(0, 1000))
def test_any_signal_stays_in_range_and_decodes(signal: Any, seed: int) -> None:
    message = cantools.database.can.Message(0x123, "M", 8, [signal], strict=False)
    plan = LivePlan(message, 0.1, seed=seed)
    model = VehicleModel(seed)
    lo, hi = signal_range(signal)
    slack = 1e-9 * max(1.0, abs(lo), abs(hi))
    values = set()
    for _ in range(40):
        model.step(0.5)
        frame = plan.frame(model.snapshot())
        decoded: Any = message.decode(bytes(frame.data), decode_choices=False)
        value = float(decoded[signal.name])
        assert math.isfinite(value) and lo - slack <= value <= hi + slack
        values.add(value)
    if lo < hi and classify(signal).kind in (Kind.VALUE, Kind.FLAG, Kind.ENUM):
        assert len(values) >= 2  # it moves of itself (a model quantity moves with the model)


def test_the_cli_says_in_one_line_how_periods_were_chosen(
    user_dbc: tuple[Any, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = user_dbc
    stop = threading.Event()
    codes: list[int] = []
    argv = [
        "--dbc",
        str(path),
        "--channel",
        f"cli-{time.monotonic_ns()}",
        "--socketcand",
        "127.0.0.1:0",
    ]
    runner = threading.Thread(target=lambda: codes.append(cli.main(argv, stop=stop)))
    runner.start()
    deadline = time.monotonic() + 10
    out = err = ""
    while "socketcand: " not in out and time.monotonic() < deadline:
        time.sleep(0.05)
        captured = capsys.readouterr()
        out, err = out + captured.out, err + captured.err
    stop.set()
    runner.join(10)
    err += capsys.readouterr().err
    assert codes == [0]
    lines = [line for line in err.splitlines() if "no cycle time" in line]
    assert lines == [
        "firmware_sim: 4 messages have no cycle time: 1 at periods from their send type,"
        " 3 at the default 100 ms"
    ]


@needs_shared
def test_the_obd_ecu_answers_from_the_same_model_on_an_opendbc_database(
    channel: str, tester: ObdTester
) -> None:
    path = OPENDBC / "toyota_prius_2010_pt.dbc"
    clock = SimulatedClock()
    with VirtualVehicle(str(path), channel=channel, clock=clock) as car:
        clock.advance(9.0)  # accelerating through the gears
        answer = tester.request(bytes([0x01, 0x0C]))
        speed = tester.request(bytes([0x01, 0x0D]))
        state = car.state
    assert answer is not None and answer[:2] == bytes([0x41, 0x0C])
    assert (answer[2] * 256 + answer[3]) / 4 == pytest.approx(state.engine_speed_rpm, abs=1)
    assert speed is not None and speed[2] == round(state.vehicle_speed_kmh) > 10
