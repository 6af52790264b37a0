"""J1939 messages longer than 8 bytes, put together for the read tools.

A J1939 database may describe parameter groups of up to 1,785 bytes (engine configuration,
identification), which travel in the transport protocol (BAM or RTS/CTS). This listener
reassembles them passively with the J1939 driver's own `TpReceiver` (it never answers: a
`CanDriver` only listens) and hands each whole message that the database describes to the
BusMonitor as the latest of its PGN's id, so `read_signals` decodes it like any frame.

The CAN bridge finds it by entry point (`hwbridge.can.listeners`: `listener_for`), as it
finds the discovery tools, so that it never imports J1939.
"""

from __future__ import annotations

import can
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.adapter import FrameListener
from hwbridge.can.transport.monitor import BusMonitor
from hwbridge.j1939.database.ids import MAX_PGN, make_id
from hwbridge.j1939.transport.tp import Completed, TpReceiver

__all__ = ["MultiPacketListener", "describes_multipacket", "listener_for"]

_TP_FORMATS = (0xEB, 0xEC)  # PDU formats of TP.DT and TP.CM


def describes_multipacket(db: CanDatabase) -> bool:
    """Whether `db` has a J1939 message longer than one classic frame."""
    return any(
        m.protocol == "j1939" and m.is_extended_frame and m.length > 8 and not m.is_fd
        for m in db.messages
    )


def listener_for(db: CanDatabase, monitor: BusMonitor) -> FrameListener | None:
    """The listener a bus read through `db` needs: one when it describes J1939 messages
    longer than 8 bytes (registered under `hwbridge.can.listeners`)."""
    return MultiPacketListener(db, monitor).on_message if describes_multipacket(db) else None


class MultiPacketListener:
    """Feeds transport-protocol frames to a passive TpReceiver; whole messages the database
    describes go to `monitor.assembled`. Register `on_message` after the monitor's own."""

    def __init__(self, db: CanDatabase, monitor: BusMonitor) -> None:
        self.db = db
        self.monitor = monitor
        self.receiver = TpReceiver()
        self.completed = 0

    def on_message(self, msg: can.Message) -> None:
        if not msg.is_extended_id or msg.is_error_frame or msg.is_remote_frame:
            return
        aid = msg.arbitration_id
        if (aid >> 16) & 0xFF not in _TP_FORMATS:
            return
        for event in self.receiver.feed(aid, bytes(msg.data), float(msg.timestamp)):
            if isinstance(event, Completed):
                self._deliver(event)

    def _deliver(self, done: Completed) -> None:
        if done.pgn > MAX_PGN:  # an announcement naming no parameter group
            return
        frame_id = make_id(done.pgn, done.source, done.destination)
        message = self.db.message_for_frame(frame_id, True)
        if message is None or message.length <= 8:
            return
        self.completed += 1
        self.monitor.assembled(
            can.Message(
                timestamp=done.ended,
                arbitration_id=frame_id,
                data=done.data,
                is_extended_id=True,
                check=False,
            )
        )
