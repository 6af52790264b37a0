"""The database that fits: captures generated from opendbc databases, matched against all of
them (`hwbridge discover --match-known`, `hwbridge.discovery.analysis.match`).

- candidates: every database of the opendbc package (its DBC files and the DBCs it generates)
  and the files of ../shared/data/opendbc it lacks, given as `--dbc` gives them;
- tuned: short drives of `benchmarks/drives.py` from every other opendbc database not held
  out (the matching rule was developed on this generator and these files);
- held out: short drives of `benchmarks/drives_heldout.py` (the other generator) from the 14
  files of `drives_heldout.HELD_OUT`;
- per capture: is the right database ranked first; or, when not, one of its *family* as the
  capture shows it: a database that explains exactly the same ids of the capture, with the
  same lengths (opendbc's Honda and Toyota variants share most of their messages, and a
  capture that shows only the shared ones cannot tell them apart); was it decoded with;
- the truth absent: each held-out capture matched again without its database and those
  tied with it, as for a car opendbc does not have: what is decoded with then;
- cost: the time to match one capture against all of them (first, with every table built;
  then per capture), against the obvious alternative, loading every database with cantools
  to look the capture's ids up in it.

Goal: the right database, or one of its family, first in at least 90% of the captures.
Captures are generated into a temporary folder, never kept.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_discovery import CARS, OPENDBC
from benchmarks.drives import Drive, generate
from benchmarks.drives_heldout import HELD_OUT, generate_heldout

SECONDS = 6.0
GOAL = 0.9


@dataclass
class Tally:
    """What the captures of one set came to."""

    captures: int = 0
    first: int = 0
    family: int = 0  # first, or a database explaining the same ids
    ties: int = 0  # the capture could not tell the first from another (said so)
    decoded_right: int = 0
    decoded_family: int = 0
    decoded_other: list[str] = field(default_factory=list)
    decoded_none: int = 0
    seconds: list[float] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)


def _candidates() -> tuple[list[Any], str]:
    from hwbridge.discovery.analysis.known import known_databases, opendbc_databases

    package, _ = opendbc_databases()
    names = {k.name for k in package}
    extra = (
        sorted(p for p in OPENDBC.glob("*.dbc") if p.stem not in names) if OPENDBC.is_dir() else []
    )
    found, _ = known_databases(extra)
    files = sum(1 for k in package if k.path is not None)
    where = (
        f"{len(found)} databases: opendbc's {files} files and {len(package) - files} generated"
        f" DBCs, and {len(extra)} more from ../shared/data/opendbc"
    )
    return found, where


def _path(known: Any, folder: Path) -> Path:
    if known.path is not None:
        return Path(known.path)
    path = folder / f"{known.name}.dbc"
    if not path.exists():
        path.write_text(known.text)
    return Path(path)


def _framesets(drive: Drive) -> tuple[dict[Any, Any], int]:
    from hwbridge.discovery.frames import Collector

    collector = Collector()
    collector.add(drive.t, drive.ids, drive.extended, drive.length, drive.data)
    return collector.framesets(), collector.frames


def _explained(known: Any, framesets: dict[Any, Any]) -> frozenset[Any]:
    """The ids of the capture `known` has a message of the right length for."""
    from hwbridge.discovery.analysis.known import SkippedDatabase, index_of
    from hwbridge.discovery.analysis.match import frame_size

    try:
        index = index_of(known)
    except SkippedDatabase:
        return frozenset()
    out = set()
    for key, fs in framesets.items():
        entry = index.lookup(*key)
        if entry is not None and frame_size(entry[0]) == fs.length:
            out.add(key)
    return frozenset(out)


def _one(
    tally: Tally,
    truth: Any,
    candidates: list[Any],
    drive: Drive,
    *,
    verbose: bool,
) -> None:
    from hwbridge.discovery.analysis.match import match_databases

    framesets, frames = _framesets(drive)
    start = time.perf_counter()
    result = match_databases(framesets, candidates, total_frames=frames)
    tally.seconds.append(time.perf_counter() - start)
    tally.captures += 1
    by_name = {k.name: k for k in candidates}
    mine = _explained(truth, framesets)
    best = result.matches[0] if result.matches else None
    right = best is not None and best.database == truth.name
    same = best is not None and (right or _explained(by_name[best.database], framesets) == mine)
    tally.first += right
    tally.family += same
    tally.ties += bool(best is not None and best.tied_with)
    used = result.decoded_with[0] if result.decoded_with else None
    if used is None:
        tally.decoded_none += 1
    elif used == truth.name:
        tally.decoded_right += 1
    elif _explained(by_name[used], framesets) == mine:
        tally.decoded_family += 1
    else:
        tally.decoded_other.append(f"{truth.name} <- {used}")
    if not same or verbose:
        ranked = ", ".join(f"{m.database} {m.score:.2f}" for m in result.matches[:3])
        line = f"{'ok  ' if right else 'same' if same else 'MISS'} {truth.name}: {ranked}"
        tally.misses.append(line)


def _absent(truth: Any, candidates: list[Any], drive: Drive) -> str | None:
    """What a capture is decoded with when its database (and those tied with it) is not
    among the candidates."""
    from hwbridge.discovery.analysis.match import match_databases

    framesets, frames = _framesets(drive)
    first = match_databases(framesets, candidates, total_frames=frames, adopt=False)
    gone = {truth.name, *(first.matches[0].tied_with if first.matches else [])}
    rest = [k for k in candidates if k.name not in gone]
    result = match_databases(framesets, rest, total_frames=frames)
    return result.decoded_with[0] if result.decoded_with else None


def _line(label: str, t: Tally) -> str:
    def pct(a: int) -> str:
        return f"{a}/{t.captures} ({a / max(t.captures, 1):.0%})"

    other = len(t.decoded_other)
    return (
        f"  {label:<10} right first {pct(t.first)}, right or its family first {pct(t.family)},"
        f" ties said {t.ties}; decoded with: right {t.decoded_right}, family"
        f" {t.decoded_family}, another {other}, none {t.decoded_none};"
        f" matching {statistics.mean(t.seconds or [0]):.2f} s a capture (median"
        f" {statistics.median(t.seconds or [0]):.2f} s, max {max(t.seconds or [0]):.2f} s)"
    )


def _cost(candidates: list[Any], drive: Drive) -> None:
    """One capture against every candidate: hwbridge from cold caches against loading every
    database with cantools and looking the capture's ids up in it."""
    import cantools

    from hwbridge.discovery.analysis import known as known_module
    from hwbridge.discovery.analysis.match import match_databases

    framesets, frames = _framesets(drive)
    known_module._index.cache_clear()
    known_module._load.cache_clear()
    start = time.perf_counter()
    match_databases(framesets, candidates, total_frames=frames)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    match_databases(framesets, candidates, total_frames=frames)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    loaded = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for known in candidates:
            try:
                db = cantools.database.can.Database(strict=False)
                db.add_dbc_string(known.read())
            except Exception:
                continue
            loaded += 1
            ids = {(int(m.frame_id), bool(m.is_extended_frame)): m.length for m in db.messages}
            sum(1 for key in framesets if key in ids)
    theirs = time.perf_counter() - start
    print(
        f"cost, one capture against all {len(candidates)}: hwbridge {ours:.2f} s from cold"
        f" caches ({warm:.2f} s again), loading every database with cantools to look its ids"
        f" up {theirs:.2f} s ({loaded} loaded): {theirs / ours:.1f}x faster from cold"
    )


def _run(
    plan: list[tuple[str, Any, Any, str | None]],
    candidates: list[Any],
    folder: Path,
    seconds: float,
    *,
    verbose: bool,
) -> tuple[dict[str, Tally], list[str], Drive | None]:
    """Every capture of `plan` generated and matched; per set its tally, the held-out
    captures matched without their database, and the first drive (for the cost)."""
    sets: dict[str, Tally] = {"tuned": Tally(), "held out": Tally()}
    absent: list[str] = []
    first_drive = None
    for label, truth, make, car in plan:
        try:
            drive = make(_path(truth, folder), seconds, car=car, seed=11)
        except Exception as exc:  # a database the generators cannot drive
            print(f"  {truth.name}: no drive ({type(exc).__name__}), skipped")
            continue
        first_drive = first_drive or drive
        _one(sets[label], truth, candidates, drive, verbose=verbose)
        if label == "held out":
            used = _absent(truth, candidates, drive)
            absent.append(f"{truth.name} <- {used or 'nothing'}")
    return sets, absent, first_drive


def _summary(sets: dict[str, Tally], absent: list[str], seconds: float) -> None:
    print(
        f"\n{seconds:g}-second drives: tuned from benchmarks/drives.py over"
        f" {sets['tuned'].captures} opendbc databases not held out, held out from"
        f" benchmarks/drives_heldout.py over {sets['held out'].captures} of HELD_OUT"
    )
    for label, tally in sets.items():
        if not tally.captures:
            continue
        print(_line(label, tally))
        for line in tally.misses:
            print(f"    {line}")
        for line in tally.decoded_other:
            print(f"    decoded with another database: {line}")
    captures = sum(t.captures for t in sets.values())
    share = sum(t.family for t in sets.values()) / max(captures, 1)
    held = sets["held out"]
    print(
        f"goal: the right database or its family first in >= {GOAL:.0%}:"
        f" {share:.1%} ({'ok' if share >= GOAL else 'MISSED'}); held out alone"
        f" {held.family / max(held.captures, 1):.1%}"
    )
    if absent:
        decoded = [a for a in absent if not a.endswith("<- nothing")]
        print(
            f"truth absent (held-out captures without their database): decoded with another"
            f" in {len(decoded)}/{len(absent)}: {'; '.join(decoded) or 'none'}"
        )


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.bench_discovery_match [--tuned N] [--seconds S] [--parts P]
    [-v]` (a subset while developing; `make bench` runs it all)."""
    import argparse

    parser = argparse.ArgumentParser(prog="bench_discovery_match")
    parser.add_argument("--tuned", type=int, default=40, help="tuned captures (default 40)")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per capture")
    parser.add_argument("--parts", default="tuned,heldout,cost", help="a subset, while developing")
    args = parser.parse_args(argv or [])
    parts = set(args.parts.split(","))
    from hwbridge.discovery.analysis.known import opendbc_available

    if not opendbc_available():
        print("  the opendbc package is not installed (pip install '.[opendbc]'): skipped")
        return
    warnings.simplefilter("ignore")
    candidates, where = _candidates()
    print(f"candidates: {where}")
    held = {Path(name).stem: car for name, car in HELD_OUT}
    cars = {Path(name).stem: car for name, car in CARS}
    by_stem = {k.name.removesuffix(".dbc"): k for k in candidates}
    pool = [k for k in candidates if k.name.removesuffix(".dbc") not in held]
    step = max(1, len(pool) // max(args.tuned, 1))
    plan: list[tuple[str, Any, Any, str | None]] = []
    if "tuned" in parts:
        plan += [("tuned", k, generate, cars.get(k.name)) for k in pool[::step][: args.tuned]]
    if "heldout" in parts:
        plan += [
            ("held out", by_stem[stem], generate_heldout, car)
            for stem, car in held.items()
            if stem in by_stem
        ]
    with tempfile.TemporaryDirectory(prefix="hwbridge-match-") as tmp:
        folder = Path(tmp)
        sets, absent, first_drive = _run(
            plan, candidates, folder, args.seconds, verbose=args.verbose
        )
        _summary(sets, absent, args.seconds)
        if first_drive is not None and "cost" in parts:
            _cost(candidates, first_drive)


if __name__ == "__main__":
    main(sys.argv[1:])
