"""The simulator's frames as openpilot reads a car's: opendbc's own `CANParser` checks every
checksum and counter it knows of, and drops a message whose checksum or counter is wrong.
Where the opendbc package is installed, the simulator computes the checksums opendbc names
with opendbc's own functions (VW MQB's per-message data ids, VW MLB's, comma body's): a
third-party reader, not ours, is the judge."""

from __future__ import annotations

import uuid

import pytest

import can
from firmware_sim import VirtualVehicle
from firmware_sim.checksums import scheme_of
from firmware_sim.clock import SimulatedClock
from tests.shared_data import DATA, needs_shared

opendbc_dbc = pytest.importorskip("opendbc.can.dbc", reason="the opendbc extra (Python < 3.13)")
opendbc_parser = pytest.importorskip("opendbc.can.parser")


@needs_shared
@pytest.mark.parametrize("name", ["vw_mqb", "vw_mlb", "comma_body", "tesla_model3_party"])
def test_every_checksum_and_counter_passes_opendbcs_parser(name: str) -> None:
    """Before, with XOR in their place, the parser dropped all 25 of vw_mqb's messages that
    carry a checksum, 7 of vw_mlb's 17 and all 6 of comma_body's."""
    path = DATA / "opendbc" / f"{name}.dbc"
    database = opendbc_dbc.DBC(str(path))  # a path: opendbc's parser reads ../shared's file too
    assert scheme_of(name) == f"opendbc:{name}"
    states = {
        address: opendbc_parser.MessageState(address, msg.name, msg.size, list(msg.sigs.values()))
        for address, msg in database.msgs.items()
    }
    checked: set[str] = set()
    dropped: dict[str, int] = {}
    channel = f"opendbc-{uuid.uuid4().hex[:8]}"
    clock = SimulatedClock()
    with (
        can.Bus(interface="virtual", channel=channel) as tap,
        VirtualVehicle([path], channel=channel, clock=clock, obd=False),
    ):
        for step in range(30):
            clock.advance(0.1)
            for msg in iter(lambda: tap.recv(0), None):
                state = states.get(msg.arbitration_id)
                judged = state is not None and any(
                    s.calc_checksum is not None or s.type == 1 for s in state.signals
                )
                if state is None or not judged:
                    continue
                checked.add(state.name)
                if not state.parse(step * 100_000_000, bytes(msg.data)):
                    dropped[state.name] = dropped.get(state.name, 0) + 1
    assert checked, "no message with a checksum or a counter was sent"
    assert dropped == {}, f"{len(dropped)} of {len(checked)} messages dropped: {dropped}"
