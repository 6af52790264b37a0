"""The draft DBC: discovered (or defined) signals written by cantools itself.

The messages and signals are built as cantools objects with cantools' strict checks on (no
signal overlaps another or leaves its frame) and written with `as_dbc_string()`, so plain
`cantools.database.load_string(text, strict=True)` reads the draft back. Each signal's
comment says how it was found: its kind, a checksum's algorithm, a counter's step, the
reference it matched, and bits that never moved next to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hwbridge.discovery.report.names import message_name

if TYPE_CHECKING:
    from hwbridge.discovery.report.models import MessageReport

__all__ = ["build_message", "build_signal", "draft_dbc"]


def build_signal(
    name: str,
    *,
    start_bit: int,
    length: int,
    byte_order: str,
    signed: bool,
    scale: float = 1.0,
    offset: float = 0.0,
    unit: str | None = None,
    comment: str | None = None,
    is_float: bool = False,
    is_multiplexer: bool = False,
    multiplexer_ids: Sequence[int] | None = None,
    multiplexer_signal: str | None = None,
) -> object:
    """A cantools `Signal` (a float: `SIG_VALTYPE_`; multiplexed: `M`, `m0`...)."""
    from cantools.database.can import Signal
    from cantools.database.conversion import BaseConversion

    return Signal(
        name=name,
        start=start_bit,
        length=length,
        byte_order=byte_order,  # type: ignore[arg-type]
        is_signed=signed,
        conversion=BaseConversion.factory(scale=scale, offset=offset, is_float=is_float),
        unit=unit or None,
        comment=comment,
        is_multiplexer=is_multiplexer,
        multiplexer_ids=list(multiplexer_ids) if multiplexer_ids is not None else None,
        multiplexer_signal=multiplexer_signal if multiplexer_ids is not None else None,
    )


def build_message(
    frame_id: int,
    extended: bool,
    length: int,
    signals: Sequence[object],
    *,
    name: str | None = None,
    period_ms: float | None = None,
    comment: str | None = None,
) -> object:
    """A cantools `Message` (strict: overlapping signals raise)."""
    from cantools.database.can import Message

    return Message(
        frame_id=frame_id,
        name=name or message_name(frame_id, extended),
        length=length,
        signals=list(signals),  # type: ignore[arg-type]
        comment=comment,
        cycle_time=round(period_ms) if period_ms else None,
        is_extended_frame=extended,
        is_fd=length > 8,
        strict=True,
    )


def dbc_text(messages: Sequence[object]) -> str:
    """DBC text of cantools messages."""
    from cantools.database.can import Database

    db = Database(messages=list(messages), strict=True)  # type: ignore[arg-type]
    text: str = db.as_dbc_string()
    return text.replace("\r\n", "\n")  # cantools writes CRLF; one newline reads everywhere


def draft_dbc(
    messages: Sequence[MessageReport], comments: Mapping[tuple[str, str | None], str]
) -> str:
    """The draft DBC of a report's messages."""
    built = []
    for m in messages:
        name = message_name(m.id, m.extended)
        selector = next((s.name for s in m.signals if s.is_multiplexer), None)
        signals = [
            build_signal(
                s.name,
                start_bit=s.start_bit,
                length=s.length,
                byte_order=s.byte_order,
                signed=s.signed,
                scale=s.scale,
                offset=s.offset,
                unit=s.unit,
                comment=comments.get((name, s.name)),
                is_float=s.is_float,
                is_multiplexer=s.is_multiplexer,
                multiplexer_ids=s.multiplexer_ids if selector else None,
                multiplexer_signal=selector,
            )
            for s in m.signals
        ]
        built.append(
            build_message(
                m.id,
                m.extended,
                m.dlc,
                signals,
                name=name,
                period_ms=m.period_ms,
                comment=comments.get((name, None)),
            )
        )
    return dbc_text(built)
