"""Another node's view of a virtual channel: the OBD-II requests sent on it, and when; and
the speed field among what `correlate_signal(signal="SPEED")` answers."""

from __future__ import annotations

import threading
import time
from typing import Any

import can
from firmware_sim.scenario import parse_scenario

OBD_REQUESTS = frozenset({0x7DF, *range(0x7E0, 0x7E8)})
"""The 11-bit request ids: functional 0x7DF, physical 0x7E0-0x7E7."""
FUNCTIONAL_29 = 0x18DB33F1
ENGINE_ANSWERS = ("OBD_7E8", "OBD_18DAF110")
"""The engine ECU's answers as discovery names them, 11-bit or 29-bit. The simulated vehicle
answers in both addressings, and the adapter keeps the one that answers its probe first:
11-bit is tried first (ISO 15765-4), but a busy machine can make its answer late."""


NEVER_STEADY = parse_scenario(
    """
name = "never steady"
repeat = true
[[phase]]
seconds = 6
speed_kmh = 60
[[phase]]
seconds = 6
speed_kmh = 15
"""
)
"""A drive whose speed is never steady: up towards 60 km/h for 6 s, down towards 15 for 6 s,
again and again (between 16 and 49 km/h, at least 9 km/h in any 4 s). A vehicle left pulling
away nears its top speed within a minute, where whole-km/h OBD-II answers barely move: a
correlation recorded then, on a machine slow to get there, fixes no scale."""


def is_request(msg: can.Message) -> bool:
    """An OBD-II request: 11-bit to 0x7DF or 0x7E0-0x7E7, 29-bit to 0x18DB33F1 or from the
    tester (F1) to one ECU (0x18DAxxF1)."""
    if msg.is_extended_id:
        return msg.arbitration_id == FUNCTIONAL_29 or msg.arbitration_id & 0x1FFF00FF == 0x18DA00F1
    return msg.arbitration_id in OBD_REQUESTS


def is_obd(ident: int) -> bool:
    """An id OBD-II requests or answers use, in either addressing."""
    return 0x7DF <= ident <= 0x7EF or ident == FUNCTIONAL_29 or ident >> 16 == 0x18DA


class Requests:
    """Collects the OBD-II requests (`is_request`, either addressing) on `channel`, each with
    the monotonic time it was seen, until closed."""

    def __init__(self, channel: str) -> None:
        self.bus = can.Bus(interface="virtual", channel=channel)
        self._seen: list[tuple[float, can.Message]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-obd-requests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.bus.recv(0.05)
            if msg is not None and is_request(msg):
                with self._lock:
                    self._seen.append((time.monotonic(), msg))

    @property
    def frames(self) -> list[can.Message]:
        with self._lock:
            return [m for _, m in self._seen]

    def since(self, start: float) -> list[can.Message]:
        """The requests seen at or after monotonic time `start`."""
        with self._lock:
            return [m for t, m in self._seen if t >= start]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.bus.shutdown()


def vehicle_speed(candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The demo vehicle's VehicleSpeed field among correlate_signal's first three candidates
    (pulling away in first gear, the engine speed moves with it just as well): 0x110, its
    bits that moved in the low two bytes, little endian."""
    for c in candidates[:3]:
        low = c["start_bit"] + c["length"] <= 16
        if (c["id"], c["byte_order"]) == (0x110, "little_endian") and low:
            return c
    return None
