"""`python -m firmware_sim` as a user runs it: a subprocess, real TCP and ptys, signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import serial

import can
from firmware_sim import cli
from firmware_sim.obd import DEFAULT_VIN
from hwbridge import CanDriver
from hwbridge.can.database.database import CanDatabase
from tests.conftest import wait_until
from tests.sim.conftest import DEMO, ROOT, collect, signals

SOCKETCAND_LINE = re.compile(r"^socketcand: socketcand://127\.0\.0\.1:(\d+)/vcan0$")
PTY_LINE = re.compile(r"^(slcan|elm327): (/dev/pts/\d+)$")
READY_LIMIT_S = 5.0  # a hang, not a speed target: `make bench` measures the ~0.35 s start


@dataclass
class Sim:
    process: subprocess.Popen[str]
    lines: list[str]
    ready_s: float

    @property
    def port(self) -> int:
        match = SOCKETCAND_LINE.match(self.lines[0])
        assert match, self.lines
        return int(match.group(1))

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=10)
        return self.process.returncode, err


def launch(*options: str, expect_lines: int = 1) -> Sim:
    """Start the simulator and read its transport lines (never longer than 10 s)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--dbc", str(DEMO), *options],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    timer = threading.Timer(10.0, process.kill)
    timer.start()
    try:
        while len(lines) < expect_lines:
            line = process.stdout.readline() if process.stdout else ""
            if not line:
                break
            lines.append(line.rstrip("\n"))
    finally:
        timer.cancel()
    ready_s = time.monotonic() - started
    if len(lines) < expect_lines:
        _, err = process.communicate(timeout=5)
        pytest.fail(f"simulator printed {lines} then exited {process.returncode}: {err}")
    return Sim(process, lines, ready_s)


@pytest.fixture(scope="module")
def sim() -> Iterator[Sim]:
    running = launch("--socketcand", "127.0.0.1:0", "--seed", "3")
    yield running
    if running.process.poll() is None:
        running.stop()


def test_prints_the_socketcand_line_when_ready(sim: Sim) -> None:
    assert len(sim.lines) == 1 and SOCKETCAND_LINE.match(sim.lines[0]), sim.lines
    assert sim.ready_s < READY_LIMIT_S, f"ready after {sim.ready_s:.2f} s"


def test_a_python_can_socketcand_client_receives_engine_data(
    sim: Sim, demo_db: CanDatabase
) -> None:
    bus = can.Bus(interface="socketcand", host="127.0.0.1", port=sim.port, channel="vcan0")
    try:
        frames = collect(bus, 0.5)
    finally:
        bus.shutdown()
    engine = [m for m in frames if m.arbitration_id == 0x100]
    assert len(engine) >= 10
    rpm = demo_db.decode("EngineData", bytes(engine[-1].data)).signals["EngineSpeed"]
    assert isinstance(rpm, float) and 500 < rpm < 7000


def test_hwbridge_reads_engine_speed_from_the_simulator(sim: Sim) -> None:
    url = f"socketcand://127.0.0.1:{sim.port}/vcan0"
    with CanDriver.from_dbc(str(DEMO), bus=url) as driver:
        call = {"tool": "read_signals", "arguments": {"signals": ["EngineSpeed"]}}
        response = driver.process_llm_response(json.dumps(call))
    assert response.call_executed, response.retry_prompt
    value = response.tool_call_result["values"]["EngineSpeed"]
    assert value["unit"] == "rpm" and 500 < value["value"] < 7000


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_stop_it_cleanly(signum: int) -> None:
    running = launch("--no-drive")  # no transport option: socketcand on any free port
    assert SOCKETCAND_LINE.match(running.lines[0])
    code, err = running.stop(signum)
    assert code == 0
    assert err == ""


def test_all_three_transports_and_the_elm327_asks_our_obd_responder() -> None:
    running = launch(
        "--socketcand", "127.0.0.1:0", "--slcan", "--elm327", "--no-drive", expect_lines=3
    )
    try:
        assert SOCKETCAND_LINE.match(running.lines[0])
        kinds = [PTY_LINE.match(line) for line in running.lines[1:]]
        assert [m.group(1) if m else None for m in kinds] == ["slcan", "elm327"]
        elm_path = kinds[1].group(2) if kinds[1] else ""
        with serial.Serial(elm_path, timeout=3.0) as link:

            def ask(command: str) -> str:
                link.write(command.encode("ascii") + b"\r")
                answer: bytes = link.read_until(b">")
                return answer.decode("ascii")

            ask("ATZ")
            ask("ATE0")
            ask("ATSP6")
            rpm = ask("010C").split("\r")[0].split()
            assert rpm[:2] == ["41", "0C"]
            assert 700 < (int(rpm[2], 16) * 256 + int(rpm[3], 16)) / 4 < 900
            vin_lines = ask("0902").replace("\n", "").split("\r")
            data = "".join(line.split(":", 1)[1] for line in vin_lines if ":" in line)
            assert DEFAULT_VIN.encode().hex().upper() in data.replace(" ", "")
    finally:
        code, err = running.stop()
    assert code == 0 and err == ""


def test_without_dbc_the_bundled_demo_vehicle_runs(
    channel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --dbc: the demo vehicle that ships with hwbridge, said in exactly one stderr line."""
    from hwbridge.resources import bundled_dbc

    stop = threading.Event()
    codes: list[int] = []
    peer = can.Bus(interface="virtual", channel=channel)
    runner = threading.Thread(
        target=lambda: codes.append(cli.main(["--channel", channel, "--no-drive"], stop=stop))
    )
    runner.start()
    out = err = ""
    try:

        def ready() -> bool:
            nonlocal out, err
            captured = capsys.readouterr()
            out, err = out + captured.out, err + captured.err
            return "socketcand: " in out

        assert wait_until(ready)
        frames = collect(peer, 0.2)
    finally:
        stop.set()
        runner.join(10)
        peer.shutdown()
    assert codes == [0]
    assert err.splitlines() == [
        f"python -m firmware_sim: no --dbc given, using the bundled demo vehicle ({bundled_dbc()})"
    ]
    assert 0x100 in {m.arbitration_id for m in frames}  # EngineData of the demo vehicle


def test_python_m_firmware_sim_alone_from_another_folder(tmp_path: Path) -> None:
    """What the README and CI run: no option at all, in a folder with no database in it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = threading.Timer(10.0, process.kill)
    timer.start()
    try:
        line = process.stdout.readline() if process.stdout else ""
    finally:
        timer.cancel()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
    assert SOCKETCAND_LINE.match(line.strip()), (line, err)
    assert process.returncode == 0
    assert err.count("\n") == 1 and "bundled demo vehicle" in err


def test_faults_and_no_drive_in_process(channel: str, capsys: pytest.CaptureFixture[str]) -> None:
    stop = threading.Event()
    codes: list[int] = []
    argv = [
        "--dbc",
        str(DEMO),
        "--channel",
        channel,
        "--no-drive",
        "--fault",
        "silence:EngineData",
        "--fault",
        "out_of_range:VehicleSpeed",
    ]
    peer = can.Bus(interface="virtual", channel=channel)
    runner = threading.Thread(target=lambda: codes.append(cli.main(argv, stop=stop)))
    runner.start()
    try:
        assert wait_until(lambda: "socketcand: " in capsys.readouterr().out)
        frames = collect(peer, 0.3)
    finally:
        stop.set()
        runner.join(10)
        peer.shutdown()
    assert codes == [0]
    ids = {m.arbitration_id for m in frames}
    assert 0x100 not in ids and 0x120 in ids
    db = CanDatabase.load(DEMO)
    dynamics = next(m for m in frames if m.arbitration_id == 0x110)
    assert signals(db, "VehicleDynamics", dynamics.data)["VehicleSpeed"] > 300
    gear = next(m for m in frames if m.arbitration_id == 0x120)
    assert signals(db, "TransmissionStatus", gear.data)["GearLever"] == {
        "value": 0,
        "label": "P",
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--dbc", "no/such.dbc"], "no/such.dbc"),
        (["--dbc"], "--dbc"),
        (["--dbc", str(DEMO), "--socketcand", "localhost"], "HOST:PORT"),
        (["--dbc", str(DEMO), "--fault", "meltdown"], "overheat, silence"),
        (["--dbc", str(DEMO), "--fault", "silence"], "silence:MESSAGE"),
        (["--dbc", str(DEMO), "--fault", "silence:NoSuchMessage"], "NoSuchMessage"),
        (["--dbc", str(DEMO), "--fault", "overheat:Engine"], "takes no target"),
        (["--dbc", str(DEMO), "--vin", "TOO-SHORT"], "VIN"),
        (["--dbc", str(DEMO), "--seed", "x"], "--seed"),
        (["--dbc", str(DEMO), "--bogus"], "--bogus"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert expected in captured.err
    assert "Traceback" not in captured.err


def test_broken_dbc_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.dbc"
    broken.write_text("BO_ this is not a database\n")
    assert cli.main(["--dbc", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "broken.dbc" in err and "Traceback" not in err


def test_help_documents_the_default_transport(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "127.0.0.1:0" in out and "socketcand://HOST:PORT/vcan0" in out
    assert "silence:MESSAGE" in out
