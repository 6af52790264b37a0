"""The simulated J1939 truck on a virtual bus, as a node of its own sees it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim.j1939 import TRUCK_FAULTS, VirtualTruck
from firmware_sim.j1939.controllers import CONTROLLERS, DEFAULT_TRUCK_VIN
from firmware_sim.j1939.model import TruckModel
from hwbridge.can.database.database import CanDatabase
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.sim.conftest import ROOT, signals
from tests.sim.j1939_peer import (
    ABORT,
    ACK,
    CLAIM,
    DM1,
    DM2,
    DM3,
    DM11,
    EOMA,
    GLOBAL,
    TESTER,
    TP_CM,
    Id,
    Peer,
    tp_pgn,
)

TRUCK_DBC = ROOT / "dbc" / "j1939_truck.dbc"
ENGINE, TRANSMISSION, BRAKES = 0x00, 0x03, 0x0B
NAMES = {c.address: c.name for c in CONTROLLERS}


@pytest.fixture
def client(channel: str) -> Iterator[Peer]:
    """The tester at 0xF9, on the bus before the truck starts."""
    peer = Peer(channel)
    yield peer
    peer.close()


@pytest.fixture
def truck(channel: str, client: Peer) -> Iterator[VirtualTruck]:
    with VirtualTruck(TRUCK_DBC, channel=channel, drive=False) as running:
        yield running


def spn_fmi_oc(four: bytes) -> tuple[int, int, int]:
    return four[0] | four[1] << 8 | (four[2] >> 5) << 16, four[2] & 0x1F, four[3] & 0x7F


def ack_from(client: Peer, sa: int, pgn: int) -> bytes:
    """The next Acknowledgement from `sa` about `pgn` (sent to global, J1939-21)."""
    _, data, _ = client.next(
        lambda i, d: i.pgn == ACK and i.sa == sa and i.da == GLOBAL and tp_pgn(d) == pgn
    )
    assert data[4] == client.sa  # the address acknowledged
    return data


def dm1_of(client: Peer, sa: int) -> bytes:
    """The DM1 of `sa` as a request addressed to it returns it (one frame or RTS/CTS)."""
    client.request(DM1, sa)
    ident, first, _ = client.next(
        lambda i, d: (
            i.sa == sa
            and (i.pgn == DM1 or (i.pgn == TP_CM and i.da == client.sa and tp_pgn(d) == DM1))
        )
    )
    if ident.pgn == DM1:  # a single frame
        return first
    size, count = int.from_bytes(first[1:3], "little"), first[3]
    client.cts(sa, DM1, count, 1)
    data = b"".join(p[1:] for p in client.packets(sa, count))
    client.cm(sa, bytes([EOMA]) + first[1:4] + b"\xff" + DM1.to_bytes(3, "little"))
    return data[:size]


# -- address claim ------------------------------------------------------------------------


def test_each_controller_claims_its_address_at_start(truck: VirtualTruck, client: Peer) -> None:
    claims = [
        client.next(lambda i, d: i.pgn == CLAIM)[:2] for _ in range(3)
    ]  # the first frames of all: nothing comes before the claims
    assert {i.sa: d for i, d in claims} == NAMES
    assert all(i.priority == 6 and i.da == GLOBAL for i, _ in claims)


def test_a_request_for_address_claimed_is_answered(truck: VirtualTruck, client: Peer) -> None:
    for _ in range(3):  # the claims at start
        client.next(lambda i, d: i.pgn == CLAIM)
    client.request(CLAIM, GLOBAL)
    got = client.collect(0.3, lambda i, d: i.pgn == CLAIM)
    assert sorted(i.sa for i, _ in got) == [ENGINE, TRANSMISSION, BRAKES]
    client.request(CLAIM, BRAKES)
    ident, data, _ = client.next(lambda i, d: i.pgn == CLAIM)
    assert (ident.sa, data) == (BRAKES, NAMES[BRAKES])
    assert client.collect(0.2, lambda i, d: i.pgn == CLAIM) == []  # only the one asked


def test_a_contender_with_a_lower_name_takes_the_address(
    truck: VirtualTruck, client: Peer, channel: str
) -> None:
    for _ in range(3):  # the claims at start
        client.next(lambda i, d: i.pgn == CLAIM)
    contender = Peer(channel, sa=BRAKES)
    try:
        contender.send(CLAIM, b"\x00" * 8)  # NAME 0 wins against any
        ident, _data, _ = client.next(lambda i, d: i.pgn == CLAIM and d == NAMES[BRAKES])
        assert ident.sa == 0xFE  # Cannot Claim Address
        assert wait_until(lambda: not truck.nodes["brakes"].active, BUSY_MARGIN_S)
        client.drain()
        client.request(DM1, BRAKES)
        assert client.collect(0.3, lambda i, d: i.sa == BRAKES) == []  # silent now
        higher = (int.from_bytes(NAMES[ENGINE], "little") + 1).to_bytes(8, "little")
        contender.sa = ENGINE
        contender.send(CLAIM, higher)  # loses: the engine claims again
        client.next(lambda i, d: i.pgn == CLAIM and i.sa == ENGINE and d == NAMES[ENGINE])
        assert truck.nodes["engine"].active
    finally:
        contender.close()


# -- requests -----------------------------------------------------------------------------


def test_a_short_pgn_is_answered_in_one_frame(truck: VirtualTruck, client: Peer) -> None:
    db = CanDatabase.load(TRUCK_DBC)
    client.request(65253, ENGINE)  # engine hours
    data = client.pgn_from(65253, ENGINE)
    assert len(data) == 8
    hours = signals(db, "HOURS", data)["EngineTotalHoursOfOperation"]
    assert 12_000 < hours < 14_000
    client.request(65253, GLOBAL)
    later = client.pgn_from(65253, ENGINE)
    assert int.from_bytes(later[:4], "little") >= int.from_bytes(data[:4], "little")


def test_a_long_pgn_requested_from_everyone_comes_by_bam(truck: VirtualTruck, client: Peer) -> None:
    client.request(65260, GLOBAL)  # vehicle identification: the engine has it
    vin, stamps = client.bam(65260, ENGINE)
    assert vin == f"{DEFAULT_TRUCK_VIN}*".encode()
    assert all(b - a >= 0.050 for a, b in itertools.pairwise(stamps))


def test_a_long_pgn_requested_from_a_node_comes_by_rts_cts(
    truck: VirtualTruck, client: Peer
) -> None:
    client.request(65259, TRANSMISSION)  # component identification
    data = client.receive(TRANSMISSION, 65259, per_cts=2)
    assert data == b"HWBSM*AT6-TCM*TCM0001939*UNIT01*"
    assert wait_until(lambda: truck.transport.counts["rts_cts"] == 1, BUSY_MARGIN_S)  # acked


def test_rts_cts_sends_two_packets_per_cts_when_asked_two(
    truck: VirtualTruck, client: Peer
) -> None:
    client.request(65251, ENGINE)  # EC1: 39 bytes, 6 packets
    size, count, per_cts = client.rts(ENGINE, 65251)
    assert (size, count, per_cts) == (39, 6, 0xFF)
    assert client.collect(0.2, lambda i, d: i.da == TESTER and i.sa == ENGINE) == []  # waits
    client.cts(ENGINE, 65251, 2, 1)
    first = client.packets(ENGINE, 2)
    assert [p[0] for p in first] == [1, 2]
    assert client.collect(0.2, lambda i, d: i.da == TESTER and i.sa == ENGINE) == []
    client.cts(ENGINE, 65251, 2, 3)
    assert [p[0] for p in client.packets(ENGINE, 2)] == [3, 4]


def test_a_stopped_truck_starts_again(channel: str, client: Peer) -> None:
    truck = VirtualTruck(TRUCK_DBC, channel=channel, drive=False)
    truck.start()
    truck.stop()
    with truck:
        client.drain()
        client.request(65260, GLOBAL)
        vin, _ = client.bam(65260, ENGINE)
    assert vin == f"{DEFAULT_TRUCK_VIN}*".encode()
    assert not truck.running


def test_a_client_abort_stops_the_transfer(truck: VirtualTruck, client: Peer) -> None:
    client.request(65242, ENGINE)  # software identification
    client.rts(ENGINE, 65242)
    client.cts(ENGINE, 65242, 1, 1)
    client.packets(ENGINE, 1)
    client.cm(ENGINE, bytes([ABORT, 1, 0xFF, 0xFF, 0xFF]) + (65242).to_bytes(3, "little"))
    assert wait_until(lambda: truck.transport.counts["aborts_received"] == 1, BUSY_MARGIN_S)
    client.cts(ENGINE, 65242, 1, 2)
    assert client.collect(0.3, lambda i, d: i.sa == ENGINE and i.da == TESTER) == []


def test_an_unsupported_pgn_is_nacked_when_addressed_and_silent_when_global(
    truck: VirtualTruck, client: Peer
) -> None:
    client.request(65251, BRAKES)  # EC1 is the engine's
    data = ack_from(client, BRAKES, 65251)
    assert data[:4] == bytes([1, 0xFF, 0xFF, 0xFF])  # NACK
    client.request(0xFEDA, GLOBAL)  # a PGN no controller sends
    assert client.collect(0.3, lambda i, d: i.pgn == ACK) == []


# -- diagnostics --------------------------------------------------------------------------


def test_dm1_with_no_fault(truck: VirtualTruck, client: Peer) -> None:
    got = [client.next(lambda i, d: i.pgn == DM1)[:2] for _ in range(3)]  # the first, at 0.1 s
    assert sorted(i.sa for i, _ in got) == [ENGINE, TRANSMISSION, BRAKES]
    assert {d for _, d in got} == {bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])}


@pytest.mark.parametrize("name", list(TRUCK_FAULTS))
def test_dm1_with_each_fault(channel: str, client: Peer, name: str) -> None:
    fault = TRUCK_FAULTS[name]
    address = {c.key: c.address for c in CONTROLLERS}[fault.controller]
    with VirtualTruck(TRUCK_DBC, channel=channel, drive=False) as truck:
        truck.inject_fault(name)
        assert truck.faults == (name,)
        data = dm1_of(client, address)
    assert len(data) == 8
    assert spn_fmi_oc(data[2:6]) == (fault.spn, fault.fmi, 1)
    bits = {"mil": 6, "red_stop": 4, "amber_warning": 2, "protect": 0}
    for lamp, shift in bits.items():
        state = fault.lamps.get(lamp, "off")
        assert data[0] >> shift & 3 == (0 if state == "off" else 1), lamp
        assert data[1] >> shift & 3 == {"slow_flash": 0, "fast_flash": 1}.get(state, 3), lamp


def test_two_faults_send_dm1_by_bam(truck: VirtualTruck, client: Peer) -> None:
    truck.inject_fault("coolant_temp_high")
    truck.inject_fault("oil_pressure_low")
    data, stamps = client.bam(DM1, ENGINE, timeout_s=3.0)
    assert len(data) == 10
    assert data[0] == 0x14  # red stop and amber warning on
    assert [spn_fmi_oc(data[i : i + 4]) for i in (2, 6)] == [(110, 0, 1), (100, 1, 1)]
    assert stamps[-1] - stamps[0] >= 0.050


def test_the_sensors_show_the_faults(truck: VirtualTruck, client: Peer) -> None:
    truck.inject_fault("oil_pressure_low")
    truck.inject_fault("wheel_speed_sensor")
    db = CanDatabase.load(TRUCK_DBC)
    client.drain()  # what was sent before
    client.request(65263, ENGINE)
    assert signals(db, "EFL_P1", client.pgn_from(65263, ENGINE))["EngineOilPressure"] == 40
    client.request(61441, BRAKES)
    ebc1 = signals(db, "EBC1", client.pgn_from(61441, BRAKES))
    assert ebc1["AbsFullyOperational"]["label"] == "No"
    assert ebc1["AbsEbsAmberWarningSignal"]["label"] == "On"


def test_dm11_clears_the_active_faults_and_acknowledges(truck: VirtualTruck, client: Peer) -> None:
    truck.inject_fault("nox_sensor")
    assert dm1_of(client, ENGINE)[0] == 0x40  # MIL on
    client.request(DM11, ENGINE)
    assert ack_from(client, ENGINE, DM11)[0] == 0  # positive
    assert truck.faults == ()
    assert dm1_of(client, ENGINE) == bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])
    client.drain()
    client.request(DM11, GLOBAL)  # to everyone: cleared without an answer
    assert client.collect(0.3, lambda i, d: i.pgn == ACK) == []


def test_dm2_dm3_and_occurrence_counts(truck: VirtualTruck, client: Peer) -> None:
    truck.inject_fault("wheel_speed_sensor")
    truck.end_fault("wheel_speed_sensor")
    truck.inject_fault("wheel_speed_sensor")  # it came back
    assert spn_fmi_oc(dm1_of(client, BRAKES)[2:6]) == (84, 2, 2)
    truck.end_fault("wheel_speed_sensor")
    client.request(DM2, BRAKES)
    assert spn_fmi_oc(client.pgn_from(DM2, BRAKES)[2:6]) == (84, 2, 2)
    client.request(DM3, BRAKES)
    assert ack_from(client, BRAKES, DM3)[0] == 0
    client.request(DM2, BRAKES)
    assert client.pgn_from(DM2, BRAKES) == bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])


# -- periodic -----------------------------------------------------------------------------


def test_periodic_pgns_decode_with_the_truck_database(channel: str, client: Peer) -> None:
    db = CanDatabase.load(TRUCK_DBC)
    model = TruckModel(3)
    for _ in range(240):  # 12 s into the drive cycle, computed now: under way
        model.step(0.05)
    model.car.set_throttle(60)  # before the first frame
    with VirtualTruck(TRUCK_DBC, channel=channel, model=model) as truck:
        seen: dict[str, dict[str, object]] = {}

        def wanted(i: Id, d: bytes) -> bool:
            message = db.message_for_frame(i.priority << 26 | i.pgn << 8 | i.sa, True)
            if message is None or message.name in seen:
                return False
            seen[message.name] = dict(db.decode(message.name, d).signals)
            return False

        client.collect(0.4, wanted)  # every periodic PGN goes out first at start
    assert set(truck.periodic_messages) <= set(seen) | {"EC1"}
    assert 600 < seen["EEC1"]["EngineSpeed"] < 2300  # type: ignore[operator]
    assert seen["CCVS1"]["WheelBasedVehicleSpeed"] > 5  # type: ignore[operator]
    assert seen["ETC2"]["TransmissionCurrentGear"] >= 1  # type: ignore[operator]
    assert 20 < seen["VEP1"]["BatteryPotentialPowerInput1"] < 30  # type: ignore[operator]
    assert seen["EEC2"]["AcceleratorPedalPosition1"] == 60


def test_a_database_given_instead_sends_its_own_messages(
    tmp_path: Path, channel: str, client: Peer
) -> None:
    text = TRUCK_DBC.read_text(encoding="latin-1")
    # one message of its own: the ambient conditions (PGN 65269) from the engine, 1 s, with
    # an SPN the truck knows (ambient air temperature 171 it does not: not available)
    own = (
        "BO_ 2566845696 AMB: 8 Engine\n"
        ' SG_ BarometricPressure : 0|8@1+ (0.5,0) [0|125] "kPa" Brakes\n'
        ' SG_ AmbientAirTemperature : 24|16@1+ (0.03125,-273) [-273|1735] "degC" Brakes\n'
        ' SG_ CoolantAgain : 48|8@1+ (1,-40) [-40|210] "degC" Brakes\n\n'
    )
    text = text.replace("BO_ 2364539904 EEC1", own + "BO_ 2364539904 EEC1")
    text += (
        'BA_ "GenMsgCycleTime" BO_ 2566845696 100;\n'
        'BA_ "SPN" SG_ 2566845696 BarometricPressure 108;\n'
        'BA_ "SPN" SG_ 2566845696 AmbientAirTemperature 171;\n'
        'BA_ "SPN" SG_ 2566845696 CoolantAgain 110;\n'
    )
    path = tmp_path / "own.dbc"
    path.write_text(text, encoding="latin-1")
    with VirtualTruck(path, channel=channel, drive=False) as truck:
        assert "AMB" in truck.periodic_messages
        _, data, _ = client.next(lambda i, d: i.pgn == 65269 and i.sa == ENGINE)
        assert data[0] == 0xFF  # barometric pressure: the truck has no source
        assert data[3:5] == b"\xff\xff"
        assert 40 <= data[6] - 40 <= 140  # coolant, by its SPN
        client.request(DM1, ENGINE)  # the diagnostics work all the same
        assert client.pgn_from(DM1, ENGINE)[:2] == b"\x00\xff"


def test_every_fault_the_truck_can_raise_has_a_named_spn() -> None:
    """j1939_dm1 names what the simulator reports (SPN 1322, its misfire, had no name)."""
    from hwbridge.j1939.database.tables import spn_name

    unnamed = {f.name: f.spn for f in TRUCK_FAULTS.values() if spn_name(f.spn) is None}
    assert unnamed == {}
    assert spn_name(1322) == "Engine Misfire for Multiple Cylinders"
