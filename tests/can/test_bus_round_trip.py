"""Send, monitor and decode: values sent through the driver's tools come back off the bus.

For every message of the demo database and of the real databases in ../shared/data, a driver
with an open policy sends drawn values with `send_message` (labels or numbers, big-endian,
signed, float, multiplexed, CAN-FD, extended, J1939) onto a virtual bus; a second, read-only
driver receives the frame through its monitor and `read_message` decodes the same values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge import CanDriver, SendPolicy
from hwbridge.can.database.database import CanDatabase
from tests.can.strategies import draw_message
from tests.can.test_database_files import ALL_FILES, DEMO, load

OPEN = SendPolicy(allow_messages=["*"], max_frames_per_second=100_000)


class Pair:
    """A sending driver and a listening driver on one private virtual channel."""

    def __init__(self, db: CanDatabase) -> None:
        channel = f"rt-{uuid.uuid4().hex[:10]}"
        self.sender = CanDriver.from_dbc(
            db, bus=f"virtual:{channel}", policy=OPEN, exposure="catalog"
        )
        self.listener = CanDriver.from_dbc(db, bus=f"virtual:{channel}", exposure="catalog")
        self.monitor = self.listener.networks["can"].monitor

    def round_trip(self, data: st.DataObject, name: str | None = None) -> None:
        drawn = draw_message(self.sender.database, data, name)
        assert self.monitor is not None
        self.monitor.clear()
        sent = self.sender.process_llm_response(
            json.dumps(
                {
                    "tool": "send_message",
                    "arguments": {"message": drawn.message.name, "signals": drawn.sent},
                }
            )
        )
        if not sent.call_executed and drawn.overlapping:
            # values drawn for signals that share bits may disagree: the frame would not
            # carry what was asked, so the send is refused and nothing goes out
            assert "shares bits" in (sent.call_detail or ""), sent.call_detail
            return
        assert sent.call_executed, sent.retry_prompt
        assert sent.tool_call_result["defaulted"] == []
        read = self.listener.execute_tool(
            "read_message", {"message": drawn.message.name, "timeout_ms": 2000}
        )
        assert read["data"] == sent.tool_call_result["data"]
        drawn.check(read["signals"])

    def close(self) -> None:
        self.sender.close()
        self.listener.close()


@pytest.fixture(scope="module")
def pairs() -> Iterator[dict[Path, Pair]]:
    opened: dict[Path, Pair] = {}
    yield opened
    for pair in opened.values():
        pair.close()


def pair_for(pairs: dict[Path, Pair], path: Path) -> Pair:
    if path not in pairs:
        pairs[path] = Pair(load(path)[0])
    return pairs[path]


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_send_monitor_decode_real_databases(
    pairs: dict[Path, Pair], path: Path, data: st.DataObject
) -> None:
    pair_for(pairs, path).round_trip(data)


@pytest.mark.slow
@pytest.mark.parametrize(
    "message",
    [
        "EngineData",
        "VehicleDynamics",
        "ClimateCommand",
        "BatteryCells",
        "BatteryPack",
        "AdasObjects",
        "EEC1",
    ],
)
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_send_monitor_decode_demo_messages(
    pairs: dict[Path, Pair], message: str, data: st.DataObject
) -> None:
    pair_for(pairs, DEMO).round_trip(data, message)
