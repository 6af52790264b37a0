"""J1939Driver against the simulated truck (firmware_sim.j1939, written apart from
hwbridge.j1939 so each witnesses the other), over python-can `virtual` and over socketcand
as a user's process would reach it: DM1 with faults, DM2, the VIN by BAM and by RTS/CTS,
the nodes, clearing refused and allowed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from firmware_sim.j1939 import VirtualTruck
from firmware_sim.j1939.controllers import DEFAULT_TRUCK_VIN
from firmware_sim.socketcand import SocketcandServer
from hwbridge import J1939Driver
from hwbridge.core.models import ToolError
from hwbridge.policy import SendPolicy
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.j1939.conftest import call

pytestmark = pytest.mark.usefixtures("no_thread_leaks")

TIMES = {"response_s": 1.0, "claim_wait_s": 0.1, "request_timeout_s": 2.0, "dm1_window_s": 1.5}


@pytest.fixture(params=["virtual", "socketcand"], scope="module")
def bus(request: pytest.FixtureRequest) -> Iterator[tuple[str, VirtualTruck]]:
    """The truck, parked, with the NOx sensor and coolant faults active; the bus string."""
    channel = f"truck-{uuid.uuid4().hex[:12]}"
    with VirtualTruck(channel=channel, drive=False) as truck:
        truck.inject_fault("nox_sensor")
        truck.inject_fault("coolant_temp_high")
        if request.param == "virtual":
            yield f"virtual:{channel}", truck
        else:
            with SocketcandServer({"vcan0": channel}) as server:
                yield server.url(), truck


@pytest.fixture(scope="module")
def driver(bus: tuple[str, VirtualTruck]) -> Iterator[J1939Driver]:
    with J1939Driver.from_can(bus=bus[0], **TIMES) as opened:  # type: ignore[arg-type]
        yield opened


def test_dm1_reports_the_engines_faults_and_lamps(driver: J1939Driver) -> None:
    result = call(driver, "j1939_dm1")
    engine = next(s for s in result["sources"] if s["source"] == 0)
    assert engine["lamps"]["mil"] == "on" and engine["lamps"]["red_stop"] == "on"
    assert engine["lamps"]["amber_warning"] == "on"
    codes = {(d["spn"], d["fmi"]): d for d in engine["dtcs"]}
    assert codes[(3216, 20)]["spn_name"] == "Aftertreatment 1 Intake NOx"
    assert codes[(3216, 20)]["fmi_text"] == "Data drifted high"
    assert codes[(110, 0)]["spn_name"] == "Engine Coolant Temperature"
    assert engine["transport"] == "bam"  # two codes: 10 bytes
    # the transmission and brakes broadcast their DM1 too, with no fault
    others = {s["source"]: s for s in result["sources"] if s["source"] != 0}
    assert {3, 11} <= set(others) and all(not s["dtcs"] for s in others.values())


def test_the_vin_by_bam_and_by_rts_cts(driver: J1939Driver) -> None:
    everyone = call(driver, "j1939_request", pgn=65260)
    engine = next(a for a in everyone["answers"] if a["source"] == 0)
    assert engine["transport"] == "bam" and engine["text"] == {"vin": DEFAULT_TRUCK_VIN}
    one = call(driver, "j1939_request", pgn=65260, address=0)
    [answer] = one["answers"]
    assert answer["transport"] == "rts" and answer["text"] == {"vin": DEFAULT_TRUCK_VIN}
    component = call(driver, "j1939_request", pgn=65259, address=3)
    assert set(component["answers"][0]["text"]) >= {"make", "model", "serial_number"}


def test_a_group_the_node_lacks_is_nacked(driver: J1939Driver) -> None:
    result = call(driver, "j1939_request", pgn=65260, address=11)  # only the engine has a VIN
    assert result["answers"] == [] and result["nacked_by"] == [{"source": 11, "answer": "nack"}]


def test_the_nodes_and_their_names(driver: J1939Driver) -> None:
    result = call(driver, "j1939_nodes")
    nodes = {n["address"]: n for n in result["nodes"]}
    assert {0, 3, 11, 249} <= set(nodes)
    assert nodes[0]["name"]["function_name"] == "Engine"
    assert nodes[3]["name"]["function_name"] == "Transmission"
    assert all(nodes[a]["claimed"] for a in (0, 3, 11))
    assert nodes[249]["this_tool"] is True


def test_dm2_and_clearing(bus: tuple[str, VirtualTruck], driver: J1939Driver) -> None:
    url, truck = bus
    truck.inject_fault("wheel_speed_sensor")
    truck.end_fault("wheel_speed_sensor")  # previously active now
    dm2 = call(driver, "j1939_dm2", address=11)
    [brakes] = dm2["sources"]
    assert [(d["spn"], d["fmi"]) for d in brakes["dtcs"]] == [(84, 2)]
    with pytest.raises(ToolError) as refused:
        call(driver, "j1939_clear_dtcs", which="previously_active", address=11)
    assert refused.value.code == "SEND_NOT_ALLOWED"
    policy = SendPolicy(allow_services=["j1939_dm3"])
    with J1939Driver.from_can(bus=url, policy=policy, address=250, **TIMES) as allowed:  # type: ignore[arg-type]
        cleared = call(allowed, "j1939_clear_dtcs", which="previously_active", address=11)
        assert cleared["sent"] is True and cleared["acknowledged_by"] == [11]
        assert wait_until(lambda: not truck.nodes["brakes"].dtcs.previous, BUSY_MARGIN_S)
        [after] = call(allowed, "j1939_dm2", address=11)["sources"]
        assert after["dtcs"] == [] and after["dtcs_total"] == 0
