"""signal_timeseries and plot_signals on a live CanDriver (the simulator on a virtual bus) and
on a CaptureDriver (a dataset); the picture in each wire format, bounded."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firmware_sim import VirtualVehicle
from hwbridge import CanDriver
from hwbridge.captures import CaptureDriver
from hwbridge.core.images import MAX_IMAGE_BYTES, image_of
from tests.conftest import wait_until
from tests.plot.conftest import png_size

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.timeout(120)

DEMO = Path(__file__).resolve().parents[2] / "dbc" / "demo_vehicle.dbc"


@pytest.fixture(scope="module")
def captures(dataset: Path) -> Iterator[CaptureDriver]:
    with CaptureDriver.from_dataset(dataset) as driver:
        yield driver


@pytest.fixture
def live(channel: str) -> Iterator[CanDriver]:
    with (
        VirtualVehicle(DEMO, channel=channel),
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as driver,
    ):
        monitor = driver.networks["can"].reader.require_bus()
        assert wait_until(lambda: monitor.frames_total > 300, timeout_s=10)
        yield driver


def call(driver: Any, tool: str, **arguments: Any) -> Any:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def test_dataset_series_keeps_extremes_and_says_what_it_cut(captures: CaptureDriver) -> None:
    out = call(captures, "signal_timeseries", signal="Speed", max_points=100)
    assert out["signal"] == "Drive.Speed" and out["unit"] == "km/h"
    assert out["total"] == 100_000 and out["returned"] == len(out["values"]) <= 100
    assert out["truncated"] is True and len(out["t_s"]) == out["returned"]
    assert max(out["values"]) == 999.0 and min(out["values"]) == 0  # the one-sample spike
    assert out["t_s"] == sorted(out["t_s"]) and out["start"] == "2023-11-14T22:13:20Z"
    assert len(json.dumps(out)) < 4000
    window = call(
        captures, "signal_timeseries", signal="Drive.Speed",
        start="2023-11-14T22:13:30Z", end="2023-11-14T22:13:30.049Z",
    )  # fmt: skip
    assert window["total"] == 50 and window["returned"] == 50 and window["truncated"] is False
    gear = call(captures, "signal_timeseries", signal="Gear")
    assert gear["labels"] == {"0": "P", "1": "R", "2": "N", "3": "D"}
    assert set(gear["values"]) == {0, 1, 2, 3}
    biggest = call(captures, "signal_timeseries", signal="Speed", max_points=500)
    assert biggest["returned"] <= 500 and len(json.dumps(biggest)) < 12_000


def test_dataset_picture(captures: CaptureDriver) -> None:
    result = call(captures, "plot_signals", signals=["Drive.*"])
    image = image_of(result)
    assert image is not None and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert len(png) <= MAX_IMAGE_BYTES and png_size(png) == (
        result["summary"]["picture"]["width"],
        result["summary"]["picture"]["height"],
    )
    speed, gear = result["summary"]["signals"]
    assert speed["signal"] == "Drive.Speed" and speed["max"] == 999 and speed["total"] == 100_000
    assert gear["labels_seen"] == ["P", "R", "N", "D"]


def test_unknown_and_too_many_signals_are_tool_errors(captures: CaptureDriver) -> None:
    r = captures.process_llm_response(
        '{"tool": "plot_signals", "arguments": {"signals": ["Nope*"]}}'
    )
    assert r.call_failed and str(r.call_detail).startswith("UNKNOWN_SIGNAL")
    r = captures.process_llm_response('{"tool": "signal_timeseries", "arguments": {"signal": "*"}}')
    assert r.call_failed and str(r.call_detail).startswith("TOO_MANY_SIGNALS")
    r = captures.process_llm_response(
        '{"tool": "signal_timeseries", "arguments": {"signal": "Speed", "max_points": 100000}}'
    )
    assert r.call_failed and str(r.call_detail).startswith("INVALID_ARGUMENTS")


def test_live_series_from_the_history(live: CanDriver) -> None:
    out = call(live, "signal_timeseries", signal="EngineSpeed", max_points=20)
    assert out["signal"] == "EngineData.EngineSpeed" and out["unit"] == "rpm"
    assert out["total"] > 20 and out["returned"] <= 20 and out["truncated"] is True
    assert all(500 < v < 8000 for v in out["values"])  # a running engine
    recent = call(live, "signal_timeseries", signal="EngineSpeed", start=-0.5)
    assert 0 < recent["total"] < out["total"]
    gear = call(live, "signal_timeseries", signal="GearLever")
    assert gear["labels"]["0"] == "P"


def test_live_picture(live: CanDriver) -> None:
    result = call(live, "plot_signals", signals=["EngineSpeed", "VehicleSpeed", "GearLever"])
    image = image_of(result)
    assert image is not None
    assert png_size(base64.b64decode(image.data))[0] == 1000
    names = [s["signal"] for s in result["summary"]["signals"]]
    assert names == [
        "EngineData.EngineSpeed",
        "VehicleDynamics.VehicleSpeed",
        "TransmissionStatus.GearLever",
    ]


def test_each_wire_format_carries_the_picture_where_it_can(captures: CaptureDriver) -> None:
    args = {"signals": ["Speed"]}
    anthropic = captures.process_llm_response(
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "plot_signals", "input": args}
        ]}
    )  # fmt: skip
    (block,) = (anthropic.messages or [])[1]["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1"
    text, picture = block["content"]
    assert text["type"] == "text" and "Drive.Speed" in text["text"]
    assert picture["type"] == "image" and picture["source"]["media_type"] == "image/png"
    assert png_size(base64.b64decode(picture["source"]["data"]))[0] == 1000

    gemini = captures.process_llm_response(
        {"role": "model", "parts": [{"functionCall": {"name": "plot_signals", "args": args}}]}
    )
    response, inline = (gemini.messages or [])[1]["parts"]
    assert (
        response["functionResponse"]["response"]["result"]["signals"][0]["signal"] == "Drive.Speed"
    )
    assert inline["inlineData"]["mimeType"] == "image/png" and inline["inlineData"]["data"]

    openai = captures.process_llm_response(
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "plot_signals", "arguments": json.dumps(args)},
        }]}
    )  # fmt: skip
    tool = (openai.messages or [])[1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert "Drive.Speed" in tool["content"] and "cannot show" in tool["content"]
    assert "iVBOR" not in tool["content"]  # no base64 in a message that cannot carry it
    assert len(tool["content"]) < 3000

    text_dialect = captures.process_llm_response(
        json.dumps({"tool": "plot_signals", "arguments": args})
    )
    said = (text_dialect.messages or [])[1]["content"]
    assert "cannot show" in said and "iVBOR" not in said
    assert image_of(text_dialect.tool_call_result) is not None  # the caller still has it
