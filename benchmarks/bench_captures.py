"""Decoding captures into Parquet against the obvious alternatives, measured in one run.

- BLF, MF4 and candump .log, end to end (read, decode, write Parquet) with `decode_captures`,
  against python-can's reader plus a per-frame `cantools` decode loop that writes nothing
  (goal: at least 4x faster);
- MF4 against asammdf's own `MDF(path).extract_bus_logging(...)` (open and decode, in memory;
  goal: no slower);
- the peak memory of decoding two million frames of each format, in a child process
  (goal: below 200 MB).

The captures are generated here (python-can's writers, into a temporary folder), never kept.
"""

from __future__ import annotations

import gc
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
SPEED_FORMATS = (".blf", ".mf4", ".log")
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


def _best(fn: Callable[[int], object], repeats: int = REPEATS) -> float:
    """The best of `repeats` runs of fn(run number)."""
    best = float("inf")
    for run in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn(run)
        best = min(best, time.perf_counter() - started)
    return best


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


def _asammdf(path: Path, dbc: Path) -> int:
    from asammdf import MDF

    with MDF(path) as mdf:
        out = mdf.extract_bus_logging({"CAN": [(str(dbc), 0)]})
        return sum(g.channel_group.cycles_nr for g in out.groups)


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hwbridge.captures import decode_captures
    summary = decode_captures([sys.argv[1]], [sys.argv[2]], sys.argv[3])
    assert summary.ok, summary.failed
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]
    print(summary.frames_read, status)
    """
)
# VmHWM (peak resident memory of this process image) resets at exec, unlike ru_maxrss,
# which a child inherits from the parent it was forked from.
_IMPORTS = (
    "from pathlib import Path; from hwbridge.captures import decode_captures; "
    "import pyarrow, duckdb, asammdf, numpy, can, cantools; "
    "print(Path('/proc/self/status').read_text().split('VmHWM:')[1].split()[0])"
)


def _peak_mb(path: Path, dbc: Path, out: Path) -> tuple[int, float, float]:
    """(frames, peak RSS of a child decoding `path`, peak RSS of a child that only imports)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(dbc), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    frames, peak_kb = (int(x) for x in done.stdout.split())
    idle = subprocess.run(
        [sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=True
    )
    return frames, peak_kb / 1024, int(idle.stdout) / 1024


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hwbridge-bench-") as tmp:
        root = Path(tmp)
        dbc = root / "bench.dbc"
        dbc.write_text(_dbc())
        print(f"{SPEED_FRAMES:,} frames, 30 messages of 6 signals (+3 unknown ids)")
        for suffix in SPEED_FORMATS:
            capture = _write(root / f"speed{suffix}", _messages(SPEED_FRAMES))

            def decode_once(run: int, capture: Path = capture) -> int:
                return _ours(capture, dbc, root / f"out{capture.suffix}{run}")

            ours = _best(decode_once)
            gc.collect()
            started = time.perf_counter()
            decoded = _pycan_cantools(capture, dbc)
            loop = time.perf_counter() - started
            frames_per_s = SPEED_FRAMES / ours
            print(
                f"{suffix[1:].upper()}: decode_captures to Parquet {ours:.2f} s "
                f"({frames_per_s / 1e6:.2f} M frames/s); python-can reader + cantools loop "
                f"{loop:.2f} s ({decoded:,} decoded, nothing written): "
                f"{loop / ours:.1f}x faster (goal >= 4x)"
            )
            if suffix == ".mf4":

                def extract_once(run: int, capture: Path = capture) -> int:
                    return _asammdf(capture, dbc)

                asam = _best(extract_once)
                print(
                    f"MF4: asammdf MDF().extract_bus_logging {asam:.2f} s (in memory, nothing "
                    f"written): decode_captures is {asam / ours:.2f}x its speed (goal >= 1.0x)"
                )
        for suffix in SPEED_FORMATS:
            big = _write(root / f"memory{suffix}", _messages(MEMORY_FRAMES, seed=2))
            frames, peak, idle = _peak_mb(big, dbc, root / f"memory_out{suffix}")
            print(
                f"memory: decoding {frames:,} frames ({suffix[1:].upper()}) peaks at {peak:.0f} MB "
                f"in its process (goal < {MEMORY_GOAL_MB} MB); the same libraries imported alone: "
                f"{idle:.0f} MB"
            )
            big.unlink()


if __name__ == "__main__":
    main()
