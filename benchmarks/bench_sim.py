"""How fast `python -m firmware_sim` is ready: the issue asks for under a second.

Ready means the socketcand line is printed and the server accepts clients. Median of
several launches; the goal is checked against the median, not the worst run.
"""

from __future__ import annotations

import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DBC = ROOT / "dbc" / "demo_vehicle.dbc"
LAUNCHES = 7
GOAL_S = 1.0


def launch_once() -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--dbc", str(DBC), "--socketcand", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.recv(16)  # the "< hi >" greeting
        return time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def main() -> None:
    times = [launch_once() for _ in range(LAUNCHES)]
    median = statistics.median(times)
    verdict = "ok" if median < GOAL_S else "MISSED"
    print(
        f"firmware_sim ready (socketcand line printed and accepting): median {median:.2f} s "
        f"over {LAUNCHES} launches (min {min(times):.2f}, max {max(times):.2f}); "
        f"goal < {GOAL_S:.0f} s [{verdict}]"
    )


if __name__ == "__main__":
    main()
