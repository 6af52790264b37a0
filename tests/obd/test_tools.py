"""The diagnostic tools as an LLM and a user see them: policy, prompt, health, third parties."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from firmware_sim.elm327 import Elm327Device
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.obd import ObdDriver
from hwbridge.policy import SendPolicy
from tests.conftest import wait_until
from tests.obd.conftest import ELM_WAIT_MS, Opener

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_leaks")]


def run(driver: ObdDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def test_clearing_is_refused_under_the_default_policy(
    open_driver: Opener, car: VirtualVehicle
) -> None:
    driver = open_driver()
    assert "obd_clear_dtcs" not in {t.name for t in driver.list_tools()}
    refused = run(driver, "obd_clear_dtcs")
    assert refused.call_failed and refused.call_detail is not None
    assert refused.call_detail.startswith("SEND_NOT_ALLOWED")
    write = run(driver, "uds_request", ecu="engine", request="2E F1 90 41 42")
    assert write.call_detail is not None and write.call_detail.startswith("SEND_NOT_ALLOWED")
    assert "uds_0x2E" in write.call_detail
    session = run(driver, "uds_request", ecu="engine", request="10 03")
    assert session.call_detail is not None and session.call_detail.startswith("SEND_NOT_ALLOWED")
    assert car.state.stored_dtcs == ("P0217",)  # nothing changed
    assert "read-only" in driver.get_driver_system_message()


def test_allowed_services_run_and_are_audited(
    open_driver: Opener, car: VirtualVehicle, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_services=["obd_clear_dtcs", "uds_0x2E"], audit_log=log)
    driver = open_driver(policy)
    assert "obd_clear_dtcs" in {t.name for t in driver.list_tools()}
    cleared = run(driver, "obd_clear_dtcs")
    assert cleared.call_executed
    assert cleared.tool_call_result["acknowledged_by"] == ["engine", "transmission"]
    # the coolant is still too hot: the engine ECU sets the code again on its next check
    assert wait_until(
        lambda: run(driver, "obd_read_dtcs", kind="stored").tool_call_result["count"] == 1
    )
    write = run(driver, "uds_request", ecu="engine", request="2E F1 90 41 42")
    assert write.call_executed  # allowed, sent, and refused by the ECU (not in this session)
    assert write.tool_call_result["nrc_name"] == "serviceNotSupportedInActiveSession"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["service"], x["outcome"]) for x in lines] == [
        ("obd_clear_dtcs", "sent"),
        ("uds_0x2E", "sent"),
    ]
    assert lines[1]["data"] == "2E F1 90 41 42" and lines[1]["ecu"] == "engine"
    assert "obd_clear_dtcs, uds_0x2E" in driver.get_driver_system_message()


def test_read_tools_are_marked_read_only_and_bounded(open_driver: Opener) -> None:
    driver = open_driver(SendPolicy(allow_services=["obd_clear_dtcs"]))
    flags = {t.name: t.read_only for t in driver.list_tools()}
    assert flags.pop("obd_clear_dtcs") is False and flags.pop("uds_request") is False
    assert all(flags.values()) and len(flags) == 9  # uds_scan_dids only reads
    too_many = run(driver, "obd_read", pids=["RPM"] * 25)
    assert too_many.call_failed and too_many.call_detail is not None
    assert too_many.call_detail.startswith("INVALID_ARGUMENTS")
    bad = run(driver, "obd_read", pids=["RPM", "WARP_DRIVE"])
    assert bad.call_detail is not None and "WARP_DRIVE" in bad.call_detail
    frame = run(driver, "obd_freeze_frame", dtc="P0420").tool_call_result
    assert frame["found"] is False


def test_health_raw_spec_and_the_public_name(open_driver: Opener) -> None:
    import hwbridge

    assert hwbridge.ObdDriver is ObdDriver
    driver = open_driver()
    run(driver, "obd_monitor_status")
    health = driver.healthcheck()
    assert health.status == "ok" and [e["name"] for e in health.details["ecus"]] == [
        "engine",
        "transmission",
    ]
    specs = driver.raw_spec()
    assert "P0217" in (specs["obd_dtc_descriptions"].text or "")
    assert {"healthcheck", "raw_spec"} <= set(driver.meta.capabilities)
    driver.close()
    assert driver.healthcheck().status == "down"


def test_python_obd_reads_the_simulated_elm327(
    channel: str, car: VirtualVehicle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third-party client (python-OBD) on the simulated ELM327, as people use it."""
    import obd.elm327

    import obd

    monkeypatch.setattr(obd.elm327.time, "sleep", lambda seconds: None)  # its 1 s pauses
    with Elm327Device(channel, no_data_timeout_ms=ELM_WAIT_MS) as elm:
        connection = obd.OBD(elm.port_name, fast=False, timeout=2)
        try:
            assert connection.status() == obd.OBDStatus.CAR_CONNECTED
            assert connection.protocol_id() == "6"
            rpm = connection.query(obd.commands.RPM)
            assert 700 < rpm.value.magnitude < 900
            assert connection.query(obd.commands.SPEED).value.magnitude == 0
            assert connection.query(obd.commands.COOLANT_TEMP).value.magnitude > 115
            dtcs = connection.query(obd.commands.GET_DTC).value
            assert [code for code, _ in dtcs] == ["P0217"]
            assert connection.query(obd.commands.STATUS).value.MIL is True
            assert bytes(connection.query(obd.commands.VIN).value) == b"5HWSM1DE8R0000817"
            assert connection.query(obd.commands.ELM_VOLTAGE).value.magnitude == 12.6
            assert len(connection.supported_commands) > 60
        finally:
            connection.close()
    time.sleep(0)


@pytest.mark.slow
def test_python_obd_reads_the_freeze_frame_the_simulator_stored(
    channel: str, car: VirtualVehicle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """python-OBD asks mode 02 without the frame number (`020C`): frame 0, with the values
    the engine ECU froze when it stored P0217, decoded by python-OBD's own decoders."""
    import obd.elm327
    from obd.protocols.protocol import Message

    import obd
    from firmware_sim.obd import ENGINE

    monkeypatch.setattr(obd.elm327.time, "sleep", lambda seconds: None)  # its 1 s pauses
    frozen = car.state.freeze_frame
    assert frozen is not None and car.state.freeze_dtc == "P0217"

    def expected(pid: int) -> Any:
        """What python-OBD makes of the frozen bytes as a mode 01 answer."""
        message = Message([])
        message.ecu = obd.ECU.ENGINE
        message.data = bytearray([0x41, pid]) + ENGINE.pids[pid](frozen)
        return obd.commands[1][pid]([message]).value

    with Elm327Device(channel, no_data_timeout_ms=ELM_WAIT_MS) as elm:
        connection = obd.OBD(elm.port_name, fast=False, timeout=2)
        try:
            mode02 = [c for c in obd.commands[2] if c is not None and connection.supports(c)]
            frozen_pids = set(ENGINE.pids) - {0x01, 0x41}  # readiness is not frozen
            checked = []
            for command in mode02:
                value = connection.query(command).value
                if command.pid in frozen_pids:
                    assert value == expected(command.pid), command.name
                    checked.append(command.name)
                else:
                    assert value is None, command.name  # not frozen: the ECUs stay silent
            assert {"DTC_RPM", "DTC_SPEED", "DTC_COOLANT_TEMP", "DTC_ENGINE_LOAD"} <= set(checked)
            assert len(checked) >= 25
            rpm = connection.query(obd.commands.DTC_RPM).value
            assert rpm is not None and rpm.magnitude == pytest.approx(
                frozen.engine_speed_rpm, abs=0.25
            )
            coolant = connection.query(obd.commands.DTC_COOLANT_TEMP).value
            assert coolant is not None and coolant.magnitude == round(frozen.coolant_temp_c)
        finally:
            connection.close()
