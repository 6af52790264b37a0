"""`hwbridge chat --discover`: the discovery tools beside the reading tools, on a bus with no
database (the simulated vehicle on a virtual bus), against the loopback fake provider; with
`--reference obd`, correlated with the OBD-II answers the vehicle gives while they record."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim import VirtualVehicle
from hwbridge.cli.main import main
from tests.discovery.obd_requests import ENGINE_ANSWERS, Requests, vehicle_speed
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, sse

pytestmark = pytest.mark.timeout(60)

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


@pytest.fixture
def channel() -> Iterator[str]:
    name = f"chat-discover-{uuid.uuid4().hex[:8]}"
    with VirtualVehicle(DEMO, channel=name, drive=False) as car:
        car.set_gear("D")
        car.set_throttle(20)
        yield name


def test_the_model_surveys_a_bus_it_has_no_database_for(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "survey_bus", {"duration_ms": 600})])),
        sse(P.openai_stream(["0x100 carries a value that moves."])),
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("What is on this bus?\n"))
    capsys.readouterr()
    code = main(
        [
            "chat", "--provider", "openai-compatible", "--base-url", fake_openai.base_url,
            "--model", "local", "--bus", f"virtual:{channel}", "--discover",
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"on virtual:{channel} (discovery)" in out
    assert "demo vehicle" not in err  # no database is assumed: the bus is to be discovered
    offered = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    assert {"survey_bus", "snapshot_bus", "correlate_signal", "define_signal"} <= offered
    assert "read_signals" in offered
    system = fake_openai.requests[0]["messages"][0]["content"]
    assert "survey_bus" in system
    assert "✓ survey_bus" in out and '"id": 256' in out  # EngineData's frames, found
    assert "model: 0x100 carries a value that moves." in out


def test_discover_needs_a_bus(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fake_openai: FakeProvider
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(
        [
            "chat", "--provider", "openai-compatible", "--base-url", fake_openai.base_url,
            "--model", "local", "--discover",
        ]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip() == "hwbridge: --discover needs --bus: the discovery tools record a live bus"


def test_with_obd_as_the_reference_the_model_correlates_with_the_vehicle_speed(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
    channel: str,
) -> None:
    """`--reference obd`: the vehicle is asked for its PIDs while the tool records (mode 01
    requests only, at most 10 a second), and correlate_signal(signal="SPEED") answers."""
    fake_openai.script(
        sse(P.openai_stream([], [("call_1", "correlate_signal",
                                  {"signal": "SPEED", "duration_ms": 4000})])),
        sse(P.openai_stream(["0x110 is the vehicle speed."])),
    )  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO("Which field is the speed?\n"))
    capsys.readouterr()
    requests = Requests(channel)
    start = time.monotonic()
    try:
        code = main(
            [
                "chat", "--provider", "openai-compatible", "--base-url", fake_openai.base_url,
                "--model", "local", "--bus", f"virtual:{channel}", "--discover",
                "--reference", "obd",
            ]
        )  # fmt: skip
        took = time.monotonic() - start
        sent = requests.since(start)
    finally:
        requests.close()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"on virtual:{channel} (discovery, reference OBD-II)" in out
    assert "OBD-II is the reference" in err  # said once, on stderr
    system = fake_openai.requests[0]["messages"][0]["content"]
    assert 'correlate_signal(signal="SPEED")' in system
    answer = next(
        json.loads(m["content"])
        for m in fake_openai.requests[1]["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == "call_1"
    )
    assert answer["signal"] in {f"{m}.SPEED" for m in ENGINE_ANSWERS} and answer["unit"] == "km/h"
    speed = vehicle_speed(answer["candidates"])  # 0.01 km/h a step of VehicleSpeed
    assert speed is not None, answer["candidates"][:3]
    assert abs(speed["scale"] / (0.01 * 2 ** speed["start_bit"]) - 1) <= 0.02
    assert "✓ correlate_signal" in out and "model: 0x110 is the vehicle speed." in out
    assert sent and all(m.data[1] == 0x01 for m in sent)  # mode 01: current data only
    assert len(sent) <= 10 * took + 3


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--bus", "virtual:x", "--reference", "obd"],
         "--reference needs --discover: it is what the discovery tools correlate the bus with"),
        (["--reference", "obd"], "--reference needs --discover and --bus:"),
        (["--discover", "--reference", "obd"],
         "--reference and --discover need --bus: the discovery tools record a live bus"),
        (["--bus", "virtual:x", "--discover", "--reference", "nope.dbc"], "nope.dbc"),
    ],
)  # fmt: skip
def test_reference_without_discover_or_a_bus_is_refused_in_one_line(
    options: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_openai: FakeProvider,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(
        ["chat", "--provider", "openai-compatible", "--base-url", fake_openai.base_url,
         "--model", "local", *options]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2
    assert (
        err.strip().startswith("hwbridge: ") and said in err and len(err.strip().splitlines()) == 1
    )
    assert fake_openai.requests == []  # refused before the model was asked anything
