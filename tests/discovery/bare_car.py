"""A small bare car for the events and OBD-II tests, with no file of ../shared: one message
whose layout the test knows, a tester polling OBD-II beside it (`drives_obd.with_obd`), and
the moments its brake was pressed and released.

0x200, 8 bytes every 20 ms: the speed in 0.01 km/h (bits 0-15, little endian), a counter
(byte 2), the brake switch (bit 24), a noisy byte (byte 4), a turn lamp blinking at 1.5 Hz
while the brake is on (bit 40: it changes at the marks, and many times between them).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from benchmarks.drives import Drive

SPEED_ID = 0x200
BRAKE_BIT = 24
LAMP_BIT = 40


def bare_car(seconds: float = 60.0, seed: int = 0) -> tuple[Drive, npt.NDArray[np.float64]]:
    """The drive (speed and engine speed in `motion`) and the times the brake changed."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 0.02)
    n = len(t)
    speed = 60 + 50 * np.sin(t / 9.0) + 5 * np.sin(t / 2.3)  # km/h
    gear = np.clip(np.searchsorted([20, 40, 65, 90], speed) + 1, 1, 5)
    rpm = np.maximum(800.0, speed * np.array([110.0, 62.0, 43.0, 33.0, 27.0])[gear - 1])
    brake = (np.floor(t / 4.0) % 3 == 1).astype(np.int64)  # on 4 s of every 12
    changes = t[1:][brake[1:] != brake[:-1]]
    lamp = brake * (np.floor(t / (1 / 1.5 / 2)) % 2 == 0)
    data = np.zeros((n, 8), np.uint8)
    raw = np.round(speed / 0.01).astype(np.int64)
    data[:, 0], data[:, 1] = raw & 0xFF, raw >> 8
    data[:, 2] = np.arange(n) % 256
    data[:, 3] = brake
    data[:, 4] = rng.integers(0, 256, n)
    data[:, 5] = lamp
    drive = Drive(
        name="bare",
        t=t,
        ids=np.full(n, SPEED_ID, np.int64),
        extended=np.zeros(n, np.bool_),
        length=np.full(n, 8, np.int64),
        data=data,
        truth=[],
        motion={"t": t, "speed_kmh": speed, "rpm": rpm},
    )
    return drive, changes
