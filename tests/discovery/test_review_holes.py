"""Discovery under review 10: a defined signal never hides or breaks what the database reads,
captures with impossible ids, time that goes backwards, files with no frame."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

import can
from hwbridge import CanDriver
from hwbridge.can import discover
from hwbridge.cli.main import main as cli_main
from hwbridge.discovery.live.tools import DiscoveryTools
from tests.conftest import wait_until
from tests.shared_data import DATA, needs_shared

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
J1939 = DATA / "css" / "CSS-Electronics-SAE-J1939-DEMO.dbc"
DBC = """VERSION ""
NS_ :
BS_:
BU_: ECU
BO_ 256 Status: 8 ECU
 SG_ Speed : 0|16@1+ (0.01,0) [0|300] "km/h" Vector__XXX
"""
ASC_HEAD = (
    "date Mon Jan 1 12:00:00.000 am 2024\nbase hex  timestamps absolute\n"
    "no internal events logged\nBegin Triggerblock Mon Jan 1 12:00:00.000 am 2024\n"
)


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def write_asc(path: Path, rows: list[tuple[float, str, bytes]]) -> Path:
    lines = [
        f"{t:11.6f} 1  {ident:<15} Rx   d {len(d)} {d.hex(' ').upper()}" for t, ident, d in rows
    ]
    path.write_text(ASC_HEAD + "\n".join(lines) + "\nEnd TriggerBlock\n")
    return path


@pytest.mark.parametrize(
    ("path", "speed", "defined", "sent"),
    [
        # EEC1 defined from source address 0x00, sent from 0x17
        pytest.param(DEMO, "EngSpeed", 0x0CF00400, 0x0CF00417, id="demo"),
        # EEC1 defined from source address 0xFE, sent from 0x00
        pytest.param(J1939, "EngineSpeed", 0x0CF004FE, 0x0CF00400, id="css", marks=needs_shared),
    ],
)
def test_a_signal_defined_on_another_senders_pgn_never_hides_the_database(
    path: Path, speed: str, defined: int, sent: int
) -> None:
    channel = f"disc-j1939-{uuid.uuid4().hex[:8]}"
    with (
        can.Bus(interface="virtual", channel=channel) as tx,
        CanDriver.from_dbc(path, bus=f"virtual:{channel}", discovery=True) as driver,
    ):
        frame = can.Message(
            arbitration_id=sent,
            is_extended_id=True,
            data=bytes([0, 0, 0, 0x40, 0x1F, 0, 0, 0]),
        )  # EEC1 from another source address: engine speed 1000 rpm
        tx.send(frame)
        assert wait_until(lambda: not call(driver, "read_signals", signals=[speed]).call_failed)
        r = call(driver, "define_signal", name="MyRpm", id=f"0x{sent:08X}", start_bit=24,
                 length=16, byte_order="little_endian")  # fmt: skip
        assert r.call_failed and "EEC1" in r.call_detail and f"0x{defined:08X}" in r.call_detail
        tx.send(frame)
        read = call(driver, "read_signals", signals=[speed])
        assert read.tool_call_result["values"][speed]["value"] == 1000.0


def test_numbers_a_signal_cannot_carry_leave_everything_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "car.dbc").write_text(DBC)
    channel = f"disc-big-{uuid.uuid4().hex[:8]}"
    with (
        can.Bus(interface="virtual", channel=channel) as tx,
        CanDriver.from_dbc(
            tmp_path / "car.dbc", bus=f"virtual:{channel}", discovery=True
        ) as driver,
    ):
        tx.send(
            can.Message(
                arbitration_id=0x100, is_extended_id=False, data=bytes([0x10, 0x27] + [0] * 6)
            )
        )
        assert wait_until(lambda: not call(driver, "read_signals", signals=["Speed"]).call_failed)
        for scale, offset, length in ((1e308, 1e308, 8), (1e300, 0.0, 8)):
            r = call(driver, "define_signal", name="Big", id="0x100", start_bit=56, length=length,
                     byte_order="little_endian", scale=scale, offset=offset)  # fmt: skip
            assert r.call_detail.startswith("INVALID_VALUE"), r.call_detail
        assert isinstance(driver.discovery, DiscoveryTools)
        assert driver.discovery.session.defined == []
        speed = call(driver, "read_signals", signals=["Speed"])
        assert speed.tool_call_result["values"]["Speed"]["value"] == 100.0


def test_impossible_ids_and_backward_time_are_counted_not_drafted(tmp_path: Path) -> None:
    rows = [(i * 0.01, "1234", bytes([i % 256, 0, 0, 0])) for i in range(200)]  # 11-bit > 0x7FF
    rows += [(5.0 - i * 0.01, "2B0", bytes([i % 256, 7, 0, 0])) for i in range(200)]  # backwards
    report = discover([write_asc(tmp_path / "odd.asc", rows)])
    assert report.dropped["frames_of_impossible_ids"] == 200
    assert [m.id for m in report.messages] == [0x2B0]
    assert report.messages[0].period_ms is None  # never a negative period
    import cantools

    cantools.database.load_string(report.to_dbc(), strict=True)


def test_a_file_with_no_frame_is_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.asc"
    empty.write_text(ASC_HEAD + "End TriggerBlock\n")
    assert cli_main(["discover", str(empty)]) == 1
    assert "no CAN frame was found" in capsys.readouterr().err
    junk = tmp_path / "junk.blf"
    junk.write_bytes(b"not a blf at all")
    assert cli_main(["discover", str(junk)]) == 2
    assert "junk.blf: not a BLF file" in capsys.readouterr().err
