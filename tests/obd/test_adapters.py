"""Both adapters against the simulated vehicle: the same answers, and every failure handled."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from firmware_sim.elm327 import Elm327Device
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.core.models import ToolError
from hwbridge.obd import Elm327Adapter, IsoTpObdAdapter, ObdDriver
from tests.obd.conftest import Opener, ScriptedElm, patient_elm

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_leaks")]


def call(driver: ObdDriver, tool: str, **arguments: Any) -> Any:
    response = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert response.call_executed, response.call_detail
    return response.tool_call_result


def test_both_adapters_give_the_same_answers(channel: str, car: VirtualVehicle) -> None:
    with (
        patient_elm(channel) as elm,
        ObdDriver.from_can(bus=f"virtual:{channel}") as over_can,
        ObdDriver.from_elm327(elm.port_name) as over_elm,
    ):
        for tool, arguments in (
            ("obd_read_dtcs", {"kind": "stored"}),
            ("obd_read_dtcs", {"kind": "permanent"}),
            ("obd_monitor_status", {}),
            ("obd_freeze_frame", {"dtc": "P0217"}),
            ("obd_vehicle_info", {}),
            ("obd_supported_pids", {}),
            ("obd_read", {"pids": ["SPEED", "1C", "TRANSMISSION_GEAR", "FUEL_TYPE"]}),
            ("uds_read_did", {"ecu": "engine", "did": "VIN"}),
            ("uds_read_dtcs", {"ecu": "0x7E0"}),
            ("uds_request", {"ecu": "transmission", "request": "22 F1 8C"}),
        ):
            assert call(over_can, tool, **arguments) == call(over_elm, tool, **arguments), tool
        assert over_can.adapter.ecus() == over_elm.adapter.ecus()


def test_a_functional_request_collects_both_ecus(open_driver: Opener) -> None:
    driver = open_driver()
    status = call(driver, "obd_monitor_status")
    assert [e["ecu"] for e in status["ecus"]] == ["engine", "transmission"]
    assert status["mil"] is True and status["dtc_count"] == 1
    dtcs = call(driver, "obd_read_dtcs", kind="stored")
    assert dtcs["ecus_answered"] == ["engine", "transmission"]
    assert dtcs["codes"] == [
        {
            "code": "P0217",
            "system": "powertrain",
            "generic": True,
            "description": "Engine coolant over temperature condition",
            "ecu": "engine",
        }
    ]
    info = call(driver, "obd_vehicle_info")
    assert info["vin"] == "5HWSM1DE8R0000817"
    assert [e["ecu_name"]["acronym"] for e in info["ecus"]] == ["ECM", "TCM"]
    values = call(driver, "obd_read", pids=["RPM", "COOLANT_TEMP", "0D", "1C"])
    by_pid = {(v["pid"], v["ecu"]): v for v in values["values"]}
    assert 700 < by_pid[("0C", "engine")]["value"] < 900
    assert by_pid[("05", "engine")]["value"] > 115 and by_pid[("05", "engine")]["unit"] == "degC"
    assert ("1C", "transmission") in by_pid  # both ECUs report their OBD standard


def test_29_bit_addressing_over_both_adapters(channel: str, car: VirtualVehicle) -> None:
    with patient_elm(channel, protocol="7") as elm:
        for driver in (
            ObdDriver.from_can(bus=f"virtual:{channel}", addressing="29bit"),
            ObdDriver.from_elm327(elm.port_name, protocol="7"),
        ):
            with driver:
                dtcs = call(driver, "obd_read_dtcs", kind="stored")
                assert [c["code"] for c in dtcs["codes"]] == ["P0217"]
                assert [e.address for e in driver.adapter.ecus()] == ["0x18DA10F1", "0x18DA18F1"]
                vin = call(driver, "uds_read_did", ecu="0x18DA10F1", did="F190")
                assert vin["value"] == "5HWSM1DE8R0000817"


def test_a_negative_response_comes_back_by_name(open_driver: Opener) -> None:
    driver = open_driver()
    refused = driver.process_llm_response(
        '{"tool": "uds_read_did", "arguments": {"ecu": "transmission", "did": "F1A0"}}'
    )
    assert refused.call_failed
    assert refused.call_detail == (
        "NEGATIVE_RESPONSE: The transmission ECU refused ReadDataByIdentifier F1A0: "
        "requestOutOfRange (0x31)."
    )
    session = call(driver, "uds_request", ecu="engine", request="10 01")
    assert session["positive"] is True and session["data"].startswith("50 01")
    unknown = driver.process_llm_response(
        '{"tool": "uds_read_did", "arguments": {"ecu": "brakes", "did": "F190"}}'
    )
    assert unknown.call_detail is not None and unknown.call_detail.startswith("UNKNOWN_ECU")
    assert "engine (0x7E0), transmission (0x7E1)" in unknown.call_detail


def test_an_ecu_that_stops_answering_mid_request(open_driver: Opener, car: VirtualVehicle) -> None:
    driver = open_driver()
    call(driver, "obd_read_dtcs", kind="stored")  # connected while all is well
    car.inject_fault("obd_stall")  # long answers stop after their first frame
    started = time.monotonic()
    failed = driver.process_llm_response(
        '{"tool": "uds_read_did", "arguments": {"ecu": "engine", "did": "F190"}}'
    )
    assert time.monotonic() - started < 5
    assert failed.call_failed and failed.call_detail is not None
    assert failed.call_detail.startswith(("INCOMPLETE_RESPONSE", "NO_RESPONSE")), failed.call_detail
    car.clear_faults()
    assert call(driver, "uds_read_did", ecu="engine", did="F190")["value"] == "5HWSM1DE8R0000817"


def test_isotp_shares_the_bus_with_a_can_driver_without_losing_frames(
    channel: str, car: VirtualVehicle
) -> None:
    from hwbridge.can import CanDriver
    from tests.sim.conftest import DEMO

    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as can_driver:
        monitor = can_driver.networks["can"].monitor
        assert monitor is not None
        with ObdDriver.from_can(bus=can_driver) as obd:
            time.sleep(0.2)
            before_sent = sum(car.frames_sent.values())
            before_seen = monitor.frames_total
            for _ in range(5):
                call(obd, "obd_read", pids=["RPM", "SPEED"])
                call(obd, "uds_read_did", ecu="engine", did="VIN")
            time.sleep(0.1)
            sent = sum(car.frames_sent.values()) - before_sent
            seen = monitor.frames_total - before_seen
        # every periodic frame the vehicle sent reached the CanDriver (plus the diagnostic
        # frames on the bus); the OBD answers were all read
        assert seen >= sent > 50
        signals = can_driver.process_llm_response(
            '{"tool": "read_signals", "arguments": {"signals": ["CoolantTemp"]}}'
        )
        assert signals.call_executed
        assert can_driver.networks["can"].adapter is not None  # still open after obd closed
        assert can_driver.healthcheck().status == "ok"


def test_elm327_reports_what_a_real_adapter_says(channel: str, car: VirtualVehicle) -> None:
    with Elm327Device(channel) as elm:
        with ObdDriver.from_elm327(elm.port_name, protocol="8") as wrong_rate:
            failed = wrong_rate.process_llm_response(
                '{"tool": "obd_monitor_status", "arguments": {}}'
            )
            assert failed.call_detail is not None and failed.call_detail.startswith("BUS_ERROR")
            assert "CAN ERROR" in failed.call_detail
        with ObdDriver.from_elm327(elm.port_name, protocol="3") as k_line:
            failed = k_line.process_llm_response('{"tool": "obd_monitor_status", "arguments": {}}')
            assert failed.call_detail is not None and failed.call_detail.startswith("NO_VEHICLE")
            assert "BUS INIT" in failed.call_detail


def test_elm327_without_a_vehicle(channel: str) -> None:
    with Elm327Device(channel) as elm, ObdDriver.from_elm327(elm.port_name) as driver:
        failed = driver.process_llm_response(
            '{"tool": "obd_read_dtcs", "arguments": {"kind": "stored"}}'
        )
        assert failed.call_detail is not None and failed.call_detail.startswith("NO_VEHICLE")
        assert "UNABLE TO CONNECT" in failed.call_detail
        assert driver.healthcheck().status == "degraded"


def test_garbage_on_the_serial_line(scripted: Any) -> None:
    elm: ScriptedElm = scripted(
        {
            "0100": b"SEARCHING...\r7E8 06 41 00 98 18 00 13 00",
            "0105": b"\x00\xff#~garbage\r7E8 03 41 05 8C 00 00 00 00\rBUS ERR0R!",
            "010C": b"\x01\x02 lorem ipsum\r%%%",
            "0103": b"7E8 10 14 41 03 02 00 00 00",  # a first frame, then nothing
            "010D": b"<silent>",
            "0111": b"STOPPED",
            "011F": b"BUFFER FULL",
        }
    )
    with Elm327Adapter.open(elm.port, timeout_s=0.5) as adapter:
        [coolant] = adapter.request(b"\x01\x05")
        assert coolant.data == b"\x41\x05\x8c" and coolant.ecu.name == "engine"
        with pytest.raises(ToolError) as garbage:
            adapter.request(b"\x01\x0c")
        assert garbage.value.code == "ADAPTER_ERROR"
        [cut] = adapter.request(b"\x01\x03")
        assert not cut.complete and "stopped after 6 of 20 bytes" in (cut.error or "")
        with pytest.raises(ToolError) as silent:
            adapter.request(b"\x01\x0d")
        assert silent.value.code == "ADAPTER_TIMEOUT" and silent.value.retryable
        [again] = adapter.request(b"\x01\x05")  # back at the prompt
        assert again.data == b"\x41\x05\x8c"
        for pid, code in ((0x11, "ADAPTER_STOPPED"), (0x1F, "ADAPTER_OVERFLOW")):
            with pytest.raises(ToolError) as error:
                adapter.request(bytes([0x01, pid]))
            assert error.value.code == code
        assert adapter.describe()["unreadable_lines"] >= 3
    assert elm.commands[:8] == ["ATZ", "ATE0", "ATL0", "ATS0", "ATH1", "ATAT1", "ATCAF1", "ATSP0"]


def test_a_late_answer_to_another_pid_is_not_this_requests_answer(scripted: Any) -> None:
    """An ECU's late answer to an earlier request (mode 02 PID 60's bitmap, a first frame
    and its rest) printed before its answer to this one (PID 02, the code that stored the
    freeze frame): the answer is the second. Taken as the answer, the first made a stored
    freeze frame `not found`."""
    elm: ScriptedElm = scripted(
        {
            "0100": b"7E8 06 41 00 98 18 00 13 00",
            "020200": b"7E8 10 13 42 60 00 00 00 00\r7E8 21 01 80 00 00 00 00 01"
            b"\r7E8 22 A0 00 04 00 00 00 55\r7E8 05 42 02 00 02 17 55 55"
            b"\r7E9 05 42 02 00 00 00 55 55",
            "010D": b"7E8 04 41 0C 1A F8 55 55 55\r7E8 03 41 0D 32 55 55 55 55",
        }
    )
    with Elm327Adapter.open(elm.port, timeout_s=0.5) as adapter:
        engine, transmission = adapter.request(b"\x02\x02\x00")
        assert engine.data == b"\x42\x02\x00\x02\x17" and engine.ecu.name == "engine"
        assert transmission.data == b"\x42\x02\x00\x00\x00"
        [speed] = adapter.request(b"\x01\x0d")
        assert speed.data == b"\x41\x0d\x32"


def test_no_adapter_on_the_port(scripted: Any) -> None:
    silent = scripted({"ATZ": b"<silent>"})
    with pytest.raises(ToolError) as error:
        Elm327Adapter(
            __import__("hwbridge.obd.transport.serial_link", fromlist=["x"]).AdapterLink(
                silent.port
            ),
            reset_timeout_s=0.3,
        ).initialize()
    assert error.value.code == "ADAPTER_TIMEOUT"


def test_the_isotp_adapter_is_safe_to_share_between_threads(
    channel: str, car: VirtualVehicle
) -> None:
    with IsoTpObdAdapter(PythonCanAdapter(f"virtual:{channel}"), own_adapter=True) as adapter:
        adapter.request(b"\x01\x00")
        engine = adapter.ecus()[0]
        results: list[bytes] = []

        def work() -> None:
            for _ in range(10):
                [reply] = adapter.request(b"\x09\x02", ecu=engine)
                results.append(reply.data)

        threads = [threading.Thread(target=work) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == [b"\x49\x02\x01" + b"5HWSM1DE8R0000817"] * 30


def test_no_answer_to_a_freeze_frame_request_is_not_reported_as_no_freeze_frame(
    channel: str,
) -> None:
    """A bus where no ECU answers: NO_RESPONSE, never "no ECU holds a freeze frame" (which
    said something about the car that nobody had told it)."""
    with ObdDriver.from_can(bus=f"virtual:{channel}") as driver:
        response = driver.process_llm_response(
            json.dumps({"tool": "obd_freeze_frame", "arguments": {"dtc": "P0217"}})
        )
    assert response.call_failed and "NO_RESPONSE" in (response.call_detail or "")
