"""J1939Driver on a real truck's recorded bus (../shared: CSS Electronics' J1939 demo log)
replayed as a live, read-only bus: the multi-packet DM1 of the engine, decoded exactly; what
a read-only bus does to requests, nodes and clearing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hwbridge import J1939Driver
from hwbridge.core.models import ToolError
from hwbridge.policy import SendPolicy
from tests.conftest import BUSY_MARGIN_S
from tests.j1939.conftest import call
from tests.shared_data import DATA, needs_shared

pytestmark = [needs_shared, pytest.mark.usefixtures("no_thread_leaks")]

LOG = DATA / "css" / "truck_j1939_gps.MF4"
DBC = DATA / "css" / "CSS-Electronics-SAE-J1939-DEMO.dbc"


@pytest.fixture
def truck() -> Iterator[J1939Driver]:
    with J1939Driver.from_can(bus=f"replay:{LOG}", dbc=DBC, request_timeout_s=0.5) as driver:
        yield driver


@pytest.mark.slow
def test_dm1_is_the_engines_four_faults(truck: J1939Driver) -> None:
    result = call(truck, "j1939_dm1")
    assert (result["total"], result["returned"], result["truncated"]) == (1, 1, False)
    [engine] = result["sources"]
    assert engine["source"] == 0 and engine["preferred_for"] == "Engine #1"
    assert engine["transport"] == "bam"  # 18 bytes: a multi-packet DM1
    assert 0 <= engine["heard_s_ago"] < 1.0 + BUSY_MARGIN_S  # DM1 goes out once a second
    assert engine["lamps"] == {
        "mil": "on",
        "red_stop": "off",
        "amber_warning": "off",
        "protect": "not_available",
    }
    assert "flashing" not in engine
    codes = [(d["spn"], d["fmi"], d["occurrence_count"]) for d in engine["dtcs"]]
    assert codes == [(980, 9, 126), (3216, 20, 2), (609, 9, 1), (609, 12, 3)]
    nox = engine["dtcs"][1]
    assert nox["spn_name"] == "Aftertreatment 1 Intake NOx"
    assert nox["fmi_text"] == "Data drifted high"
    assert (engine["dtcs_total"], engine["dtcs_returned"], engine["dtcs_truncated"]) == (
        4,
        4,
        False,
    )


@pytest.mark.slow
def test_a_request_on_a_replay_answers_from_what_was_heard(truck: J1939Driver) -> None:
    call(truck, "j1939_dm1")  # let the replay run a moment
    result = call(truck, "j1939_request", pgn=65265)
    assert result["sent"] is False and "replay" in result["not_sent_because"]
    assert "heard on the bus" in result["note"]
    [answer] = result["answers"]
    # the DBC describes CCVS1: decoded, with the SPN attribute's signal
    assert answer["decoded"]["message"] == "CCVS1"
    assert "WheelBasedVehicleSpeed" in answer["decoded"]["signals"]
    assert answer["heard_s_ago"] >= 0
    with pytest.raises(ToolError) as never:  # nobody sends a VIN on this bus
        call(truck, "j1939_request", pgn=65260, timeout_ms=200)
    assert never.value.code == "NO_RESPONSE"
    assert never.value.message.startswith("Nothing was sent: This bus is a replay")


@pytest.mark.slow
def test_nodes_are_the_sources_heard(truck: J1939Driver) -> None:
    call(truck, "j1939_dm1")
    result = call(truck, "j1939_nodes")
    assert result["request_sent"] is False
    addresses = [n["address"] for n in result["nodes"]]
    assert addresses == [0, 85]
    assert all(n["claimed"] is False for n in result["nodes"])


def test_clearing_a_replay(truck: J1939Driver) -> None:
    with pytest.raises(ToolError) as refused:
        call(truck, "j1939_clear_dtcs", which="active")
    assert refused.value.code == "SEND_NOT_ALLOWED"
    with J1939Driver.from_can(
        bus=f"replay:{LOG}", policy=SendPolicy(allow_services=["j1939_dm11"])
    ) as allowed:
        with pytest.raises(ToolError) as read_only:
            call(allowed, "j1939_clear_dtcs", which="active")
        assert read_only.value.code == "READ_ONLY_BUS"
