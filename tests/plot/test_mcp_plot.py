"""plot_signals over MCP, driven by the MCP SDK's own client over stdio: `hwbridge mcp` on the
simulated vehicle (its own process, over socketcand) answers with image content."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Iterator

import pytest
from mcp import Client, StdioServerParameters

from tests.mcp.conftest import ROOT, Session
from tests.plot.conftest import png_size
from tests.sim.test_cli import Sim, launch

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    simulator = launch("--socketcand", "127.0.0.1:0")
    yield simulator
    if simulator.process.poll() is None:
        simulator.stop()


@pytest.fixture(scope="module")
def server(sim: Sim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    log = (tmp_path_factory.mktemp("mcp-plot") / "stderr.txt").open("w")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hwbridge", "mcp", "--bus", f"socketcand://127.0.0.1:{sim.port}/vcan0"],
        cwd=ROOT,
        # this checkout's hwbridge, whichever is installed
        env={"PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    from mcp.client.stdio import stdio_client

    session = Session(lambda: Client(stdio_client(params, errlog=log)))
    yield session
    session.close()
    log.close()


def test_plot_signals_returns_an_image(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    assert tools["plot_signals"].annotations is not None
    assert tools["plot_signals"].annotations.read_only_hint is True
    assert "signals" in tools["plot_signals"].input_schema["required"]
    time.sleep(1.5)  # some history to draw
    result = server.run(
        lambda c: c.call_tool("plot_signals", {"signals": ["EngineSpeed", "GearLever"]})
    )
    assert not result.is_error, result.content
    text, image = result.content
    assert text.type == "text" and image.type == "image"
    assert image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert len(png) <= 200_000 and png_size(png)[0] == 1000
    summary = json.loads(text.text)
    assert [s["signal"] for s in summary["signals"]] == [
        "EngineData.EngineSpeed",
        "TransmissionStatus.GearLever",
    ]
    assert summary["signals"][0]["total"] > 10
    assert result.structured_content == summary
    series = server.run(lambda c: c.call_tool("signal_timeseries", {"signal": "EngineSpeed"}))
    assert not series.is_error and series.structured_content["returned"] > 0
