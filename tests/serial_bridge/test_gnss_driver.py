"""SerialDriver.from_spec on the simulated GNSS receiver: typed read-only tools over one
background reader, sentences with a bad checksum ignored, silence reported, not waited on."""

from __future__ import annotations

import time
from pathlib import Path

from firmware_sim.gnss import START, GnssReceiver
from hwbridge import SerialDriver
from hwbridge.serial import PySerialAdapter
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.serial_bridge.conftest import GNSS_SPEC
from tests.serial_bridge.test_psu_driver import call, code, value


def test_position_fix_satellites_speed_and_time(gnss: GnssReceiver) -> None:
    with SerialDriver.from_spec(GNSS_SPEC, port=str(gnss.link)) as driver:
        assert abs(value(call(driver, "position"), "latitude") - START[0]) < 0.001
        assert value(call(driver, "position"), "altitude") == 519.0
        fix = call(driver, "fix").tool_call_result["values"]["quality"]
        assert fix == {"value": 1, "label": "GPS fix"}
        assert call(driver, "fix_type").tool_call_result["values"]["dimension"]["label"] == "3D"
        assert value(call(driver, "satellites"), "in_use") == 9
        speed = call(driver, "speed").tool_call_result["values"]["speed"]
        assert speed == {"value": 36.0, "unit": "km/h"}
        assert value(call(driver, "utc_time"), "utc").endswith("+00:00")
        assert driver.healthcheck().status == "ok"
        assert driver.monitor is not None and driver.monitor.stats()["kinds"].keys() >= {
            "GGA", "RMC", "GSA"
        }  # fmt: skip


def test_no_fix_and_garbage_lines(gnss: GnssReceiver) -> None:
    with SerialDriver.from_spec(GNSS_SPEC, port=str(gnss.link)) as driver:
        assert value(call(driver, "satellites"), "in_use") == 9
        gnss.inject_fault("garbage")  # lines that are no NMEA: never taken for a sentence
        seen = driver.monitor.lines_total if driver.monitor else 0
        assert wait_until(
            lambda: driver.monitor is not None and driver.monitor.lines_total > seen + 3
        )
        r = call(driver, "fix")
        assert r.tool_call_result["values"]["quality"]["label"] == "GPS fix"
        gnss.inject_fault(None)
        gnss.inject_fault("no_fix")
        time.sleep(0.25)  # the lines from before the fault grow older than max_age_ms
        r = call(driver, "fix", max_age_ms=150)
        assert r.tool_call_result["values"]["quality"] == {"value": 0, "label": "no fix"}
        assert value(call(driver, "speed", max_age_ms=150), "valid") is False


def test_silence_is_reported_within_the_timeout(gnss: GnssReceiver) -> None:
    with SerialDriver.from_spec(GNSS_SPEC, port=str(gnss.link)) as driver:
        call(driver, "position")
        gnss.inject_fault("silence")
        time.sleep(0.15)  # the last line grows older than max_age_ms
        started = time.monotonic()
        r = call(driver, "position", max_age_ms=100, timeout_ms=200)
        assert code(r) == "NOT_RECEIVED"
        # its timeout_ms; by default a read waits 5 s (streaming.py)
        assert time.monotonic() - started < 0.2 + BUSY_MARGIN_S
        latest = call(driver, "position")  # without max_age_ms: the last value, with its age
        assert latest.tool_call_result["age_ms"] >= 100


def test_a_flood_of_lines_keeps_memory_bounded(gnss: GnssReceiver) -> None:
    gnss.tick_hz = 500  # 1,500 sentences a second
    with SerialDriver.from_spec(GNSS_SPEC, port=str(gnss.link)) as driver:
        monitor = driver.monitor
        assert monitor is not None
        assert wait_until(lambda: monitor.lines_total > 1000, 5.0)
        assert len(monitor.history()) <= 600  # the spec's history
        assert value(call(driver, "satellites"), "in_use") == 9


LOGGER = """
[device]
name = "logger"
mode = "stream"

[stream]
format = "lines"
kind = '^(?P<kind>[A-Z]+)='
stale_ms = 1000

[commands.temperature]
description = "The logger's latest temperature."
read = "T"
reply = '^T=(?P<celsius>-?\\d+(\\.\\d+)?)$'
fields.celsius = { type = "number", unit = "degC" }
"""


def test_a_line_stream_read_by_the_specs_patterns(tmp_path: Path) -> None:
    spec = tmp_path / "logger.toml"
    spec.write_text(LOGGER)
    port = PySerialAdapter("loop://")
    with port, SerialDriver.from_spec(spec, port=port) as driver:
        port.write(b"boot ok\nT=21.5\nH=40\n")
        r = call(driver, "temperature", timeout_ms=1000)
        assert r.tool_call_result["values"]["celsius"] == {"value": 21.5, "unit": "degC"}
        port.write(b"T=oops\n")  # a T line of the wrong form: the tool says so
        assert wait_until(lambda: driver.monitor is not None and driver.monitor.lines_total == 4)
        assert code(call(driver, "temperature")) == "BAD_DATA"
