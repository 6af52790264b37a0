"""`hwbridge monitor`: in a real terminal (tmux) against the simulator over socketcand, and
its screen model on its own (filter, keys, bounds)."""

from __future__ import annotations

import ast
import io
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

import can
from firmware_sim.clock import SimulatedClock
from firmware_sim.model import VehicleModel
from firmware_sim.vehicle import VirtualVehicle
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.monitor import BusMonitor
from hwbridge.cli.monitor import MAX_UNKNOWN_IDS, MonitorScreen, matches, parse_keys
from tests.cli.conftest import DEMO, ENGINE, REPO, Run
from tests.cli.sim_bus import SimBus, hwbridge, sim_bus, stack_of
from tests.conftest import wait_until

__all__ = ["sim_bus"]  # the fixture, imported for the tests below

pytestmark = pytest.mark.timeout(90)

ENGINE_SPEED = re.compile(r"EngineSpeed ([0-9.]+) rpm")


class Tmux:
    """One tmux server of its own, one window running a command."""

    def __init__(self, tmp: Path) -> None:
        self.socket = str(tmp / "tmux.sock")  # its own server, its socket gone with tmp
        self.tmp = tmp

    def __call__(self, *argv: str) -> str:
        proc = subprocess.run(
            ["tmux", "-S", self.socket, *argv],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return proc.stdout

    def start(self, argv: list[str], width: int = 200, height: int = 50) -> None:
        """Run `argv` in a terminal; its exit status and the terminal's mode before and
        after go to files, so a test can check the terminal came back as it was."""
        import os

        script = self.tmp / "run.sh"
        command = shlex.join(argv)
        script.write_text(
            "trap : INT\n"  # the shell outlives a Ctrl-C (the command gets it as usual)
            f"cd {shlex.quote(str(REPO))}\n"
            f"export PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}\n"
            "unset COLUMNS LINES\n"
            f"stty -g > {self.tmp}/stty.before\n"
            f"{command} 2> {self.tmp}/stderr\n"
            f"echo $? > {self.tmp}/exit.tmp && mv {self.tmp}/exit.tmp {self.tmp}/exit\n"
            f"stty -g > {self.tmp}/stty.tmp && mv {self.tmp}/stty.tmp {self.tmp}/stty.after\n"
            "sleep 60\n"
        )
        self("new-session", "-d", "-s", "mon", "-x", str(width), "-y", str(height), f"sh {script}")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "mon")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self("send-keys", "-t", "mon", *(["-l"] if literal else []), *keys)

    def exit_status(self, timeout_s: float = 10) -> int | None:
        done = self.tmp / "exit"
        if not wait_until(done.exists, timeout_s):
            return None
        return int(done.read_text())

    def stderr(self) -> str:
        return (self.tmp / "stderr").read_text()

    def terminal_restored(self) -> bool:
        assert wait_until((self.tmp / "stty.after").exists, 5)
        before = (self.tmp / "stty.before").read_text()
        return before == (self.tmp / "stty.after").read_text()

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    t = Tmux(tmp_path)
    yield t
    t.kill()


def _engine_speed(tmux: Tmux, timeout_s: float = 20) -> tuple[float, str]:
    found: list[tuple[float, str]] = []

    def seen() -> bool:
        screen = tmux.screen()
        match = ENGINE_SPEED.search(screen)
        if match:
            found.append((float(match[1]), screen))
        return bool(match)

    assert wait_until(seen, timeout_s), f"no EngineSpeed on the screen:\n{tmux.screen()}"
    return found[-1]


def _monitor(sim: SimBus) -> list[str]:
    return [sys.executable, "-m", "hwbridge", "monitor", "--bus", sim.url, "--dbc", str(DEMO)]


def test_engine_speed_changes_on_screen_pause_holds_it_q_quits(sim_bus: SimBus, tmux: Tmux) -> None:
    tmux.start(_monitor(sim_bus))
    first, screen = _engine_speed(tmux)
    assert "EngineData" in screen and "rpm" in screen
    header = screen.splitlines()[0]
    assert header.startswith("hwbridge monitor socketcand://") and "frames/s" in header
    # the simulated engine's speed moves: the same row shows new values
    assert wait_until(lambda: _engine_speed(tmux)[0] != first, 10), "EngineSpeed never changed"

    tmux.keys("p")  # pause: the screen holds still
    assert wait_until(lambda: "PAUSED" in tmux.screen(), 5)
    held = tmux.screen()
    time.sleep(1.0)
    assert tmux.screen() == held

    tmux.keys("Space")  # and resumes
    assert wait_until(lambda: "PAUSED" not in tmux.screen(), 5)
    paused_value = float(ENGINE_SPEED.findall(held)[0])
    assert wait_until(lambda: _engine_speed(tmux)[0] != paused_value, 10)

    tmux.keys("q")
    assert tmux.exit_status() == 0, tmux.stderr()
    assert tmux.terminal_restored()


def test_filter_key_narrows_the_rows(sim_bus: SimBus, tmux: Tmux) -> None:
    tmux.start(_monitor(sim_bus))
    _engine_speed(tmux)
    tmux.keys("f")
    tmux.keys("battery", literal=True)
    tmux.keys("Enter")

    def rows() -> list[str]:  # a screen captured while a redraw is being written can mix two
        screen = tmux.screen()
        return [line.split()[1] for line in screen.splitlines() if line.startswith("0x")]

    assert wait_until(lambda: "filter: battery" in tmux.screen(), 5), tmux.screen()
    assert wait_until(lambda: rows() == ["BatteryCells", "BatteryPack"], 5), tmux.screen()
    tmux.keys("/")  # and back to every row
    tmux.keys("BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "Enter")
    assert wait_until(lambda: "EngineData" in tmux.screen(), 5), tmux.screen()
    tmux.keys("q")
    assert tmux.exit_status() == 0


def test_filter_option_and_ctrl_c_restore_the_terminal(sim_bus: SimBus, tmux: Tmux) -> None:
    tmux.start([*_monitor(sim_bus), "--filter", "0x1[01]0"], width=120, height=12)
    screen = _engine_speed(tmux)[1]
    rows = [line.split()[0] for line in screen.splitlines() if line.startswith("0x")]
    assert rows == ["0x100", "0x110"], screen
    tmux.keys("C-c")
    assert tmux.exit_status() == 0, tmux.stderr()
    assert tmux.terminal_restored()


def test_a_small_terminal_shows_what_fits_and_says_how_many_more(
    sim_bus: SimBus, tmux: Tmux
) -> None:
    tmux.start(_monitor(sim_bus), width=100, height=10)
    screen = _engine_speed(tmux)[1]
    lines = screen.rstrip("\n").splitlines()
    assert len(lines) <= 10
    assert re.search(r"0 above, \d+ more below", screen), screen
    tmux.keys("PageDown")
    assert wait_until(lambda: "EngineData" not in tmux.screen(), 5), tmux.screen()
    tmux.keys("q")
    assert tmux.exit_status() == 0


def test_without_a_terminal_it_prints_plain_snapshots(sim_bus: SimBus) -> None:
    proc = hwbridge(*_monitor(sim_bus)[3:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum("EngineSpeed" in s for s in seen) < 2:
            seen.append(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the monitor did not end after Ctrl-C; its threads:\n{stack_of(proc)}")
    finally:
        proc.kill()
    text = "".join(seen) + out
    assert proc.returncode == 0, err
    assert sum(line.startswith("hwbridge monitor ") for line in text.splitlines()) >= 2
    assert "\x1b" not in text
    speeds = ENGINE_SPEED.findall(text)
    assert len(speeds) >= 2


def test_a_bus_that_does_not_answer_exits_1() -> None:
    proc = hwbridge(
        "monitor", "--bus", "socketcand://127.0.0.1:9/vcan0",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "BUS_DOWN" in err


def test_usage_errors_exit_2_in_one_line(run: Run) -> None:
    r = run("monitor", "--bus", "virtual:x", "--dbc", "missing.dbc")
    assert r.code == 2
    assert r.err == "hwbridge: missing.dbc: cannot read the file: No such file or directory\n"
    r = run("monitor", "--bus", "nonsense", "--dbc", str(DEMO))
    assert r.code == 2
    assert (
        r.err.startswith("hwbridge: --bus: invalid CAN bus 'nonsense'") and r.err.count("\n") == 1
    )
    proc = hwbridge("monitor", "--bus", "virtual:x", "--no-such-option", stderr=subprocess.PIPE)
    assert proc.wait(60) == 2


# -- the screen on its own --------------------------------------------------------------


def test_filter_globs_and_plain_text() -> None:
    assert matches("", "EngineData", "0x100")
    assert matches("engine*", "EngineData", "0x100")
    assert matches("ENGINE", "EngineData", "0x100")  # no wildcard: contains
    assert matches("0x1?0", "", "0x110")
    assert not matches("0x1?0", "EngineData", "0x101")
    assert not matches("Battery*", "EngineData", "0x100")


def test_keys_from_escape_sequences() -> None:
    assert parse_keys("pq") == ["p", "q"]
    assert parse_keys("\x1b[A\x1b[B\x1b[5~\x1b[6~") == ["up", "down", "pgup", "pgdn"]
    assert parse_keys("\x1b") == ["esc"]
    assert parse_keys("\x1b[15~x") == ["x"]  # F5: dropped whole
    assert parse_keys("ab\x7f\r") == ["a", "b", "backspace", "enter"]


def _screen(monitor: BusMonitor, db: CanDatabase | None) -> MonitorScreen:
    return MonitorScreen(monitor, db, bus_name="virtual:test")


def _feed(monitor: BusMonitor, aid: int, data: bytes, ts: float) -> None:
    monitor.on_message(
        can.Message(timestamp=ts, arbitration_id=aid, data=data, is_extended_id=aid > 0x7FF)
    )


def test_changed_values_are_highlighted_and_unknown_ids_raw() -> None:
    db = CanDatabase.load(DEMO)
    now = [1000.0]
    monitor = BusMonitor(clock=lambda: now[0])
    screen = _screen(monitor, db)
    frame = db.encode("EngineData", ENGINE)
    _feed(monitor, frame.arbitration_id, frame.data, 999.9)
    _feed(monitor, 0x7AB, b"\x01\x02", 999.9)
    screen.refresh()
    faster = db.encode("EngineData", {**ENGINE, "EngineSpeed": 2000})
    _feed(monitor, frame.arbitration_id, faster.data, 1000.0)
    _feed(monitor, 0x7AB, b"\x01\x03", 1000.0)
    screen.refresh()
    console = Console(width=200, record=True, color_system="truecolor", file=io.StringIO())
    console.print(screen.render(console, 200, 20))
    text = console.export_text(clear=False)
    assert "EngineSpeed 2000.00 rpm" in text and "EngineState Running" in text
    assert "unknown" in text and "01 03" in text
    ansi = console.export_text(styles=True)
    assert ansi.count("\x1b[30;43m") == 2  # EngineSpeed's value and the raw byte 03
    now[0] += 5.0  # a second later the highlight is gone
    console = Console(width=200, record=True, color_system="truecolor", file=io.StringIO())
    console.print(screen.render(console, 200, 20))
    assert "\x1b[30;43m" not in console.export_text(styles=True)


def test_many_distinct_ids_keep_the_state_bounded_and_the_screen_short() -> None:
    monitor = BusMonitor(max_unknown_ids=MAX_UNKNOWN_IDS)
    screen = _screen(monitor, None)
    for aid in range(5000):
        _feed(monitor, 0x10000 + aid, b"\x00", time.time())
    screen.refresh()
    assert len(screen.rows()) == MAX_UNKNOWN_IDS
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(screen.render(console, 120, 24))
    lines = console.export_text().rstrip("\n").splitlines()
    assert len(lines) <= 24
    assert f"{MAX_UNKNOWN_IDS - 21} more below" in lines[-1]
    assert "more ids not tracked" in lines[0]


def test_the_monitor_imports_no_private_name_of_another_module() -> None:
    import hwbridge.cli.monitor as module

    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hwbridge")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_frame_owner_tells_own_ids_pgn_matches_and_unknown_ids() -> None:
    from hwbridge.can.network import frame_owner

    db = CanDatabase.load(DEMO)
    assert frame_owner(db, 0x100, False) is True  # EngineData
    assert frame_owner(db, 0x0CF00400, True) is True  # EEC1 as the database has it
    assert frame_owner(db, 0x0CF00401, True) == "EEC1"  # another source address: its PGN
    assert frame_owner(db, 0x7FF, False) is None


def test_on_the_simulated_vehicles_clock_rates_and_values_are_exact(channel: str) -> None:
    """The monitor and the simulated vehicle on one SimulatedClock: after 3 simulated
    seconds the screen shows each message at its exact rate and the engine speed the vehicle
    has, however busy the machine (nothing here waits on real time)."""
    db = CanDatabase.load(DEMO)
    clock = SimulatedClock()
    monitor = BusMonitor(clock=clock.time)
    screen = _screen(monitor, db)
    model = VehicleModel(seed=3, driving=False)
    with (
        can.Bus(interface="virtual", channel=channel) as tap,
        VirtualVehicle(DEMO, channel=channel, model=model, clock=clock, obd=False) as car,
    ):
        car.set_gear("N")
        car.set_throttle(20)
        for _ in range(30):
            clock.advance(0.1)
            for msg in iter(lambda: tap.recv(0), None):
                monitor.on_message(msg)
            screen.refresh()
        rpm = car.state.engine_speed_rpm
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(screen.render_all(200))
    text = console.export_text()
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("0x")}
    # id, name, rate (frames/s), age, count: the 10 ms and 500 ms messages, to the digit
    assert rows["EngineData"].split()[2:6] == ["100.0", "0", "ms", "301"], rows["EngineData"]
    assert rows["ClimateStatus"].split()[2:6] == ["2.0", "0", "ms", "7"], rows["ClimateStatus"]
    shown = float(ENGINE_SPEED.findall(text)[-1])
    assert shown == pytest.approx(rpm, abs=0.5)
