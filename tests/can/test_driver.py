"""CanDriver as a user drives it: reading a live bus, the send policy, typed tools, offline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge import CanDriver, DriverResponse, SendPolicy
from hwbridge.can.database.database import CanDatabase, DatabaseError
from hwbridge.core.prompts import estimate_tokens
from tests.can.conftest import recv_all
from tests.can.ecu import Ecu
from tests.conftest import wait_until
from tests.shared_data import DATA, needs_shared

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"


@pytest.fixture(scope="module")
def demo_db() -> CanDatabase:
    return CanDatabase.load(DEMO)


def call(driver: CanDriver, tool: str, **arguments: Any) -> DriverResponse:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def test_read_signals_with_units_labels_mux_and_missing(demo_db: CanDatabase, channel: str) -> None:
    values: dict[str, dict[str, Any]] = {
        "EngineData": {"EngineSpeed": 1500, "CoolantTemp": 90},
        "TransmissionStatus": {"GearLever": "D"},
        "BatteryCells": {"CellGroup": 1, "Cell05Voltage": 3.61},
    }
    with Ecu(demo_db, channel, values), CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        r = call(
            d,
            "read_signals",
            signals=["EngineSpeed", "GearLever", "Cell05Voltage", "CabinTemp", "NoSuchSignal"],
            timeout_ms=300,
        )
    assert r.call_executed
    got = r.tool_call_result
    assert got["values"]["EngineSpeed"]["value"] == 1500
    assert got["values"]["EngineSpeed"]["unit"] == "rpm"
    assert got["values"]["EngineSpeed"]["message"] == "EngineData"
    assert got["values"]["EngineSpeed"]["age_ms"] < 300
    assert got["values"]["GearLever"]["label"] == "D"
    assert got["values"]["Cell05Voltage"]["value"] == pytest.approx(3.61)
    assert got["not_received"]["CabinTemp"]["cycle_time_ms"] == 500
    assert got["errors"]["NoSuchSignal"].startswith("UNKNOWN_SIGNAL")


def test_wait_for_signal_by_number_and_label(demo_db: CanDatabase, channel: str) -> None:
    values: dict[str, dict[str, Any]] = {
        "EngineData": {"EngineSpeed": 800},
        "TransmissionStatus": {"GearLever": "P"},
    }
    with (
        Ecu(demo_db, channel, values) as ecu,
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d,
    ):
        assert wait_until(lambda: d.networks["can"].monitor.frames_total > 2)  # type: ignore[union-attr]
        r = call(d, "wait_for_signal", signal="GearLever", op="==", value="P", timeout_ms=500)
        assert r.tool_call_result["met"] and r.tool_call_result["already_met"]
        time.sleep(0.05)
        ecu.values["EngineData"]["EngineSpeed"] = 2500
        started = time.monotonic()
        r = call(d, "wait_for_signal", signal="EngineSpeed", op=">=", value=2000, timeout_ms=20_000)
        assert r.tool_call_result["met"] is True
        assert r.tool_call_result["value"] == 2500
        assert time.monotonic() - started < 20.0 / 2  # met with the next frame, not timed out
        r = call(d, "wait_for_signal", signal="EngineSpeed", op="<", value=100, timeout_ms=200)
        assert r.call_executed
        assert r.tool_call_result["met"] is False
        assert r.tool_call_result["last_value"] == 2500
        r = call(d, "wait_for_signal", signal="GearLever", op="==", value="Warp", timeout_ms=100)
        assert r.call_failed
        assert "P, R, N, D" in (r.retry_prompt or "")


def test_read_only_never_transmits(demo_db: CanDatabase, channel: str, peer: can.BusABC) -> None:
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        names = {t.name for t in d.list_tools()}
        assert not names & {"send_message", "send_frame", "start_periodic", "stop_periodic"}
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("send_message", {"message": "ClimateCommand", "signals": {"CabinSetpoint": 21}}),
            ("send_frame", {"id": "0x3C0", "data": "00"}),
            ("start_periodic", {"message": "ClimateCommand", "period_ms": 100}),
            ("send_ClimateCommand", {"CabinSetpoint": 21}),
        ]
        for tool, args in attempts:
            r = call(d, tool, **args)
            assert r.call_failed, tool
            assert (r.call_detail or "").startswith("SEND_NOT_ALLOWED")
        assert "read-only" in d.get_driver_system_message()
    assert recv_all(peer, timeout_s=0.2) == []


def test_allow_list_sends_exactly_what_was_asked(
    demo_db: CanDatabase, channel: str, peer: can.BusABC, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    policy = SendPolicy(
        allow_messages=["ClimateCommand"],
        signal_limits={"ClimateCommand.CabinSetpoint": (18, 26)},
        audit_log=audit,
    )
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        r = call(
            d,
            "send_message",
            message="ClimateCommand",
            signals={"CabinSetpoint": 22.5, "FanLevel": 3},
        )
        assert r.call_executed, r.retry_prompt
        assert "AcRequest" in r.tool_call_result["defaulted"]
        refused = [
            call(d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 27}),
            call(d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 45}),
            call(d, "send_message", message="EngineData", signals={}),
            call(d, "send_ClimateCommand", CabinSetpoint=40),
        ]
        codes = [(x.call_detail or "").split(":")[0] for x in refused]
        assert codes[0] == "OUT_OF_RANGE"  # the policy's narrower limit
        assert codes[1] == "OUT_OF_RANGE"  # the database's range
        assert codes[2] == "SEND_NOT_ALLOWED" or "must be one of" in (refused[2].retry_prompt or "")
        assert refused[3].call_failed  # the typed tool's schema refuses it before anything runs
        dry = call(
            d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 20}, dry_run=True
        )
        assert dry.tool_call_result["sent"] is False
    frames = recv_all(peer, timeout_s=0.2)
    assert len(frames) == 1
    decoded = demo_db.decode("ClimateCommand", bytes(frames[0].data)).signals
    assert decoded["CabinSetpoint"] == 22.5
    assert decoded["FanLevel"] == 3
    assert frames[0].is_extended_id is False
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [x["outcome"] for x in lines].count("sent") == 1


def test_flood_of_sends_stays_within_the_rate_limit(channel: str, peer: can.BusABC) -> None:
    policy = SendPolicy(allow_messages=["ClimateCommand"], max_frames_per_second=20)
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy) as d:
        started = time.monotonic()
        results = [
            call(d, "send_message", message="ClimateCommand", signals={"CabinSetpoint": 21})
            for _ in range(300)
        ]
        elapsed = time.monotonic() - started
    sent = sum(r.call_executed for r in results)
    limited = [r for r in results if (r.call_detail or "").startswith("RATE_LIMITED")]
    frames = recv_all(peer, timeout_s=0.2)
    assert len(frames) == sent
    assert sent <= 20 + 20 * elapsed + 1
    assert len(limited) == 300 - sent


def test_periodic_send_refreshes_counter_and_checksum(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    from hwbridge import counter_and_checksum

    policy = SendPolicy(allow_messages=["ClimateCommand"], max_frames_per_second=50)
    hooks = {"ClimateCommand": counter_and_checksum("RollingCounter", "Checksum")}
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy, hooks=hooks) as d:
        r = call(
            d,
            "start_periodic",
            message="ClimateCommand",
            signals={"CabinSetpoint": 21},
            period_ms=20,
        )
        assert r.call_executed, r.retry_prompt
        too_fast = call(d, "start_periodic", message="ClimateCommand", signals={}, period_ms=10)
        assert (too_fast.call_detail or "").startswith("RATE_LIMITED")
        time.sleep(0.3)  # the periodic send runs a while
        assert call(d, "stop_periodic", message="ClimateCommand").call_executed
        assert call(d, "stop_periodic", message="ClimateCommand").call_failed
    frames = recv_all(peer, timeout_s=0.2)
    assert 3 <= len(frames) <= 20  # never faster than the period (a busy machine may be slower)
    counters = [
        demo_db.decode("ClimateCommand", bytes(f.data)).signals["RollingCounter"] for f in frames
    ]
    assert len(set(counters)) == min(len(counters), 16)  # every frame a new counter value
    for f in frames:
        payload = bytearray(f.data)
        checksum = payload[7]
        payload[7] = 0
        x = 0
        for b in payload:
            x ^= b
        assert checksum == x


def test_j1939_message_matched_by_pgn_whatever_the_source(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    eec1 = demo_db.message("EEC1")
    f = demo_db.encode(
        "EEC1",
        {"EngineSpeed_J1939": 1234}
        if "EngineSpeed_J1939" in {s.name for s in eec1.signals}
        else {},
    )
    other_source = (f.arbitration_id & ~0xFF) | 0x42
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}") as d:
        peer.send(can.Message(arbitration_id=other_source, data=f.data, is_extended_id=True))
        r = call(d, "read_message", message="EEC1", timeout_ms=500)
    assert r.call_executed, r.retry_prompt
    assert r.tool_call_result["id"] == f"0x{other_source:08X}"


def test_typed_tools_and_exposure(channel: str) -> None:
    with CanDriver.from_dbc(DEMO) as d:
        names = {t.name for t in d.list_tools()}
        assert "read_EngineData" in names
        assert "send_ClimateCommand" not in names
        assert d.tool_driver.exposure == "messages"
    policy = SendPolicy(allow_messages=["ClimateCommand"])
    with CanDriver.from_dbc(DEMO, policy=policy) as d:
        send = next(t for t in d.list_tools() if t.name == "send_ClimateCommand")
        params = {p.name: p.schema for p in send.parameters}
        assert params["CabinSetpoint"] == {"type": "number", "minimum": 16, "maximum": 30}
        assert "enum" in (params["AcRequest"] or {})
        # FanLevel labels only some values (Off, Auto; 1..7 are plain numbers): both accepted
        assert params["FanLevel"] == {
            "anyOf": [
                {"type": "string", "enum": ["Off", "Auto"]},
                {"type": "integer", "minimum": 0, "maximum": 8},
            ]
        }
        for level in (3, "Auto"):
            r = call(d, "send_ClimateCommand", FanLevel=level, dry_run=True)
            assert r.call_executed, r.retry_prompt
    with CanDriver.from_dbc(DEMO, exposure="catalog") as d:
        assert not any(t.name.startswith("read_E") for t in d.list_tools())


@needs_shared
def test_large_database_keeps_the_prompt_under_budget() -> None:
    with CanDriver.from_dbc(DATA / "opendbc" / "ford_lincoln_base_pt.dbc") as d:
        prompt = d.get_driver_system_message()
        assert estimate_tokens(prompt) < 4000
        assert d.tool_driver.exposure == "catalog"
        r = call(d, "list_messages", filter="Engine")
        assert r.call_executed
        assert r.tool_call_result["total"] >= 1
        r = call(d, "search_signals", query="vehicle sped")
        assert r.tool_call_result["results"]


def test_offline_driver_has_catalog_and_decoding_but_no_bus() -> None:
    with CanDriver.from_dbc(DEMO) as d:
        assert "no bus attached" in d.get_driver_system_message()
        r = call(d, "decode_frame", id="0x100", data="40 1F 19 00 00 00 00 00")
        assert r.tool_call_result["message"] == "EngineData"
        assert r.tool_call_result["signals"]["EngineSpeed"] == 2000
        r = call(d, "describe_message", message="ClimateCommand")
        assert r.tool_call_result["signals"][0]["name"] == "CabinSetpoint"
        r = call(d, "read_signals", signals=["EngineSpeed"])
        assert r.call_failed
        assert (r.call_detail or "").startswith("NO_BUS")


def test_capture_and_bus_status(demo_db: CanDatabase, channel: str) -> None:
    values = {"EngineData": {"EngineSpeed": 900}, "DoorStatus": {"DoorFrontLeft": 1}}
    with (
        Ecu(demo_db, channel, values, period_s=0.01) as ecu,
        CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", bitrate=500_000) as d,
    ):
        ecu.bus.send(can.Message(arbitration_id=0x7AB, data=b"\x01", is_extended_id=False))
        assert wait_until(lambda: d.networks["can"].monitor.frames_total > 10)  # type: ignore[union-attr]
        r = call(d, "capture", duration_ms=500)
        summary = r.tool_call_result
        engine = summary["messages"]["EngineData"]
        # the test's sender is a thread on a busy machine: check the summary, not its timing
        assert 2 <= engine["count"] <= 60
        assert engine["rate_hz"] == pytest.approx(engine["count"] / 0.5, rel=0.05)
        assert engine["cycle_time_ms"] == 10
        assert engine["signals"]["EngineSpeed"]["min"] == 900
        assert len(json.dumps(summary)) < 12_000
        status = call(d, "bus_status").tool_call_result
        assert status["state"] == "connected"
        assert status["frames_per_s"] > 0
        assert status["bus_load_percent"] > 0
        assert "0x7AB" in status["ids_not_in_database"]


def test_two_networks_in_one_driver(demo_db: CanDatabase, channel: str) -> None:
    other = channel + "-body"
    with (
        Ecu(demo_db, channel, {"EngineData": {"EngineSpeed": 1000}}),
        Ecu(demo_db, other, {"EngineData": {"EngineSpeed": 3000}}),
        CanDriver.from_networks(
            {
                "powertrain": {"dbc": DEMO, "bus": f"virtual:{channel}"},
                "body": {"dbc": demo_db, "bus": f"virtual:{other}"},
            }
        ) as d,
    ):
        schema = next(t for t in d.list_tools() if t.name == "read_signals").input_schema()
        assert schema["properties"]["network"]["enum"] == ["powertrain", "body"]
        a = call(d, "read_signals", network="powertrain", signals=["EngineSpeed"])
        b = call(d, "read_signals", network="body", signals=["EngineSpeed"])
        assert a.tool_call_result["values"]["EngineSpeed"]["value"] == 1000
        assert b.tool_call_result["values"]["EngineSpeed"]["value"] == 3000
        assert call(d, "read_signals", signals=["EngineSpeed"]).call_failed


def test_over_socketcand(demo_db: CanDatabase, channel: str, socketcand: Any) -> None:
    url = f"socketcand://127.0.0.1:{socketcand.port}/vcan0"
    with (
        Ecu(demo_db, channel, {"EngineData": {"EngineSpeed": 1750}}),
        CanDriver.from_dbc(DEMO, bus=url) as d,
    ):
        r = call(d, "read_signals", signals=["EngineSpeed"], timeout_ms=2000)
    assert r.tool_call_result["values"]["EngineSpeed"]["value"] == 1750


def test_broken_database_fails_clearly(tmp_path: Path) -> None:
    broken = tmp_path / "broken.dbc"
    broken.write_text(
        'VERSION ""\nNS_ :\nBS_:\nBU_: ECU\nBO_ 256 Engine: 8 ECU\n'
        ' SG_ Speed : 0|16@1+ (1,0) [0|100] "" ECU\nBO_ 257 Broken 8 ECU\n'
    )
    with pytest.raises(DatabaseError) as err:
        CanDriver.from_dbc(broken)
    assert err.value.line == 7
    assert str(err.value).startswith(f"{broken}:7: invalid syntax")


@needs_shared
def test_results_stay_bounded_on_huge_messages() -> None:
    with CanDriver.from_dbc(DATA / "css" / "OBD-v4.4.dbc") as d:
        r = call(d, "describe_message", message="OBD_RX_EXT")
        assert r.call_executed, r.retry_prompt
        assert r.tool_call_result["more_signals"] > 100
        assert r.messages is not None
        text = r.messages[-1]["content"]
        assert "result cut" not in text  # whole, valid JSON within the limit
        json.loads(text.split("\n", 1)[1])


def test_hooked_sends_report_the_wire_frame_and_dry_runs_leave_the_counter(
    demo_db: CanDatabase, channel: str, peer: can.BusABC
) -> None:
    from hwbridge import counter_and_checksum

    policy = SendPolicy(allow_messages=["ClimateCommand"])
    hooks = {"ClimateCommand": counter_and_checksum("RollingCounter", "Checksum")}
    with CanDriver.from_dbc(DEMO, bus=f"virtual:{channel}", policy=policy, hooks=hooks) as d:
        for _ in range(3):
            dry = call(d, "send_ClimateCommand", CabinSetpoint=21, dry_run=True)
            assert dry.tool_call_result["sent"] is False
        sent = [call(d, "send_ClimateCommand", CabinSetpoint=21).tool_call_result for _ in range(2)]
    frames = recv_all(peer, timeout_s=0.2)
    counters = [
        demo_db.decode("ClimateCommand", bytes(f.data)).signals["RollingCounter"] for f in frames
    ]
    assert counters == [0, 1]  # the dry runs did not advance it
    assert sent[1]["signals"]["RollingCounter"] == 1
    assert "Checksum" in sent[1]["set_by_hook"]
    assert sent[1]["data"] == bytes(frames[1].data).hex(" ").upper()


def test_describe_message_says_how_many_signals_it_returned(tmp_path: Path) -> None:
    """A message with more signals than a description holds: the cut list says total,
    returned and truncated, as every list a model gets does; a whole one says so too."""
    lines = ['VERSION ""', "NS_ :", "BS_:", "BU_: ECU", "BO_ 256 Wide: 64 ECU"]
    lines += [f' SG_ S{i:03d} : {i * 8}|8@1+ (1,0) [0|255] "" ECU' for i in range(60)]
    lines += ["BO_ 257 Narrow: 8 ECU", ' SG_ Only : 0|8@1+ (1,0) [0|255] "" ECU']
    dbc = tmp_path / "wide.dbc"
    dbc.write_text("\n".join(lines) + "\n")
    with CanDriver.from_dbc(dbc) as d:
        wide = call(d, "describe_message", message="Wide").tool_call_result
        narrow = call(d, "describe_message", message="Narrow").tool_call_result
    assert (wide["total"], wide["returned"], wide["truncated"]) == (60, 40, True)
    assert len(wide["signals"]) == 40 and wide["more_signals"] == 20
    assert (narrow["total"], narrow["returned"], narrow["truncated"]) == (1, 1, False)
    assert "more_signals" not in narrow
