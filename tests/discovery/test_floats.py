"""Float signals: IEEE 754 float32 fields (either byte order) and float64 fields of CAN FD
frames are found as floats, written to the draft as float signals that cantools reads back
strictly, and integers that merely look like floats are left integers.

Payloads are packed by numpy from quantities the tests choose; the float drives of
`benchmarks/drives_mux.py` when ../shared is there.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import cantools
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.discovery.analysis.floats import FloatWindow, decode_float
from hwbridge.discovery.analysis.multiplex import analyse_layouts
from hwbridge.discovery.analysis.reference import Reference
from hwbridge.discovery.analysis.survey import analyse_frames, build_report
from hwbridge.discovery.bits import ByteOrder, bit_matrix, cantools_chain, float_values
from tests.discovery.frames import counter, frameset, load_dbc_text, walk
from tests.shared_data import DATA, needs_shared

N = 3000
T = np.arange(N) * 0.02


def _pack(x: np.ndarray, kind: str) -> np.ndarray:
    """Rows of the bytes of `x` as `kind` ('<f4', '>f8'...)."""
    out: np.ndarray = np.ascontiguousarray(x.astype(kind)).view(np.uint8).reshape(len(x), -1)
    return out


def _speed() -> np.ndarray:
    """km/h: stops (exactly zero), pulls away, cruises, with sensor noise."""
    rng = np.random.default_rng(1)
    x = 60 * np.clip(np.sin(T / 9.0) * 1.4, 0, None) + rng.normal(0, 0.03, N)
    return np.where(x > 0.05, x, 0.0)


def _acceleration() -> np.ndarray:
    """m/s², both signs, noisy around zero."""
    rng = np.random.default_rng(2)
    out: np.ndarray = 2.5 * np.sin(T / 5.0) + rng.normal(0, 0.02, N)
    return out


def _floats_frames() -> np.ndarray:
    data = np.zeros((N, 8), np.uint8)
    data[:, 0:4] = _pack(_speed().astype(np.float32), "<f4")
    data[:, 4:8] = _pack(_acceleration().astype(np.float32), ">f4")
    return data


def _fields(data: np.ndarray, key: tuple[int, bool] = (0x123, False)) -> list:
    return analyse_layouts(frameset(data, key=key))


def test_float32_fields_of_either_order_are_floats() -> None:
    fields = {f.bits: f for f in _fields(_floats_frames())}
    little = FloatWindow(0, 4, "little_endian").bits
    big = FloatWindow(4, 4, "big_endian").bits
    assert fields[little].is_float and fields[little].kind == "value"
    assert fields[big].is_float and fields[big].byte_order == "big_endian"
    assert fields[big].start_bit == 39  # cantools' start bit: the MSB, in byte 4
    assert len(fields) == 2  # nothing else was found in them


def test_float64_in_a_can_fd_frame() -> None:
    rng = np.random.default_rng(3)
    data = np.zeros((N, 24), np.uint8)
    data[:, 8:16] = _pack(_acceleration(), "<f8")
    data[:, 20] = counter(N, 4)
    data[:, 21] = walk(rng, N, 0, 255, 1.0)
    fields = {f.bits: f for f in _fields(data)}
    window = FloatWindow(8, 8, "little_endian").bits
    assert fields[window].is_float and fields[window].length == 64
    assert fields[tuple(range(160, 164))].kind == "counter"


def test_the_report_and_the_draft_say_float_and_round_trip() -> None:
    data = _floats_frames()
    found, _ = analyse_frames({(0x123, False): frameset(data)}, Reference(()))
    report = build_report(found, Reference(()))
    doc = json.loads(report.to_json())
    floats = [s for s in doc["messages"][0]["signals"] if s["is_float"]]
    assert [(s["start_bit"], s["length"], s["kind"]) for s in floats] == [
        (0, 32, "value"),
        (39, 32, "value"),
    ]
    text = report.to_dbc()
    assert "SIG_VALTYPE_ 291 SIG_123_0 : 1;" in text
    message = load_dbc_text(text).get_message_by_frame_id(0x123)
    assert all(s.is_float for s in message.signals)
    row = 777
    decoded = message.decode_simple(bytes(data[row]))
    assert decoded["SIG_123_0"] == np.float32(_speed()[row])
    assert decoded["SIG_123_39"] == np.float32(_acceleration()[row])


def test_integers_that_look_like_floats_stay_integers() -> None:
    """Two 16-bit values side by side, the upper one with an offset that puts its top bits
    where a float's exponent would be, and a clock: integers with a scale read them."""
    rng = np.random.default_rng(4)
    data = np.zeros((N, 8), np.uint8)
    upper = walk(rng, N, 15500, 18500, 20)  # 0x3C8C..0x4844: "exponents" of 2**-6..2**17
    lower = walk(rng, N, 0, 65535, 900)
    data[:, 0:2] = _pack(lower.astype(np.uint16), "<u2")
    data[:, 2:4] = _pack(upper.astype(np.uint16), "<u2")
    clock = (1_090_000_000 + np.arange(N) * 20).astype(np.uint32)  # ms, near 0x41000000
    data[:, 4:8] = _pack(clock, "<u4")
    fields = _fields(data)
    assert not any(f.is_float for f in fields)


def test_a_float_that_stays_between_two_powers_of_two_is_an_integer() -> None:
    """48.1...48.2 degrees: nothing but the mantissa moves; an integer reading with a scale
    decodes it exactly as well, so no float is claimed."""
    latitude = 48.137 + 0.05 * np.sin(T / 13.0)
    data = np.zeros((N, 8), np.uint8)
    data[:, 0:4] = _pack(latitude.astype(np.float32), "<f4")
    assert not any(f.is_float for f in _fields(data))


@settings(max_examples=80, deadline=None)
@given(
    numbers=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=8
    ),
    first=st.integers(0, 4),
    big=st.booleans(),
    wide=st.booleans(),
)
def test_float_values_read_what_struct_packs(
    numbers: list[float], first: int, big: bool, wide: bool
) -> None:
    width = 8 if wide else 4
    order: ByteOrder = "big_endian" if big else "little_endian"
    fmt = (">" if big else "<") + ("d" if wide else "f")
    data = np.zeros((len(numbers), first + width + 2), np.uint8)
    for row, x in enumerate(numbers):
        data[row, first : first + width] = np.frombuffer(struct.pack(fmt, x), np.uint8)
    want = np.asarray([struct.unpack(fmt, struct.pack(fmt, x))[0] for x in numbers], np.float64)
    window = FloatWindow(first, width, order)
    assert np.array_equal(decode_float(data, first, width, order), want)
    assert np.array_equal(float_values(bit_matrix(data), window.bits), want)
    # the window's bits are the chain cantools reads from its start bit
    start = window.bits[0] if order == "little_endian" else window.bits[-1]
    assert cantools_chain(start, width * 8, order) == window.bits


@needs_shared
def test_the_generated_float_drives_are_found(tmp_path: Path) -> None:
    from benchmarks.drives_mux import generate_layouts, score_layouts

    from hwbridge.can import discover

    drive = generate_layouts(DATA / "opendbc" / "vw_mqb.dbc", 30.0, car="vw_mqb", plain_messages=4)
    report = discover([drive.write(tmp_path / "drive.blf")])
    s = score_layouts(report.to_dict(), drive)
    assert s.floats and s.floats_found == s.floats, s.misses
    assert s.false_floats == 0, s.misses
    cantools.database.load_string(report.to_dbc(), strict=True)


@needs_shared
def test_the_truck_log_has_no_float_and_multiplexes_only_its_transport_frames() -> None:
    """The real J1939 truck and GNSS log: its signals are integers. Its only multiplexed
    ids are J1939's transport protocol: in TP.DT (PGN 0xEB00) byte 0, the packet's sequence
    number, selects which seven bytes of the transported message a frame carries; in TP.CM
    (PGN 0xEC00) the announcements of two transported messages alternate, all their fields
    changing together."""
    from hwbridge.can import discover

    report = discover([DATA / "css" / "truck_j1939_gps.MF4"])
    assert not any(s.is_float for m in report.messages for s in m.signals)
    paged = {
        (m.id >> 8) & 0xFF00: [s for s in m.signals if s.is_multiplexer]
        for m in report.messages
        if any(s.is_multiplexer or s.multiplexer_ids is not None for s in m.signals)
    }
    assert set(paged) <= {0xEB00, 0xEC00}
    sequence = paged[0xEB00][0]
    assert sequence.start_bit == 0 and sequence.length <= 8


@pytest.mark.slow
def test_the_live_tools_show_floats_and_multiplexers_and_define_a_float() -> None:
    """survey_bus on a live bus says which field is a float and which frame multiplexed;
    define_signal takes is_float, and reads and drafts it as a float."""
    import threading
    import uuid

    import can
    from hwbridge import CanDriver
    from tests.discovery.test_multiplex import _mux_frames

    channel = f"floats-{uuid.uuid4().hex[:8]}"
    paged = _mux_frames()
    floats = np.zeros((N, 8), np.uint8)  # a frame every 4 ms: quantities that move faster
    t = np.arange(N) * 0.004
    rng = np.random.default_rng(7)
    speed = np.clip(40 * np.sin(t / 0.5), 0, None) + rng.normal(0, 0.02, N)
    speed = np.where(speed > 0.05, speed, 0.0)  # standing still: exactly zero
    floats[:, 0:4] = _pack(speed.astype(np.float32), "<f4")
    floats[:, 4:8] = _pack((2.5 * np.sin(t / 0.3) + rng.normal(0, 0.02, N)), ">f4")
    stop = threading.Event()

    def send() -> None:
        with can.Bus(interface="virtual", channel=channel) as bus:
            i = 0
            while not stop.is_set():
                k = i % N
                bus.send(
                    can.Message(arbitration_id=0x123, data=bytes(floats[k]), is_extended_id=False)
                )
                bus.send(
                    can.Message(arbitration_id=0x321, data=bytes(paged[k]), is_extended_id=False)
                )
                i += 1
                stop.wait(0.004)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        with CanDriver.from_bus(f"virtual:{channel}") as driver:
            survey = _call(driver, "survey_bus", duration_ms=2500)
            by_id = {m["id"]: m["signals"] for m in survey["messages"]}
            assert [s["start_bit"] for s in by_id[0x123] if s.get("is_float")] == [0, 39]
            assert [s["start_bit"] for s in by_id[0x321] if s.get("is_multiplexer")] == [0]
            assert any(s.get("multiplexer_ids") == [2] for s in by_id[0x321])
            assert all("is_float" not in s for s in by_id[0x321])  # said only where true
            defined = _call(driver, "define_signal", name="Accel", id=0x123, start_bit=39,
                            length=32, byte_order="big_endian", is_float=True)  # fmt: skip
            assert isinstance(defined["value"], float) and abs(defined["value"]) < 3
            draft = _call(driver, "draft_dbc")["dbc"]
            assert "SIG_VALTYPE_ 291 Accel : 1;" in draft
            cantools.database.load_string(draft, strict=True)
    finally:
        stop.set()
        sender.join(timeout=5)


def _call(driver: object, tool: str, **arguments: object) -> dict:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))  # type: ignore[attr-defined]
    assert r.call_executed and not r.call_failed, r.call_detail
    result: dict = r.tool_call_result
    return result


def test_a_float_takes_the_meaning_of_the_reference_it_moves_with(tmp_path: Path) -> None:
    """A float speed in km/h beside a GNSS speed in m/s: correlated as the float it is,
    scaled by 1/3.6 and confirmed; the evidence draws it as a float."""
    import can
    from hwbridge.can import discover

    gnss = cantools.database.load_string(
        'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_: GNSS\n\nBO_ 2021 gnss_speed: 5 GNSS\n'
        ' SG_ Speed : 1|20@1+ (0.001,0) [0|1048.575] "m/s" GNSS\n'
        ' SG_ SpeedValid : 0|1@1+ (1,0) [0|1] "" GNSS\n'
    )
    message = gnss.get_message_by_name("gnss_speed")  # type: ignore[union-attr]
    reference = tmp_path / "gnss.dbc"
    reference.write_text(gnss.as_dbc_string())  # type: ignore[union-attr]
    speed = _speed()
    capture = tmp_path / "drive.blf"
    with can.Logger(str(capture)) as log:
        for i in range(N):
            frame = np.zeros(8, np.uint8)
            frame[0:4] = _pack(np.asarray([speed[i]], np.float32), "<f4")[0]
            frame[4] = i % 16
            log.on_message_received(can.Message(timestamp=T[i], arbitration_id=0x123,
                                                data=bytes(frame), is_extended_id=False))  # fmt: skip
            if i % 5 == 0:
                data = message.encode({"Speed": speed[i] / 3.6, "SpeedValid": 1})
                log.on_message_received(can.Message(timestamp=T[i] + 0.001, arbitration_id=2021,
                                                    data=data, is_extended_id=False))  # fmt: skip
    report = discover([capture], reference=reference, evidence=True)
    field = next(s for m in report.messages if m.id == 0x123 for s in m.signals if s.is_float)
    assert field.reference is not None and field.reference.signal == "Speed"
    assert field.reference.verdict == "confirmed"
    assert abs(field.scale * 3.6 - 1) < 0.01 and field.unit == "m/s"
    plot = report.evidence.messages[(0x123, False)].plots[field.name]
    assert max(plot.field_v) == pytest.approx(float(np.float32(speed.max())) / 3.6, rel=0.02)
