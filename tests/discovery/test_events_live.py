"""`mark_event` and `rank_events` on a live bus: a small sender on a python-can virtual bus
whose brake switch the test presses, the moments marked as a person would (a little late),
the switch ranked first; marks made while `survey_bus` records are ranked in its answer."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import can
from hwbridge import CanDriver
from hwbridge.discovery.live.tools import DiscoveryTools

BRAKE_ID, BRAKE_BIT = 0x300, 16


class Sender:
    """0x300 every 20 ms: a 4-bit counter (bits 0-3), noise (byte 1), the brake switch (bit
    16); 0x301 every 100 ms: a value that wanders slowly. (A counter's top bit or a value's
    that flips every couple of seconds can meet two marks by chance: the bench and the
    generated drives measure the ranking; this is about the live tools.)"""

    def __init__(self, channel: str) -> None:
        self.bus = can.Bus(interface="virtual", channel=channel)
        self.brake = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rng = np.random.default_rng(0)
        n = 0
        while not self._stop.wait(0.02):
            n += 1
            data = bytes([n % 16, int(rng.integers(0, 256)), int(self.brake), 0, 0, 0, 0, 0])
            self.bus.send(can.Message(arbitration_id=BRAKE_ID, data=data, is_extended_id=False))
            if n % 5 == 0:
                value = int(128 + 100 * np.sin(n / 2000))
                self.bus.send(can.Message(arbitration_id=0x301, data=bytes([value, 0]),
                                          is_extended_id=False))  # fmt: skip

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.bus.shutdown()


@pytest.fixture
def bus() -> Iterator[tuple[str, Sender]]:
    channel = f"events-{uuid.uuid4().hex[:8]}"
    sender = Sender(channel)
    try:
        yield channel, sender
    finally:
        sender.close()


def call(driver: CanDriver, tool: str, **arguments: Any) -> Any:
    r = driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))
    assert r.call_executed and not r.call_failed, r.call_detail
    return r.tool_call_result


def press(driver: CanDriver, sender: Sender, on: bool, hold_s: float) -> None:
    """Set the brake, then mark it 0.2 s later, as a person saying "now" would."""
    sender.brake = on
    time.sleep(0.2)
    call(driver, "mark_event", name="brake pressed" if on else "brake released")
    time.sleep(hold_s)


@pytest.mark.slow
def test_marked_moments_rank_the_brake_switch_first(bus: tuple[str, Sender]) -> None:
    channel, sender = bus
    with CanDriver.from_bus(f"virtual:{channel}") as driver:
        failed = driver.process_llm_response(json.dumps({"tool": "rank_events", "arguments": {}}))
        assert failed.call_failed and "NOT_RECEIVED" in (failed.call_detail or "")
        time.sleep(1.0)
        for _ in range(2):  # a person marks a few seconds apart (with 1.2 s the slow decoy
            press(driver, sender, True, 1.8)  # on 0x301 can flip with every mark by chance)
            press(driver, sender, False, 1.8)
        marked = call(driver, "mark_event", name="brake pressed")
        assert marked == {"event": "brake pressed", "marks": 3, "events": 2, "history_s": 30.0}
        sender.brake = True  # the third press, 0.3 s after its mark
        time.sleep(0.3)
        ranked = call(driver, "rank_events", window_ms=800)
        sender.brake = False
    assert ranked["marks"] == 5 and ranked["window_ms"] == 800
    assert [e["name"] for e in ranked["events"]] == ["brake pressed", "brake released"]
    for event in ranked["events"]:
        top = event["candidates"][0]
        assert (top["id"], top["start_bit"], top["length"]) == (BRAKE_ID, BRAKE_BIT, 1)
        assert top["score"] == 1.0 and top["marks_hit"] == event["marks"]


def test_marks_made_while_a_survey_records_are_ranked_in_it(bus: tuple[str, Sender]) -> None:
    channel, sender = bus
    with CanDriver.from_bus(f"virtual:{channel}") as driver:
        result: dict[str, Any] = {}
        survey = threading.Thread(
            target=lambda: result.update(call(driver, "survey_bus", duration_ms=3500))
        )
        survey.start()
        time.sleep(0.5)
        press(driver, sender, True, 1.0)
        press(driver, sender, False, 1.0)
        survey.join()
    events = {e["name"]: e["candidates"] for e in result["events"]}
    for name in ("brake pressed", "brake released"):  # one mark each: among the best
        best = [c for c in events[name] if c["score"] == events[name][0]["score"]]
        assert (BRAKE_ID, BRAKE_BIT, 1) in {(c["id"], c["start_bit"], c["length"]) for c in best}


def test_an_event_name_is_bounded(bus: tuple[str, Sender]) -> None:
    channel, _ = bus
    with CanDriver.from_bus(f"virtual:{channel}") as driver:
        for name in ("x" * 65, "", "\x00bell"):
            r = driver.process_llm_response(
                json.dumps({"tool": "mark_event", "arguments": {"name": name}})
            )
            assert r.call_failed, name
        assert isinstance(driver.discovery, DiscoveryTools) and driver.discovery.marks.all() == []
