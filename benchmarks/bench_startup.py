"""Start-up of the `hwbridge` command: wall time and peak memory of whole processes.

    python benchmarks/run.py startup

Times, as separate processes of this interpreter (best of 5, alternating): `hwbridge --help`
and every subcommand's `--help`, `hwbridge decode` on a 100-frame capture (a canutils .log of
the demo vehicle, into a fresh folder each run) and the reference `python -c "import can,
cantools"`, which every CAN tool pays before any work. Peak memory is the child's maximum
resident set (ru_maxrss). The goal: every `--help` in at most 0.3 s, and decode's start near
the reference (ratio = decode / reference; 1.00x means decoding 100 frames costs no more than
importing python-can and cantools). Only ratios carry over to another machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
REPEATS = 5
HELP_GOAL_S = 0.3
SUBCOMMANDS = (
    "tools", "prompt", "inspect", "chat", "mcp", "drivers", "sim", "schema", "decode",
    "discover", "demo", "ports",
)  # fmt: skip


def _env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(ROOT / "src"), str(ROOT / "firmware-sim"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _measured(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall time and peak RSS of `argv`, the peak taken in a wrapper process of its own."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "w = time.perf_counter() - t\n"
        "assert p.returncode == 0, p.stderr.decode()[-500:]\n"
        "print(w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, *argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed: {proc.stderr[-500:]}")
    wall, kb = proc.stdout.split()
    return float(wall), int(kb) / 1024


def write_capture(path: Path, frames: int = 100) -> Path:
    import cantools

    import can

    db = cantools.database.load_file(str(DEMO))
    assert isinstance(db, cantools.database.can.Database)
    message = db.get_message_by_name("EngineData")
    data = message.encode(
        {
            "EngineSpeed": 1500,
            "ThrottlePosition": 20,
            "CoolantTemp": 90,
            "EngineLoad": 30,
            "EngineState": "Running",
            "RollingCounter": 0,
            "Checksum": 0,
        }
    )
    with can.Logger(str(path)) as log:
        for i in range(frames):
            log.on_message_received(
                can.Message(
                    timestamp=1_700_000_000 + i * 0.01,
                    arbitration_id=message.frame_id,
                    data=data,
                    channel="vcan0",
                )
            )
    return path


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hwbridge-startup-") as tmp:
        folder = Path(tmp)
        capture = write_capture(folder / "drive.log")
        cases: dict[str, list[str]] = {
            "hwbridge --help": ["-m", "hwbridge", "--help"],
            "hwbridge decode (100 frames)": [
                "-m", "hwbridge", "decode", str(capture), "--dbc", str(DEMO), "--out", "OUT",
            ],
            'python -c "import can, cantools"': ["-c", "import can, cantools"],
            **{f"hwbridge {c} --help": ["-m", "hwbridge", c, "--help"] for c in SUBCOMMANDS},
        }  # fmt: skip
        best: dict[str, tuple[float, float]] = {}
        for i in range(REPEATS):
            for name, argv in cases.items():
                out = str(folder / f"out{i}")  # a fresh dataset folder each run
                wall, mb = _measured([out if a == "OUT" else a for a in argv], folder)
                old = best.get(name)
                best[name] = (min(wall, old[0]), min(mb, old[1])) if old else (wall, mb)
    print(f"{'':<34} {'wall (best of 5)':>17} {'peak RSS':>10}")
    for name, (wall, mb) in best.items():
        print(f"{name:<34} {wall:>15.3f} s {mb:>7.0f} MB")
    help_s = best["hwbridge --help"][0]
    slowest = max((n for n in best if n.endswith(" --help")), key=lambda n: best[n][0])
    decode, reference = (
        best["hwbridge decode (100 frames)"],
        best['python -c "import can, cantools"'],
    )
    verdict = "met" if best[slowest][0] <= HELP_GOAL_S else "MISSED"
    print(
        f"--help: {help_s:.3f} s, the slowest {slowest} {best[slowest][0]:.3f} s, "
        f"goal <= {HELP_GOAL_S} s: {verdict}"
    )
    print(
        f"decode / reference: {decode[0] / reference[0]:.2f}x the time, "
        f"{decode[1] / reference[1]:.2f}x the memory"
    )


if __name__ == "__main__":
    main()
