"""Shared fixtures for the `hwbridge` command: paths, an in-process runner, a live sender."""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import can
from hwbridge.can.database.database import CanDatabase
from hwbridge.cli.main import main
from tests.shared_data import DATA, require_shared

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "dbc" / "demo_vehicle.dbc"
FORD = DATA / "opendbc" / "ford_lincoln_base_pt.dbc"

ENGINE = {
    "EngineSpeed": 1500,
    "ThrottlePosition": 20,
    "CoolantTemp": 90,
    "EngineLoad": 30,
    "EngineState": "Running",
    "RollingCounter": 0,
    "Checksum": 0,
}


@dataclass
class Result:
    code: int
    out: str
    err: str


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """`main(argv)` in this process, stdin replaced by `stdin`; exit code and captured output."""

    # output to a pipe is laid out wide; a COLUMNS inherited from a parallel runner is not
    monkeypatch.delenv("COLUMNS", raising=False)

    def runner(*argv: str, stdin: str = "") -> Result:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return runner


@pytest.fixture
def ford() -> Path:
    """Ford's 331 messages and 2,150 signals, from ../shared (skipped without it)."""
    require_shared()
    return FORD


@pytest.fixture
def channel() -> str:
    """A virtual channel no other test uses (python-can virtual channels are process-wide)."""
    return f"hwb-cli-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def engine_sender(channel: str) -> Iterator[can.BusABC]:
    """EngineData at 100 Hz on `channel`, as the ECM would send it; yields the sender's bus,
    which also receives what the code under test sends."""
    frame = CanDatabase.load(DEMO).encode("EngineData", ENGINE)
    bus = can.Bus(interface="virtual", channel=channel, receive_own_messages=False)
    stop = threading.Event()

    def send() -> None:
        while not stop.is_set():
            bus.send(
                can.Message(
                    arbitration_id=frame.arbitration_id,
                    data=frame.data,
                    is_extended_id=frame.is_extended,
                )
            )
            stop.wait(0.01)

    thread = threading.Thread(target=send, name="test-ecm", daemon=True)
    thread.start()
    yield bus
    stop.set()
    thread.join(2)
    bus.shutdown()
