"""At which period each message of a database is sent: its cycle time where it has one,
otherwise a period chosen from what the database says about it (another cycle-time
attribute, its send type, a J1939 parameter group's default rate) or a default.

`period_summary` says in one line how many periods were chosen and how, for stderr.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["DEFAULT_PERIOD_S", "EVENT_PERIOD_S", "Period", "choose_period", "period_summary"]

DEFAULT_PERIOD_S: Final = 0.1
EVENT_PERIOD_S: Final = 0.5
"""A message sent on events: a change now and then, shown as a frame every half second."""

CYCLE_TIME = "cycle time"
OTHER_ATTRIBUTE = "another cycle-time attribute"
SEND_TYPE = "send type"
J1939_RATE = "J1939 default rate"
DEFAULT = "default"

_CYCLE_ATTRIBUTE: Final = re.compile(r"cycle_?time|period|cycletime|txrate", re.IGNORECASE)
_PERIODIC: Final = re.compile(r"cycl|period|fixed|ifactive", re.IGNORECASE)
_EVENT: Final = re.compile(r"event|spontan|onchange|onwrite|request", re.IGNORECASE)
# J1939-71 transmission rates of common parameter groups, in seconds
_PGN_RATES: Final = {
    0: 0.01,  # TSC1
    61441: 0.1,  # EBC1
    61442: 0.01,  # ETC1
    61443: 0.05,  # EEC2
    61444: 0.02,  # EEC1
    61445: 0.1,  # ETC2
    61449: 0.01,  # VDC2
    65132: 0.05,  # TCO1
    65215: 0.1,  # EBC2
    65248: 0.1,  # VD
    65253: 1.0,  # HOURS (on request; shown every second)
    65262: 1.0,  # ET1
    65263: 0.5,  # EFL/P1
    65265: 0.1,  # CCVS1
    65266: 0.1,  # LFE1
    65269: 1.0,  # AMB
    65270: 0.5,  # IC1
    65271: 1.0,  # VEP1
    65272: 1.0,  # TRF1
    65276: 1.0,  # DD1
    65226: 1.0,  # DM1
}


@dataclass(frozen=True, slots=True)
class Period:
    """A message's period and where it comes from (`CYCLE_TIME`, ...)."""

    seconds: float
    source: str


def _attribute(message: Any, name: str) -> Any:
    attributes = getattr(getattr(message, "dbc", None), "attributes", None) or {}
    found = attributes.get(name)
    if found is None:
        return None
    value = found.value
    choices = getattr(found.definition, "choices", None)
    if isinstance(value, int) and choices and 0 <= value < len(choices):
        return choices[value]
    return value


def _other_cycle_time(message: Any) -> float | None:
    attributes = getattr(getattr(message, "dbc", None), "attributes", None) or {}
    for name, attribute in attributes.items():
        if name == "GenMsgCycleTime" or not _CYCLE_ATTRIBUTE.search(name):
            continue
        value = attribute.value
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value) / 1000.0
    return None


def _pgn(frame_id: int) -> int:
    pf = (frame_id >> 16) & 0xFF
    pgn = (frame_id >> 8) & 0x3FF00
    return pgn if pf < 240 else pgn | (frame_id >> 8) & 0xFF


def _j1939_period(message: Any) -> float | None:
    if not message.is_extended_frame or getattr(message, "protocol", None) != "j1939":
        return None
    frame_id = int(message.frame_id)
    rate = _PGN_RATES.get(_pgn(frame_id))
    if rate is not None:
        return rate
    priority = (frame_id >> 26) & 0x7
    return 0.1 if priority <= 3 else 1.0  # control messages are fast, information slow


def choose_period(message: Any) -> Period:
    """The period `message` is sent at."""
    if message.cycle_time:
        return Period(float(message.cycle_time) / 1000.0, CYCLE_TIME)
    other = _other_cycle_time(message)
    if other is not None:
        return Period(other, OTHER_ATTRIBUTE)
    j1939 = _j1939_period(message)
    if j1939 is not None:
        return Period(j1939, J1939_RATE)
    send_type = _attribute(message, "GenMsgSendType")
    if isinstance(send_type, str) and send_type:
        if _EVENT.search(send_type):
            delay = _attribute(message, "GenMsgDelayTime")
            floor = float(delay) / 1000.0 if isinstance(delay, int | float) else 0.0
            return Period(max(EVENT_PERIOD_S, floor), SEND_TYPE)
        if _PERIODIC.search(send_type):
            return Period(DEFAULT_PERIOD_S, SEND_TYPE)
    return Period(DEFAULT_PERIOD_S, DEFAULT)


_SAID: Final = {
    OTHER_ATTRIBUTE: "from another cycle-time attribute",
    J1939_RATE: "at J1939 default rates of their parameter groups",
    SEND_TYPE: "at periods from their send type",
    DEFAULT: f"at the default {DEFAULT_PERIOD_S * 1000:.0f} ms",
}


def period_summary(periods: Iterable[Period]) -> str | None:
    """One line saying how many periods were chosen and how; None when every message had a
    cycle time."""
    counts = Counter(p.source for p in periods if p.source != CYCLE_TIME)
    if not counts:
        return None
    total = sum(counts.values())
    parts = [f"{counts[source]} {_SAID[source]}" for source in _SAID if counts[source]]
    noun = "message has" if total == 1 else "messages have"
    return f"firmware_sim: {total} {noun} no cycle time: {', '.join(parts)}"
