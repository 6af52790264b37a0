"""`python -m firmware_sim --j1939`: its options, its errors, the truck over socketcand."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import can
from firmware_sim import cli
from firmware_sim.j1939 import TRUCK_FAULTS
from tests.conftest import wait_until
from tests.sim.conftest import ROOT
from tests.sim.j1939_peer import CLAIM, DM1, REQUEST, TESTER, join, split

SOCKETCAND_LINE = re.compile(r"^socketcand: socketcand://127\.0\.0\.1:(\d+)/vcan0$")
PROG = "python -m firmware_sim"


def test_help_lists_the_truck_and_its_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--j1939" in out
    for fault in TRUCK_FAULTS.values():
        line = next(line for line in out.splitlines() if line.strip().startswith(fault.name))
        assert f"SPN {fault.spn} FMI {fault.fmi}" in line
        assert fault.lamp_text() in line
    assert "mil slow_flash" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--j1939", "--fault", "overheat"], "fault 'overheat' is the car's, not the truck's"),
        (["--j1939", "--fault", "bogus"], "fault 'bogus' is unknown; the truck's faults:"),
        (["--j1939", "--fault", "nox_sensor:EEC1"], "fault nox_sensor takes no target"),
        (["--fault", "nox_sensor"], "fault 'nox_sensor' is the J1939 truck's: add --j1939"),
        (["--j1939", "--elm327"], "--elm327 belongs to the car; not with --j1939"),
        (["--j1939", "--gnss-can"], "--gnss-can belongs to the car; not with --j1939"),
        (["--j1939", "--vin", "TOO-SHORT"], "a VIN has 17 characters"),
        (
            ["--j1939", "--dbc", str(ROOT / "dbc" / "gnss_module.dbc")],
            "has no 29-bit (J1939) message",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str], says: str, channel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*argv, "--channel", channel, "--socketcand", "127.0.0.1:0"]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if ": error: " in line]
    assert len(errors) == 1, captured.err
    assert errors[0].startswith(f"{PROG}: error: ") and says in errors[0], errors[0]
    assert captured.out == ""
    for fault in TRUCK_FAULTS if "truck's faults" in says else ():
        assert fault in errors[0]


@pytest.fixture
def served(channel: str, capsys: pytest.CaptureFixture[str]) -> Iterator[tuple[int, str]]:
    """`--j1939` with two faults in this process, over socketcand: (port, stderr)."""
    stop = threading.Event()
    codes: list[int] = []
    argv = ["--j1939", "--channel", channel, "--no-drive", "--socketcand", "127.0.0.1:0"]
    argv += ["--fault", "nox_sensor", "--fault", "wheel_speed_sensor"]
    runner = threading.Thread(target=lambda: codes.append(cli.main(argv, stop=stop)))
    runner.start()
    out = err = ""

    def ready() -> bool:
        nonlocal out, err
        captured = capsys.readouterr()
        out, err = out + captured.out, err + captured.err
        return "socketcand: " in out

    try:
        assert wait_until(ready)
        match = SOCKETCAND_LINE.match(out.splitlines()[0])
        assert match, out
        yield int(match.group(1)), err
    finally:
        stop.set()
        runner.join(10)
    assert codes == [0]


def test_the_truck_over_socketcand(served: tuple[int, str]) -> None:
    port, err = served
    assert err.splitlines() == [
        f"{PROG}: no --dbc given, using the bundled J1939 truck ({ROOT / 'dbc' / 'j1939_truck.dbc'})"
    ]
    bus = can.Bus(interface="socketcand", host="127.0.0.1", port=port, channel="vcan0")
    try:
        request = join(6, REQUEST, TESTER, 0xFF)
        bus.send(can.Message(arbitration_id=request, data=b"\x00\xee\x00", is_extended_id=True))
        bus.send(
            can.Message(
                arbitration_id=join(6, REQUEST, TESTER, 0x0B),
                data=DM1.to_bytes(3, "little"),
                is_extended_id=True,
            )
        )
        claims: set[int] = set()
        dm1: dict[int, bytes] = {}
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not (len(claims) == 3 and {0x00, 0x0B} <= set(dm1)):
            msg = bus.recv(0.2)
            if msg is None:
                continue
            ident = split(msg.arbitration_id)
            if ident.pgn == CLAIM:
                claims.add(ident.sa)
            elif ident.pgn == DM1:
                dm1[ident.sa] = bytes(msg.data)
    finally:
        bus.shutdown()
    assert claims == {0x00, 0x03, 0x0B}
    assert dm1[0x00][:6] == bytes([0x40, 0xFF, 0x90, 0x0C, 0x14, 0x01])  # MIL, SPN 3216 FMI 20
    assert dm1[0x0B][:6] == bytes([0x04, 0xFF, 0x54, 0x00, 0x02, 0x01])  # amber, SPN 84 FMI 2


def test_python_m_firmware_sim_j1939_as_users_run_it() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", "--j1939", "--fault", "misfire"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
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
    assert "using the bundled J1939 truck" in err
