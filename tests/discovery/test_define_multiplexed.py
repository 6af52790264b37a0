"""define_signal defines a multiplexed layout through the tool path: the multiplexer
(`is_multiplexer`) and each page's signals (`multiplexer_ids`), read back through the
session's database, drafted as cantools' `M` / `m0` and refused with a reason when the
layout cannot be one."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import can
from hwbridge import CanDriver
from tests.discovery.frames import load_dbc_text

MUX_ID = 0x321


def _frame(i: int) -> bytes:
    """Page i % 3 in bits 0-1; page 0 carries 100 + k in byte 1, page 1 200 in bytes 1-2
    (little endian), page 2 a 4-bit 9 in bits 8-11; byte 7 is 0x5A in every frame."""
    page = i % 3
    data = bytearray(8)
    data[0] = page
    if page == 0:
        data[1] = 100
    elif page == 1:
        data[1:3] = (2000).to_bytes(2, "little")
    else:
        data[1] = 9
    data[7] = 0x5A
    return bytes(data)


@pytest.fixture(scope="module")
def channel() -> Iterator[str]:
    """A multiplexed frame every 5 ms, its pages in turn."""
    name = f"define-mux-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()

    def send() -> None:
        with can.Bus(interface="virtual", channel=name) as bus:
            i = 0
            while not stop.is_set():
                bus.send(can.Message(arbitration_id=MUX_ID, data=_frame(i), is_extended_id=False))
                i += 1
                time.sleep(0.005)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    yield name
    stop.set()
    sender.join(2)


@pytest.fixture
def driver(channel: str) -> Iterator[CanDriver]:
    with CanDriver.from_bus(f"virtual:{channel}") as d:
        yield d


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def ok(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    r = call(driver, tool, **arguments)
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def refused(driver: CanDriver, **arguments: Any) -> str:
    r = call(driver, "define_signal", **arguments)
    assert r.call_failed, arguments
    detail: str = r.call_detail
    assert detail.startswith(("INVALID_VALUE:", "INVALID_ARGUMENTS")), detail
    return detail


LE = "little_endian"


def _define_layout(driver: CanDriver) -> None:
    ok(driver, "define_signal", name="Page", id=MUX_ID, start_bit=0, length=2, byte_order=LE,
       is_multiplexer=True)  # fmt: skip
    ok(driver, "define_signal", name="Temp", id=MUX_ID, start_bit=8, length=8, byte_order=LE,
       multiplexer_ids=[0], offset=-40, unit="degC")  # fmt: skip
    ok(driver, "define_signal", name="Rpm", id=MUX_ID, start_bit=8, length=16, byte_order=LE,
       multiplexer_ids=[1])  # fmt: skip
    ok(driver, "define_signal", name="Gear", id=MUX_ID, start_bit=8, length=4, byte_order=LE,
       multiplexer_ids=[2])  # fmt: skip
    ok(driver, "define_signal", name="Tail", id=MUX_ID, start_bit=56, length=8, byte_order=LE)


def test_a_multiplexed_layout_is_defined_read_and_drafted(driver: CanDriver) -> None:
    _define_layout(driver)
    # each page's signal is read from the newest frame of its own page
    values = ok(driver, "read_signals", signals=["Temp", "Rpm", "Gear", "Tail"])["values"]
    assert values["Temp"]["value"] == 60 and values["Temp"]["unit"] == "degC"
    assert values["Rpm"]["value"] == 2000
    assert values["Gear"]["value"] == 9
    assert values["Tail"]["value"] == 0x5A
    draft = ok(driver, "draft_dbc")
    assert draft["signals"] == 5
    db = load_dbc_text(draft["dbc"])
    message = db.get_message_by_frame_id(MUX_ID)
    selector = message.get_signal_by_name("Page")
    assert selector.is_multiplexer
    assert {s.name: s.multiplexer_ids for s in message.signals} == {
        "Page": None, "Temp": [0], "Rpm": [1], "Gear": [2], "Tail": None,
    }  # fmt: skip
    assert " M : 0|2@1+" in draft["dbc"] and " Rpm m1 : 8|16@1+" in draft["dbc"]
    # the draft decodes the bus's frames as the session does
    assert message.decode_simple(_frame(1)) == {"Page": 1, "Rpm": 2000, "Tail": 0x5A}
    assert message.decode_simple(_frame(3))["Temp"] == 60


def test_a_page_can_be_named_in_several_values_and_moved(driver: CanDriver) -> None:
    _define_layout(driver)
    ok(driver, "define_signal", name="Temp", id=MUX_ID, start_bit=8, length=8, byte_order=LE,
       multiplexer_ids=[0, 3])  # fmt: skip
    draft = ok(driver, "draft_dbc")["dbc"]
    message = load_dbc_text(draft).get_message_by_frame_id(MUX_ID)
    assert message.get_signal_by_name("Temp").multiplexer_ids == [0, 3]
    # the multiplexer itself may be defined again, as long as its pages still fit
    ok(driver, "define_signal", name="Page", id=MUX_ID, start_bit=0, length=3, byte_order=LE,
       is_multiplexer=True)  # fmt: skip
    assert "0|3@1+" in ok(driver, "draft_dbc")["dbc"]


def test_a_layout_that_cannot_be_is_refused_with_a_reason(driver: CanDriver) -> None:
    args = {"id": MUX_ID, "byte_order": LE}
    no_mux = refused(driver, name="Alone", start_bit=8, length=8, multiplexer_ids=[0], **args)
    assert "has no multiplexer" in no_mux and "is_multiplexer=true" in no_mux
    both = refused(driver, name="Both", start_bit=0, length=2, is_multiplexer=True,
                   multiplexer_ids=[1], **args)  # fmt: skip
    assert "not both" in both
    assert "unsigned" in refused(driver, name="Neg", start_bit=0, length=2, is_multiplexer=True,
                                 signed=True, **args)  # fmt: skip
    assert "at most 16" in refused(driver, name="Huge", start_bit=0, length=20,
                                   is_multiplexer=True, **args)  # fmt: skip
    _define_layout(driver)
    same_page = refused(driver, name="Clash", start_bit=12, length=4, multiplexer_ids=[0], **args)
    assert "overlap Temp" in same_page and "page 0" in same_page
    # bits of every frame, the multiplexer's too, are shared by no page
    assert "overlap Page" in refused(driver, name="OnMux", start_bit=1, length=3,
                                     multiplexer_ids=[1], **args)  # fmt: skip
    assert "overlap Tail" in refused(driver, name="OnTail", start_bit=56, length=4,
                                     multiplexer_ids=[1], **args)  # fmt: skip
    assert "overlap Rpm" in refused(driver, name="Plain", start_bit=16, length=4, **args)
    second = refused(driver, name="Other", start_bit=32, length=2, is_multiplexer=True, **args)
    assert "Page is already the multiplexer" in second
    unfit = refused(driver, name="Far", start_bit=40, length=4, multiplexer_ids=[4], **args)
    assert "2-bit multiplexer Page (0 to 3)" in unfit
    shrunk = refused(driver, name="Page", start_bit=0, length=1, is_multiplexer=True, **args)
    assert "do not fit" in shrunk
    demoted = refused(driver, name="Page", start_bit=0, length=2, **args)
    assert "keep it a multiplexer" in demoted
    # nothing refused changed the database
    ok(driver, "draft_dbc")
    assert {s.name for m in driver.database.messages for s in m.signals} == {
        "Page", "Temp", "Rpm", "Gear", "Tail"
    }  # fmt: skip


def test_the_schema_bounds_the_page_values(driver: CanDriver) -> None:
    tool = next(t for t in driver.list_tools() if t.name == "define_signal")
    schema = next(p.schema for p in tool.parameters if p.name == "multiplexer_ids") or {}
    assert schema["maxItems"] == 64 and schema["items"]["maximum"] == 65535
    for bad in ([], [1, 1], [-1], list(range(65)), ["a"]):
        r = call(driver, "define_signal", name="X", id=MUX_ID, start_bit=8, length=8,
                 byte_order=LE, multiplexer_ids=bad)  # fmt: skip
        assert r.call_failed and r.call_detail.startswith("INVALID_ARGUMENTS"), bad


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "C", "D"]),
            st.integers(0, 63),
            st.integers(1, 18),
            st.sampled_from([LE, "big_endian"]),
            st.booleans(),
            st.one_of(st.none(), st.lists(st.integers(0, 9), min_size=1, max_size=3)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_definitions_leave_a_layout_cantools_reads_strictly(
    steps: list[tuple[str, int, int, str, bool, list[int] | None]],
) -> None:
    """Whatever is defined, in any order, each call defines a signal or says why not, and
    the draft loads strictly; the session's database decodes any frame of the id."""
    with CanDriver.from_bus(f"virtual:define-any-{uuid.uuid4().hex[:8]}") as driver:
        for name, start, length, order, is_mux, ids in steps:
            args: dict[str, Any] = {"name": f"S{name}", "id": 0x400, "start_bit": start,
                                    "length": length, "byte_order": order}  # fmt: skip
            if is_mux:
                args["is_multiplexer"] = True
            if ids is not None:
                args["multiplexer_ids"] = sorted(set(ids))
            r = call(driver, "define_signal", **args)
            if r.call_failed:
                assert r.call_detail.split(":")[0].isupper(), r.call_detail
        draft = ok(driver, "draft_dbc")
        if not draft["signals"]:
            return
        db = load_dbc_text(draft["dbc"])
        signals = db.get_message_by_frame_id(0x400).signals
        selectors = [s for s in signals if s.is_multiplexer]
        assert len(selectors) <= 1
        if not selectors:
            assert all(s.multiplexer_ids is None for s in signals)
        message = driver.database.message_for_frame(0x400, False)
        for payload in (bytes(8), bytes(range(8)), b"\xff" * 8):
            driver.database.decode(message, payload)


def known_message(body: str) -> str:
    """A DBC of one 8-byte message `Known` at MUX_ID holding `body` (its SG_ lines and what
    follows them)."""
    return f'VERSION ""\n\nNS_ :\n\nBS_:\n\nBU_:\n\nBO_ {MUX_ID} Known: 8 Vector__XXX\n{body}'


PARTIAL_DBC = known_message(
    """ SG_ Page M : 0|2@1+ (1,0) [0|3] "" Vector__XXX
 SG_ Temp m0 : 8|8@1+ (1,-40) [-40|215] "degC" Vector__XXX
"""
)


def test_a_page_of_a_database_multiplexer_is_defined_and_drafted_with_it(
    channel: str, tmp_path: Any
) -> None:
    """A message the database already multiplexes: a new page's signal names the database's
    multiplexer's values; the draft carries that multiplexer, so it loads on its own."""
    path = tmp_path / "partial.dbc"
    path.write_text(PARTIAL_DBC)
    with CanDriver.from_dbc(path, bus=f"virtual:{channel}", discovery=True) as driver:
        ok(driver, "define_signal", name="Rpm", id=MUX_ID, start_bit=8, length=16,
           byte_order=LE, multiplexer_ids=[1])  # fmt: skip
        values = ok(driver, "read_signals", signals=["Rpm", "Temp"])["values"]
        assert (values["Rpm"]["value"], values["Temp"]["value"]) == (2000, 60)
        assert "is already the multiplexer" in refused(
            driver, name="Mine", id=MUX_ID, start_bit=32, length=2, byte_order=LE,
            is_multiplexer=True,
        )  # fmt: skip
        assert "overlap Known.Temp" in refused(
            driver, name="Clash", id=MUX_ID, start_bit=12, length=4, byte_order=LE,
            multiplexer_ids=[0],
        )  # fmt: skip
        draft = ok(driver, "draft_dbc")["dbc"]
        message = load_dbc_text(draft).get_message_by_frame_id(MUX_ID)
        assert {s.name: s.multiplexer_ids for s in message.signals} == {"Page": None, "Rpm": [1]}


def test_a_scaled_multiplexer_is_refused(driver: CanDriver) -> None:
    """cantools picks a page by its multiplexer's scaled value, multiplexer_ids name raw
    ones: a multiplexer with a scale or an offset would read each page from another's
    frames (raw 0 scaled by 2 plus 1 is page 1), so it is refused and nothing is kept."""
    args = {"id": MUX_ID, "start_bit": 0, "length": 2, "byte_order": LE, "is_multiplexer": True}
    assert "no scale or offset" in refused(driver, name="Page", scale=2.0, offset=1.0, **args)
    assert "no scale or offset" in refused(driver, name="Page", offset=1.0, **args)
    assert ok(driver, "draft_dbc")["signals"] == 0
    ok(driver, "define_signal", name="Page", scale=1.0, offset=0.0, **args)


SCALED_DBC = known_message(
    """ SG_ Page M : 0|2@1+ (2,1) [1|7] "" Vector__XXX
 SG_ Temp m1 : 8|8@1+ (1,-40) [-40|215] "degC" Vector__XXX
"""
)

EXTENDED_DBC = known_message(
    f""" SG_ Page M : 0|2@1+ (1,0) [0|3] "" Vector__XXX
 SG_ Sub m0M : 8|4@1+ (1,0) [0|15] "" Vector__XXX
 SG_ Deep m1 : 16|8@1+ (1,0) [0|255] "" Vector__XXX
 SG_ Other m1 : 16|8@1+ (1,0) [0|255] "" Vector__XXX

SG_MUL_VAL_ {MUX_ID} Deep Sub 1-1;
SG_MUL_VAL_ {MUX_ID} Other Page 1-1;
"""
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [(SCALED_DBC, "is scaled"), (EXTENDED_DBC, "several multiplexers")],
)
def test_pages_of_a_database_multiplexer_they_cannot_name_are_refused(
    channel: str, tmp_path: Any, text: str, reason: str
) -> None:
    """A database's multiplexer whose pages raw values cannot name (a scaled one), or a
    message with several (extended multiplexing, where a page's values could name either):
    a new page's signal is refused, the database unchanged."""
    path = tmp_path / "weird.dbc"
    path.write_text(text)
    with CanDriver.from_dbc(path, bus=f"virtual:{channel}", discovery=True) as driver:
        before = {s.name for m in driver.database.messages for s in m.signals}
        detail = refused(driver, name="New", id=MUX_ID, start_bit=24, length=8, byte_order=LE,
                         multiplexer_ids=[0])  # fmt: skip
        assert reason in detail
        assert {s.name for m in driver.database.messages for s in m.signals} == before
        assert ok(driver, "draft_dbc")["signals"] == 0


def test_a_frame_of_no_page_is_answered_with_a_bounded_note() -> None:
    """Pages naming thousands of multiplexer values (20 signals of 64 values each): a frame
    whose multiplexer names none of them was decoded with a note listing every one (7,500
    characters here, 87,000 with 200 such signals) in decode_frame's answer; the note now
    lists the first few and how many there are."""
    with CanDriver.from_bus(f"virtual:define-many-{uuid.uuid4().hex[:8]}") as driver:
        ok(driver, "define_signal", name="Page", id=0x10, start_bit=0, length=16, byte_order=LE,
           is_multiplexer=True)  # fmt: skip
        for k in range(20):
            ok(driver, "define_signal", name=f"S{k}", id=0x10, start_bit=16, length=8,
               byte_order=LE, multiplexer_ids=list(range(k * 128, k * 128 + 128, 2)))  # fmt: skip
        answer = ok(driver, "decode_frame", id=0x10, data="01" + "00" * 7)
        (note,) = answer["notes"]
        assert note.startswith("Page = 1 selects no signals") and "(1280 values)" in note
        assert len(json.dumps(answer)) < 1000
        page = ok(driver, "decode_frame", id=0x10, data="0201" + "00" * 6)
        assert page["signals"]["S2"] == 0 and "notes" not in page
