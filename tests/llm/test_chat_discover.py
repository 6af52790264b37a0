"""`hwbridge chat --discover`: the discovery tools beside the reading tools, on a bus with no
database (the simulated vehicle on a virtual bus), against the loopback fake provider."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from firmware_sim import VirtualVehicle
from hwbridge.cli.main import main
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
