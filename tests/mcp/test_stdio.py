"""`hwbridge mcp` over stdio, driven by the MCP SDK's own client as Claude Desktop or Claude
Code would start it: against the simulated vehicle in its own process over socketcand."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import TextResourceContents

from firmware_sim.bench_psu import BenchPsu
from hwbridge.can.health import SILENT_AFTER_S
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.mcp.conftest import Session, elapsed, stdio_session, text_of
from tests.sim.test_cli import Sim, launch


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    simulator = launch("--socketcand", "127.0.0.1:0", "--no-drive")
    yield simulator
    if simulator.process.poll() is None:
        simulator.stop()


@pytest.fixture(scope="module")
def stderr(module_tmp: Path) -> Path:
    return module_tmp / "server-stderr.txt"


@pytest.fixture(scope="module")
def psu(module_tmp: Path) -> Iterator[BenchPsu]:
    device = BenchPsu(link=module_tmp / "psu")
    device.start()
    yield device
    device.stop()


@pytest.fixture(scope="module")
def server(sim: Sim, psu: BenchPsu, module_tmp: Path, stderr: Path) -> Iterator[Session]:
    """The three bridges in one server: the CAN bus, diagnostics on the same bus (sharing
    the CAN driver's connection) and the simulated bench supply on a pty."""
    bus = f"socketcand://127.0.0.1:{sim.port}/vcan0"
    session = stdio_session(
        "--bus", bus, "--obd", bus, "--spec", "bench_psu", "--port", str(module_tmp / "psu"),
        "--allow", "ClimateCommand", "set_voltage", stderr=stderr,
    )  # fmt: skip
    yield session
    session.close()


def call(session: Session, tool: str, **arguments: Any) -> Any:
    return session.run(lambda c: c.call_tool(tool, arguments))


def test_tools_carry_schemas_and_truthful_annotations(server: Session) -> None:
    listed = server.run(lambda c: c.list_tools()).tools
    tools = {t.name: t for t in listed}
    assert {"read_signals", "wait_for_signal", "capture", "bus_status", "decode_frame"} <= set(
        tools
    )
    read = tools["read_signals"]
    assert read.input_schema["type"] == "object"
    assert read.input_schema["required"] == ["signals"]
    assert read.input_schema["properties"]["signals"]["type"] == "array"
    assert read.annotations is not None and read.annotations.read_only_hint is True
    # --allow ClimateCommand: the send tools exist, and say they change the world
    # (beside the OBD tools the CAN driver keeps its generic tools: one prompt budget)
    for name in ("send_message", "start_periodic", "stop_periodic"):
        annotations = tools[name].annotations
        assert annotations is not None
        assert annotations.read_only_hint is False
        assert annotations.destructive_hint is True
    assert "send_frame" not in tools  # raw frames are not allowed by the policy
    assert all(
        t.annotations.read_only_hint == (not t.annotations.destructive_hint)
        for t in listed
        if t.annotations is not None
    )


def test_a_call_returns_structured_results(server: Session) -> None:
    result = call(server, "read_signals", signals=["EngineSpeed", "GearLever"], timeout_ms=2000)
    assert not result.is_error, text_of(result)
    values = result.structured_content["values"]
    assert 600 < values["EngineSpeed"]["value"] < 1000
    assert values["GearLever"]["label"] == "P"
    assert json.loads(text_of(result)) == result.structured_content


def test_policy_refusals_are_tool_errors_never_successes(server: Session) -> None:
    raw = call(server, "send_frame", id="0x123", data="00")
    assert raw.is_error
    assert text_of(raw).startswith("SEND_NOT_ALLOWED: ")
    assert raw.structured_content["error"]["code"] == "SEND_NOT_ALLOWED"
    other = call(server, "send_EngineData", EngineSpeed=1000)
    assert other.is_error and text_of(other).startswith("SEND_NOT_ALLOWED: ")
    invalid = call(server, "read_signals", signals="EngineSpeed")
    assert invalid.is_error and text_of(invalid).startswith("INVALID_ARGUMENTS: ")
    unknown = call(server, "format_disk")
    assert unknown.is_error and text_of(unknown).startswith("UNKNOWN_TOOL: ")


def test_an_allowed_send_reaches_the_vehicle(server: Session) -> None:
    signals = {"CabinSetpoint": 22.5, "FanLevel": 3, "AcRequest": "On"}
    sent = call(server, "send_message", message="ClimateCommand", signals=signals)
    assert not sent.is_error, text_of(sent)
    assert sent.structured_content["message"] == "ClimateCommand"
    reacted = call(
        server, "wait_for_signal", signal="ActiveSetpoint", op="==", value=22.5, timeout_ms=3000
    )
    assert reacted.structured_content["met"] is True, text_of(reacted)


def test_a_long_wait_reports_progress_and_can_be_cancelled(server: Session) -> None:
    async def cancelled_wait(client: Client) -> tuple[list[tuple[float, float | None]], float]:
        reports: list[tuple[float, float | None]] = []
        seen = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total))
            seen.set()

        async def wait() -> None:
            await client.call_tool(
                "wait_for_signal",
                {"signal": "VehicleSpeed", "op": ">", "value": 150, "timeout_ms": 20_000},
                progress_callback=on_progress,
            )

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            with anyio.fail_after(5):
                await seen.wait()
            cancelled_at = time.monotonic()
            group.cancel_scope.cancel()
        return reports, elapsed(cancelled_at)

    progress, took = server.run(cancelled_wait)
    # seconds waited of the 20 s timeout, once per PROGRESS_INTERVAL_S (0.5 s): never sooner,
    # later on a busy machine
    first, total = progress[0]
    assert total == 20.0 and 0.5 <= first < 20.0
    assert [p for p, _ in progress] == sorted(p for p, _ in progress)
    assert took < 10.0  # the client is not kept waiting for the 20 s timeout
    started = time.monotonic()
    status = call(server, "bus_status")  # the server goes on serving, not held by the wait
    assert not status.is_error and elapsed(started) < 10.0


def test_diagnostics_join_on_the_same_bus(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    assert {"obd_read", "obd_read_dtcs", "uds_read_did"} <= set(tools)
    annotations = tools["obd_read"].annotations
    assert annotations is not None and annotations.read_only_hint is True
    assert "obd_clear_dtcs" not in tools  # not allowed by the policy: not offered
    read = call(server, "obd_read", pids=["RPM"])
    assert not read.is_error, text_of(read)
    [rpm] = read.structured_content["values"]
    assert rpm["name"] == "RPM" and 600 < rpm["value"] < 1000
    cleared = call(server, "obd_clear_dtcs")
    assert cleared.is_error and text_of(cleared).startswith("SEND_NOT_ALLOWED: ")


def test_a_serial_device_joins_with_its_own_allow_list(server: Session) -> None:
    tools = {t.name: t for t in server.run(lambda c: c.list_tools()).tools}
    measure, setter = tools["measure_voltage"].annotations, tools["set_voltage"].annotations
    assert measure is not None and measure.read_only_hint is True
    assert setter is not None and setter.destructive_hint is True
    assert "output" not in tools  # --allow named set_voltage only
    assert not call(server, "set_voltage", volts=5.0).is_error
    setpoint = call(server, "voltage_setpoint")
    assert setpoint.structured_content["values"]["volts"]["value"] == 5.0
    refused = call(server, "output", on=True)
    assert refused.is_error and text_of(refused).startswith("SEND_NOT_ALLOWED: ")


def test_resources_are_the_database_and_the_bus_status(server: Session) -> None:
    listed = server.run(lambda c: c.list_resources()).resources
    uris = {str(r.uri) for r in listed}
    assert {"hwbridge://driver", "hwbridge://health", "hwbridge://spec/can/can"} <= uris
    spec = server.run(lambda c: c.read_resource("hwbridge://spec/can/can")).contents[0]
    assert isinstance(spec, TextResourceContents)
    assert spec.text == Path("dbc/demo_vehicle.dbc").read_text()

    def health() -> dict[str, Any]:
        content = server.run(lambda c: c.read_resource("hwbridge://health")).contents[0]
        assert isinstance(content, TextResourceContents)
        report: dict[str, Any] = json.loads(content.text)
        return report

    # right after connecting the bus is "degraded: no frame received yet", then ok; the
    # diagnostics are ok once an ECU has answered (this test's own request, not another's;
    # on a busy machine the simulator's first answer can come after the adapter's probe
    # gave up, and the next request finds it, as it would a vehicle slow to wake)
    answered = lambda: not call(server, "obd_read", pids=["RPM"]).is_error  # noqa: E731
    assert wait_until(answered, BUSY_MARGIN_S)
    assert wait_until(lambda: health()["status"] == "ok", SILENT_AFTER_S + BUSY_MARGIN_S), health()
    report = health()
    assert report["parts"]["can"]["parts"]["can"]["details"]["interface"] == "socketcand"
    assert report["parts"]["obd"]["status"] == "ok"
    assert report["parts"]["serial"]["status"] == "ok"
    assert "hwbridge://spec/serial/bench_psu" in uris


def test_the_simulator_killed_mid_call_is_a_bus_down_error(module_tmp: Path) -> None:
    simulator = launch("--socketcand", "127.0.0.1:0", "--no-drive")
    session = None
    try:
        bus = f"socketcand://127.0.0.1:{simulator.port}/vcan0"
        session = stdio_session("--bus", bus, stderr=module_tmp / "killed-stderr.txt")

        async def wait_while_killed(client: Client) -> tuple[Any, float]:
            seen = anyio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.set()

            result: list[Any] = []

            async def wait() -> None:
                result.append(
                    await client.call_tool(
                        "wait_for_signal",
                        {"signal": "VehicleSpeed", "op": ">", "value": 150, "timeout_ms": 20_000},
                        progress_callback=on_progress,
                    )
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                with anyio.fail_after(5):
                    await seen.wait()
                simulator.process.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
            return result[0], elapsed(killed_at)

        down, took = session.run(wait_while_killed)
        assert down.is_error and text_of(down).startswith("BUS_DOWN: "), text_of(down)
        assert took < 5.0  # long before the 20 s timeout
        stale = call(session, "read_signals", signals=["EngineSpeed"])
        assert stale.is_error and text_of(stale).startswith("BUS_DOWN: ")
        assert session.run(lambda c: c.list_tools()).tools  # the server itself lives on
    finally:
        if session is not None:
            session.close()
        if simulator.process.poll() is None:
            simulator.stop()
        else:
            simulator.process.communicate(timeout=5)
