"""The simulated vehicle served over socketcand on loopback, with a witness of every frame.

python-can virtual channels live in one process, so a `hwbridge` subprocess reaches the
simulator through socketcand, as a user's would. A second bus on the same virtual channel
keeps what the vehicle sent (the frames socketcand's raw mode carries), in order, so a
recording can be checked frame by frame against it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import can
from firmware_sim import VirtualVehicle
from firmware_sim.socketcand import SocketcandServer, carried
from tests.cli.conftest import DEMO, REPO

Frame = tuple[int, bool, bytes]
"""(arbitration id, extended, data): what a recording must reproduce."""


@dataclass
class SimBus:
    url: str
    server: SocketcandServer
    vehicle: VirtualVehicle
    sent: list[tuple[float, Frame]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def frames(self) -> list[tuple[float, Frame]]:
        with self.lock:
            return list(self.sent)


def frame_of(msg: can.Message) -> Frame:
    return msg.arbitration_id, bool(msg.is_extended_id), bytes(msg.data)


@pytest.fixture
def sim_bus() -> Iterator[SimBus]:
    channel = f"hwb-rec-{uuid.uuid4().hex[:12]}"
    witness = can.Bus(interface="virtual", channel=channel)
    stop = threading.Event()
    with (
        SocketcandServer({"vcan0": channel}) as server,
        VirtualVehicle(DEMO, channel=channel) as vehicle,
    ):
        sim = SimBus(server.url(), server, vehicle)

        def watch() -> None:
            while not stop.is_set():
                msg = witness.recv(0.05)
                if msg is not None and not msg.is_error_frame and carried(msg) is None:
                    with sim.lock:
                        sim.sent.append((msg.timestamp, frame_of(msg)))

        thread = threading.Thread(target=watch, name="test-witness", daemon=True)
        thread.start()
        try:
            yield sim
        finally:
            stop.set()
            thread.join(2)
            witness.shutdown()


def hwbridge(*argv: str, **kwargs: object) -> subprocess.Popen[str]:
    """`python -m hwbridge ARGV` in its own process, as a user runs it."""
    # faulthandler: a command that hangs can be made to show where (`stack_of`)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    env.pop("COLUMNS", None)
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "hwbridge", *argv],
        cwd=REPO,
        env=env,
        text=True,
        **kwargs,
    )


def stack_of(proc: subprocess.Popen[str]) -> str:
    """Where a command that does not end is stuck: every thread's stack (faulthandler's
    dump on SIGABRT), for the failure message of a test that waited for it in vain."""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "(no stack: the process did not answer SIGABRT)"
    return str(err)[-8000:]


def contiguous_in(recorded: list[Frame], sent: list[Frame]) -> int | None:
    """Where `recorded` sits in `sent` as one unbroken run (no frame missing, none added,
    none reordered), or None."""
    if not recorded:
        return None
    first = recorded[0]
    for start, frame in enumerate(sent):
        if frame == first and sent[start : start + len(recorded)] == recorded:
            return start
    return None


def read_back(path: Path) -> list[can.Message]:
    """The file as python-can reads it (asammdf for MF4 in this process)."""
    with can.LogReader(path) as reader:
        return list(reader)
