"""What a frame costs the simulator on a 300-message database at its periods (issue 37), against
sending the same pre-encoded frames with python-can alone; and how many such messages one core
holds at their periods.

`ford_lincoln_base_pt.dbc` (opendbc, 331 messages, 150 with a cycle time, the others at the
periods the simulator chooses) runs for 10 simulated seconds on a `SimulatedClock`, its
frames received by a peer bus as a user's tool would: the time of `clock.advance` is the
simulator's whole cost (scheduling, model, motions, cantools encoding, counters, checksums,
python-can's send). The baseline sends the very frames it sent, already built, with
`bus.send` to the same kind of peer. Both are timed in CPU seconds of this process (on a
shared machine the wall clock also counts the time other processes hold the core), the two
taken in turn, best of 5 each (a shared machine only ever adds time).
Goal: at most 1.5x. One core holds `1 / cost per frame` frames a second: divided by the
frames a second this database's messages make, that is how many of its messages it holds.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[1]
DBC = ROOT.parent / "shared" / "data" / "opendbc" / "ford_lincoln_base_pt.dbc"
SECONDS: Final = 10.0
REPEATS: Final = 5
GOAL: Final = 1.5


def simulate(db: Any) -> tuple[float, list[Any]]:
    """(seconds spent, frames sent) for SECONDS of the simulator on `db`."""
    import can
    from firmware_sim.clock import SimulatedClock
    from firmware_sim.vehicle import VirtualVehicle

    channel = f"cost-{uuid.uuid4().hex[:8]}"
    clock = SimulatedClock()
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        VirtualVehicle(db, channel=channel, clock=clock, obd=False, dbc_name=DBC.name),
    ):
        clock.advance(0.0)  # the first frames (all due at once) are not the steady state
        for _ in iter(lambda: peer.recv(0), None):
            pass
        started = time.process_time()
        clock.advance(SECONDS)
        spent = time.process_time() - started
        frames = list(iter(lambda: peer.recv(0), None))
    return spent, frames


def send_alone(frames: list[Any]) -> float:
    """Seconds python-can takes to send `frames`, already built, to a peer."""
    import can

    channel = f"cost-{uuid.uuid4().hex[:8]}"
    with (
        can.Bus(interface="virtual", channel=channel) as peer,
        can.Bus(interface="virtual", channel=channel, preserve_timestamps=True) as bus,
    ):
        started = time.process_time()
        for frame in frames:
            bus.send(frame)
        spent = time.process_time() - started
        while peer.recv(0) is not None:
            pass
    return spent


def main() -> None:
    if not DBC.is_file():
        print(f"skipped: {DBC} is not there (../shared/data)")
        return
    import cantools

    db: Any = cantools.database.load_file(str(DBC), strict=False)
    first, frames = simulate(db)
    sims, alones = [first], [send_alone(frames)]
    for _ in range(REPEATS - 1):  # in turn: a busy spell of the machine falls on both
        sims.append(simulate(db)[0])
        alones.append(send_alone(frames))
    sim = min(sims) / len(frames)
    alone = min(alones) / len(frames)
    ratio = sim / alone
    rate = len(frames) / SECONDS
    per_message = rate / len(db.messages)
    held = 1.0 / sim / per_message
    verdict = "ok" if ratio <= GOAL else "MISSED"
    print(
        f"{DBC.name}: {len(db.messages)} messages at their periods, {rate:.0f} frames/s; "
        f"simulator {sim * 1e6:.1f} us a frame, python-can alone {alone * 1e6:.1f} us: "
        f"{ratio:.2f}x (goal <= {GOAL}x) [{verdict}]"
    )
    print(
        f"one core holds {1 / sim:.0f} frames/s: about {held:.0f} messages of this database "
        f"at their periods ({per_message:.1f} frames/s each)"
    )


if __name__ == "__main__":
    main()
