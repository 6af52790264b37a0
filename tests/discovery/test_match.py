"""The database that fits: a capture matched against known databases (`discover(...,
match_known=True)`, `match_databases`), on drives generated from real opendbc files and on
the real truck log; broken and hostile databases are skipped with a note."""

from __future__ import annotations

import re
from pathlib import Path

import cantools
import pytest
from benchmarks.drives import Drive, generate
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.can import discover
from hwbridge.discovery.analysis.known import (
    MAX_DATABASE_BYTES,
    KnownDatabase,
    SkippedDatabase,
    index_of,
    known_databases,
)
from hwbridge.discovery.analysis.match import match_databases
from hwbridge.discovery.frames import Collector, FrameKey, FrameSet
from tests.shared_data import DATA, needs_shared

OPENDBC = DATA / "opendbc"
CSS = DATA / "css"
TRUCK = CSS / "truck_j1939_gps.MF4"
# several real files, of three makes, two of them sharing most of their ids (MQB, MQB Evo)
FILES = [
    "vw_mqb.dbc",
    "vw_mqbevo.dbc",
    "vw_pq.dbc",
    "toyota_prius_2010_pt.dbc",
    "toyota_tss2_adas.dbc",
    "acura_ilx_2016_nidec.dbc",
    "tesla_can.dbc",
]


def framesets(drive: Drive) -> tuple[dict[FrameKey, FrameSet], int]:
    collector = Collector()
    collector.add(drive.t, drive.ids, drive.extended, drive.length, drive.data)
    return collector.framesets(), collector.frames


@pytest.mark.slow
@needs_shared
@pytest.mark.parametrize(
    ("truth", "car"),
    [("vw_mqbevo.dbc", "vw_mqb"), ("toyota_prius_2010_pt.dbc", "toyota"), ("tesla_can.dbc", None)],
)
def test_the_right_database_is_first_among_real_opendbc_files(truth: str, car: str | None) -> None:
    """A drive generated from one file: that file ranks first, is decoded with, and its
    checks pass; its sibling sharing most ids (MQB for MQB Evo) ranks below it."""
    fss, frames = framesets(generate(OPENDBC / truth, 8.0, car=car, seed=5, max_messages=24))
    candidates, notes = known_databases([OPENDBC / f for f in FILES], opendbc=False)
    assert len(candidates) == len(FILES) and not notes
    result = match_databases(fss, candidates, total_frames=frames)
    best = result.matches[0]
    assert best.database == truth, [m.database for m in result.matches]
    assert result.decoded_with == [truth]
    assert best.checked and best.ids == len(fss) - 1  # every id but the GNSS module's
    assert best.ids_explained == pytest.approx((len(fss) - 1) / len(fss), abs=1e-4)
    assert 0.9 < best.frames_explained < 1.0
    assert best.chance < 1e-6 and best.checks.length_ok == 1.0
    assert best.checks.bits_covered == 1.0 and best.checks.values_in_range == 1.0
    if car is not None:
        assert best.checks.counters_ok == 1.0 and best.checks.checksums_ok == 1.0
    scores = [m.score for m in result.matches if m.checked]
    assert scores == sorted(scores, reverse=True)
    assert all(m.score < best.score for m in result.matches[1:])
    [adopted] = result.adopted  # only the messages of the ids that fit
    assert {(int(m.frame_id), bool(m.is_extended_frame)) for m in adopted.messages} <= set(fss)


@pytest.mark.slow
@needs_shared
def test_discover_decodes_with_the_best_match_instead_of_rediscovering_it(tmp_path: Path) -> None:
    capture = generate(OPENDBC / "vw_mqb.dbc", 8.0, car="vw_mqb", seed=2, max_messages=16).write(
        tmp_path / "mqb.blf"
    )
    report = discover(capture, match_known=True, known=[OPENDBC / f for f in FILES])
    best = report.matches[0]
    assert best.database in ("vw_mqb.dbc", "vw_mqb")  # opendbc's own copy when installed
    assert report.decoded_with == [best.database]
    assert len(report.reference_messages) == best.ids
    # what the match explains is decoded, not rediscovered: only the GNSS module is left
    assert [(m.id, m.extended) for m in report.messages] == [(0x7E5, False)]
    draft = cantools.database.load_string(report.to_dbc(), strict=True)
    assert isinstance(draft, cantools.database.can.Database)
    assert [m.frame_id for m in draft.messages] == [0x7E5]
    document = report.to_dict()
    assert set(document["matches"][0]) >= {"database", "ids_explained", "frames_explained"}
    assert set(document["matches"][0]["checks"]) >= {"length_ok", "rate_ok", "counters_ok",
                                                     "checksums_ok", "values_in_range"}  # fmt: skip
    assert document["decoded_with"] == [best.database]


@needs_shared
def test_the_truck_log_ranks_its_j1939_database_first() -> None:
    """Against the J1939 databases of ../shared, CSS Electronics' demo DBC (EEC1 and CCVS1,
    matched by PGN) explains the truck; it explains too little of the bus to decode with."""
    j1939 = [
        CSS / "CSS-Electronics-SAE-J1939-DEMO.dbc",
        DATA / "cantools" / "j1939.dbc",
        DATA / "cantools" / "vehicle.dbc",
        CSS / "OBD-v4.4.dbc",
        CSS / "tp_uds.dbc",
    ]
    candidates, _ = known_databases(j1939, opendbc=False)
    collector = Collector()
    from hwbridge.can.io.readers import open_capture

    reader = open_capture(TRUCK)
    for chunk in reader.chunks():
        collector.add(
            chunk.timestamp_us / 1e6, chunk.arbitration_id, chunk.extended, chunk.length, chunk.data
        )
    reader.close()
    result = match_databases(collector.framesets(), candidates, total_frames=collector.frames)
    best = result.matches[0]
    assert best.database == "CSS-Electronics-SAE-J1939-DEMO.dbc"
    assert best.ids == 2 and best.checked and best.checks.values_in_range == 1.0
    assert all(m.ids < best.ids for m in result.matches[1:])
    assert result.decoded_with == []
    assert any("was not decoded with" in n and "4%" in n for n in result.notes)


def _small_database() -> str:
    """Six messages of one layout (a speed, a counter, a temperature), as DBC text."""
    messages = "".join(
        f"""
BO_ {0x100 + 0x50 * i} M{i}: 8 ECU
 SG_ Speed{i} : 0|16@1+ (0.01,0) [0|300] "km/h" Vector__XXX
 SG_ COUNTER{i} : 16|4@1+ (1,0) [0|15] "" Vector__XXX
 SG_ Temp{i} : 24|8@1+ (1,-40) [-40|150] "degC" Vector__XXX
"""
        for i in range(6)
    )
    return f'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: ECU\n{messages}'


def test_a_database_that_does_not_load_is_skipped_with_a_note(tmp_path: Path) -> None:
    """The right database still wins; one that fails to parse, an empty one, a template that
    only imports others and one too large are each skipped with a note, never a crash."""
    good = tmp_path / "good.dbc"
    good.write_text(_small_database())
    text = good.read_text()
    (tmp_path / "broken.dbc").write_text(text.replace(" SG_ Temp3 :", " SG_ Temp3 ::: ("))
    (tmp_path / "empty.dbc").write_text("")
    (tmp_path / "template.dbc").write_text('CM_ "IMPORT _common.dbc";\n')
    huge = tmp_path / "huge.dbc"
    huge.write_text(text + "\n" + 'CM_ "' + "x" * MAX_DATABASE_BYTES + '";\n')
    capture = generate(good, 6.0, seed=1).write(tmp_path / "small.blf")
    report = discover(capture, match_known=True, known=[tmp_path])
    assert report.matches[0].database == "good.dbc"
    assert report.decoded_with == ["good.dbc"]
    said = " ".join(n.text for n in report.notes)
    assert "broken.dbc does not load" in said
    assert "empty.dbc defines no message" in said
    assert "template.dbc defines no message" in said
    assert "huge.dbc is 4.2 MB, above the 4.2 MB" in said
    listed = {m.database for m in report.matches}
    assert not listed & {"broken.dbc", "empty.dbc", "template.dbc", "huge.dbc"}


def test_databases_without_match_known_or_missing_are_refused(tmp_path: Path) -> None:
    capture = generate_small(tmp_path)
    with pytest.raises(ValueError, match="only with match_known=True"):
        discover(capture, known=[tmp_path])
    with pytest.raises(FileNotFoundError, match="no such database file or folder"):
        discover(capture, match_known=True, known=[tmp_path / "missing.dbc"])


def generate_small(folder: Path) -> Path:
    dbc = folder / "small.dbc"
    dbc.write_text(_small_database())
    return generate(dbc, 3.0, seed=1).write(folder / "small.blf")


def test_a_copy_of_a_database_is_matched_once(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    text = _small_database()
    (tmp_path / "a" / "one.dbc").write_text(text)
    (tmp_path / "b" / "two.dbc").write_text(text)
    found, notes = known_databases([tmp_path / "a", tmp_path / "b"], opendbc=False)
    assert [k.name for k in found] == ["one.dbc"]
    assert notes == [f"{tmp_path / 'b' / 'two.dbc'} is the same as one.dbc, matched once"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=60),
            st.builds(
                lambda i, n, extra: f"BO_ {i} M_{i}: {n} X{extra}",
                st.integers(0, 2**32),
                st.integers(0, 99),
                st.text(max_size=10),
            ),
            st.builds(
                lambda i, c: f'BA_ "GenMsgCycleTime" BO_ {i} {c};',
                st.integers(0, 2**32),
                st.integers(0, 10**6),
            ),
        ),
        max_size=30,
    )
)
def test_any_text_is_indexed_or_refused_in_a_sentence(lines: list[str]) -> None:
    """The cheap table reads any text: an index of every BO_ line, or SkippedDatabase."""
    text = "\n".join(lines)
    known = KnownDatabase("x", "test", text=text)
    ids = re.findall(r"^[ \t]*BO_[ \t]+(\d+)[ \t]+\w+[ \t]*:[ \t]*\d+", text, re.M)
    if all(int(i) == 0xC0000000 for i in ids):  # none, or only cantools' VECTOR__INDEPENDENT
        with pytest.raises(SkippedDatabase, match="defines no message"):
            index_of(known)
        return
    index = index_of(known)
    assert index.messages >= 1 and index.by_key
    for key, (length, cycle) in index.by_key.items():
        assert 0 <= key < 2**32 and length >= 0 and cycle >= 0
