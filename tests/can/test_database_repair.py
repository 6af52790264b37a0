"""Each DBC repair on a tiny synthetic file, and the errors for files beyond repair."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import pytest

from hwbridge.can.database import CanDatabase, DatabaseError, DatabaseRepairWarning
from hwbridge.can.dbc_repair import repair_dbc
from hwbridge.core.models import ToolError

HEADER = 'VERSION ""\n\nNS_ :\n\tCM_\n\tVAL_\n\tBA_\n\nBS_:\n\nBU_: ECU TOOL\n\n'
CYCLE_DEF = 'BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;\nBA_DEF_DEF_ "GenMsgCycleTime" 0;\n'


def write(tmp_path: Path, body: str, name: str = "car.dbc") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def load_with_repairs(path: Path) -> tuple[CanDatabase, DatabaseRepairWarning]:
    with pytest.warns(DatabaseRepairWarning) as record:
        db = CanDatabase.load(path)
    warning = record[0].message
    assert isinstance(warning, DatabaseRepairWarning)
    return db, warning


def line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


def test_a_clean_file_loads_without_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path, 'BO_ 256 Engine: 8 ECU\n SG_ Speed : 0|16@1+ (1,0) [0|8000] "rpm" TOOL\n'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        db = CanDatabase.load(path)
    assert db.repairs == ()
    assert db.message_names == ("Engine",)


def test_extended_id_without_flag_is_marked_extended_and_references_follow(
    tmp_path: Path,
) -> None:
    body = (
        "BO_ 256 Small: 8 ECU\n"
        ' SG_ A : 0|8@1+ (1,0) [0|255] "" TOOL\n\n'
        "BO_ 419358976 Big: 8 ECU\n"
        ' SG_ Mode : 0|8@1+ (1,0) [0|3] "" TOOL\n\n'
        'CM_ BO_ 419358976 "Mentions BO_ 419358976 in its text.";\n'
        'CM_ SG_ 419358976 Mode "Operating mode.";\n'
        + CYCLE_DEF
        + 'BA_ "GenMsgCycleTime" BO_ 419358976 100;\n'
        'VAL_ 419358976 Mode 1 "Run" 0 "Stop" ;\n'
    )
    path = write(tmp_path, body)
    before = path.read_bytes()
    db, warning = load_with_repairs(path)

    big = db.message("Big")
    assert big.is_extended_frame and big.frame_id == 0x18FEE900
    # comment, cycle time and labels were attached to the renumbered message
    assert big.comment == "Mentions BO_ 419358976 in its text."  # text inside a string untouched
    assert big.cycle_time == 100
    assert db.decode("Big", bytes([1, 0, 0, 0, 0, 0, 0, 0])).signals["Mode"] == {
        "value": 1,
        "label": "Run",
    }
    assert db.message_for_frame(0x18FEE900, True) is big
    assert db.message_for_frame(0x100, False) is db.message("Small")
    assert [r.kind for r in db.repairs] == ["extended_id"]
    assert db.repairs[0].line == line_of(path, "BO_ 419358976")
    assert f"line {db.repairs[0].line}" in str(warning) and "Big" in str(warning)
    assert path.read_bytes() == before  # repaired in memory only


def test_id_beyond_29_bits_keeps_its_low_29_bits(tmp_path: Path) -> None:
    body = 'BO_ 1075054137 Virtual: 8 ECU\n SG_ A : 0|8@1+ (1,0) [0|255] "" TOOL\n'
    db, _ = load_with_repairs(write(tmp_path, body))
    message = db.message("Virtual")
    assert message.is_extended_frame and message.frame_id == 0x00140639


def test_identifiers_starting_with_a_digit_are_renamed_and_still_found(tmp_path: Path) -> None:
    body = (
        "BO_ 1275 2017_5: 8 ECU\n"
        ' SG_ 0_COUNTER : 0|4@1+ (1,0) [0|15] "" TOOL\n'
        ' SG_ Gear : 8|4@1+ (1,0) [0|3] "" TOOL\n\n'
        'CM_ SG_ 1275 0_COUNTER "Rolling counter.";\n'
        'VAL_ 1275 0_COUNTER 15 "Invalid" ;\n'
    )
    path = write(tmp_path, body)
    db, warning = load_with_repairs(path)

    assert db.message_names == ("_2017_5",)
    assert dict(db.renamed) == {"2017_5": "_2017_5", "0_COUNTER": "_0_COUNTER"}
    assert db.message("2017_5") is db.message("_2017_5")
    assert db.resolve_signal("0_COUNTER").name == "_0_COUNTER"
    assert db.resolve_signal("0_COUNTER").comment == "Rolling counter."
    frame = db.encode("2017_5", {"0_COUNTER": 7, "Gear": 2})
    assert db.decode("_2017_5", frame.data).signals == {"_0_COUNTER": 7, "Gear": 2}
    assert {r.kind for r in db.repairs} == {"digit_identifier"}
    assert "'2017_5'" in str(warning) and "'_0_COUNTER'" in str(warning)
    assert db.repairs[0].line == line_of(path, "BO_ 1275")


def test_dangling_choices_are_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    body = (
        "BO_ 352 Acm: 8 ECU\n"
        ' SG_ Hold : 0|1@1+ (1,0) [0|1] "" TOOL\n\n'
        'VAL_ 352 Hold 1 "Held" 0 "Free" ;\n'
        'VAL_ 352 VehicleHoldRequired 1 "Yes" 0 "No" ;\n'
        'VAL_ 999 Hold 1 "Yes" 0 "No" ;\n'
    )
    path = write(tmp_path, body)
    db, warning = load_with_repairs(path)

    assert [r.kind for r in db.repairs] == ["dangling_choices", "dangling_choices"]
    assert [r.line for r in db.repairs] == [
        line_of(path, "VehicleHoldRequired"),
        line_of(path, "VAL_ 999"),
    ]
    assert "message 352 has no signal VehicleHoldRequired" in str(warning)
    assert "no message 999" in str(warning)
    assert db.resolve_signal("Hold").choices == {0: "Free", 1: "Held"}


def test_dangling_signal_type_is_dropped(tmp_path: Path) -> None:
    body = (
        'BO_ 300 Floats: 8 ECU\n SG_ Real : 0|32@1- (1,0) [0|0] "" TOOL\n\n'
        "SIG_VALTYPE_ 300 Real : 1;\nSIG_VALTYPE_ 300 Ghost : 1;\n"
    )
    db, _ = load_with_repairs(write(tmp_path, body))
    assert [r.kind for r in db.repairs] == ["dangling_signal_type"]
    assert db.resolve_signal("Real").is_float


def test_missing_semicolon_after_a_comment_is_added(tmp_path: Path) -> None:
    body = (
        'BO_ 790 Obj: 8 ECU\n SG_ Dist : 0|8@1+ (1,0) [0|255] "m" TOOL\n\n'
        'CM_ "Front target"\n'
        'BO_ 1664 Cluster: 8 ECU\n SG_ Dist2 : 0|8@1+ (1,0) [0|255] "m" TOOL\n\n'
        'CM_ BO_ 1664 "Cluster of targets.";\n'
    )
    path = write(tmp_path, body)
    db, _ = load_with_repairs(path)
    assert [(r.kind, r.line) for r in db.repairs] == [
        ("missing_semicolon", line_of(path, 'CM_ "Front target"'))
    ]
    assert db.message("Cluster").comment == "Cluster of targets."


def test_syntax_error_names_file_line_and_problem(tmp_path: Path) -> None:
    body = (
        'BO_ 256 Engine: 8 ECU\n SG_ Speed : 0|16@1+ (1,0) [0|8000] "rpm" TOOL\n'
        ' SG_ Broken : 16|8@1+ (1,0 [0|255] "" TOOL\n'
    )
    path = write(tmp_path, body)
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    error = info.value
    assert error.path == str(path)
    assert error.line == line_of(path, "SG_ Broken")
    assert "invalid syntax" in error.problem
    assert str(error).startswith(f"{path}:{error.line}: ")


def test_line_numbers_stay_true_when_a_repaired_file_still_fails(tmp_path: Path) -> None:
    body = (
        'BO_ 1275 2017_5: 8 ECU\n SG_ A : 0|4@1+ (1,0) [0|15] "" TOOL\n\n'
        "BO_ 300 Bad: 8 ECU\n"
        ' SG_ B : 0|4@1+ (1,0) [0|15] "" TOOL TOOL2 oops\n'
    )
    path = write(tmp_path, body)
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    assert info.value.line == line_of(path, "oops")


def test_extended_id_already_taken_is_refused_with_a_reason(tmp_path: Path) -> None:
    body = (
        'BO_ 4096 Plain: 8 ECU\n SG_ A : 0|8@1+ (1,0) [0|255] "" TOOL\n\n'
        'BO_ 2147487744 Flagged: 8 ECU\n SG_ B : 0|8@1+ (1,0) [0|255] "" TOOL\n'
    )
    path = write(tmp_path, body)
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    assert info.value.line == line_of(path, "BO_ 4096")
    assert "Plain" in info.value.problem
    assert "already used" in info.value.problem


def test_repair_keeps_every_line_in_place() -> None:
    text = HEADER + (
        'BO_ 1275 2017_5: 8 ECU\n SG_ 0_C : 0|4@1+ (1,0) [0|15] "" TOOL\n\n'
        'VAL_ 1275 Nope 1 "a"\n 0 "b" ;\nCM_ "x"\nBO_ 5000 Big: 8 ECU\n'
    )
    result = repair_dbc(text)
    assert len(result.repairs) == 5
    assert result.text.count("\n") == text.count("\n")
    assert result.text.splitlines()[-1] == "BO_ 2147488648 Big: 8 ECU"


def test_unknown_format_and_missing_file_are_database_errors(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match=r"unknown database format '\.txt'"):
        CanDatabase.load(tmp_path / "car.txt")
    with pytest.raises(DatabaseError, match="cannot read") as info:
        CanDatabase.load(tmp_path / "missing.dbc")
    assert info.value.line is None


def test_invalid_kcd_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.kcd"
    path.write_text('<NetworkDefinition>\n<Bus name="x">\n</NetworkDefinition>\n')
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    assert info.value.line == 3


def test_errors_survive_pickling_for_worker_processes() -> None:
    error = DatabaseError("car.dbc", 12, "invalid syntax")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.line, copy.problem, str(copy)) == (
        "car.dbc",
        12,
        "invalid syntax",
        "car.dbc:12: invalid syntax",
    )
    assert not isinstance(error, ToolError)
