"""A GNSS receiver on a pty, streaming NMEA 0183 as a u-blox or MediaTek module does.

Every update (1-10 Hz, 1 by default) it writes one GGA (fix, position, altitude,
satellites), one RMC (UTC date and time, speed, course) and one GSA (fix type, satellites
used, dilution of precision) sentence, each ending in CR LF with a valid checksum. The
sentences are built with pynmea2, the library the driver reads them with.

The receiver moves at `speed_kmh` on `course_deg` from its start position, so position and
speed change as a real one's do. `PMTK220,<ms>` (the MediaTek command, checksum required)
sets the update period. The fault `no_fix` makes it report no fix (GGA quality 0, RMC status
V, GSA 1), as it does indoors; the line faults of `LineDevice` apply to every sentence.

Run on its own with `python -m firmware_sim --gnss`.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from pathlib import Path

import pynmea2

from firmware_sim.line_device import FAULTS as LINE_FAULTS
from firmware_sim.line_device import LineDevice

__all__ = ["FAULTS", "START", "GnssReceiver"]

START = (48.137154, 11.576124, 519.0)  # latitude, longitude (degrees), altitude (m)
FAULTS = (*LINE_FAULTS, "no_fix")
_SATELLITES = ("02", "05", "07", "09", "13", "15", "18", "20", "30")
_METERS_PER_DEGREE = 111_320.0
_KNOTS_PER_KMH = 1 / 1.852


def _nmea_angle(value: float, degree_digits: int) -> str:
    degrees = int(abs(value))
    minutes = (abs(value) - degrees) * 60
    return f"{degrees:0{degree_digits}d}{minutes:07.4f}"


class GnssReceiver(LineDevice):
    """The receiver; `rate_hz` updates a second (1-10)."""

    kind = "gnss"
    terminator = b"\r\n"

    def __init__(
        self,
        *,
        link: str | Path | None = None,
        rate_hz: float = 1.0,
        speed_kmh: float = 36.0,
        course_deg: float = 90.0,
        start: tuple[float, float, float] = START,
    ) -> None:
        if not 1 <= rate_hz <= 10:
            raise ValueError("a GNSS receiver updates 1 to 10 times a second")
        super().__init__(link=link, tick_hz=rate_hz)
        self.speed_kmh = speed_kmh
        self.course_deg = course_deg
        self.start_position = start
        self.no_fix = False
        self.updates = 0
        self._t0 = time.monotonic()

    def inject_fault(self, name: str | None) -> None:
        if name == "no_fix":
            self.no_fix = True
            return
        if name is None:
            self.no_fix = False
        super().inject_fault(name)

    def position(self, at: float | None = None) -> tuple[float, float, float]:
        """(latitude, longitude, altitude) after moving since start."""
        elapsed = (time.monotonic() if at is None else at) - self._t0
        meters = self.speed_kmh / 3.6 * elapsed
        lat0, lon0, alt = self.start_position
        course = math.radians(self.course_deg)
        lat = lat0 + meters * math.cos(course) / _METERS_PER_DEGREE
        lon = lon0 + meters * math.sin(course) / (_METERS_PER_DEGREE * math.cos(math.radians(lat0)))
        return lat, lon, alt

    def sentences(self, now: datetime | None = None) -> list[str]:
        """One update's sentences (GGA, RMC, GSA), without line endings."""
        now = now or datetime.now(UTC)
        lat, lon, alt = self.position()
        clock = now.strftime("%H%M%S.") + f"{now.microsecond // 10000:02d}"
        la, lo = _nmea_angle(lat, 2), _nmea_angle(lon, 3)
        ns, ew = ("N" if lat >= 0 else "S"), ("E" if lon >= 0 else "W")
        fix = not self.no_fix
        used = _SATELLITES if fix else ()
        gga = pynmea2.GGA(
            "GP",
            "GGA",
            (clock, la, ns, lo, ew, "1" if fix else "0", f"{len(used):02d}",
             "0.9" if fix else "", f"{alt:.1f}", "M", "47.0", "M", "", ""),
        )  # fmt: skip
        knots = self.speed_kmh * _KNOTS_PER_KMH if fix else 0.0
        rmc = pynmea2.RMC(
            "GP",
            "RMC",
            (clock, "A" if fix else "V", la, ns, lo, ew, f"{knots:.2f}",
             f"{self.course_deg:.1f}", now.strftime("%d%m%y"), "", "", "A" if fix else "N"),
        )  # fmt: skip
        sats = list(used) + [""] * (12 - len(used))
        gsa = pynmea2.GSA(
            "GP",
            "GSA",
            ("A", "3" if fix else "1", *sats, "1.6" if fix else "", "0.9" if fix else "",
             "1.3" if fix else ""),
        )  # fmt: skip
        return [str(gga), str(rmc), str(gsa)]

    def _tick(self) -> None:
        self.updates += 1
        for sentence in self.sentences():
            self.emit(sentence)

    def _on_line(self, line: str) -> str | None:
        try:
            message = pynmea2.parse(line, check=True)
        except (pynmea2.ParseError, AttributeError, TypeError, ValueError):
            return None
        if not (
            isinstance(message, pynmea2.ProprietarySentence)
            and message.manufacturer == "MTK"
            and message.data[:1] == ["220"]
        ):
            return None
        period = message.data[1] if len(message.data) > 1 else ""
        accepted = period.isdigit() and 100 <= int(period) <= 1000
        if accepted:
            self.tick_hz = 1000 / int(period)
        # PMTK001: the acknowledgement (3: done, 2: refused)
        return str(pynmea2.ProprietarySentence("MTK", ["001", "220", "3" if accepted else "2"]))
