"""Each DBC repair on a tiny synthetic file, and the errors for files beyond repair."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import cantools
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.can.database.database import (
    CanDatabase,
    DatabaseError,
    DatabaseImportWarning,
    DatabaseRepairWarning,
)
from hwbridge.can.database.repair import repair_dbc
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


# -- the defects of opendbc's generated files (Honda, Hyundai, Chrysler) -----------------


def test_signal_comment_naming_no_signal_is_kept_as_the_message_comment(tmp_path: Path) -> None:
    body = (
        "BO_ 304 GAS_PEDAL_2: 8 PCM\n"
        ' SG_ ENGINE_TORQUE_ESTIMATE : 7|16@0- (1,0) [-1000|1000] "Nm" EON\n'
        ' SG_ CAR_GAS : 39|8@0+ (1,0) [0|255] "" EON\n\n'
        "BO_ 420 VSA_STATUS: 8 VSA\n"
        ' SG_ BRAKE_HOLD_RELATED : 52|1@0+ (1,0) [0|1] "" EON\n\n'
        'CM_ SG_ 304 "Seems to be platform-agnostic";\n'
        'CM_ SG_ 420 BRAKE_HOLD_RELATED "On when Brake Hold engaged";\n'
    )
    path = write(tmp_path, body)
    db, warning = load_with_repairs(path)
    assert db.message("GAS_PEDAL_2").comment == "Seems to be platform-agnostic"
    assert db.resolve_signal("BRAKE_HOLD_RELATED").comment == "On when Brake Hold engaged"
    assert [(r.kind, r.line) for r in db.repairs] == [
        ("comment_target", line_of(path, 'CM_ SG_ 304 "'))
    ]
    assert "CM_ SG_ 304 names no signal" in str(warning) and "GAS_PEDAL_2" in str(warning)


def test_message_comment_without_bo_keyword_is_a_message_comment(tmp_path: Path) -> None:
    body = (
        "BO_ 145 FCEV_ACCELERATOR: 8 XXX\n"
        ' SG_ ACCELERATOR_PEDAL : 15|8@0+ (1,0) [0|255] "" XXX\n\n'
        "BO_ 2364 FCEV_EXT: 8 XXX\n"  # above 0x7FF without bit 31: repaired too
        ' SG_ X : 0|8@1+ (1,0) [0|255] "" XXX\n\n'
        'CM_ "BO_ E_EMS11: a general comment that mentions CM_ 145 in its text";\n'
        'CM_ 145 "Contains signal with accelerator pedal press.";\n'
        'CM_ 2364 "An extended frame.";\n'
    )
    path = write(tmp_path, body)
    db, _ = load_with_repairs(path)
    assert db.message("FCEV_ACCELERATOR").comment == "Contains signal with accelerator pedal press."
    ext = db.message("FCEV_EXT")
    assert ext.is_extended_frame and ext.frame_id == 2364 and ext.comment == "An extended frame."
    kinds = [(r.kind, r.line) for r in db.repairs]
    assert ("comment_target", line_of(path, 'CM_ 145 "Contains')) in kinds
    assert ("comment_target", line_of(path, "CM_ 2364")) in kinds
    assert not any(r.line == line_of(path, "E_EMS11") for r in db.repairs)


def test_numbers_without_leading_zero_read_as_written(tmp_path: Path) -> None:
    body = (
        "BO_ 268 ECM_1: 8 XXX\n"
        ' SG_ ENGINE_TORQ_MAX : 4|13@0+ (.25,-500) [-500|1547.5] "NM" XXX\n'
        ' SG_ TRIM : 39|8@0- (.5,-.5) [-.5|+.75] "%" XXX\n'
        ' SG_ PLAIN : 40|8@1+ (0.1,0) [0|25.5] "" XXX\n\n'
        'CM_ SG_ 268 TRIM "resolution .5 percent, see (.25,-500)";\n'
    )
    path = write(tmp_path, body)
    db, warning = load_with_repairs(path)
    torque = db.resolve_signal("ENGINE_TORQ_MAX")
    assert (torque.signal.scale, torque.signal.offset) == (0.25, -500)
    trim = db.resolve_signal("TRIM")
    assert (trim.signal.scale, trim.signal.offset) == (0.5, -0.5)
    assert (trim.signal.minimum, trim.signal.maximum) == (-0.5, 0.75)
    assert trim.comment == "resolution .5 percent, see (.25,-500)"  # strings untouched
    assert [(r.kind, r.line) for r in db.repairs] == [
        ("leading_zero", line_of(path, "ENGINE_TORQ_MAX")),
        ("leading_zero", line_of(path, "SG_ TRIM")),
    ]
    assert "read .25 as 0.25" in str(warning)
    assert "read .5 as 0.5, -.5 as -0.5, -.5 as -0.5" in str(warning)
    frame = db.encode("ECM_1", {"ENGINE_TORQ_MAX": 100.25, "TRIM": 0.5, "PLAIN": 1})
    assert db.decode("ECM_1", frame.data).signals["ENGINE_TORQ_MAX"] == 100.25


GENERATED = (
    'CM_ "AUTOGENERATED FILE, DO NOT EDIT";\n\n\n'
    'CM_ "Imported file _honda_common.dbc starts here";\n' + HEADER + "BO_ 304 GAS_PEDAL_2: 8 PCM\n"
    ' SG_ CAR_GAS : 39|8@0+ (1,0) [0|255] "" EON\n\n'
    "BO_ 344 ENGINE_DATA: 8 PCM\n"
    ' SG_ XMISSION_SPEED : 7|16@0+ (.01,0) [0|250] "kph" EON\n\n'
    'CM_ SG_ 304 "Seems to be platform-agnostic";\n'
    'CM_ 344 "Engine and transmission speeds.";\n\n'
    'CM_ "honda_civic_touring_2016_can.dbc starts here";\n'
    "BO_ 545 ECON_STATUS: 6 XXX\n"
    ' SG_ ECON_ON : 23|1@0+ (1,0) [0|1] "" EON\n\n'
    'VAL_ 545 ECON_ON 0 "off" 1 "on" ;\n'
)


def test_a_generated_opendbc_file_loads_with_every_repair_listed(tmp_path: Path) -> None:
    path = tmp_path / "honda_civic_touring_2016_can_generated.dbc"
    path.write_text(GENERATED, encoding="utf-8")
    with pytest.raises(Exception):  # noqa: PT011 - any cantools error
        cantools.database.load_file(path, strict=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = CanDatabase.load(path)
    assert [type(w.message) for w in caught] == [DatabaseRepairWarning]
    assert db.message_names == ("GAS_PEDAL_2", "ENGINE_DATA", "ECON_STATUS")
    assert {r.kind for r in db.repairs} == {"comment_target", "leading_zero"}
    assert all(f"line {r.line}: " in str(caught[0].message) for r in db.repairs)
    assert db.decode("ENGINE_DATA", bytes([0x27, 0x10]) + bytes(6)).signals[
        "XMISSION_SPEED"
    ] == pytest.approx(100.0)


def test_a_template_that_only_imports_is_refused_with_what_to_load(tmp_path: Path) -> None:
    path = tmp_path / "acura_ilx_2016_can.dbc"
    path.write_text(
        'CM_ "IMPORT _honda_common.dbc";\nCM_ "IMPORT _nidec_common.dbc";\n', encoding="utf-8"
    )
    with pytest.raises(DatabaseError) as info:
        CanDatabase.load(path)
    problem = info.value.problem
    assert "defines no messages" in problem
    assert "_honda_common.dbc, _nidec_common.dbc" in problem
    assert "generator template" in problem and "generated" in problem


def test_a_template_with_messages_loads_them_and_warns_about_its_imports(tmp_path: Path) -> None:
    path = tmp_path / "honda_civic_touring_2016_can.dbc"
    path.write_text(
        'CM_ "IMPORT _honda_common.dbc";\n\n'
        'BO_ 493 HUD_SETTING: 5 XXX\n SG_ IMPERIAL_UNIT : 5|1@0+ (1,0) [0|1] "" EON\n',
        encoding="utf-8",
    )
    with pytest.warns(DatabaseImportWarning) as record:
        db = CanDatabase.load(path)
    assert db.message_names == ("HUD_SETTING",)
    warning = record[0].message
    assert isinstance(warning, DatabaseImportWarning)
    assert warning.imports == ("_honda_common.dbc",) and warning.messages == 1
    assert "only its own 1 message loaded" in str(warning)
    assert pickle.loads(pickle.dumps(warning)).imports == warning.imports


def test_a_file_without_messages_or_content_is_refused(tmp_path: Path) -> None:
    nodes_only = write(tmp_path, 'VAL_TABLE_ Gear 0 "P" 1 "D" ;\n')
    with pytest.raises(DatabaseError, match=r"defines no messages \(no BO_ definition\)"):
        CanDatabase.load(nodes_only)
    empty = tmp_path / "empty.dbc"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DatabaseError, match="the file is empty"):
        CanDatabase.load(empty)
    kcd = tmp_path / "none.kcd"
    kcd.write_text(
        '<NetworkDefinition xmlns="http://kayak.2codeornot2code.org/1.0">'
        '<Document/><Bus name="b"/></NetworkDefinition>'
    )
    with pytest.raises(DatabaseError, match="defines no messages"):
        CanDatabase.load(kcd)


def test_text_inside_strings_and_line_comments_is_never_repaired() -> None:
    text = HEADER + (
        "BO_ 256 Engine: 8 ECU\n"
        ' SG_ Speed : 0|16@1+ (1,0) [0|8000] "rpm" TOOL\n'
        '// CM_ 256 "commented out" (.5,0) 2017_5\n'
        'CM_ BO_ 256 "CM_ SG_ 256 \\"quoted\\" .5 2017_5\nBO_ 4096 Fake: 8 ECU";\n'
    )
    result = repair_dbc(text)
    assert result.repairs == () and result.text == text


def test_a_long_repair_list_is_cut_in_the_message_but_kept_whole(tmp_path: Path) -> None:
    body = "".join(
        f'BO_ {i} M{i}: 8 ECU\n SG_ S{i} : 0|8@1+ (.5,0) [0|127.5] "" TOOL\n' for i in range(60)
    )
    db, warning = load_with_repairs(write(tmp_path, body))
    assert len(db.repairs) == len(warning.repairs) == 60
    assert "... and 20 more (all in .repairs)" in str(warning)


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list('BOSGCMVAL_ :;"0123456789.-+()[]|@\n\tx')), max_size=300)
)
def test_repair_never_raises_and_keeps_every_line(text: str) -> None:
    result = repair_dbc(text)
    assert result.text.count("\n") == text.count("\n")
    quick = repair_dbc(text, quick=True)
    assert quick.text.count("\n") == text.count("\n")


@settings(max_examples=60, deadline=None)
@given(
    scale=st.decimals(min_value="0.001", max_value="0.999", places=3),
    offset=st.decimals(min_value="-0.999", max_value="0.999", places=3),
)
def test_a_fraction_without_its_zero_loads_as_the_same_number(scale: Any, offset: Any) -> None:
    def bare(number: Any) -> str:
        written = str(number)
        return written.replace("0.", ".", 1) if written.lstrip("-").startswith("0.") else written

    line = ' SG_ S : 0|8@1+ ({},{}) [0|255] "" TOOL\n'
    text = HEADER + "BO_ 256 M: 8 ECU\n" + line.format(bare(scale), bare(offset))
    reference: Any = cantools.database.load_string(
        HEADER + "BO_ 256 M: 8 ECU\n" + line.format(scale, offset), strict=False
    )
    repaired = repair_dbc(text)
    loaded: Any = cantools.database.load_string(repaired.text, strict=False)
    signal = loaded.messages[0].signals[0]
    expected = reference.messages[0].signals[0]
    assert (signal.scale, signal.offset) == (expected.scale, expected.offset)
