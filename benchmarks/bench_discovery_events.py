"""Marked events and OBD-II as the reference, on generated drives with their truth.

Each drive is a bare car (`drives_obd.with_obd`: its reference module taken off, a tester
polling SPEED and RPM on 0x7DF at 5 Hz each, the engine ECU answering on 0x7E8; every other
drive asks five PIDs at once, so the answers span two ISO-TP frames) and a person's marks
made from its truth (`drives_obd.marked_events`: a flag's changes as "on" and "off" events, a
state's as "changed", each marked 0.1 to 0.5 s late or, one time in four, early). One
`discover(capture, reference="obd", events=marks)` per drive, then:

- events ranked first: the share of events whose first candidate lies in the marked signal
  (its bits inside the signal's, over bits that moved), or in a signal that changed at the
  very same moments (a twin no marking can tell apart); the share in the top three beside it;
- speed scaled by OBD-II within 2%: the share of speed-like signals recovered exactly whose
  scale, fitted against the OBD-II SPEED answers alone (whole km/h, 5 a second), is within 2%
  of the truth; beside it, the obvious alternative measured in the same run: the same drive
  with its reference module (the GNSS speed in 0.001 m/s at 10 Hz, the navigation module's in
  0.01 km/h at 5 Hz) as the reference instead.

Reported apart for the drives of the generator discovery was tuned on (`drives.py`, from
`bench_discovery.CARS`) and the held-out one (`drives_heldout.py`, from its `HELD_OUT` files,
never tuned on). Drives are short (90 s, 20 messages) to keep the run near a minute; the
held-out route needs that long to leave the parking lot.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cantools
import numpy as np

from benchmarks.bench_discovery import CARS, OPENDBC
from benchmarks.drives import Drive, score
from benchmarks.drives_heldout import HELD_OUT, generate_heldout
from benchmarks.drives_obd import MarkedEvent, marked_events, with_obd

SECONDS = 90.0
MESSAGES = 20
TUNED_CARS = 8  # the first of bench_discovery.CARS (time)
GOAL_EVENTS = 0.9
GOAL_SPEEDS = 0.95


@dataclass
class Tally:
    events: int = 0
    first: int = 0
    top3: int = 0
    twins: int = 0
    speeds: int = 0
    speeds_scaled: int = 0
    module_speeds: int = 0
    module_scaled: int = 0
    drives: int = 0
    seconds: float = 0.0
    misses: list[str] = field(default_factory=list)


def _chain(c: dict[str, Any]) -> set[int]:
    start, length = int(c["start_bit"]), int(c["length"])
    if c.get("byte_order", "little_endian") == "little_endian":
        return set(range(start, start + length))
    out = [start]
    for _ in range(length - 1):
        pos = out[-1]
        out.append(pos - 1 if pos % 8 else pos + 15)
    return set(out)


def _lies_in(c: dict[str, Any], event: MarkedEvent) -> bool:
    bits = _chain(c)
    for t in [event.signal, *event.twins]:
        same = (c["id"], c["extended"]) == (t.frame_id, t.extended)
        if same and bits <= set(t.chain) and bits & set(t.seen):
            return True
    return False


def _one(
    path: Path, make: Callable[..., Drive], car: str | None, seed: int, folder: Path
) -> tuple[Tally, float]:
    from hwbridge.discovery.api import discover

    tally = Tally(drives=1)
    original = make(path, SECONDS, car=car, seed=seed, max_messages=MESSAGES)
    drive = with_obd(original, seed=seed, multi=bool(seed % 2))
    events = marked_events(drive, np.random.default_rng(seed))
    marks = [(t, e.name) for e in events for t in e.times]
    capture = drive.write(folder / f"{path.stem}-{make.__name__}.blf")
    start = time.perf_counter()
    report = discover([capture], reference="obd", events=marks or None).to_dict()
    took = time.perf_counter() - start
    ranked = {e["name"]: e["candidates"] for e in report.get("events", [])}
    for e in events:
        candidates = ranked.get(e.name, [])
        tally.events += 1
        tally.twins += bool(e.twins)
        if candidates and _lies_in(candidates[0], e):
            tally.first += 1
        else:
            top = candidates[0] if candidates else None
            got = f"0x{top['id']:X} {top['start_bit']}|{top['length']}" if top else "nothing"
            tally.misses.append(
                f"{path.stem}: {e.name} (0x{e.signal.frame_id:X}, {len(e.times)} marks) -> {got}"
            )
        if any(_lies_in(c, e) for c in candidates[:3]):
            tally.top3 += 1
    s = score(report, drive, skip=())
    tally.speeds, tally.speeds_scaled = s.speeds, s.speeds_scaled
    # the alternative: the drive as generated, its reference module as the reference
    module = folder / "module.dbc"
    module.write_text(original.reference_dbc)
    known = [int(m.frame_id) for m in _messages(original.reference_dbc)]
    plain = discover([original.write(folder / "module.blf")], reference=module).to_dict()
    m = score(plain, original, skip=known)
    tally.module_speeds, tally.module_scaled = m.speeds, m.speeds_scaled
    return tally, took


def _run(
    label: str, cars: list[tuple[str, str | None]], make: Callable[..., Drive], folder: Path
) -> Tally:
    total = Tally()
    for seed, (name, car) in enumerate(cars, start=101):
        path = OPENDBC / name
        if not path.exists():
            print(f"  {name}: not here, skipped")
            continue
        t, took = _one(path, make, car, seed, folder)
        total.drives += 1
        total.seconds += took
        for key in (
            "events", "first", "top3", "twins", "speeds", "speeds_scaled", "module_speeds",
            "module_scaled",
        ):  # fmt: skip
            setattr(total, key, getattr(total, key) + getattr(t, key))
        total.misses += t.misses
    _print(label, total)
    return total


def _pct(a: int, b: int) -> str:
    return f"{a / b:.1%}" if b else "-"


def _print(label: str, t: Tally) -> None:
    events_ok = t.events and t.first / t.events >= GOAL_EVENTS
    speeds_ok = t.speeds and t.speeds_scaled / t.speeds >= GOAL_SPEEDS
    print(
        f"  {label:<10} {t.drives} drives: events ranked first {t.first}/{t.events}"
        f" ({_pct(t.first, t.events)}; top 3: {_pct(t.top3, t.events)}; {t.twins} with a twin),"
        f" speed scaled by OBD-II within 2% {t.speeds_scaled}/{t.speeds}"
        f" ({_pct(t.speeds_scaled, t.speeds)}; with the reference module instead:"
        f" {t.module_scaled}/{t.module_speeds}); discover {t.seconds / max(t.drives, 1):.2f} s"
        " a drive"
    )
    print(
        f"  goals: events ranked first >= {GOAL_EVENTS:.0%}: {'ok' if events_ok else 'MISSED'},"
        f" speeds within 2% >= {GOAL_SPEEDS:.0%}: {'ok' if speeds_ok else 'MISSED'}"
    )
    for miss in t.misses[:8]:
        print(f"    not first: {miss}")


def main(argv: list[str] | None = None) -> None:
    from hwbridge.discovery._deps import require_numpy

    require_numpy()
    if not OPENDBC.is_dir():
        print("  ../shared/data/opendbc is not here: skipped")
        return
    print(
        f"events and OBD-II: {SECONDS:.0f}-second drives ({MESSAGES} messages), bare car with an"
        " OBD port, marks 0.1-0.5 s off"
    )
    with tempfile.TemporaryDirectory(prefix="hwbridge-bench-events-") as tmp:
        folder = Path(tmp)
        tuned = _run("tuned", CARS[:TUNED_CARS], _tuned, folder)
        held = _run("held out", HELD_OUT, generate_heldout, folder)
    for label, t in (("tuned", tuned), ("held out", held)):
        print(
            f"{label}: events ranked first {_pct(t.first, t.events)},"
            f" speed scaled by OBD-II within 2% {_pct(t.speeds_scaled, t.speeds)}"
            f" (reference module: {_pct(t.module_scaled, t.module_speeds)})"
        )


def _messages(dbc: str) -> list[Any]:
    db: Any = cantools.database.load_string(dbc)
    return list(db.messages)


def _tuned(path: Path, seconds: float, **kwargs: Any) -> Drive:
    from benchmarks.drives import generate

    return generate(path, seconds, **kwargs)


if __name__ == "__main__":
    main(sys.argv[1:])
