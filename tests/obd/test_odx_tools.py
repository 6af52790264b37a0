"""Tools generated from an ODX description and DIDs by name (issue 38, item 2), against the
simulated engine ECU with a second listener on the bus counting what really went out; the
typing and encoding of the tools checked without a bus first."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmware_sim.odx import write_engine_pdx
from hwbridge.core.models import ToolError
from hwbridge.obd import ObdDriver
from hwbridge.obd.database.odx import OdxDescription, load_odx
from hwbridge.obd.tools.odx_services import OdxServicesWarning
from hwbridge.obd.tools.tool_driver import ObdToolDriver
from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter
from hwbridge.policy import SendPolicy
from tests.obd.test_uds_changes import Bench, allowing, changing, demo_key, run

pytest.importorskip("odxtools")
pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("no_thread_leaks")]

DIDS = Path(__file__).resolve().parents[2] / "examples" / "engine_dids.toml"
ENGINE = Ecu(0x7E0, 0x7E8, False)


@pytest.fixture(scope="module")
def engine_odx(tmp_path_factory: pytest.TempPathFactory) -> OdxDescription:
    return load_odx(write_engine_pdx(tmp_path_factory.mktemp("odx")))


class CountingAdapter(ObdAdapter):
    """An adapter that answers nothing and counts what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def request(
        self, payload: bytes, *, ecu: Ecu | None = None, timeout_s: float | None = None
    ) -> list[EcuReply]:
        self.sent.append(payload)
        return []

    def ecus(self) -> list[Ecu]:
        return [ENGINE]

    @property
    def extended(self) -> bool | None:
        return False

    def describe(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def offline(engine_odx: OdxDescription, policy: SendPolicy | None = None) -> ObdToolDriver:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OdxServicesWarning)
        return ObdToolDriver(CountingAdapter(), policy or allowing(), odx=engine_odx)


def outcome(tools: ObdToolDriver, name: str, arguments: dict[str, Any]) -> Any:
    """The tool's result, or the ToolError it refused the call with."""
    try:
        return tools.execute_tool(name, arguments)
    except ToolError as exc:
        return exc


def test_one_typed_tool_per_service(engine_odx: OdxDescription) -> None:
    with pytest.warns(
        OdxServicesWarning,
        match="SecurityAccess_RequestSeed: SecurityAccess goes through uds_unlock",
    ):
        tools = ObdToolDriver(CountingAdapter(), SendPolicy(), odx=engine_odx)
    assert tools.odx is not None and tools.odx.variant == "HWB_ECM_0417"
    made = {t.name: t for t in tools.list_tools() if t.name[0].isupper()}
    assert set(made) == {
        "Read_IdleSpeedTarget", "Read_CoolantTemperature", "Read_ActiveSession", "Read_VIN",
        "Read_ECUSerialNumber", "Read_SparePartNumber", "Read_SoftwareVersion",
        "Write_IdleSpeedTarget", "DiagnosticSessionControl", "ECUReset", "Start_SelfTest",
        "Results_SelfTest", "TesterPresent",
    }  # fmt: skip
    assert made["Read_VIN"].read_only and not made["Write_IdleSpeedTarget"].read_only
    params = {p.name: p for p in made["Write_IdleSpeedTarget"].parameters}
    assert params["IdleSpeedTarget"].schema == {"type": "integer", "minimum": 600, "maximum": 1000}
    assert params["IdleSpeedTarget"].required and "rpm" in (
        params["IdleSpeedTarget"].description or ""
    )
    assert params["dry_run"].schema == {"type": "boolean"} and not params["dry_run"].required
    session = {p.name: p for p in made["DiagnosticSessionControl"].parameters}["session"]
    assert session.schema == {"type": "string", "enum": ["default", "programming", "extended"]}
    reset = {p.name: p for p in made["ECUReset"].parameters}["resetType"]
    assert not reset.required  # the description gives it a default (hard)
    assert "uds_0x2E" in (made["Write_IdleSpeedTarget"].description or "")
    assert "22 01 01" in (made["Read_IdleSpeedTarget"].description or "")
    assert tools.changing_tools()["Write_IdleSpeedTarget"] == "uds_0x2E"
    assert "Read_VIN" not in tools.changing_tools()


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.integers(min_value=-70000, max_value=70000), st.floats(), st.text(max_size=8)))
def test_a_write_value_is_encoded_by_the_description_or_refused_unsent(
    engine_odx: OdxDescription, value: Any
) -> None:
    tools = offline(engine_odx)
    arguments = {"IdleSpeedTarget": value, "dry_run": True}
    result = outcome(tools, "Write_IdleSpeedTarget", arguments)
    if isinstance(result, ToolError):
        assert result.code in ("INVALID_VALUE", "OUT_OF_RANGE"), result
        assert not (isinstance(value, int) and 600 <= value <= 1000)
    else:
        assert isinstance(value, int | float) and 600 <= value <= 1000 and value == int(value)
        expected = bytes([0x2E, 0x01, 0x01]) + int(value).to_bytes(2, "big")
        assert result["request"] == expected.hex(" ").upper()
        assert result == result | {"sent": False, "dry_run": True, "allowed": True,
                                   "policy": "uds_0x2E"}  # fmt: skip
    assert tools.adapter.sent == []  # type: ignore[attr-defined]


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.sampled_from(["hard", " Soft", "KEYOFFON", "keyOffOn "]), st.text(max_size=20)))
def test_a_choice_is_one_of_the_value_table_or_refused(
    engine_odx: OdxDescription, text: str
) -> None:
    tools = offline(engine_odx, SendPolicy())
    result = outcome(tools, "ECUReset", {"resetType": text, "dry_run": True})
    if isinstance(result, ToolError):
        assert result.code == "INVALID_VALUE" and "hard, keyOffOn, soft" in result.message
    else:
        table = {"hard": "01", "keyoffon": "02", "soft": "03"}
        assert result["request"] == "11 " + table[text.strip().lower()]
        assert result["allowed"] is False  # the default policy would refuse it
    assert tools.adapter.sent == []  # type: ignore[attr-defined]


def test_without_can_ids_the_tools_ask_for_the_ecu(tmp_path: Path) -> None:
    from tests.obd.test_odx_files import without_comparams

    one = tmp_path / "HWB_ECM.odx-d"
    one.write_text(without_comparams())
    tools = offline(load_odx(one))
    read = next(t for t in tools.list_tools() if t.name == "Read_VIN")
    assert [p.name for p in read.parameters] == ["ecu", "dry_run"] and read.parameters[0].required


@pytest.fixture
def bench() -> Any:
    made = Bench()
    made.car.start()
    try:
        yield made
    finally:
        made.close()


def odx_driver(
    bench: Bench, pdx: Path, policy: SendPolicy | None = None, **options: Any
) -> ObdDriver:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OdxServicesWarning)
        return bench.open(policy, odx=pdx, dids=DIDS, **options)


@pytest.fixture
def pdx(tmp_path: Path) -> Path:
    return write_engine_pdx(tmp_path)


def test_reads_come_back_decoded(bench: Bench, pdx: Path) -> None:
    driver = odx_driver(bench, pdx)
    idle = run(driver, "Read_IdleSpeedTarget").tool_call_result
    assert idle["values"] == {"IdleSpeedTarget": {"value": 800, "unit": "rpm"}}
    assert idle["request"] == "22 01 01" and idle["response"] == "62 01 01 03 20"
    vin = run(driver, "Read_VIN").tool_call_result["values"]["VIN"]["value"]
    assert vin == bench.car.vin
    session = run(driver, "Read_ActiveSession").tool_call_result["values"]["ActiveSession"]
    assert session == {"value": "default", "raw": 1}
    coolant = run(driver, "Read_CoolantTemperature").tool_call_result["values"]
    assert coolant["CoolantTemperature"]["unit"] == "degC"
    by_name = run(driver, "uds_read_did", ecu="engine", did="IdleSpeedTarget").tool_call_result
    assert by_name | {"value": 800, "unit": "rpm", "raw": "03 20"} == by_name
    assert (
        run(driver, "uds_read_did", ecu="engine", did="0xF186").tool_call_result["label"]
        == "default"
    )
    prompt = driver.get_driver_system_message()
    assert (
        "Read_IdleSpeedTarget" in prompt
        and "IdleSpeedTarget (0101, 600 to 1000 rpm, writable)" in prompt
    )


def test_under_the_default_policy_no_write_reaches_the_bus(bench: Bench, pdx: Path) -> None:
    driver = odx_driver(bench, pdx, security_key=demo_key)
    offered = {t.name for t in driver.list_tools()}
    assert {"Read_IdleSpeedTarget", "TesterPresent"} <= offered
    assert offered.isdisjoint({"Write_IdleSpeedTarget", "DiagnosticSessionControl", "ECUReset",
                               "Start_SelfTest", "uds_write_did"})  # fmt: skip
    calls: list[tuple[str, dict[str, Any]]] = [
        ("Write_IdleSpeedTarget", {"IdleSpeedTarget": 950}),
        ("Write_IdleSpeedTarget", {"IdleSpeedTarget": 950, "dry_run": True}),
        ("DiagnosticSessionControl", {"session": "extended"}),
        ("ECUReset", {}),
        ("Start_SelfTest", {}),
        ("uds_write_did", {"ecu": "engine", "did": "IdleSpeedTarget", "value": 950}),
    ]
    for tool, arguments in calls:
        answer = run(driver, tool, **arguments)
        assert answer.call_failed and (answer.call_detail or "").startswith("SEND_NOT_ALLOWED"), (
            tool
        )
    with pytest.raises(
        ToolError, match="SEND_NOT_ALLOWED"
    ):  # asked directly, the policy still says no
        driver.tool_driver.execute_tool("Write_IdleSpeedTarget", {"IdleSpeedTarget": 950})
    run(driver, "Read_IdleSpeedTarget")
    sent = bench.requests()
    assert b"\x22\x01\x01" in sent
    assert [r.hex() for r in sent if changing(r)] == []


def test_allowed_the_write_changes_the_engines_idle(bench: Bench, pdx: Path) -> None:
    driver = odx_driver(bench, pdx, allowing(), security_key=demo_key, tester_present_s=0.05)
    bench.clock.advance(1.0)
    assert 770 < bench.engine_speed() < 830
    entered = run(driver, "DiagnosticSessionControl", session="extended").tool_call_result
    assert entered["values"]["session"] == {"value": "extended", "raw": 3}
    assert entered["values"]["P2Star"] == {"value": 5000, "unit": "ms"}
    assert entered["state"]["session"] == "extended"  # kept with tester present from now on
    locked = run(driver, "Write_IdleSpeedTarget", IdleSpeedTarget=950)
    assert "securityAccessDenied (0x33)" in (locked.call_detail or "")
    assert run(driver, "uds_unlock", ecu="engine", level=1).tool_call_result["unlocked"]
    written = run(driver, "Write_IdleSpeedTarget", IdleSpeedTarget=950).tool_call_result
    assert written["request"] == "2E 01 01 03 B6" and written["response"] == "6E 01 01"
    bench.clock.advance(2.0)
    assert 920 < bench.engine_speed() < 980  # the engine follows its new idle target
    assert (
        run(driver, "Read_IdleSpeedTarget").tool_call_result["values"]["IdleSpeedTarget"]["value"]
        == 950
    )
    by_name = run(driver, "uds_write_did", ecu="engine", did="IdleSpeedTarget", value=900)
    assert by_name.tool_call_result | {"name": "IdleSpeedTarget", "value": 900, "raw": "03 84"} == (
        by_name.tool_call_result
    )
    assert (
        run(driver, "uds_read_did", ecu="engine", did="idlespeedtarget").tool_call_result["value"]
        == 900
    )


def test_out_of_range_is_refused_before_anything_is_sent(bench: Bench, pdx: Path) -> None:
    driver = odx_driver(bench, pdx, allowing(), security_key=demo_key)
    before = len(bench.requests())
    calls: list[tuple[str, dict[str, Any]]] = [
        ("Write_IdleSpeedTarget", {"IdleSpeedTarget": 1200}),
        ("Write_IdleSpeedTarget", {"IdleSpeedTarget": "950"}),
        ("DiagnosticSessionControl", {"session": "sport"}),
        ("uds_write_did", {"ecu": "engine", "did": "IdleSpeedTarget", "value": 1200}),
        ("uds_write_did", {"ecu": "engine", "did": "CoolantTemperature", "value": 90}),
    ]
    for tool, arguments in calls:
        answer = run(driver, tool, **arguments)
        assert answer.call_failed, (tool, arguments)
    direct = driver.tool_driver
    with pytest.raises(ToolError) as out_of_range:
        direct.execute_tool("Write_IdleSpeedTarget", {"IdleSpeedTarget": 1200})
    assert (
        out_of_range.value.code == "OUT_OF_RANGE"
        and "600 to 1000 rpm" in out_of_range.value.message
    )
    with pytest.raises(ToolError, match="NOT_WRITABLE"):
        direct.execute_tool(
            "uds_write_did", {"ecu": "engine", "did": "CoolantTemperature", "value": 90}
        )
    # no UDS request at all (finding the ECUs asks OBD-II mode 01 PID 00, which only reads)
    assert [r.hex() for r in bench.requests()[before:] if r != b"\x01\x00"] == []


def test_dry_run_shows_the_request_and_sends_nothing(
    bench: Bench, pdx: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    dry = odx_driver(bench, pdx, allowing(dry_run=True, audit_log=audit))
    result = run(dry, "Write_IdleSpeedTarget", IdleSpeedTarget=950).tool_call_result
    assert result == {"sent": False, "dry_run": True, "service": "Write_IdleSpeedTarget",
                      "request": "2E 01 01 03 B6"}  # fmt: skip
    live = odx_driver(bench, pdx, allowing())
    asked = run(live, "ECUReset", resetType="soft", dry_run=True).tool_call_result
    assert asked == {"sent": False, "dry_run": True, "service": "ECUReset", "request": "11 03",
                     "allowed": True, "policy": "uds_0x11"}  # fmt: skip
    assert [r.hex() for r in bench.requests() if changing(r)] == []
    assert all(json.loads(line)["dry_run"] for line in audit.read_text().splitlines())


def test_a_bad_description_fails_the_driver_and_closes_the_bus(
    bench: Bench, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pdx"
    broken.write_bytes(b"not a zip")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"odx": broken}, "not a readable zip"),
        ({"odx": write_engine_pdx(tmp_path), "odx_variant": "HWB_TCM"}, "has no variant 'HWB_TCM'"),
        ({"odx_variant": "HWB_ECM"}, "give odx too"),
        ({"dids": tmp_path / "none.toml"}, "cannot be read"),
    ]
    for options, says in cases:
        with pytest.raises(ValueError, match=says):
            ObdDriver.from_can(bus=f"virtual:{bench.channel}", **options)


def test_the_same_tools_over_an_elm327(bench: Bench, pdx: Path) -> None:
    from tests.obd.conftest import patient_elm

    with patient_elm(bench.channel) as elm, warnings.catch_warnings():
        warnings.simplefilter("ignore", OdxServicesWarning)
        with ObdDriver.from_elm327(elm.port_name, odx=pdx, dids=DIDS) as driver:
            read = run(driver, "Read_IdleSpeedTarget").tool_call_result
            assert read["values"] == {"IdleSpeedTarget": {"value": 800, "unit": "rpm"}}
            named = run(driver, "uds_read_did", ecu="engine", did="IdleSpeedTarget")
            assert named.tool_call_result["value"] == 800


def engine_pdx_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *extra: tuple[str, str, str, str, str],
    dops: tuple[str, ...] = (),
) -> Path:
    """The engine's PDX with `extra` services (name, description, semantic, request params,
    response params) and data object properties `dops` added to its base variant, as a
    hostile or careless maker would write."""
    import firmware_sim.odx as engine

    services = engine._services
    monkeypatch.setattr(engine, "_services", lambda: [*services(), *extra])
    monkeypatch.setattr(engine, "_DOPS", (*engine._DOPS, *dops))
    return write_engine_pdx(tmp_path)


@pytest.mark.filterwarnings("ignore:Overlapping objects")
def test_a_parameter_that_overwrites_the_service_id_sends_nothing(
    bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request whose value parameter lies over its constant service id (22, a read) would
    encode another service: SecurityAccess, whose seed would come back to the model, or an
    OBD-II mode. What goes out must start with the constants the tool was judged by."""
    from firmware_sim.odx import _const, _value

    sneaky = (
        _const("SID_RQ", 0, 0x22) + _value("sid", 0, "Byte", "39") + _const("level", 1, 1),
        _const("SID_PR", 0, 0x67) + _const("level", 1, 1) + _value("seed", 2, "Ascii"),
    )
    obd = (_const("SID_RQ", 0, 0x22) + _value("mode", 0, "Byte", "4"), _const("SID_PR", 0, 0x44))
    pdx = engine_pdx_with(
        tmp_path, monkeypatch, ("Read_Sneaky", "Read.", "DATA", *sneaky),
        ("Read_Mode", "Read.", "DATA", *obd),
    )  # fmt: skip
    driver = odx_driver(bench, pdx, allowing(), security_key=demo_key)
    assert run(driver, "DiagnosticSessionControl", session="extended").tool_call_result
    before = len(bench.requests())
    calls: list[tuple[str, dict[str, Any]]] = [
        ("Read_Sneaky", {}),
        ("Read_Sneaky", {"sid": 0x27}),
        ("Read_Sneaky", {"dry_run": True}),
        ("Read_Mode", {}),
    ]
    for tool, arguments in calls:
        answer = run(driver, tool, **arguments)
        assert answer.call_failed and "INVALID_VALUE" in (answer.call_detail or ""), answer
        assert "67 01" not in json.dumps(answer.tool_call_result)
    assert [r.hex() for r in bench.requests()[before:] if r != b"\x22\xf1\x86"] == []


def test_a_parameter_wider_than_any_request_is_not_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BIT-LENGTH 4,000,000,000 in an 8 KB file: typing it built a 500 MB integer, and every
    call had odxtools build a 500 MB request (166 s) before its length was refused. A request
    carries at most 4095 bytes: a wider parameter (or a type 0 bits wide) is not a tool."""
    from firmware_sim.odx import _const, _value

    def wide(name: str, bits: int) -> str:
        return (
            f'<DATA-OBJECT-PROP ID="ECM.DOP.{name}"><SHORT-NAME>{name}</SHORT-NAME>'
            "<COMPU-METHOD><CATEGORY>IDENTICAL</CATEGORY></COMPU-METHOD>"
            '<DIAG-CODED-TYPE BASE-DATA-TYPE="A_UINT32" xsi:type="STANDARD-LENGTH-TYPE">'
            f'<BIT-LENGTH>{bits}</BIT-LENGTH></DIAG-CODED-TYPE><PHYSICAL-TYPE BASE-DATA-TYPE="'
            'A_UINT32"/></DATA-OBJECT-PROP>'
        )

    did = _const("SID_RQ", 0, 0x2E) + _const("DID", 1, 0x0102, 16)
    answer = _const("SID_PR", 0, 0x6E)
    pdx = engine_pdx_with(
        tmp_path,
        monkeypatch,
        ("Write_Huge", "Write.", "DATA", did + _value("v", 3, "Huge"), answer),
        ("Write_None", "Write.", "DATA", did + _value("v", 3, "Nothing"), answer),
        ("Write_HugeConst", "Write.", "DATA", did + _const("c", 3, 1, 4_000_000_000), answer),
        dops=(wide("Huge", 4_000_000_000), wide("Nothing", 0)),
    )
    started = time.monotonic()
    tools = offline(load_odx(pdx))
    assert tools.odx is not None
    for name in ("Write_Huge", "Write_None", "Write_HugeConst"):
        assert "bits" in tools.odx.skipped[name], tools.odx.skipped
        assert outcome(tools, name, {"v": 1, "dry_run": True}).code == "UNKNOWN_TOOL"
    assert time.monotonic() - started < 5
    assert tools.adapter.sent == []  # type: ignore[attr-defined]


class AnsweringAdapter(CountingAdapter):
    """Answers each request by its service id from `answers` (no entry: no answer)."""

    def __init__(self, answers: dict[int, bytes]) -> None:
        super().__init__()
        self.answers = answers

    def request(
        self, payload: bytes, *, ecu: Ecu | None = None, timeout_s: float | None = None
    ) -> list[EcuReply]:
        self.sent.append(payload)
        answer = self.answers.get(payload[0])
        return [] if answer is None else [EcuReply(ENGINE, answer)]


def test_an_unanswered_reset_does_not_leave_the_session_reported_held(
    engine_odx: OdxDescription,
) -> None:
    """The ECU may have reset (and dropped its session and security) without answering:
    the ODX tool must say so, as uds_reset does, not report the session still held."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OdxServicesWarning)
        tools = ObdToolDriver(AnsweringAdapter({}), allowing(), odx=engine_odx)
    try:
        tools.keeper.entered(ENGINE, 0x03)
        tools.keeper.unlocked(ENGINE, 1)
        result = tools.execute_tool("ECUReset", {"resetType": "hard"})
        assert result["sent"] is True and result["answered"] is False
        assert result["state"]["session"] == "default" and result["state"]["security"] == "locked"
        assert "reset" in result["state"]["note"]
        assert not tools.keeper.holds(ENGINE)
    finally:
        tools.close()


def test_an_unanswered_reset_is_said_in_plain_words() -> None:
    """uds_reset's note names its request once ("the hard reset request", not "the the")."""
    tools = ObdToolDriver(AnsweringAdapter({}), allowing())
    try:
        result = tools.execute_tool("uds_reset", {"ecu": "engine", "kind": "hard"})
        assert result["sent"] is True and result["answered"] is False
        assert "the hard reset request went out" in result["note"], result["note"]
        assert "the the" not in json.dumps(result)
    finally:
        tools.close()


def test_a_service_id_with_no_positive_answer_id_is_reported_not_raised(
    engine_odx: OdxDescription,
) -> None:
    """Service ids 0xC0-0xFF have no positive answer id (sid + 0x40 is past a byte): an answer
    to one went out and came back, and must be reported, not end in a ValueError."""
    from hwbridge.obd.tools.gated import Sent

    policy = SendPolicy(allow_services=["uds_0xC0", "uds_0xFF"], max_commands_per_second=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OdxServicesWarning)
        adapter = AnsweringAdapter({0xC0: b"\x00\x01", 0xFF: b"\x7f\xff\x11"})
        tools = ObdToolDriver(adapter, policy, odx=engine_odx)
    answered = tools.execute_tool("uds_request", {"ecu": "engine", "request": "C0 01"})
    assert answered["sent"] is True and answered["positive"] is False
    refused = tools.execute_tool("uds_request", {"ecu": "engine", "request": "FF"})
    assert refused["sent"] is True and refused["positive"] is False
    sent = Sent(ENGINE, b"\xc0\x01", replies=[EcuReply(ENGINE, b"\x00\x01")])
    assert sent.positive() is None and sent.refusal() is None
