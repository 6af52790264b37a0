"""The j1939_dm table: DM1/DM2 parsed with numpy exactly as parse_dm parses one message, and
written with the dataset (single-frame and multi-packet, with and without a fault)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from hwbridge.can.io.frames import FrameChunk
from hwbridge.captures import decode_captures
from hwbridge.captures.j1939_dm import DmTable, dm_mask
from hwbridge.captures.texts import capture_texts
from hwbridge.j1939.database.dm import LAMPS, parse_dm
from hwbridge.j1939.database.ids import DM1_PGN, DM2_PGN, make_id

from .conftest import FLEET_DBC, T0, write_capture

NAMES = {980: "EngineFan", 1: "FromTheDbc"}


def _code(spn: int, fmi: int, count: int, method: int = 0) -> bytes:
    if method:
        b0, b1, b2 = spn >> 11 & 0xFF, spn >> 3 & 0xFF, (spn & 7) << 5 | fmi
    else:
        b0, b1, b2 = spn & 0xFF, spn >> 8 & 0xFF, (spn >> 16) << 5 | fmi
    return bytes([b0, b1, b2, method << 7 | count])


_codes = st.one_of(
    st.binary(min_size=4, max_size=4),
    st.just(b"\xff\xff\xff\xff"),  # padding
    st.just(bytes(4)),  # no fault
    st.builds(
        _code,
        st.sampled_from([980, 3216, 609, 190, 1, 0x7FFFF, 0]),
        st.integers(0, 31),
        st.sampled_from([0, 1, 126, 127]),
        st.integers(0, 1),
    ),
)
_messages = st.lists(
    st.tuples(
        st.sampled_from([DM1_PGN, DM2_PGN]),
        st.integers(0, 255),
        st.binary(min_size=2, max_size=2),
        st.lists(_codes, max_size=12),
        st.binary(max_size=3),  # bytes short of a whole code
    ),
    min_size=1,
    max_size=12,
)


def _chunk(messages: list[tuple[int, int, bytes]]) -> FrameChunk:
    width = max(len(p) for *_, p in messages)
    data = np.zeros((len(messages), width), np.uint8)
    for i, (*_, payload) in enumerate(messages):
        data[i, : len(payload)] = np.frombuffer(payload, np.uint8)
    return FrameChunk(
        np.arange(len(messages), dtype=np.int64) * 1000,
        np.array([make_id(pgn, source) for pgn, source, _ in messages], np.uint32),
        np.ones(len(messages), np.bool_),
        np.array([len(p) for *_, p in messages], np.uint16),
        data,
    )


def _expected(pgn: int, source: int, payload: bytes) -> list[dict[str, Any]]:
    dm = parse_dm(payload, NAMES.get)
    head: dict[str, Any] = {"source_address": source, "message": "DM1" if pgn == DM1_PGN else "DM2"}
    head.update(dm.lamps.model_dump())
    head.update({f"{lamp}_flash": dm.flashing.get(lamp) for lamp in LAMPS})
    none = dict.fromkeys(
        ("spn", "fmi", "occurrence_count", "conversion_method", "spn_name", "fmi_text")
    )
    if not dm.dtcs:
        return [head | none]
    return [head | d.model_dump() for d in dm.dtcs]


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_rows_are_parse_dm_of_each_message(generated: list[Any]) -> None:
    messages = [
        (pgn, source, lamps + b"".join(codes) + tail)
        for pgn, source, lamps, codes, tail in generated
        if len(lamps + b"".join(codes) + tail) >= 6
    ]
    if not messages:
        return
    chunk = _chunk(messages)
    assert bool(dm_mask(chunk).all())
    rows = DmTable(NAMES).batch(chunk).to_pylist()
    expected = [row for m in messages for row in _expected(*m)]
    assert [{k: v for k, v in r.items() if k != "timestamp"} for r in rows] == expected


def test_the_table_has_a_comment_for_every_column_and_says_what_it_holds() -> None:
    texts = capture_texts().tables["j1939_dm"]
    schema = DmTable().schema
    assert [f.name for f in schema][1:] == list(texts.columns)
    assert all(f.metadata and f.metadata[b"comment"] for f in list(schema)[1:])
    assert schema.metadata[b"hwbridge.about"].decode() == texts.about.strip()


def _dm_frame(t: float, source: int, payload: bytes, pgn: int = DM1_PGN) -> can.Message:
    return can.Message(timestamp=t, arbitration_id=make_id(pgn, source), data=payload)


def test_single_frame_dm1_and_dm2_with_and_without_a_fault(tmp_path: Path) -> None:
    """A capture without a J1939 database: --j1939 turns it on, and a DM1 with no fault is
    one row whose SPN is NULL."""
    no_fault = bytes([0x00, 0xFF, 0, 0, 0, 0, 0xFF, 0xFF])
    amber = bytes([0x04, 0xFF]) + _code(110, 0, 3) + b"\xff\xff"  # amber warning on
    flashing = bytes([0x40, 0x7F]) + _code(3216, 20, 2)  # MIL on, flashing fast (01)
    frames = [
        _dm_frame(T0, 0x00, no_fault),
        _dm_frame(T0 + 1, 0x00, amber),
        _dm_frame(T0 + 1.5, 0x03, flashing, DM2_PGN),
        _dm_frame(T0 + 2, 0x00, no_fault),
        _dm_frame(T0 + 3, 0x00, bytes([0, 0xFF, 1])),  # too short for a code: no row
    ]
    capture = write_capture(tmp_path / "dm.blf", frames)
    dbc = tmp_path / "fleet.dbc"
    dbc.write_text(FLEET_DBC)  # a J1939 database (EEC1): on by default
    summary = decode_captures([capture], [dbc], tmp_path / "ds")
    assert summary.rows["j1939_dm"] == 4
    assert summary.files[0].j1939_dm_messages == 4
    table = pq.read_table(tmp_path / "ds" / "j1939_dm").to_pylist()
    picked = [
        (r["message"], r["source_address"], r["mil"], r["amber_warning"], r["mil_flash"], r["spn"])
        for r in table
    ]
    assert picked == [
        ("DM1", 0, "off", "off", None, None),
        ("DM1", 0, "off", "on", None, 110),
        ("DM2", 3, "on", "off", "fast", 3216),
        ("DM1", 0, "off", "off", None, None),
    ]
    assert table[1]["occurrence_count"] == 3 and table[1]["fmi_text"]


def test_off_by_default_without_a_j1939_database(tmp_path: Path) -> None:
    capture = write_capture(tmp_path / "dm.blf", [_dm_frame(T0, 0x00, bytes(8))])
    dbc = tmp_path / "car.dbc"
    dbc.write_text(
        'VERSION ""\n\nBS_:\n\nBU_: ECU\n\nBO_ 256 Engine: 8 ECU\n SG_ A : 0|8@1+ (1,0) [0|255] "" ECU\n'
    )
    summary = decode_captures([capture], [dbc], tmp_path / "ds")
    assert "j1939_dm" not in summary.rows and summary.files[0].j1939_tp_frames == 0
    summary = decode_captures([capture], [dbc], tmp_path / "ds", j1939=True)
    assert summary.rows["j1939_dm"] == 1


def test_a_database_message_named_j1939_dm_keeps_the_name_free(tmp_path: Path) -> None:
    dbc = tmp_path / "odd.dbc"
    dbc.write_text(
        'VERSION ""\n\nBS_:\n\nBU_: ECU\n\nBO_ 256 j1939_dm: 8 ECU\n SG_ A : 0|8@1+ (1,0) [0|255] "" ECU\n'
    )
    frames = [
        can.Message(timestamp=T0, arbitration_id=0x100, is_extended_id=False, data=bytes(8)),
        _dm_frame(T0, 0x00, bytes(8)),
    ]
    capture = write_capture(tmp_path / "odd.blf", frames)
    summary = decode_captures([capture], [dbc], tmp_path / "ds", j1939=True)
    assert summary.rows == {"j1939_dm": 1, "j1939_dm__odd": 1}
