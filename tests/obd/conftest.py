"""A simulated vehicle with its diagnostic ECUs, reachable over ISO-TP and through an ELM327."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from firmware_sim.elm327 import Elm327Device
from firmware_sim.model import VehicleModel
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.obd import ObdDriver
from hwbridge.policy import SendPolicy
from tests.conftest import wait_until
from tests.sim.conftest import DEMO

pytestmark = pytest.mark.usefixtures("no_thread_leaks")

ELM_WAIT_MS = 1000
"""The simulated ELM327's NO DATA timeout in tests that compare answers, not timing: its
200 ms default, the real chip's, turned a late ECU thread on a busy machine into NO DATA."""
ELM_FLOOR_MS = 300
"""How long the simulated ELM327 waits at least for a second ECU in those tests: adaptive
timing's 50 ms is shorter than a busy machine may hold the vehicle's responder between two
ECUs' answers."""


def patient_elm(channel: str, protocol: str = "0") -> Elm327Device:
    """A simulated ELM327 that waits ELM_WAIT_MS for an ECU and ELM_FLOOR_MS for another."""
    return Elm327Device(
        channel, protocol=protocol, no_data_timeout_ms=ELM_WAIT_MS, adaptive_floor_ms=ELM_FLOOR_MS
    )


@pytest.fixture
def channel() -> str:
    return f"obd-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def car(channel: str) -> Iterator[VirtualVehicle]:
    """Parked, warm, with the overheat fault already stored (P0217, MIL on)."""
    model = VehicleModel(seed=4, driving=False, coolant_c=118.0)
    with VirtualVehicle(DEMO, channel=channel, model=model) as vehicle:
        vehicle.inject_fault("overheat")
        assert wait_until(lambda: bool(vehicle.state.stored_dtcs), timeout_s=10)
        yield vehicle


@pytest.fixture
def elm(channel: str) -> Iterator[Elm327Device]:
    with patient_elm(channel) as device:
        yield device


Opener = Callable[..., ObdDriver]


@pytest.fixture(params=["can", "elm327"])
def open_driver(
    request: pytest.FixtureRequest, channel: str, car: VirtualVehicle
) -> Iterator[Opener]:
    """Opens an ObdDriver on the vehicle over one adapter or the other."""
    opened: list[ObdDriver] = []
    device: list[Elm327Device] = []

    def open_(policy: SendPolicy | None = None) -> ObdDriver:
        if request.param == "can":
            driver = ObdDriver.from_can(bus=f"virtual:{channel}", policy=policy)
        else:
            if not device:
                device.append(patient_elm(channel))
                device[0].start()
            driver = ObdDriver.from_elm327(device[0].port_name, policy=policy)
        opened.append(driver)
        return driver

    yield open_
    for driver in opened:
        driver.close()
    for dev in device:
        dev.stop()


Streamed = Callable[[], Iterator[bytes]]


class ScriptedElm:
    """A fake ELM327 on a pty that answers each command from a script (for replies the
    simulator never gives: garbage, odd adapter messages). An answer that is a function
    streams what it yields until it ends (its last chunk brings the prompt, if any) or a
    character arrives (then STOPPED, as a real chip)."""

    def __init__(self, answers: dict[str, bytes | Streamed]) -> None:
        self.answers = answers
        self.master, slave = os.openpty()
        import tty

        tty.setraw(slave)
        self.slave = slave
        self.port = os.ttyname(slave)
        self.commands: list[str] = []
        self._stop = threading.Event()
        self._stream: tuple[threading.Thread, threading.Event] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="scripted-elm")
        self._thread.start()

    def _run(self) -> None:
        import select

        line = b""
        busy = False
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.master, 1024)
            except OSError:
                return
            for byte in data:
                if self._stream is not None and self._stream[0].is_alive():
                    self._end_stream()  # a real chip stops on any character, and discards it
                    continue
                if busy:  # a real chip stops on any character, and discards it
                    busy = False
                    os.write(self.master, b"STOPPED\r\r>")
                    continue
                if byte == 0x0D:
                    command = line.decode().strip().upper().replace(" ", "")
                    self.commands.append(command)
                    answer = self.answers.get(command, b"OK" if command.startswith("AT") else b"?")
                    if callable(answer):
                        self._start_stream(answer)
                    elif answer == b"<silent>":
                        busy = True
                    else:
                        os.write(self.master, answer + b"\r\r>")
                    line = b""
                else:
                    line += bytes([byte])

    def _start_stream(self, answer: Streamed) -> None:
        stop = threading.Event()

        def run() -> None:
            import select

            for chunk in answer():
                # never blocked on a full pty: the reader may have stopped reading
                while not (stop.is_set() or self._stop.is_set()):
                    if select.select([], [self.master], [], 0.05)[1]:
                        break
                if stop.is_set() or self._stop.is_set():
                    break
                try:
                    os.write(self.master, chunk)
                except OSError:
                    return
            if stop.is_set() and not self._stop.is_set():
                os.write(self.master, b"STOPPED\r\r>")

        thread = threading.Thread(target=run, daemon=True, name="scripted-elm-stream")
        self._stream = (thread, stop)
        thread.start()

    def _end_stream(self) -> None:
        if self._stream is not None:
            thread, stop = self._stream
            stop.set()
            thread.join(2)
            self._stream = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._end_stream()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def scripted() -> Iterator[Callable[[dict[str, bytes | Streamed]], ScriptedElm]]:
    made: list[ScriptedElm] = []

    def make(answers: dict[str, bytes | Streamed]) -> ScriptedElm:
        base = {"ATZ": b"\r\rELM327 v1.5", "ATRV": b"12.1V", "ATDPN": b"A6"}
        made.append(ScriptedElm({**base, **answers}))
        return made[-1]

    yield make
    for elm in made:
        elm.close()


def settle() -> None:
    time.sleep(0.01)
