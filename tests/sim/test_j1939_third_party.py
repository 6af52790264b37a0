"""The simulated truck seen by can-j1939, a J1939 stack people use on real trucks: its
controller application claims an address, receives BAM and RTS/CTS and parses DM1."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Iterator
from typing import Any

import cantools
import pytest

from firmware_sim.j1939 import VirtualTruck
from tests.conftest import wait_until
from tests.sim.conftest import ROOT

j1939: Any = pytest.importorskip(
    "j1939",
    reason="can-j1939 (in the dev extra) is not installed: the third-party J1939 client the"
    " simulated truck is checked against",
)
if not hasattr(j1939, "ElectronicControlUnit"):  # another distribution's `j1939`
    pytest.skip("the installed `j1939` module is not can-j1939's", allow_module_level=True)

TRUCK_DBC = ROOT / "dbc" / "j1939_truck.dbc"
TOOL = 0xF9
ENGINE, BRAKES = 0x00, 0x0B
Received = queue.Queue[tuple[int, int, bytes]]


class Tool:
    """can-j1939's ECU with one controller application at 0xF9 on virtual `channel`."""

    def __init__(self, channel: str) -> None:
        self.ecu = j1939.ElectronicControlUnit()  # max_cmdt_packets=1: one packet per CTS
        self.ecu.connect(interface="virtual", channel=channel)
        name = j1939.Name(
            arbitrary_address_capable=0,
            industry_group=j1939.Name.IndustryGroup.OnHighway,
            vehicle_system_instance=0,
            vehicle_system=0,
            function=129,  # off-board diagnostic-service tool
            function_instance=0,
            ecu_instance=0,
            manufacturer_code=2047,
            identity_number=4242,
        )
        self.ca = j1939.ControllerApplication(name, TOOL)
        self.ecu.add_ca(controller_application=self.ca)
        self.received: Received = queue.Queue()
        self.ca.subscribe(self._on_message)
        self.dm1: queue.Queue[tuple[int, dict[str, int], list[dict[str, int]]]] = queue.Queue()
        j1939.Dm1(self.ca).subscribe(
            lambda sa, lamps, dtcs, timestamp: self.dm1.put((sa, lamps, dtcs))
        )
        self.ca.start()

    def _on_message(self, priority: int, pgn: int, sa: int, timestamp: float, data: Any) -> None:
        self.received.put((pgn, sa, bytes(data)))

    def wait(self, pgn: int, sa: int, timeout_s: float = 3.0) -> bytes:
        """The data of the next `pgn` from `sa` the stack delivers (reassembled)."""
        while True:
            got_pgn, got_sa, data = self.received.get(timeout=timeout_s)
            if (got_pgn, got_sa) == (pgn, sa):
                return data

    def drain(self) -> None:
        """Forget what an earlier truck sent."""
        for pending in (self.received, self.dm1):
            while not pending.empty():
                pending.get_nowait()

    def close(self) -> None:
        self.ca.stop()
        self.ecu.stop()
        self.ecu.disconnect()


@pytest.fixture(scope="module")
def channel() -> str:
    """One virtual channel for this module's tests: the tool stays, each test starts a truck
    (closing can-j1939's ECU takes a second: its notifier polls once a second)."""
    return f"sim-j1939-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def tool_on_the_bus(channel: str) -> Iterator[Tool]:
    client = Tool(channel)
    try:
        assert wait_until(lambda: client.ca.state == j1939.ControllerApplication.State.NORMAL)
        yield client
    finally:
        client.close()


@pytest.fixture
def tool(tool_on_the_bus: Tool) -> Tool:
    tool_on_the_bus.drain()
    return tool_on_the_bus


def test_can_j1939_parses_a_bam_dm1_with_its_lamps(tool: Tool, channel: str) -> None:
    with VirtualTruck(TRUCK_DBC, channel=channel, drive=False) as truck:
        truck.inject_fault("coolant_temp_high")
        truck.inject_fault("misfire")
        while True:  # the DM1 every second, by BAM: two DTCs
            sa, lamps, dtcs = tool.dm1.get(timeout=3.0)
            if sa == ENGINE:
                break
    lamp = j1939.DtcLamp
    assert lamps == {
        "pl": lamp.OFF,
        "awl": lamp.ON,
        "rsl": lamp.ON,
        "mil": lamp.ON_SLOW_FLASH,
    }
    assert dtcs == [{"spn": 110, "fmi": 0, "oc": 1}, {"spn": 1322, "fmi": 31, "oc": 1}]


def test_can_j1939_receives_answers_by_rts_cts_and_bam(tool: Tool, channel: str) -> None:
    with VirtualTruck(TRUCK_DBC, channel=channel, drive=False):
        tool.ca.send_request(0, 65259, ENGINE)  # to the engine: RTS/CTS, one packet per CTS
        assert tool.wait(65259, ENGINE) == b"HWBSM*HD13-ECM*ECM0001939*UNIT01*"
        tool.ca.send_request(0, 65251, ENGINE)  # EC1, 39 bytes
        ec1 = tool.wait(65251, ENGINE)
        tool.ca.send_request(0, 65260, 0xFF)  # to everyone: BAM
        assert tool.wait(65260, ENGINE) == b"5HWTK1J39R0001939*"
        tool.ca.send_request(0, 65251, BRAKES)  # not the brakes': a NACK
        nack = tool.wait(59392, BRAKES)
    assert len(ec1) == 39
    db: Any = cantools.database.load_file(str(TRUCK_DBC))
    signals = db.decode_message("EC1", ec1)
    assert signals["EngineSpeedAtIdlePoint1"] == 600
    assert signals["EngineReferenceTorque"] == 2500
    assert nack[0] == 1 and nack[4] == TOOL
    assert int.from_bytes(nack[5:8], "little") == 65251


def test_can_j1939_clears_the_faults_with_dm11(tool: Tool, channel: str) -> None:
    with VirtualTruck(TRUCK_DBC, channel=channel, drive=False) as truck:
        truck.inject_fault("wheel_speed_sensor")
        j1939.Dm11(tool.ca).request_clear_all(BRAKES)
        ack = tool.wait(59392, BRAKES)
        assert ack[0] == 0  # positive
        assert wait_until(lambda: truck.faults == ())
        tool.ca.send_request(0, 65226, BRAKES)
        assert tool.wait(65226, BRAKES) == bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])
