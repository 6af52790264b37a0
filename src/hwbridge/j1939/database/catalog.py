"""What a DBC adds to J1939: the names of SPNs (the `SPN` signal attribute) and the decoding
of the parameter groups it describes, whatever their source address and length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwbridge.can.database.database import CanDatabase
from hwbridge.j1939.database.ids import make_id
from hwbridge.j1939.database.strings import printable
from hwbridge.j1939.database.tables import pgn_name, spn_name

__all__ = ["J1939Database"]

MAX_SIGNALS = 40  # decoded signals shown per parameter group


class J1939Database:
    """A DBC (or none) seen as J1939: SPN names and PGN decoding; immutable."""

    def __init__(self, db: CanDatabase | None = None) -> None:
        self.db = db
        spns: dict[int, str] = {}
        if db is not None:
            for message in db.messages:
                for signal in message.signals:
                    spn = _spn_attribute(signal)
                    if spn:
                        spns.setdefault(spn, printable(str(signal.name).encode(), 64))
        self._spns = spns

    @classmethod
    def load(cls, dbc: str | Path | CanDatabase | None) -> J1939Database:
        if dbc is None or isinstance(dbc, CanDatabase):
            return cls(dbc)
        return cls(CanDatabase.load(dbc))

    @property
    def path(self) -> str | None:
        return self.db.path if self.db is not None else None

    def spn_name(self, spn: int) -> str | None:
        """The DBC's signal name for `spn`, else the SAE table's name, else None."""
        return self._spns.get(spn) or spn_name(spn)

    def database_spn_name(self, spn: int) -> str | None:
        return self._spns.get(spn)

    def _message(self, pgn: int, source: int) -> Any | None:
        if self.db is None:
            return None
        return self.db.message_for_frame(make_id(pgn, source, 0xFF), True)

    def pgn_label(self, pgn: int) -> str | None:
        """The SAE name of `pgn`, else the DBC message's name."""
        found = pgn_name(pgn)
        if found is None and (message := self._message(pgn, 0xFE)) is not None:
            found = str(message.name)
        return found

    def decode(self, pgn: int, source: int, data: bytes) -> dict[str, Any] | None:
        """The DBC's message for `pgn` decoded from `data`, or None when it has none."""
        message = self._message(pgn, source)
        if message is None or self.db is None:
            return None
        decoded = self.db.decode(message, data).to_dict()
        signals = decoded["signals"]
        if len(signals) > MAX_SIGNALS:
            decoded["signals"] = dict(list(signals.items())[:MAX_SIGNALS])
            decoded["signals_not_shown"] = len(signals) - MAX_SIGNALS
        return decoded


def _spn_attribute(signal: Any) -> int | None:
    dbc = getattr(signal, "dbc", None)
    attributes = getattr(dbc, "attributes", None) or {}
    attribute = attributes.get("SPN")
    value = getattr(attribute, "value", None)
    if isinstance(value, int) and 0 < value <= 0x7FFFF:
        return value
    return None
