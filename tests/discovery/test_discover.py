"""`discover` and `hwbridge discover` on captures: a generated drive with its truth, the real
truck log, the report's JSON document, the draft DBC, and every way a capture can be bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.drives import GNSS_DBC, Drive, generate, score

from tests.discovery.frames import load_dbc_text
from tests.shared_data import DATA, needs_shared, require_shared

TRUCK = DATA / "css" / "truck_j1939_gps.MF4"
J1939 = DATA / "css" / "CSS-Electronics-SAE-J1939-DEMO.dbc"
PQ = DATA / "opendbc" / "vw_pq.dbc"


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Drive, Path, Path]:
    return make_drive(tmp_path_factory.mktemp("drive"))


def make_drive(folder: Path, seconds: float = 30.0) -> tuple[Drive, Path, Path]:
    """A VW PQ drive (XOR checksums, counters) beside a GNSS module, as BLF, and the GNSS
    module's DBC (skipped without ../shared, where vw_pq.dbc is)."""
    require_shared()
    drive = generate(PQ, seconds, car="xor", seed=5, max_messages=12)
    gnss = folder / "gnss.dbc"
    gnss.write_text(GNSS_DBC)
    return drive, drive.write(folder / "drive.blf"), gnss


def test_a_drive_is_recovered_against_its_truth(drive: tuple[Drive, Path, Path]) -> None:
    from hwbridge.can import discover

    truth, capture, gnss = drive
    report = discover([capture], reference=gnss)
    s = score(report.to_dict(), truth)
    assert s.observable >= 40
    assert s.exact / s.observable >= 0.9, s.misses
    assert s.inside / s.fields >= 0.9, s.stray
    assert s.counters and s.counters_found == s.counters
    assert s.checksums and s.checksums_found == s.checksums
    assert s.speeds and s.speeds_scaled == s.speeds  # within 2% of the truth's scale
    assert report.reference_messages == ["gnss_speed"]
    assert report.captures == ["drive.blf"]


def test_the_report_is_the_documented_json(drive: tuple[Drive, Path, Path]) -> None:
    from hwbridge.can import discover

    _, capture, gnss = drive
    report = discover(str(capture), reference=str(gnss))
    doc = json.loads(report.to_json())
    message = doc["messages"][0]
    assert set(message) == {"id", "extended", "dlc", "frames", "period_ms", "signals"}
    matched = [s for m in doc["messages"] for s in m["signals"] if s["reference"]]
    assert matched
    assert set(matched[0]) == {
        "name", "start_bit", "length", "byte_order", "signed", "kind",
        "scale", "offset", "unit", "reference", "is_float", "is_multiplexer", "multiplexer_ids",
    }  # fmt: skip
    assert set(matched[0]["reference"]) == {
        "message",
        "signal",
        "r",
        "r2",
        "verdict",
        "fitted_scale",
        "lag_s",
    }
    assert matched[0]["reference"]["verdict"] == "confirmed"
    # the GNSS module sends its speed 0.2 s late: the fit says so
    assert 0.1 <= matched[0]["reference"]["lag_s"] <= 0.3, matched[0]["reference"]
    assert matched[0]["reference"]["signal"] == "Speed" and matched[0]["unit"] == "m/s"
    kinds = {s["kind"] for m in doc["messages"] for s in m["signals"]}
    assert kinds == {"value", "flag", "counter", "checksum", "constant"}
    # the draft: plain cantools, strictly, the same names and places as the report
    db = load_dbc_text(report.to_dbc())
    for m in doc["messages"]:
        dbc_message = db.get_message_by_frame_id(m["id"])
        placed = {
            s.name: (s.start, s.length, s.byte_order, s.is_signed) for s in dbc_message.signals
        }
        assert placed == {
            s["name"]: (s["start_bit"], s["length"], s["byte_order"], s["signed"])
            for s in m["signals"]
        }
    speed = next(s for s in matched if s["unit"] == "m/s")
    comment = (
        db.get_message_by_frame_id(next(m["id"] for m in doc["messages"] if speed in m["signals"]))
        .get_signal_by_name(speed["name"])
        .comment
    )
    assert isinstance(comment, str) and "moves with gnss_speed.Speed" in comment


@needs_shared
def test_a_reference_message_is_decoded_not_rediscovered() -> None:
    """On the real truck log, EEC1 is known from the J1939 database (by PGN, whatever the
    source address): it is decoded with it, so no field of it comes back at all (not even
    in the bits its signals leave out); the ids the database does not know get fields."""
    from hwbridge.discovery.api import discover

    report = discover(TRUCK, reference=J1939)
    assert "EEC1" in report.reference_messages
    assert not [m for m in report.messages if m.extended and m.id & 0x03FFFF00 == 0x00F00400]
    assert report.messages and all(m.signals for m in report.messages if m.frames > 2)
    assert report.frames == 57_849
    assert all(m.extended or m.id < 0x800 for m in report.messages)


def test_bad_captures_are_clear_errors(tmp_path: Path) -> None:
    from hwbridge.discovery.api import discover

    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "missing.blf")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="unknown capture format"):
        discover(tmp_path / "notes.txt")
    with pytest.raises(ValueError, match="at least one capture"):
        discover([])


def test_a_truncated_capture_keeps_what_came_before(
    drive: tuple[Drive, Path, Path], tmp_path: Path
) -> None:
    from hwbridge.discovery.api import discover

    _, capture, _ = drive
    cut = tmp_path / "cut.blf"
    raw = capture.read_bytes()
    cut.write_bytes(raw[: len(raw) // 2])
    report = discover(cut)
    assert report.messages and report.frames > 0
    assert any(
        n.message == "cut.blf" and "the frames before it were used" in n.text for n in report.notes
    )
