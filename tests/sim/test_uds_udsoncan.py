"""udsoncan, a third-party client, does a workshop's job on the simulated engine ECU over
python-can's virtual bus and can-isotp: session, unlock with `demo_security_key`, write the
idle target, read it back, run the self test, reset - and the engine on the bus follows."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import isotp
import pytest
import udsoncan
from udsoncan.client import Client
from udsoncan.connections import PythonIsoTpConnection
from udsoncan.exceptions import NegativeResponseException, TimeoutException
from udsoncan.services.ECUReset import ECUReset

import can
from firmware_sim import VirtualVehicle, demo_security_key
from firmware_sim.clock import SimulatedClock
from firmware_sim.obd import DEFAULT_VIN
from hwbridge.can.database.database import CanDatabase
from tests.sim.conftest import DEMO, drain, signals

pytestmark = pytest.mark.usefixtures("no_thread_leaks")

EXTENDED, DEFAULT = 0x03, 0x01
IDLE_TARGET = 0x0101


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock()


@pytest.fixture
def car(channel: str, clock: SimulatedClock) -> Iterator[VirtualVehicle]:
    with VirtualVehicle(DEMO, channel=channel, drive=False, clock=clock) as vehicle:
        yield vehicle


@pytest.fixture
def client(channel: str, car: VirtualVehicle) -> Iterator[Client]:
    bus = can.Bus(interface="virtual", channel=channel)
    notifier = can.Notifier(bus, [], timeout=0.1)
    stack = isotp.NotifierBasedCanStack(
        bus,
        notifier,
        address=isotp.Address(isotp.AddressingMode.Normal_11bits, txid=0x7E0, rxid=0x7E8),
        params={"tx_padding": 0x55, "tx_data_min_length": 8},
    )
    config = copy.deepcopy(udsoncan.configs.default_client_config)
    # udsoncan passes `seed` and `level` by name (its type hint says positional: level, seed)
    config["security_algo"] = demo_security_key  # type: ignore[typeddict-item]
    config["data_identifiers"] = {
        IDLE_TARGET: udsoncan.DidCodec(">H"),
        0xF186: udsoncan.DidCodec("B"),
        0xF190: udsoncan.AsciiCodec(17),
        0xF197: udsoncan.AsciiCodec(16),
    }
    config["use_server_timing"] = False  # P2 50 ms is the ECU's; a shared machine is slower
    config["p2_timeout"] = 2.0
    try:
        with Client(PythonIsoTpConnection(stack), config=config, request_timeout=6.0) as uds:
            yield uds
    finally:
        notifier.stop()
        bus.shutdown()


def read(client: Client, did: int) -> object:
    response = client.read_data_by_identifier(did)
    assert response is not None
    value = response.service_data.values[did]
    return value[0] if isinstance(value, tuple) else value  # a struct codec gives a tuple


def engine_speeds(bus: can.BusABC, db: CanDatabase) -> list[float]:
    frame_id = db.message("EngineData").frame_id
    frames = iter(lambda: bus.recv(0), None)
    return [
        float(signals(db, "EngineData", m.data)["EngineSpeed"])
        for m in frames
        if m.arbitration_id == frame_id
    ]


def test_a_session_unlock_and_write_move_the_idle_speed_on_the_bus(
    channel: str, clock: SimulatedClock, client: Client, demo_db: CanDatabase
) -> None:
    with can.Bus(interface="virtual", channel=channel) as peer:
        clock.advance(3.0)
        assert 780 < sum(speeds := engine_speeds(peer, demo_db)) / len(speeds) < 820
        assert read(client, IDLE_TARGET) == 800
        with pytest.raises(NegativeResponseException) as refused:
            client.write_data_by_identifier(IDLE_TARGET, 950)
        assert refused.value.response.code == 0x7F  # not in the default session
        client.change_session(EXTENDED)
        with pytest.raises(NegativeResponseException) as locked:
            client.write_data_by_identifier(IDLE_TARGET, 950)
        assert locked.value.response.code == 0x33  # securityAccessDenied
        client.unlock_security_access(1)
        client.write_data_by_identifier(IDLE_TARGET, 950)
        assert read(client, IDLE_TARGET) == 950
        drain(peer)
        clock.advance(3.0)  # the engine settles at its new idle speed
        speeds = engine_speeds(peer, demo_db)
    assert len(speeds) == 300  # EngineData every 10 ms
    settled = speeds[-100:]  # the last second: around 950, with the model's jitter
    assert 935 < sum(settled) / len(settled) < 965 and all(910 < r < 990 for r in settled)


def test_the_session_times_out_and_a_reset_locks_and_silences_the_ecu(
    clock: SimulatedClock, client: Client
) -> None:
    assert read(client, 0xF190) == DEFAULT_VIN
    assert read(client, 0xF197) == "HWB ECM 2.0 MHEV"
    client.change_session(EXTENDED)
    clock.advance(4.0)
    client.tester_present()
    clock.advance(4.0)
    assert read(client, 0xF186) == EXTENDED  # kept alive
    clock.advance(5.0)
    assert read(client, 0xF186) == DEFAULT  # S3 ran out
    client.change_session(EXTENDED)
    client.unlock_security_access(1)
    response = client.unlock_security_access(1)  # unlocked already: a seed of zeros
    assert response is not None and response.service_data.seed == bytes(4)
    response = client.ecu_reset(ECUReset.ResetType.hardReset)
    assert response is not None and response.positive
    client.set_config("request_timeout", 0.5)
    with pytest.raises(TimeoutException):
        client.tester_present()  # rebooting
    clock.advance(0.2)
    client.set_config("request_timeout", 6.0)
    assert read(client, 0xF186) == DEFAULT
    client.change_session(EXTENDED)
    with pytest.raises(NegativeResponseException) as locked:
        client.write_data_by_identifier(IDLE_TARGET, 900)
    assert locked.value.response.code == 0x33


def test_wrong_keys_and_the_self_test(clock: SimulatedClock, client: Client) -> None:
    client.change_session(EXTENDED)
    client.set_config("security_algo", lambda seed, level: bytes(4))
    for code in (0x35, 0x35, 0x36):
        with pytest.raises(NegativeResponseException) as wrong:
            client.unlock_security_access(1)
        assert wrong.value.response.code == code
    with pytest.raises(NegativeResponseException) as delayed:
        client.request_seed(1)
    assert delayed.value.response.code == 0x37
    for seconds in (4.0, 4.0, 2.0):
        clock.advance(seconds)
        client.tester_present()  # the session stays open through the 10 s of delay
    client.set_config("security_algo", demo_security_key)
    client.unlock_security_access(1)
    started = client.start_routine(0x0203)  # "response pending" first, then started
    assert started is not None and started.service_data.routine_status_record == b"\x00"
    result = client.get_routine_result(0x0203)
    assert result is not None and result.service_data.routine_status_record == b"\x01"
    clock.advance(2.0)
    result = client.get_routine_result(0x0203)
    assert result is not None and result.service_data.routine_status_record == b"\x00"
