"""Another node's view of a virtual channel: the OBD-II requests sent on it, and when; and
the speed field among what `correlate_signal(signal="SPEED")` answers."""

from __future__ import annotations

import threading
import time
from typing import Any

import can

OBD_REQUESTS = frozenset({0x7DF, *range(0x7E0, 0x7E8)})


class Requests:
    """Collects the OBD-II requests (11-bit, to 0x7DF and 0x7E0-0x7E7) on `channel`, each
    with the monotonic time it was seen, until closed."""

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
            if msg is not None and not msg.is_extended_id and msg.arbitration_id in OBD_REQUESTS:
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
