"""Multiplexed messages and float signals found by discovery, tuned, held out and fresh.

Drives of `benchmarks/drives_mux.py`: the multiplexed messages of the DBC files that have
them, beside a few of the car's plain messages and messages with float signals.

- tuned: the opendbc files and float layouts discovery was tuned on (`TUNED_MUX`,
  `TUNED_FLOATS`; signals filled by `benchmarks/drives.py`'s generator, pages sent in turn);
- held out: opendbc files and float layouts it was not tuned on (`HELD_OUT_MUX`,
  `HELD_OUT_FLOATS`; signals filled by `benchmarks/drives_heldout.py`'s generator, pages also
  at random, in bursts or every other frame). Honestly: two of their failures were looked at
  while the method was built (a noisy float near zero, whose exponent moves on most frames;
  a page's constant bit grouping the frames as the multiplexer does), so they are held out
  from tuning the thresholds on, not from being seen;
- fresh: cantools' own test databases with multiplexed messages (`FRESH_MUX`), run once the
  method was frozen, with the held-out float layouts; spent since (multiplex_choices was
  studied in issue 24's second round), still reported;
- new fresh: multiplexed messages of files none of the sets above uses (`NEW_FRESH_MUX`:
  cantools' and the opendbc package's), written down before the method's second round and
  run once when it was frozen.

Reported apart:

- multiplexers found (the multiplexer field exactly, its bits that moved);
- multiplexed signals exactly recovered (bits, order, signedness, in the right page), and
  the signals of every frame of those messages;
- precision: fields of multiplexed messages lying inside one true signal of their page;
- float signals found (float32 and float64, exactly placed), of those whose exponent or
  sign moved (a float that stays between two powers of two is an integer with a scale to
  anyone reading its bits; those are counted apart);
- false multiplexers and false floats: reported where the truth has none (in the plain
  messages of the same drives too; bench_discovery's drives and the truck log measure the
  rest).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from benchmarks.drives_mux import (
    FRESH_MUX,
    HELD_OUT_MUX,
    NEW_FRESH_MUX,
    TUNED_MUX,
    LayoutScore,
    generate_layouts,
    score_layouts,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SECONDS = 60.0


def _pct(a: int, b: int) -> str:
    return f"{a / b:6.1%}" if b else "     -"


def _line(name: str, s: LayoutScore) -> str:
    return (
        f"  {name:<26} multiplexers {s.muxes_found:>2}/{s.muxes:<2}"
        f"  multiplexed signals {s.page_exact:>3}/{s.page_signals:<3}"
        f" {_pct(s.page_exact, s.page_signals)}"
        f"  every-frame {s.whole_exact:>3}/{s.whole_signals:<3}"
        f"  precision {_pct(s.inside, s.fields)}"
        f"  floats {s.floats_found}/{s.floats} (+{s.floats_one_binade} in one binade)"
        f"  false: {s.false_muxes} mux, {s.false_floats} float"
    )


def _path(name: str, folder: Path) -> Path | None:
    """A file of ../shared/data by its path there, or the opendbc package's by its name."""
    if "/" in name:
        return DATA / name
    from benchmarks.bench_discovery import _dbc_path

    return _dbc_path(name, folder)


def run(
    cars: list[tuple[str, str | None]], *, held_out: bool, seconds: float, verbose: bool
) -> LayoutScore:
    from hwbridge.discovery.api import discover

    total = LayoutScore()
    with tempfile.TemporaryDirectory(prefix="hwbridge-bench-mux-") as tmp:
        for name, car in cars:
            path = _path(name, Path(tmp))
            if path is None or not path.exists():
                print(f"  {name}: not here, skipped")
                continue
            drive = generate_layouts(path, seconds, car=car, held_out=held_out)
            capture = drive.write(Path(tmp) / f"{path.stem}.blf")
            report = discover([capture]).to_dict()
            s = score_layouts(report, drive)
            total.add(s)
            print(_line(path.name, s))
            if verbose:
                for miss in s.misses:
                    print(f"    {miss}")
    return total


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.bench_discovery_mux [--parts tuned,heldout,fresh,newfresh]
    [--seconds S] [-v]`"""
    import argparse

    from hwbridge.discovery._deps import require_numpy

    parser = argparse.ArgumentParser(prog="bench_discovery_mux")
    parser.add_argument("--parts", default="tuned,heldout,fresh,newfresh")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    args = parser.parse_args(argv or [])
    parts = set(args.parts.split(","))
    require_numpy()
    if not DATA.is_dir():
        print("../shared/data is not here: nothing to measure")
        return
    results: list[tuple[str, LayoutScore]] = []
    start = time.perf_counter()
    if "tuned" in parts:
        print(f"tuned: {args.seconds:.0f}-second drives of the opendbc files tuned on")
        got = run(TUNED_MUX, held_out=False, seconds=args.seconds, verbose=args.verbose)
        print(_line("all tuned", got))
        results.append(("tuned", got))
    if "heldout" in parts:
        print(f"\nheld out: {args.seconds:.0f}-second drives of opendbc files never tuned on")
        got = run(HELD_OUT_MUX, held_out=True, seconds=args.seconds, verbose=args.verbose)
        print(_line("all held out", got))
        results.append(("held out (never tuned on)", got))
    if "fresh" in parts:
        print(
            f"\nfresh: {args.seconds:.0f}-second drives of cantools' test databases, run once"
            " after the first round (spent: multiplex_choices was studied in the second)"
        )
        got = run(FRESH_MUX, held_out=True, seconds=args.seconds, verbose=args.verbose)
        print(_line("all fresh", got))
        results.append(("fresh (spent)", got))
    if "newfresh" in parts:
        print(
            f"\nnew fresh: {args.seconds:.0f}-second drives of files no set above uses,"
            " written down before the method's second round, run once it was frozen"
        )
        got = run(NEW_FRESH_MUX, held_out=True, seconds=args.seconds, verbose=args.verbose)
        print(_line("all new fresh", got))
        results.append(("new fresh (never looked at)", got))
    print()
    for label, s in results:
        print(
            f"{label}: multiplexers {s.muxes_found}/{s.muxes}, multiplexed signals"
            f" {_pct(s.page_exact, s.page_signals).strip()} exact, precision"
            f" {_pct(s.inside, s.fields).strip()}, floats {s.floats_found}/{s.floats},"
            f" false multiplexers {s.false_muxes}, false floats {s.false_floats}"
        )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
