"""`hwbridge mcp --bus BUS --discover --reference obd`: a real server process reaches the
simulated vehicle over socketcand on loopback, asks it for its OBD-II PIDs while the discovery
tools record (mode 01 requests only, within the send policy's frame budget), and
`correlate_signal(signal="SPEED")` answers with the speed field scaled by them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim import VirtualVehicle
from firmware_sim.socketcand import SocketcandServer
from tests.cli.conftest import DEMO, Run, run  # noqa: F401  (the runner fixture)
from tests.discovery.obd_requests import (
    ENGINE_ANSWERS,
    NEVER_STEADY,
    Requests,
    vehicle_speed,
)
from tests.mcp.conftest import Session, stdio_session, text_of

pytestmark = pytest.mark.timeout(90)

MAX_RATE_HZ = 10  # ObdPoller's own ceiling, below the default policy's 20 frames a second


@pytest.fixture(scope="module")
def vehicle() -> Iterator[tuple[str, Requests, VirtualVehicle]]:
    """The demo vehicle driving `NEVER_STEADY` on a virtual channel served over socketcand;
    its engine ECU answers OBD-II. (bus string, the requests seen on its channel, the
    vehicle)"""
    channel = f"mcp-obd-{uuid.uuid4().hex[:8]}"
    with (
        SocketcandServer({"vcan0": channel}) as server,
        VirtualVehicle(DEMO, channel=channel, scenario=NEVER_STEADY) as car,
    ):
        requests = Requests(channel)
        try:
            yield server.url(), requests, car
        finally:
            requests.close()


@pytest.fixture(scope="module")
def server(
    vehicle: tuple[str, Requests, VirtualVehicle], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("discover-obd-mcp")
    session = stdio_session(
        "--bus", vehicle[0], "--discover", "--reference", "obd", stderr=folder / "stderr.txt"
    )
    yield session
    session.close()


def test_correlate_signal_speed_is_answered_from_obd_polled_within_the_policy(
    server: Session, vehicle: tuple[str, Requests, VirtualVehicle]
) -> None:
    _, requests, _ = vehicle
    start = time.monotonic()
    result = server.run(
        lambda c: c.call_tool("correlate_signal", {"signal": "SPEED", "duration_ms": 4000})
    )
    took = time.monotonic() - start
    assert not result.is_error, text_of(result)
    found = result.structured_content
    assert found["signal"] in {f"{m}.SPEED" for m in ENGINE_ANSWERS} and found["unit"] == "km/h"
    speed = vehicle_speed(found["candidates"])  # 0.01 km/h a step of VehicleSpeed
    assert speed is not None, found["candidates"][:3]
    assert speed["verdict"] == "confirmed"
    assert abs(speed["scale"] / (0.01 * 2 ** speed["start_bit"]) - 1) <= 0.02
    # what went out: mode 01 requests only (current data, read-only), never faster than
    # the poller's ceiling under the policy's budget (the first request probes twice first)
    sent = requests.since(start)
    assert sent and all(m.data[1] == 0x01 for m in sent)
    assert len(sent) <= MAX_RATE_HZ * took + 3
    # and only while a discovery tool records: nothing once it answered
    quiet = time.monotonic()
    time.sleep(0.5)
    assert requests.since(quiet) == []


def test_the_server_instructions_say_obd_is_the_reference(server: Session) -> None:
    assert server.client is not None
    instructions = server.client.instructions or ""
    assert "OBD-II is the reference" in instructions and 'signal="SPEED"' in instructions


def test_reference_reaches_the_printed_config_and_is_refused_alone(
    run: Run,  # noqa: F811
    tmp_path: Path,
) -> None:
    printed = run(
        "mcp", "--print-config", "--bus", "virtual:x", "--discover", "--reference", "obd",
        "--reference", str(DEMO),
    )  # fmt: skip
    assert printed.code == 0, printed.err
    args = json.loads(printed.out)["mcpServers"]["hwbridge"]["args"]
    assert args == ["mcp", "--bus", "virtual:x", "--discover", "--reference", "obd",
                    "--reference", str(DEMO.resolve())]  # fmt: skip
    alone = run("mcp", "--bus", "virtual:x", "--reference", "obd")
    assert alone.code == 2
    assert alone.err.strip().splitlines()[-1] == (
        "hwbridge: --reference needs --discover: it is what the discovery tools correlate the"
        " bus with"
    )
    busless = run("mcp", "--discover", "--reference", "obd")
    assert busless.code == 2
    assert "--bus" in busless.err.splitlines()[-1]
