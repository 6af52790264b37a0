"""search_signals as people ask: synonyms, DBC abbreviations, German names, partial matches,
no noisy prefixes, bounded queries, the vocabulary as data."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.can.database.database import CanDatabase, DatabaseRepairWarning
from hwbridge.can.database.search import SignalIndex
from hwbridge.can.database.vocabulary import Vocabulary, stem
from hwbridge.core.prompts import PromptPackError
from tests.shared_data import DATA, needs_shared

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "dbc" / "demo_vehicle.dbc"
OPENDBC = DATA / "opendbc"
HEADER = 'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n\n'


_DBS: dict[str, CanDatabase] = {}
_LOCK = threading.Lock()


def load(name: str) -> CanDatabase:
    """Each opendbc file (or the demo database) once per session (some load with a repair
    warning: not tested here)."""
    with _LOCK:
        if name not in _DBS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DatabaseRepairWarning)
                _DBS[name] = CanDatabase.load(DEMO if name == DEMO.name else OPENDBC / name)
        return _DBS[name]


def top(db: CanDatabase, query: str, n: int = 5) -> list[str]:
    return [h["qualified"] for h in db.search_signals(query, limit=n)]


def dbc(tmp_path: Path, body: str) -> CanDatabase:
    path = tmp_path / "car.dbc"
    path.write_text(HEADER + body, encoding="utf-8")
    return CanDatabase.load(path)


def signals(*names: str, message: str = "Body", frame_id: int = 256) -> str:
    lines = [f"BO_ {frame_id} {message}: 8 ECU"]
    lines += [f' SG_ {n} : {i}|1@1+ (1,0) [0|1] "" ECU' for i, n in enumerate(names)]
    return "\n".join(lines) + "\n\n"


# -- the vocabulary of the field ------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "question", "expected"),
    [
        ("toyota_prius_2010_pt.dbc", "blinker", "STEERING_LEVERS.TURN_SIGNALS"),
        ("toyota_prius_2010_pt.dbc", "indicator", "STEERING_LEVERS.TURN_SIGNALS"),
        ("toyota_prius_2010_pt.dbc", "throttle", "GAS_PEDAL.GAS_PEDAL"),
        ("toyota_prius_2010_pt.dbc", "accelerator pedal", "GAS_PEDAL.GAS_PEDAL"),
        ("toyota_prius_2010_pt.dbc", "ACC set speed", "PCM_CRUISE_2.SET_SPEED"),
        ("cadillac_ct6_powertrain.dbc", "shifter", "ECMPRDNL.PRNDL"),
        ("cadillac_ct6_powertrain.dbc", "gear lever", "ECMPRDNL.PRNDL"),
        (
            "mercedes_benz_e350_2010.dbc",
            "driver belt buckle",
            "SEATBELT_SENSORS.SEATBELT_DRIVER_LATCHED",
        ),
        ("chrysler_cusw.dbc", "rear left door ajar", "DOORS.DOOR_OPEN_RL"),
        ("bmw_e9x_e8x.dbc", "gear selector", "GearSelectorSwitch.ShifterPosition"),
    ],
)
@needs_shared
def test_synonyms_find_what_the_dbc_calls_it(file: str, question: str, expected: str) -> None:
    assert expected in top(load(file), question)


@pytest.mark.parametrize(
    ("file", "question", "expected"),
    [
        ("vw_mqb.dbc", "rear right wheel speed", "ESP_19.ESP_HR_Radgeschw_02"),
        ("vw_mqb.dbc", "gear", "Getriebe_11.GE_Fahrstufe"),
        ("vw_mqb.dbc", "right turn signal", "Gateway_72.BH_Blinker_re"),
        ("vw_mqb.dbc", "driver seatbelt buckle", "Airbag_02.AB_Gurtschloss_FA"),
        ("vw_mqb.dbc", "driver door open", "Gateway_72.ZV_FT_offen"),
        ("vw_mqb.dbc", "steering wheel angle", "LWI_01.LWI_Lenkradwinkel"),
        ("vw_mqb.dbc", "driver is braking", "ESP_05.ESP_Fahrer_bremst"),
        ("vw_mqb.dbc", "accelerator pedal", "Motor_20.MO_Fahrpedalrohwert_01"),
        ("vw_mqb.dbc", "cruise set speed", "ACC_02.ACC_Wunschgeschw_02"),
        ("vw_pq.dbc", "gear selector lever", "Waehlhebel_1.Waehlhebelposition"),
        ("vw_pq.dbc", "displayed speed", "Kombi_1.Angezeigte_Geschwindigkeit"),
        ("vw_pq.dbc", "passenger door open", "BSG_Kombi.Beifahrertuer_geoeffnet"),
    ],
)
@needs_shared
def test_english_questions_find_german_names(file: str, question: str, expected: str) -> None:
    assert expected in top(load(file), question)


ABBREVIATED = signals(
    "VehSpd",
    "WhlSpd_RR",
    "StrgWhlAng",
    "DrvDrOpen",
    "PasDrOpen",
    "TurnLmpLh",
    "TurnLmpRh",
    "WiperSw",
    "BrkPdlSts",
    "AccelPdlPos",
    "TrnsShftLvrPos",
    "SbltDrvStat",
    "HeadLmpStat",
)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("vehicle speed", "VehSpd"),
        ("rear right wheel speed", "WhlSpd_RR"),
        ("steering wheel angle", "StrgWhlAng"),
        ("driver door open", "DrvDrOpen"),
        ("passenger door open", "PasDrOpen"),
        ("left turn signal", "TurnLmpLh"),
        ("right blinker", "TurnLmpRh"),
        ("wiper switch", "WiperSw"),
        ("brake pedal status", "BrkPdlSts"),
        ("accelerator pedal position", "AccelPdlPos"),
        ("transmission shift lever", "TrnsShftLvrPos"),
        ("driver seatbelt", "SbltDrvStat"),
    ],
)
def test_dbc_abbreviations_are_understood(tmp_path: Path, question: str, expected: str) -> None:
    db = dbc(tmp_path, ABBREVIATED)
    assert top(db, question, 1) == [f"Body.{expected}"]


@pytest.mark.parametrize(
    ("file", "question", "expected"),
    [
        pytest.param(DEMO.name, "front left door", "DoorStatus.DoorFrontLeft", id="demo"),
        pytest.param(
            "toyota_prius_2010_pt.dbc",
            "front left wheel speed",
            "WHEEL_SPEEDS.WHEEL_SPEED_FL",
            id="prius",
            marks=needs_shared,
        ),
    ],
)
def test_a_word_matching_nothing_never_empties_the_list(
    file: str, question: str, expected: str
) -> None:
    db = load(file)
    plain = top(db, question, 1)
    assert plain == [expected]
    for noisy in (
        f"{question} please xyzzy",
        f"what is the {question} position pressed",
        f"qwertz {question}",
    ):
        assert top(db, noisy, 1) == plain, noisy
    assert top(db, "zzzzqqq xyzzy") == []


def test_three_letter_prefixes_bring_no_noise(tmp_path: Path) -> None:
    db = dbc(
        tmp_path,
        signals("LAT_ACCEL", "SEATBELT_LATCHED", "ROAD_SIGN", "TURN_SIGNAL", "SPEED_LIMIT"),
    )
    assert "Body.LAT_ACCEL" not in top(db, "latched", 10)
    assert top(db, "latched", 1) == ["Body.SEATBELT_LATCHED"]
    assert "Body.ROAD_SIGN" not in top(db, "signal", 10)
    assert top(db, "lateral acceleration", 1) == ["Body.LAT_ACCEL"]
    assert top(db, "traffic sign", 1) == ["Body.ROAD_SIGN"]


def test_value_labels_units_and_comments_are_searched(tmp_path: Path) -> None:
    body = (
        "BO_ 256 Body: 8 ECU\n"
        ' SG_ XYZ_State : 0|2@1+ (1,0) [0|3] "" ECU\n'
        ' SG_ Obj : 8|8@1+ (1,0) [0|255] "m" ECU\n\n'
        'BO_ 300 Other: 8 ECU\n SG_ Amb : 0|8@1+ (1,0) [0|255] "degC" ECU\n\n'
        'VAL_ 256 XYZ_State 0 "Park" 1 "Reverse" 2 "Neutral" 3 "Drive" ;\n'
        'CM_ SG_ 256 Obj "Distance to the vehicle ahead.";\n'
    )
    db = dbc(tmp_path, body)
    hits = db.search_signals("reverse", limit=3)
    assert hits[0]["qualified"] == "Body.XYZ_State" and hits[0]["match"] == "labels"
    assert hits[0]["labels"] == ["Park", "Reverse", "Neutral", "Drive"]
    assert top(db, "degC", 1) == ["Other.Amb"]
    hits = db.search_signals("distance to the car in front", limit=1)
    assert hits[0]["qualified"] == "Body.Obj" and hits[0]["match"] == "comment"


def test_counters_and_checksums_rank_below_what_was_asked(tmp_path: Path) -> None:
    db = dbc(tmp_path, signals("SteerAngle_Counter", "SteerAngle_Checksum", "SteerAngle_Value"))
    assert top(db, "steer angle", 1) == ["Body.SteerAngle_Value"]
    assert top(db, "steer angle checksum", 1) == ["Body.SteerAngle_Checksum"]


# -- bounds ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "file",
    [
        pytest.param(DEMO.name, id="demo"),
        pytest.param("ford_lincoln_base_pt.dbc", id="ford", marks=needs_shared),
    ],
)
def test_a_huge_question_is_read_up_to_its_bound(file: str) -> None:
    """A 24 KB question costs what its first 64 words cost (on Ford's 2,150 signals it used to
    take seconds)."""
    db = load(file)
    words = ["vehicle", "speed", "steering", "wheel", "angle", "brake", "pedal"]
    huge = " ".join(words * 500) + " " + " ".join(f"word{i}" for i in range(2000))
    assert len(huge) > 24_000
    assert top(db, huge, 10) == top(db, " ".join((words * 9)[:64]), 10)


@pytest.mark.parametrize(
    "file",
    [
        pytest.param(DEMO.name, id="demo"),
        pytest.param("toyota_prius_2010_pt.dbc", id="prius", marks=needs_shared),
    ],
)
@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=300), limit=st.integers(min_value=-3, max_value=30))
def test_any_text_is_a_valid_question(file: str, text: str, limit: int) -> None:
    db = load(file)
    hits = db.search_signals(text, limit=limit)
    assert len(hits) <= max(limit, 0)
    assert all(isinstance(h["qualified"], str) for h in hits)


def test_the_index_is_built_once_under_many_threads() -> None:
    db = CanDatabase.load(DEMO)  # a fresh, unsearched copy
    results: list[list[str]] = []

    def work() -> None:
        results.append(top(db, "steering wheel angle"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r == results[0] for r in results)
    assert db._signal_index() is db._signal_index()


# -- the vocabulary is data -------------------------------------------------------------------


def test_a_vocabulary_of_your_own_adds_words(tmp_path: Path) -> None:
    db = dbc(tmp_path, signals("Gizmo_Level", "Other"))
    specs = db.signals("Body")
    plain = SignalIndex(specs)
    assert [s.name for s, _ in plain.search("widget")] == []
    mine = Vocabulary.from_toml({"concepts": {"widget": ["gizmo", "doohickey"]}})
    hits = SignalIndex(specs, mine).search("doohickey level")
    assert hits[0][0].name == "Gizmo_Level"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"words": {}}, "unknown tables"),
        ({"search": {"stopword": ["a"]}}, "unknown keys in [search]"),
        ({"concepts": {"x": "y"}}, "must be a list of strings"),
        ({"concepts": {"x": ["y"]}, "compounds": {"xy": ["nope"]}}, "unknown concepts"),
        ({"search": {"demote": ["nope"]}}, "unknown concepts"),
    ],
)
def test_a_broken_vocabulary_says_what_is_wrong(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(PromptPackError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        Vocabulary.from_toml(data, "mine.toml")


def test_the_packaged_vocabulary_loads_and_knows_the_issue_words() -> None:
    vocab = Vocabulary.load()
    for word, concept in [
        ("blinker", "turn_signal"),
        ("geschw", "speed"),
        ("radgeschw", "wheel"),
        ("fahrstufe", "gear"),
        ("waehlhebel", "selector"),
        ("gurtschloss", "seatbelt"),
        ("tuer", "door"),
        ("offen", "open"),
        ("lenkradwinkel", "angle"),
        ("bremst", "brake"),
        ("fahrpedal", "accelerator"),
        ("wunschgeschw", "set"),
        ("sblt", "seatbelt"),
        ("lvr", "lever"),
        ("shft", "selector"),
        ("trns", "transmission"),
    ]:
        assert concept in vocab.concepts(stem(word)), word
