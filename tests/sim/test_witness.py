"""The simulator is an independent witness of hwbridge's decoding: it encodes with cantools
itself and imports nothing of hwbridge's databases, codec or tools. And the GNSS module that
gives discovery its reference shares the vehicle's bus."""

from __future__ import annotations

import ast
import threading
import uuid
from pathlib import Path

import cantools
import pytest

import can
from firmware_sim import VirtualVehicle
from hwbridge.resources import bundled_dbc

SIM = Path(__file__).resolve().parents[2] / "firmware-sim" / "firmware_sim"


def test_the_simulator_imports_none_of_hwbridge_but_its_data_files() -> None:
    imported: dict[str, set[str]] = {}
    for path in SIM.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.setdefault(node.module, set()).add(path.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imported.setdefault(alias.name, set()).add(path.name)
    ours = {m: files for m, files in imported.items() if m.split(".")[0] == "hwbridge"}
    assert set(ours) <= {"hwbridge.resources"}, ours  # where the bundled DBC files are


def test_the_gnss_module_sends_the_vehicle_speed_beside_the_vehicle() -> None:
    channel = f"gnss-{uuid.uuid4().hex[:8]}"
    gnss = cantools.database.load_file(bundled_dbc("gnss_module.dbc"), strict=True)
    demo = cantools.database.load_file(bundled_dbc(), strict=False)
    assert isinstance(gnss, cantools.database.can.Database)
    assert isinstance(demo, cantools.database.can.Database)
    listener = can.Bus(interface="virtual", channel=channel)
    try:
        with VirtualVehicle(
            [bundled_dbc(), bundled_dbc("gnss_module.dbc")], channel=channel
        ) as car:
            assert "GnssSpeed" in car.periodic_messages
            assert "EngineData" in car.periodic_messages
            speeds: list[tuple[float, float]] = []
            while len(speeds) < 3:
                msg = listener.recv(2.0)
                assert msg is not None
                if msg.arbitration_id == 0x650:
                    decoded = gnss.decode_message(0x650, bytes(msg.data))
                    assert isinstance(decoded, dict)
                    gnss_kmh = decoded["GnssSpeedKmh"]
                    speeds.append((float(gnss_kmh), car.state.vehicle_speed_kmh))  # type: ignore[arg-type]
                elif msg.arbitration_id == 0x110:
                    demo.decode_message(0x110, bytes(msg.data))
        for gnss_kmh, true_kmh in speeds:
            assert abs(gnss_kmh - true_kmh) < 3.0
    finally:
        listener.shutdown()


def test_the_command_line_adds_the_gnss_module(capfd: pytest.CaptureFixture[str]) -> None:
    """`python -m firmware_sim --gnss-can`: the GNSS module's frames on the served bus, and
    one stderr line naming its database (the reference a client gives discovery)."""
    from firmware_sim.cli import main

    channel = f"gnss-cli-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(
            main(["--gnss-can", "--channel", channel, "--socketcand", "127.0.0.1:0"], stop=stop)
        )
    )
    listener = can.Bus(interface="virtual", channel=channel)
    thread.start()
    try:
        seen = False
        for _ in range(100):
            msg = listener.recv(0.1)
            if msg is not None and msg.arbitration_id == 0x650:
                seen = True
                break
        assert seen
    finally:
        stop.set()
        thread.join(10)
        listener.shutdown()
    assert codes == [0]
    err = capfd.readouterr().err
    assert "a GNSS module sends GnssSpeed (0x650) too; its database is" in err
    assert "gnss_module.dbc" in err
