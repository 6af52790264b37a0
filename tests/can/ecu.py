"""A tiny ECU for the CAN tests: sends chosen messages of a database on a virtual channel."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import can
from hwbridge.can.database.database import CanDatabase


class Ecu:
    """Sends each message every `period_s` with the current values (change them live)."""

    def __init__(
        self,
        db: CanDatabase,
        channel: str,
        values: Mapping[str, Mapping[str, Any]],
        period_s: float = 0.01,
    ) -> None:
        self.db = db
        self.values = {k: dict(v) for k, v in values.items()}
        self.period_s = period_s
        self.bus = can.Bus(interface="virtual", channel=channel)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def frame(self, message: str, values: Mapping[str, Any]) -> can.Message:
        f = self.db.encode(message, values)
        return can.Message(
            arbitration_id=f.arbitration_id,
            data=f.data,
            is_extended_id=f.is_extended,
            is_fd=f.is_fd,
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            for message, values in list(self.values.items()):
                self.bus.send(self.frame(message, values))
            self._stop.wait(self.period_s)

    def __enter__(self) -> Ecu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)
        self.bus.shutdown()
