"""`hwbridge dump FILE`: a database browsed offline, with cantools' own bit layout grids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cantools.subparsers.dump import formatting

from hwbridge.can import CanDatabase
from tests.cli.conftest import DEMO, Run
from tests.shared_data import DATA, needs_shared


def test_the_demo_database_is_shown_message_by_message(run: Run) -> None:
    result = run("dump", str(DEMO))
    assert result.code == 0, result.err
    out = result.out
    assert "\x1b[" not in out  # a pipe gets plain text
    assert out.startswith(f"{DEMO}: 11 message(s), 101 signal(s)")
    assert "EngineData  0x100  8 bytes  senders: ECM  cycle time: 10 ms" in out
    engine_speed = next(line for line in out.splitlines() if "EngineSpeed " in line)
    expected = "EngineSpeed 0|16 intel unsigned 0.25 0 0 10000 rpm"
    assert engine_speed.split() == expected.split()
    yaw = next(line for line in out.splitlines() if line.strip().startswith("YawRate "))
    assert "motorola" in yaw and "signed" in yaw and "deg/s" in yaw
    assert "EngineState: 0 Off, 1 Cranking, 2 Running, 3 Stalled, 4 Fault" in out
    # the grid is cantools' own drawing, indented
    message = CanDatabase.load(DEMO).message("EngineData")
    draw: Any = formatting.layout_string
    for line in draw(message).splitlines():
        assert ("    " + line).rstrip() in out
    assert out.count("Layout:") == 11


def test_message_globs_and_ids_limit_what_is_shown(run: Run) -> None:
    result = run("dump", str(DEMO), "--message", "engine*", "-m", "0x110", "--no-layout")
    assert result.code == 0, result.err
    assert "; 2 shown" in result.out.splitlines()[0]
    assert "EngineData" in result.out and "VehicleDynamics" in result.out
    assert "TransmissionStatus" not in result.out
    assert "Layout:" not in result.out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["dump", "missing.dbc"], "missing.dbc: cannot read the file: No such file or directory"),
        (["dump", "README.md"], "unknown database format"),
        (["dump", str(DEMO), "--message", "Nothing*"], "--message Nothing*: matches no message"),
    ],
)
def test_a_missing_or_unreadable_file_is_a_usage_error(
    run: Run, argv: list[str], words: str
) -> None:
    result = run(*argv)
    assert result.code == 2
    assert result.err.startswith("hwbridge: ") and words in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert result.out == ""


def test_an_unknown_option_is_exit_2(run: Run) -> None:
    with pytest.raises(SystemExit) as exited:
        run("dump", str(DEMO), "--no-such-option")
    assert exited.value.code == 2


def test_a_database_that_does_not_parse_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    broken = tmp_path / "broken.dbc"
    broken.write_text('VERSION ""\nBO_ 1 X: 8 ECU\n SG_ S : 0|8@1+ (1,0 [0|1] "" ECU\n')
    result = run("dump", str(broken))
    assert result.code == 2
    assert result.err.startswith(f"hwbridge: {broken}")


def test_names_from_the_file_are_not_read_as_markup(run: Run, tmp_path: Path) -> None:
    dbc = tmp_path / "markup.dbc"
    dbc.write_text(
        'VERSION ""\nBS_:\nBU_: ECU\nBO_ 5 Msg: 1 ECU\n'
        ' SG_ Sig : 0|2@1+ (1,0) [0|3] "[red]u" ECU\n'
        'VAL_ 5 Sig 0 "[bold]x" 1 "y" ;\n'
    )
    result = run("dump", str(dbc))
    assert result.code == 0, result.err
    assert "[red]u" in result.out and "Sig: 0 [bold]x, 1 y" in result.out


@pytest.mark.slow
@needs_shared
def test_a_real_database_with_hundreds_of_messages(run: Run) -> None:
    ford = DATA / "opendbc" / "ford_lincoln_base_pt.dbc"
    result = run("dump", str(ford))
    assert result.code == 0, result.err
    db = CanDatabase.load(ford)
    assert result.out.count("Layout:") == len(db.messages)
    first = min(db.messages, key=lambda m: m.frame_id)
    assert f"{first.name}  0x{first.frame_id:03X}" in result.out


@needs_shared
def test_multiplexed_messages_name_their_selectors(run: Run) -> None:
    result = run("dump", str(DATA / "cantools" / "multiplex_2.dbc"), "-m", "Shared")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines() if "|" in line}
    assert rows["S0"][-1] == "selector"
    assert rows["S2"][-1] == "S0=2,3,4,5"
    assert "Extended" not in result.out


J1939_DBC = """VERSION ""
BS_:
BU_: ECU
BO_ 2364540158 EEC1: 8 ECU
 SG_ EngineSpeed : 24|16@1+ (0.125,0) [0|8031.875] "rpm" ECU
BO_ 2565800190 TorqueRequest: 8 ECU
 SG_ Requested : 0|8@1+ (0.1,-12.5) [-12.5|13] "%" ECU
BA_DEF_ "ProtocolType" STRING ;
BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","reserved","J1939PG";
BA_DEF_DEF_ "ProtocolType" "";
BA_DEF_DEF_ "VFrameFormat" "StandardCAN";
BA_ "ProtocolType" "J1939";
BA_ "VFrameFormat" BO_ 2364540158 3;
BA_ "VFrameFormat" BO_ 2565800190 3;
"""


def test_a_j1939_message_shows_its_parameter_group_and_exact_values(
    run: Run, tmp_path: Path
) -> None:
    """PGN, priority, source address and PDU format as `cantools dump` shows them (PDU 1
    names its destination); minima, maxima, scales and offsets as the database holds them."""
    dbc = tmp_path / "truck.dbc"
    dbc.write_text(J1939_DBC)
    out = run("dump", str(dbc), "--no-layout").out
    assert "J1939: PGN 0x0F004 (61444)  priority 3  source 0xFE  PDU 2 (broadcast)" in out
    # 0x18EF00FE: PDU format 0xEF < 240, so the group is sent to address 0x00
    assert "J1939: PGN 0x0EF00 (61184)  priority 6  source 0xFE  PDU 1 (destination 0x00)" in out
    speed = next(line.split() for line in out.splitlines() if "EngineSpeed " in line)
    assert speed[4:8] == ["0.125", "0", "0", "8031.875"]  # not 8031.88
    torque = next(line.split() for line in out.splitlines() if "Requested " in line)
    assert torque[4:8] == ["0.1", "-12.5", "-12.5", "13"]


def test_numbers_are_printed_as_held(run: Run) -> None:
    from hwbridge.cli.dump import exact

    assert [exact(v) for v in (8031.875, 0.1, 100.0, -0.0, 1e20, 3, None)] == [
        "8031.875", "0.1", "100", "0", "1e+20", "3", "-"
    ]  # fmt: skip
