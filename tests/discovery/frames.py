"""Frames for the discovery tests, encoded by cantools from a layout the test chooses.

The layouts are cantools signals (start bit as cantools writes it), so what discovery
reports can be compared with them directly; nothing here uses hwbridge's codec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import cantools
import numpy as np
import numpy.typing as npt
from cantools.database.can import Database, Message, Signal

from hwbridge.discovery.frames import Collector, FrameSet

Raw = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Layout:
    """One signal: name, start bit (cantools), length, order, signed."""

    name: str
    start: int
    length: int
    order: str = "little_endian"
    signed: bool = False


def encode(
    layouts: list[Layout],
    raws: Mapping[str, Raw],
    length: int = 8,
    frame_id: int = 0x123,
) -> npt.NDArray[np.uint8]:
    """Payloads (frames x length) with each signal's raw values, by cantools."""
    message = Message(
        frame_id=frame_id,
        name="M",
        length=length,
        signals=[
            Signal(x.name, x.start, x.length, byte_order=x.order, is_signed=x.signed)  # type: ignore[arg-type]
            for x in layouts
        ],
        strict=True,
    )
    n = len(next(iter(raws.values())))
    out = np.zeros((n, length), np.uint8)
    for i in range(n):
        values = {name: int(raw[i]) for name, raw in raws.items()}
        for x in layouts:
            values.setdefault(x.name, 0)
        out[i] = np.frombuffer(message.encode(values, scaling=False, strict=False), np.uint8)
    return out


def frameset(
    data: npt.NDArray[np.uint8], period_s: float = 0.01, key: tuple[int, bool] = (0x123, False)
) -> FrameSet:
    """The FrameSet discovery analyses for these payloads, sent every `period_s`."""
    collector = Collector()
    n = len(data)
    collector.add(
        np.arange(n, dtype=np.float64) * period_s,
        np.full(n, key[0], np.int64),
        np.full(n, key[1], np.bool_),
        np.full(n, data.shape[1], np.int64),
        data,
    )
    found = collector.frameset(key)
    assert found is not None
    return found


def walk(
    rng: np.random.Generator, n: int, lo: int, hi: int, step: float, start: float | None = None
) -> Raw:
    """A random walk between lo and hi (a slowly moving physical value)."""
    x = np.cumsum(rng.normal(0, step, n)) + (start if start is not None else (lo + hi) / 2)
    span = hi - lo
    x = lo + np.abs(((x - lo) % (2 * span)) - span)  # reflect at the ends
    return np.clip(np.round(x), lo, hi).astype(np.int64)


def counter(n: int, bits: int, start: int = 0) -> Raw:
    return (start + np.arange(n)) % (1 << bits)


Fill = Callable[[Raw], Raw]


def load_dbc_text(text: str) -> Database:
    """A DBC text loaded by plain cantools, strictly (overlaps and misplaced signals raise)."""
    db = cantools.database.load_string(text, database_format="dbc", strict=True)
    assert isinstance(db, Database)
    return db
