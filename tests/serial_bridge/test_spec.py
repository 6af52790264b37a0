"""Device specs: the bundled ones load, a malformed one fails at load naming the file, the
key and the problem, and an offline driver gives its tools and prompt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbridge import SendPolicy, SerialDriver
from hwbridge.resources import bundled_spec, bundled_specs
from hwbridge.serial import SpecError, load_spec
from hwbridge.serial.spec import FieldSpec
from hwbridge.serial.tools.values import nmea_kind, typed_value
from tests.serial_bridge.conftest import GNSS_SPEC, PSU_SPEC

GOOD = PSU_SPEC.read_text()


def test_the_bundled_specs_load_and_are_found_by_name() -> None:
    assert {"bench_psu.toml", "gnss_nmea.toml"} <= set(bundled_specs())
    assert load_spec(bundled_spec("bench_psu")).spec.device.name == "bench_psu"
    with SerialDriver.from_spec("gnss_nmea") as by_name:  # a bare name: the bundled spec
        assert by_name.raw_spec()["gnss_nmea"].source == str(bundled_spec("gnss_nmea"))
    gnss = load_spec(bundled_spec("gnss_nmea.toml")).spec
    assert gnss.streaming and gnss.stream is not None and gnss.stream.format == "nmea"


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (("minimum = 0, maximum = 30", "minimum = 40, maximum = 30"), "params.volts", "above"),
        (('send = "VOLT {volts:.3f}"', 'send = "VOLT {voltz:.3f}"'), "set_voltage", "voltz"),
        (('send = "VOLT {volts:.3f}"', 'send = "VOLT {volts.real}"'), "set_voltage", "name"),
        (("[commands.output]", "[commands.port_status]"), "commands", "generic tool"),
        (("baudrate = 115200", "baudrate = -1"), "port.baudrate", "greater than 0"),
        (("baudrate = 115200", "baud_rate = 115200"), "port.baud_rate", "not permitted"),
        (("expect = '^HWBRIDGE,PSU-3005,'", "expect = '(unclosed'"), "identity.expect", "compile"),
        (('fields.amps = { type = "number", unit = "A" }', 'fields.ampz = { type = "number" }'),
         "measure_current", "ampz"),
        (('mode = "query"', 'mode = "stream"'), "commands", "read"),
    ],
)  # fmt: skip
def test_a_malformed_spec_names_the_file_the_key_and_the_problem(
    tmp_path: Path, change: tuple[str, str], key: str, problem: str
) -> None:
    path = tmp_path / "broken.toml"
    assert change[0] in GOOD
    path.write_text(GOOD.replace(change[0], change[1], 1))
    with pytest.raises(SpecError) as caught:
        SerialDriver.from_spec(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert key in message and problem in message, message


def test_not_toml_and_missing_files_are_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[device\nname = 1")
    with pytest.raises(SpecError, match=r"bad.toml: not valid TOML.*line 1"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot be read"):
        load_spec(tmp_path / "absent.toml")


def test_a_limit_on_a_parameter_the_spec_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match=r"set_voltage\.volt'"):
        SerialDriver.from_spec(
            PSU_SPEC, policy=SendPolicy(command_limits={"set_voltage.volt": (0, 5)})
        )


def test_offline_driver_tools_prompt_and_read_only_flags() -> None:
    policy = SendPolicy(allow_commands=["set_voltage"])
    with SerialDriver.from_spec(PSU_SPEC, policy=policy) as driver:
        tools = {t.name: t for t in driver.list_tools()}
        assert "set_voltage" in tools and "output" not in tools  # closed by the policy
        assert not tools["set_voltage"].read_only
        assert all(t.read_only for n, t in tools.items() if n != "set_voltage")
        schema = tools["set_voltage"].input_schema()["properties"]["volts"]
        assert schema["minimum"] == 0 and schema["maximum"] == 30 and "V" in schema["description"]
        assert "no port attached" in driver.get_driver_system_message()
        r = driver.process_llm_response('{"tool": "measure_voltage", "arguments": {}}')
        assert r.call_failed and r.call_detail and r.call_detail.startswith("NO_PORT")
        r = driver.process_llm_response('{"tool": "output", "arguments": {"state": "ON"}}')
        assert r.call_failed and r.call_detail and r.call_detail.startswith("SEND_NOT_ALLOWED")
        dry = driver.process_llm_response(
            '{"tool": "set_voltage", "arguments": {"volts": 3.3, "dry_run": true}}'
        )
        assert dry.tool_call_result == {
            "command": "set_voltage", "line": "VOLT 3.300", "sent": False, "dry_run": True
        }  # fmt: skip
        assert driver.healthcheck().status == "offline"
        raw = driver.raw_spec()["bench_psu"]
        assert raw.text == GOOD and raw.sha256 and raw.source == str(PSU_SPEC)


def test_gnss_tools_are_all_read_only_and_typed() -> None:
    with SerialDriver.from_spec(GNSS_SPEC) as driver:
        tools = driver.list_tools()
        assert {t.name for t in tools} >= {"position", "fix", "satellites", "speed", "utc_time"}
        assert all(t.read_only for t in tools)
        native = driver.get_native_tools("openai")
        assert json.dumps(native)  # every schema is plain JSON


@given(st.text(max_size=300))
def test_nmea_kind_never_raises_and_needs_a_valid_checksum(line: str) -> None:
    kind = nmea_kind(line)
    if kind is not None:
        assert re.search(r"\*[0-9A-Fa-f]{2}", line)


@given(st.one_of(st.none(), st.text(max_size=50), st.floats(), st.integers()))
def test_typed_values_are_json_whatever_the_device_wrote(raw: object) -> None:
    for spec in (
        FieldSpec(type="number", unit="V", digits=2),
        FieldSpec(type="integer", labels={"1": "GPS fix"}),
        FieldSpec(type="boolean"),
        FieldSpec(type="string"),
    ):
        out = typed_value(spec, raw)
        json.dumps(out, allow_nan=False)
        assert set(out) <= {"value", "unit", "label"}
