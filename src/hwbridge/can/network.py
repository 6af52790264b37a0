"""One CAN network: a database, the bus it is on, the monitor that listens to it.

A driver holds one or more networks (spec section 14, multi-connection). Opening a network
wires the adapter's single listener to the monitor before the first frame can arrive; with
no bus the network is offline and only the catalog and decoding work.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hwbridge.can.database.bits import extract
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.extensions import listeners_for
from hwbridge.can.tools.reading import Reader
from hwbridge.can.tools.sending import HookFactory, Sender
from hwbridge.can.transport.adapter import BusSpec, CanAdapter, PythonCanAdapter
from hwbridge.can.transport.bus_url import is_replay_url
from hwbridge.can.transport.monitor import BusMonitor
from hwbridge.can.transport.replay import ReplayAdapter
from hwbridge.policy import SendPolicy

__all__ = ["Network", "frame_owner", "multiplexer_extractors"]


def _extractor(signal: Any) -> Callable[[bytearray], Hashable]:
    def multiplexer_value(data: bytearray) -> Hashable:
        return extract(signal, bytes(data))

    return multiplexer_value


def multiplexer_extractors(
    db: CanDatabase,
) -> dict[tuple[int, bool], Callable[[bytearray], Hashable]]:
    """(frame id, extended) -> a function giving the multiplexer's raw value of a frame.

    The monitor keeps the latest frame per (id, multiplexer value) with these, so a signal
    of any multiplexer branch can be read without decoding on the receive path.
    """
    out: dict[tuple[int, bool], Callable[[bytearray], Hashable]] = {}
    for message in db.messages:
        if not message.is_multiplexed():
            continue
        for signal in message.signals:
            if signal.is_multiplexer and signal.multiplexer_ids is None:
                out[message.frame_id, bool(message.is_extended_frame)] = _extractor(signal)
                break
    return out


@dataclass(frozen=True, eq=False)
class Network:
    """A database with its (optional) live bus."""

    name: str
    db: CanDatabase
    adapter: CanAdapter | None
    monitor: BusMonitor | None
    reader: Reader
    sender: Sender

    @classmethod
    def open(
        cls,
        name: str,
        database: CanDatabase | str | Path,
        bus: BusSpec | CanAdapter | None,
        policy: SendPolicy,
        *,
        history_s: float = 30.0,
        bitrate: float | None = None,
        hooks: Mapping[str, HookFactory] | None = None,
    ) -> Network:
        db = database if isinstance(database, CanDatabase) else CanDatabase.load(database)
        adapter: CanAdapter | None = None
        monitor: BusMonitor | None = None
        if bus is not None:
            if bitrate is None and isinstance(bus, Mapping):
                bitrate = bus.get("bitrate")
            monitor = BusMonitor(
                history_s=history_s,
                mux=multiplexer_extractors(db) or None,
                bitrate=bitrate,
                known=lambda aid, ext: frame_owner(db, aid, ext),
            )
            # after the monitor's own: J1939's multi-packet messages, when the database has them
            listeners = [monitor.on_message, *listeners_for(db, monitor)]
            if isinstance(bus, CanAdapter):
                adapter = bus
                for listener in listeners:
                    adapter.add_listener(listener)
            elif is_replay_url(bus):
                adapter = ReplayAdapter.from_url(bus, listeners=listeners)
            else:
                adapter = PythonCanAdapter(bus, listeners=listeners)
        try:
            sender = Sender(db, adapter, policy, hooks, scope=name)
        except BaseException:
            if adapter is not None:
                adapter.close()
            raise
        return cls(name, db, adapter, monitor, Reader(db, monitor, adapter), sender)

    def with_database(self, db: CanDatabase) -> Network:
        """The same bus, monitor and sender, read through another database (one that grew
        at run time: discovery's defined signals). What is sent stays the sender's."""
        return replace(self, db=db, reader=Reader(db, self.monitor, self.adapter))

    def close(self) -> None:
        self.sender.stop_all()
        if self.adapter is not None:
            self.adapter.close()


def frame_owner(db: CanDatabase, arbitration_id: int, extended: bool) -> object:
    """True for an id of the database itself; the message's name for a frame it matches by
    PGN (J1939); None for an unknown id (see BusMonitor's `known`)."""
    message = db.message_for_frame(arbitration_id, extended)
    if message is None:
        return None
    if message.frame_id == arbitration_id and bool(message.is_extended_frame) == extended:
        return True
    return str(message.name)
