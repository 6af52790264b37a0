"""Values read the same way whether or not they have a label, and every error names the
problem once, as a sentence, with the closest names (issue 8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hwbridge import CanDriver, SendPolicy

SPEED_DBC = """VERSION ""

NS_ :

BS_:

BU_: ABS

BO_ 1280 Geschwindigkeit: 8 ABS
 SG_ Fahrzeuggeschw : 0|10@1+ (0.32,0) [0|327.04] "km/h" ABS
 SG_ Zustand : 16|2@1+ (1,0) [0|3] "" ABS

VAL_ 1280 Fahrzeuggeschw 1023 "keine_Anzeige" ;
VAL_ 1280 Zustand 0 "Aus" 1 "An" ;
"""


@pytest.fixture
def speed_driver(tmp_path: Path) -> Any:
    path = tmp_path / "speed.dbc"
    path.write_text(SPEED_DBC)
    with CanDriver.from_dbc(path, bus=None) as driver:
        yield driver


def call(driver: Any, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def test_value_is_always_physical_and_a_label_brings_its_raw_value(speed_driver: Any) -> None:
    plain = call(speed_driver, "decode_frame", id="0x500", data="2C 01 01 00 00 00 00 00")
    labelled = call(speed_driver, "decode_frame", id="0x500", data="FF 03 00 00 00 00 00 00")
    assert plain.tool_call_result["signals"] == {
        "Fahrzeuggeschw": 96.0,  # raw 300
        "Zustand": {"value": 1, "label": "An"},
    }
    assert labelled.tool_call_result["signals"]["Fahrzeuggeschw"] == {
        "value": 327.36,
        "raw": 1023,
        "label": "keine_Anzeige",
    }


def test_errors_name_the_problem_once_as_a_sentence_with_close_names() -> None:
    with CanDriver.from_dbc("dbc/demo_vehicle.dbc", bus=None) as driver:
        negative = call(driver, "decode_frame", id=-1, data="00")
        assert "id -1 is outside" in negative.retry_prompt and "0x-1" not in negative.retry_prompt
        typo = call(driver, "describe_message", message="EngineDat")
        assert "did you mean EngineData?" in typo.retry_prompt
        nothing = call(driver, "describe_message", message="Wiper")
        assert "list_messages" in nothing.retry_prompt
        unknown_id = call(driver, "decode_frame", id="0x101", data="00")
        assert "list_messages" in unknown_id.retry_prompt
        for r in (negative, typo, nothing, unknown_id):
            before_hint = r.retry_prompt.split(" Repeating the same call")[0]
            assert before_hint.endswith((".", "?")), r.retry_prompt
        short = call(driver, "decode_frame", id="0x100", data="00 01")
        assert len(short.tool_call_result["notes"]) == 1


GEAR_DBC = """VERSION ""

NS_ :

BS_:

BU_: TCM

BO_ 90 Gear_Shift: 8 TCM
 SG_ Gear_Rq : 7|5@0+ (1,0) [0|31] "" TCM

VAL_ 90 Gear_Rq 26 "Return_to_Park" 21 "Return_To_Park" 8 "Drive" 1 "Park" ;
"""


def test_labels_that_differ_only_by_case_are_each_encoded_as_spelled(tmp_path: Path) -> None:
    """opendbc's Ford database has both: "Return_to_Park" went out as 21, the other's raw
    (found by the real-database round trip under hypothesis)."""
    path = tmp_path / "gear.dbc"
    path.write_text(GEAR_DBC)
    policy = SendPolicy(allow_messages=["Gear_Shift"])
    with CanDriver.from_dbc(path, bus=f"virtual:{path.stem}-{id(path)}", policy=policy) as driver:

        def raw(label: str) -> Any:
            return call(driver, "send_message", message="Gear_Shift", signals={"Gear_Rq": label})

        assert raw("Return_to_Park").tool_call_result["data"] == "D0 00 00 00 00 00 00 00"
        assert raw("Return_To_Park").tool_call_result["data"] == "A8 00 00 00 00 00 00 00"
        assert raw("drive").tool_call_result["data"] == "40 00 00 00 00 00 00 00"  # any case
        ambiguous = raw("return_to_park")  # which one? not guessed
        assert ambiguous.call_failed and "Return_to_Park" in (ambiguous.call_detail or "")
