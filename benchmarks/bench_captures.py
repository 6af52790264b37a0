"""Decoding captures into Parquet against the obvious alternatives, measured in one run.

- BLF, MF4, candump .log, Vector ASC and python-can's CSV, end to end (read, decode, write
  Parquet) with `decode_captures`, against python-can's reader plus a per-frame `cantools`
  decode loop that writes nothing (goal: at least 4x faster; CSV, whose python-can reader
  is a plain split, reported), each side run `REPEATS` times in turn, medians reported;
- MF4 as a whole run, process start to the Parquet files written (`hwbridge decode`),
  against a process that runs asammdf's `MDF(path).extract_bus_logging(...)` on the same
  file with the same database (goal: at least as fast; asammdf writes nothing);
- the peak memory of `hwbridge decode` on two million frames of each format, in its own
  process, imports included (goal: below 200 MB), beside its peak on a one-second capture
  of the same format (what the imports and the set-up cost).

The captures are generated here (python-can's writers, into a temporary folder), never kept.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import can

SPEED_FRAMES = 300_000
MEMORY_FRAMES = 2_000_000
REPEATS = 3
FORMATS = (".blf", ".mf4", ".log", ".asc", ".csv")
SPEED_GOALS = {".blf": 4.0, ".mf4": 4.0, ".log": 4.0, ".asc": 4.0}  # CSV: reported
MEMORY_GOAL_MB = 200


def _dbc() -> str:
    """30 messages of 6 signals: Intel and Motorola, scaled, signed, labelled, multiplexed."""
    lines = ['VERSION ""', "", "NS_ :", "", "BS_:", "", "BU_: ECU", ""]
    for m in range(30):
        frame_id = 0x100 + m if m % 3 else 0x80000000 | (0x18F00000 + m)
        lines.append(f"BO_ {frame_id} Msg{m}: 8 ECU")
        if m % 5 == 0:
            lines.append(' SG_ Page M : 0|8@1+ (1,0) [0|255] "" ECU')
            lines.append(f' SG_ A{m} m0 : 8|16@1+ (0.1,0) [0|6553.5] "V" ECU')
            lines.append(f' SG_ B{m} m1 : 8|16@1- (0.01,-10) [-337|317] "A" ECU')
            lines.append(f' SG_ C{m} : 24|8@1+ (1,-40) [-40|215] "degC" ECU')
            lines.append(f' SG_ D{m} : 39|16@0+ (0.25,0) [0|16383] "rpm" ECU')
            lines.append(f' SG_ E{m} : 48|4@1+ (1,0) [0|15] "" ECU')
        else:
            lines.append(f' SG_ A{m} : 0|16@1+ (0.125,0) [0|8191] "rpm" ECU')
            lines.append(f' SG_ B{m} : 16|8@1+ (1,-40) [-40|215] "degC" ECU')
            lines.append(f' SG_ C{m} : 24|12@1- (0.5,0) [-1024|1023] "Nm" ECU')
            lines.append(f' SG_ D{m} : 47|8@0+ (0.4,0) [0|100] "%" ECU')
            lines.append(f' SG_ E{m} : 48|4@1+ (1,0) [0|15] "" ECU')
            lines.append(f' SG_ F{m} : 52|12@1+ (0.01,0) [0|40.95] "V" ECU')
        lines.append("")
    for m in range(30):
        frame_id = 0x100 + m if m % 3 else 0x80000000 | (0x18F00000 + m)
        lines.append(f'VAL_ {frame_id} E{m} 0 "Off" 1 "On" 2 "Error" 3 "NotAvailable" ;')
    return "\n".join(lines) + "\n"


def _messages(count: int, seed: int = 1) -> Iterator[can.Message]:
    """Random payloads on 30 known ids and 3 unknown ones, 5,000 frames/s."""
    rng = np.random.default_rng(seed)
    for first in range(0, count, 100_000):
        n = min(100_000, count - first)
        yield from _block(rng, first, n)


def _block(rng: np.random.Generator, first: int, n: int) -> Iterator[can.Message]:
    payloads = rng.integers(0, 256, size=(n, 8), dtype=np.uint8)
    payloads[:, 0] &= 1  # multiplexer pages 0 and 1
    which = rng.integers(0, 33, size=n)  # 3 of 33 ids are not in the database
    t0 = 1_700_000_000.0
    for i, (w, data) in enumerate(zip(which.tolist(), payloads, strict=True), start=first):
        if w >= 30:
            arbitration_id, extended = 0x700 + w, False
        elif w % 3:
            arbitration_id, extended = 0x100 + w, False
        else:
            arbitration_id, extended = 0x18F00000 + w, True
        yield can.Message(
            timestamp=t0 + i * 0.0002,
            arbitration_id=arbitration_id,
            is_extended_id=extended,
            data=data.tobytes(),
            channel=0,
        )


def _write(path: Path, messages: Iterable[can.Message]) -> Path:
    with can.Logger(str(path)) as logger:
        for msg in messages:
            logger.on_message_received(msg)
    return path


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _in_turn(sides: dict[str, Callable[[int], object]]) -> dict[str, float]:
    """The median time of each side over `REPEATS` runs, the sides taking turns so a busy
    spell of the machine falls on both."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for run in range(REPEATS):
        for name, fn in sides.items():
            times[name].append(_timed(lambda fn=fn, run=run: fn(run)))  # type: ignore[misc]
    return {name: statistics.median(t) for name, t in times.items()}


def _pycan_cantools(path: Path, dbc: Path) -> int:
    import cantools

    db: Any = cantools.database.load_file(str(dbc))
    decoded = 0
    for msg in can.LogReader(path):
        try:
            message = db.get_message_by_frame_id(msg.arbitration_id)
        except KeyError:
            continue
        message.decode(bytes(msg.data))
        decoded += 1
    return decoded


def _ours(path: Path, dbc: Path, out: Path) -> int:
    from hwbridge.captures import decode_captures

    _clear_database_cache()  # every timed run parses the DBC, as asammdf's does

    summary = decode_captures([path], [dbc], out)
    assert summary.ok, summary.failed
    return summary.frames_decoded


def _clear_database_cache() -> None:
    from hwbridge.captures import file_task

    file_task._tables.cache_clear()


_ASAMMDF_RUN = (
    "import sys; from asammdf import MDF; "
    "out = MDF(sys.argv[1]).extract_bus_logging({'CAN': [(sys.argv[2], 0)]}); "
    "print(sum(g.channel_group.cycles_nr for g in out.groups))"
)


def _process(args: Callable[[int], list[str]]) -> Callable[[int], object]:
    """A run of `python <args(run)>` in its own process (its start-up included)."""

    def run(number: int) -> object:
        return subprocess.run([sys.executable, *args(number)], check=True, capture_output=True)

    return run


# VmHWM (peak resident memory of this process image) resets at exec, unlike ru_maxrss,
# which a child inherits from the parent it was forked from.
_DECODE_CHILD = textwrap.dedent(
    """
    import atexit, runpy, sys
    from pathlib import Path
    def peak():
        status = Path("/proc/self/status").read_text()
        print("VmHWM", status.split("VmHWM:")[1].split()[0], file=sys.stderr)
    atexit.register(peak)
    sys.argv = ["hwbridge", *sys.argv[1:]]
    runpy.run_module("hwbridge", run_name="__main__")
    """
)


def _decode_args(path: Path, dbc: Path, out: Path) -> list[str]:
    return ["decode", str(path), "--dbc", str(dbc), "--out", str(out)]


def _peak_mb(path: Path, dbc: Path, out: Path) -> float:
    """Peak resident memory of `hwbridge decode path` in its own process, in MB."""
    done = subprocess.run(
        [sys.executable, "-c", _DECODE_CHILD, *_decode_args(path, dbc, out)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("VmHWM")][-1]
    return int(line.split()[1]) / 1024


def _big_mf4(root: Path, small: Path, frames: int) -> tuple[Path, int]:
    """At least `frames` frames of MF4: copies of `small` joined by asammdf (python-can's
    writer takes minutes for two million), saved sorted and compressed as python-can's."""
    from asammdf import MDF

    copies = -(-frames // SPEED_FRAMES)
    path = root / "memory.mf4"
    with MDF.concatenate([small] * copies) as joined:
        joined.save(path, overwrite=True, compression=2)
    return path, copies * SPEED_FRAMES


def _speed(root: Path, dbc: Path, captures: dict[str, Path]) -> None:
    for suffix, capture in captures.items():
        decoded: list[int] = []

        def decode(run: int, c: Path = capture) -> int:
            return _ours(c, dbc, root / f"out{c.suffix}{run}")

        def python_can(run: int, c: Path = capture, counts: list[int] = decoded) -> None:
            counts.append(_pycan_cantools(c, dbc))

        medians = _in_turn({"ours": decode, "loop": python_can})
        goal = f"goal >= {SPEED_GOALS[suffix]:g}x" if suffix in SPEED_GOALS else "reported"
        ours, loop = medians["ours"], medians["loop"]
        print(
            f"{suffix[1:].upper()}: decode_captures to Parquet {ours:.2f} s "
            f"({SPEED_FRAMES / ours / 1e6:.2f} M frames/s); python-can reader + cantools loop "
            f"{loop:.2f} s ({decoded[-1]:,} decoded, nothing written): {loop / ours:.1f}x faster "
            f"({goal}; medians of {REPEATS})",
            flush=True,
        )


def _whole_mf4(root: Path, dbc: Path, mf4: Path) -> None:
    medians = _in_turn(
        {
            # each run into a new folder: nothing of an earlier run to remove first
            "ours": _process(
                lambda run: ["-m", "hwbridge", *_decode_args(mf4, dbc, root / f"whole{run}")]
            ),
            "asammdf": _process(lambda run: ["-c", _ASAMMDF_RUN, str(mf4), str(dbc)]),
        }
    )
    ours, asam = medians["ours"], medians["asammdf"]
    print(
        f"MF4 whole run ({SPEED_FRAMES:,} frames, process start to end): hwbridge decode "
        f"(Parquet written) {ours:.2f} s, asammdf MDF().extract_bus_logging (in memory, "
        f"nothing written) {asam:.2f} s: {asam / ours:.2f}x its speed (goal >= 1.0x; "
        f"medians of {REPEATS})",
        flush=True,
    )


def _memory(root: Path, dbc: Path, captures: dict[str, Path]) -> None:
    for suffix, capture in captures.items():
        if suffix == ".mf4":
            big, frames = _big_mf4(root, capture, MEMORY_FRAMES)
        else:
            big = _write(root / f"memory{suffix}", _messages(MEMORY_FRAMES, seed=2))
            frames = MEMORY_FRAMES
        small = _write(root / f"second{suffix}", _messages(5_000, seed=3))
        peak = _peak_mb(big, dbc, root / f"memory_out{suffix}")
        base = _peak_mb(small, dbc, root / f"second_out{suffix}")
        print(
            f"memory: hwbridge decode of {frames:,} frames ({suffix[1:].upper()}) peaks at "
            f"{peak:.0f} MB in its process (goal < {MEMORY_GOAL_MB} MB); of one second "
            f"(5,000 frames): {base:.0f} MB",
            flush=True,
        )
        big.unlink()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hwbridge-bench-") as tmp:
        root = Path(tmp)
        dbc = root / "bench.dbc"
        dbc.write_text(_dbc())
        print(f"{SPEED_FRAMES:,} frames, 30 messages of 6 signals (+3 unknown ids)", flush=True)
        captures = {s: _write(root / f"speed{s}", _messages(SPEED_FRAMES)) for s in FORMATS}
        _speed(root, dbc, captures)
        _whole_mf4(root, dbc, captures[".mf4"])
        _memory(root, dbc, captures)


if __name__ == "__main__":
    main()
