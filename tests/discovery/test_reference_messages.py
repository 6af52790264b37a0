"""With a reference database, the messages it describes are decoded with it, never
rediscovered: not in the report, not in the draft DBC, not by the live tools, not even the
bits its signals leave out (a navigation module whose DBC describes part of its frame)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import can
from hwbridge import CanDriver
from hwbridge.discovery.api import discover
from tests.discovery.frames import load_dbc_text

NAV_ID, CAR_ID = 0x6F1, 0x2A0
NAV_DBC = f"""VERSION ""

NS_ :

BS_:

BU_: NAV

BO_ {NAV_ID} NAV_Motion: 8 NAV
 SG_ VehSpd : 7|16@0+ (0.01,0) [0|655.35] "km/h" NAV
 SG_ Sats : 39|6@0+ (1,0) [0|63] "" NAV

"""
"""Bytes 0-1 and six bits of byte 4 described; byte 2 moves and byte 6 is 0xA5, undescribed."""


def _frames(seconds: float = 6.0) -> list[tuple[float, int, bytes]]:
    """The navigation module at 10 Hz and a car's speed at 50 Hz, moving together."""
    rng = np.random.default_rng(3)
    out: list[tuple[float, int, bytes]] = []
    for i, t in enumerate(np.arange(0.0, seconds, 0.02)):
        kmh = 40 + 30 * np.sin(t / 2)
        car = int(kmh / 0.05)
        out.append((float(t), CAR_ID, bytes([car & 0xFF, car >> 8, 0, 0, 0, 0, 0, i % 7])))
        if i % 5 == 0:
            nav = int(kmh / 0.01)
            heading = int(rng.integers(0, 256))  # undescribed, but moving
            payload = bytes([nav >> 8, nav & 0xFF, heading, 0, 12 << 2, 0, 0xA5, 0])
            out.append((float(t) + 0.001, NAV_ID, payload))
    return out


def _capture(folder: Path) -> Path:
    path = folder / "nav.blf"
    with can.Logger(str(path)) as log:
        for t, aid, data in _frames():
            log.on_message_received(
                can.Message(timestamp=t, arbitration_id=aid, data=data, is_extended_id=False)
            )
    return path


def test_the_report_and_the_draft_leave_the_reference_message_alone(tmp_path: Path) -> None:
    reference = tmp_path / "nav.dbc"
    reference.write_text(NAV_DBC)
    report = discover(_capture(tmp_path), reference=reference)
    assert report.reference_messages == ["NAV_Motion"]
    assert [m.id for m in report.messages] == [CAR_ID]  # no NAV_Motion, no CONST_6F1_...
    draft = load_dbc_text(report.to_dbc())
    assert [int(m.frame_id) for m in draft.messages] == [CAR_ID]
    assert not any(m["id"] == NAV_ID for m in json.loads(report.to_json())["messages"])
    # and it is still decoded: the car's speed field is matched to the reference's
    speed = next(s for s in report.messages[0].signals if s.reference is not None)
    assert speed.reference is not None and speed.reference.signal == "VehSpd"


@pytest.fixture
def bus_with_nav() -> Iterator[str]:
    channel = f"nav-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    frames = _frames(60.0)

    def play() -> None:
        with can.Bus(interface="virtual", channel=channel) as bus:
            start = time.monotonic()
            for t, aid, data in frames:
                if stop.is_set():
                    return
                wait = start + t - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                bus.send(can.Message(arbitration_id=aid, data=data, is_extended_id=False))

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    try:
        yield channel
    finally:
        stop.set()
        thread.join(timeout=5)


def _call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def test_the_live_tools_leave_the_reference_message_alone(
    bus_with_nav: str, tmp_path: Path
) -> None:
    reference = tmp_path / "nav.dbc"
    reference.write_text(NAV_DBC)
    with CanDriver.from_bus(f"virtual:{bus_with_nav}", reference=reference) as driver:
        _call(driver, "snapshot_bus", name="a", duration_ms=600)
        survey = _call(driver, "survey_bus", duration_ms=1200)
        _call(driver, "snapshot_bus", name="b", duration_ms=600)
        assert "NAV_Motion" in survey["known_messages"]
        assert [m["id"] for m in survey["messages"]] == [CAR_ID]
        diff = _call(driver, "diff_snapshots", a="a", b="b")
        assert not [c for c in diff["changes"] if c["id"] == NAV_ID]
        # a signal defined on an id of its own leaves the rest of that id to be found
        _call(
            driver,
            "define_signal",
            name="Speed",
            id=CAR_ID,
            start_bit=0,
            length=16,
            byte_order="little_endian",
        )
        again = _call(driver, "survey_bus", duration_ms=1000)
        fields = [f for m in again["messages"] if m["id"] == CAR_ID for f in m["signals"]]
        assert fields and all(f["start_bit"] >= 56 for f in fields), fields
