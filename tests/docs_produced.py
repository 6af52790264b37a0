"""What the docs show that a program printed or drew, made again by that program.

A page marks such a block with `<!-- produced: NAME -->` on the line before it; `PRODUCERS`
makes NAME again from the code it shows (the simulated vehicle on a `SimulatedClock` where
the values matter, so the same seed gives the same screen), and tests/test_docs_produced.py
checks the page against it, so a transcript cannot go stale. The pictures of docs/_static
(the monitor screen, an evidence page) are made here too.

    python -m tests.docs_produced            # say what is stale
    python -m tests.docs_produced --write    # write the blocks and pictures again
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from benchmarks.drives_obd import with_obd
from pytest_httpserver import HTTPServer
from rich.console import Console

import can
from firmware_sim import VirtualVehicle
from firmware_sim.clock import SimulatedClock
from firmware_sim.model import VehicleModel
from firmware_sim.socketcand import SocketcandServer
from hwbridge import CanDriver, SendPolicy
from hwbridge.can import discover
from hwbridge.can.database.database import CanDatabase
from hwbridge.can.transport.monitor import BusMonitor
from hwbridge.captures.commit import DECODED
from hwbridge.cli.main import main as hwbridge_main
from hwbridge.cli.monitor import MonitorScreen
from hwbridge.core.models import ToolCall
from hwbridge.core.trust import wheel_digest
from hwbridge.discovery.analysis.known import opendbc_available
from hwbridge.discovery.report.html import render_html
from hwbridge.mcp.consent import question_text
from tests.captures.conftest import FLEET_DBC, drive, write_capture
from tests.discovery.bare_car import bare_car
from tests.discovery.test_floats import _floats_frames
from tests.discovery.test_multiplex import _mux_frames
from tests.docs_pages import (
    ROOT,
    block_under,
    blocks,
    environment,
    pages,
    repository_folder,
    text,
)
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, sse
from tests.mcp.farm import TOKEN as FARM_TOKEN
from tests.mcp.farm import start_benches
from tests.shared_data import DATA, SHARED_REASON
from tests.trust.tiny import build_wheel, pip_install

STATIC = ROOT / "docs" / "_static"
DEMO = ROOT / "dbc" / "demo_vehicle.dbc"
GNSS = ROOT / "dbc" / "gnss_module.dbc"
MONITOR_WIDTH = 118
MONITOR_HEIGHT = 24  # a terminal of 24 lines: the rows that fit, and how many more below
CHAT_WIDTH = 110


class Unavailable(Exception):
    """What a producer needs is not here (../shared's real data, an optional package): its
    test is skipped with this reason, and `--write` leaves its block as it is."""


def _shared(*parts: str) -> Path:
    """A file of ../shared/data; Unavailable without it."""
    path = DATA.joinpath(*parts)
    if not path.is_file():
        raise Unavailable(f"{SHARED_REASON} ({'/'.join(parts)} is not there)")
    return path


@dataclass(frozen=True)
class Produced:
    """What one producer made: the block's text, and the files beside it (docs/_static)."""

    text: str
    files: dict[str, str]


@dataclass(frozen=True)
class Producer:
    make: Callable[[], Produced]
    volatile: tuple[str, ...] = ()
    """Patterns of what may differ between runs (a port, a live value): masked on both sides."""
    flatten: bool = False
    """Compare the words, not the lines: a terminal's panels wrap where the widths of the
    values that vary say, so a value one digit longer moves every line break after it."""

    def mask(self, shown: str) -> str:
        if self.flatten:
            shown = " ".join(shown.replace("│", " ").split())
        for pattern in self.volatile:
            shown = re.sub(pattern, "<varies>", shown)
        return shown


# -- the monitor screen ------------------------------------------------------------------------


def _monitor_screen() -> Produced:
    """`hwbridge monitor` on the demo vehicle, 12 simulated seconds after it pulled away."""

    channel = f"docs-{uuid.uuid4().hex[:10]}"
    clock = SimulatedClock()
    monitor = BusMonitor(clock=clock.time)
    screen = MonitorScreen(
        monitor,
        CanDatabase.load(DEMO),
        bus_name="socketcand://127.0.0.1:29536/vcan0",
        db_name="demo_vehicle.dbc",
    )
    with (
        can.Bus(interface="virtual", channel=channel) as tap,
        VirtualVehicle(
            DEMO, channel=channel, model=VehicleModel(seed=1), clock=clock, obd=False
        ) as car,
    ):
        for _ in range(120):
            clock.advance(0.1)
            for msg in iter(lambda: tap.recv(0), None):
                monitor.on_message(msg)
            screen.refresh()
        del car
    console = Console(
        width=MONITOR_WIDTH, record=True, file=io.StringIO(), color_system="truecolor"
    )
    console.print(screen.render(console, MONITOR_WIDTH, MONITOR_HEIGHT))
    shown = "\n".join(line.rstrip() for line in console.export_text(clear=False).splitlines())
    svg = console.export_svg(title="hwbridge monitor")
    return Produced(shown.strip("\n") + "\n", {"monitor.svg": svg})


# -- make demo ----------------------------------------------------------------------------------

DEMO_COLUMNS = 88


def demo_transcript(folder: Path) -> str:
    """`hwbridge demo` in a terminal of 88 columns, run from `folder` (not the checkout, as
    after `pip install`): the simulator in its own process and socketcand, in real time, so
    it takes 11 s. tests/test_readme.py runs it once and compares the page with it."""
    out = subprocess.run(
        [sys.executable, "-m", "hwbridge", "demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**environment(), "COLUMNS": str(DEMO_COLUMNS)},
        stdin=subprocess.DEVNULL,
        cwd=folder,
    ).stdout
    return "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


def _demo() -> Produced:
    with tempfile.TemporaryDirectory() as folder:
        return Produced(demo_transcript(Path(folder)), {})


DEMO_VOLATILE = (
    r"(?<=socketcand://127\.0\.0\.1:)\d+",  # the port the simulator got
    r'(?<="age_ms": )\d+',  # timing, in real time
    r'(?<="after_ms": )\d+',
    r'(?<="EngineSpeed": \{"value": )[\d.]+',  # the idle's jitter
    r'(?<="CoolantTemp": \{"value": )[\d.]+',  # the engine warming
    r'(?<="VehicleDynamics\.VehicleSpeed", "value": )[\d.]+',  # the first sample past 20 km/h
    r'(?<=result: \{"duration_ms": )\d+, "frames".*?(?= messages to append)',  # 0.5 s of driving
    r"(?<=demo finished in )[\d.]+",
)


# -- what an example of a page prints -------------------------------------------------------------


def run_example(page: str, heading: str) -> str:
    """What the python block under `heading` of `page` prints, run as written in this process
    from the repository's root (tests/test_docs_examples.py runs it too, in a fresh one)."""
    block = block_under(page, heading)
    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out):
        exec(compile(block.code, block.name, "exec"), {"__name__": "__main__"})
    return out.getvalue()


def _first_read() -> Produced:
    """The README's first example, which getting-started shows again word for word."""
    readme = block_under("README.md", "Read live signals with your DBC")
    again = block_under("docs/getting-started.md", "Your DBC on the simulated vehicle")
    if readme.code != again.code:
        raise RuntimeError(f"{again.name} is no longer {readme.name}: give it its own producer")
    return Produced(run_example("README.md", "Read live signals with your DBC"), {})


def _can_read() -> Produced:
    return Produced(run_example("docs/can.md", "Read live signals"), {})


def _obd_session() -> Produced:
    """The check-engine-light session over both adapters: the second's lines are the same,
    and the page says so instead of showing them twice."""
    out = run_example("docs/obd.md", "Vehicle diagnostics: OBD-II and UDS (`hwbridge.obd`)")
    over_can, over_elm = out.split("ELM327\n")
    if over_can.split("\n", 1)[1] != over_elm:
        raise RuntimeError(f"the adapters answered differently:\n{out}")
    return Produced(f"{over_can}ELM327\n  ...the same lines\n", {})


# -- the simulator on a database of its user's ---------------------------------------------------


def _simulator_on_prius() -> Produced:
    """`python -m firmware_sim --dbc toyota_prius_2010_pt.dbc --scenario park_accelerate_door`
    in a terminal in ../shared/data/opendbc: what it prints until it serves, then stopped
    as Ctrl-C stops it (on stderr first, then stdout: the order a terminal shows them)."""
    folder = _shared("opendbc", "toyota_prius_2010_pt.dbc").parent
    argv = ["--dbc", "toyota_prius_2010_pt.dbc", "--scenario", "park_accelerate_door"]
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim", *argv],
        cwd=folder,
        env=environment(folder),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, process.kill)  # a simulator that never serves
    watchdog.start()
    try:
        assert process.stdout is not None
        served = process.stdout.readline()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        watchdog.cancel()
        process.kill()
    if process.returncode != 0 or not served.startswith("socketcand: "):
        raise RuntimeError(f"python -m firmware_sim ended with {process.returncode}:\n{err}")
    return Produced(f"$ python -m firmware_sim {' '.join(argv)}\n{err}{served}{out}", {})


# -- the evidence page -------------------------------------------------------------------------


@contextlib.contextmanager
def _recorded(databases: list[Path], seconds: int, **vehicle: Any) -> Iterator[Path]:
    """`drive.blf`: `seconds` simulated seconds of the simulator sending `databases`, the
    vehicle built with `vehicle` (the same frames on every run)."""
    channel = f"docs-{uuid.uuid4().hex[:10]}"
    clock = SimulatedClock()
    with tempfile.TemporaryDirectory() as folder:
        capture = Path(folder) / "drive.blf"
        with (
            can.Bus(interface="virtual", channel=channel) as tap,
            can.BLFWriter(str(capture)) as writer,
            VirtualVehicle(databases, channel=channel, clock=clock, obd=False, **vehicle),
        ):
            for _ in range(seconds * 10):
                clock.advance(0.1)
                for msg in iter(lambda: tap.recv(0), None):
                    msg.channel = None  # BLF's channel 1, not the digits of a random name
                    writer.on_message_received(msg)
        yield capture


def _simulated_drive(seconds: int = 20) -> contextlib.AbstractContextManager[Path]:
    """`drive.blf`: `seconds` simulated seconds of the demo vehicle pulling away beside its
    GNSS module, as `hwbridge sim --gnss-can` sends them."""
    return _recorded([DEMO, GNSS], seconds, model=VehicleModel(seed=1))


def _evidence_page() -> Produced:
    """`hwbridge discover drive.blf --reference gnss_module.dbc --html report.html`."""
    with _simulated_drive() as capture:
        report = discover([capture], reference=GNSS, evidence=True)
    matched = sum(1 for m in report.messages for f in m.signals if f.reference is not None)
    summary = f"{len(report.messages)} frame ids, {matched} fields matched to the reference"
    return Produced(summary + "\n", {"evidence.html": render_html(report)})


def _discover_table() -> Produced:
    """`hwbridge discover drive.blf --reference gnss_module.dbc`: the table of 0x110."""
    with _simulated_drive() as capture:
        out = _run_hwbridge(["discover", str(capture), "--reference", str(GNSS)])
    table = out.split("\n0x110 ", 1)[1].split("\n0x", 1)[0]
    return Produced("\n".join(line.rstrip() for line in f"0x110 {table}".splitlines()) + "\n", {})


def _discover_json() -> Produced:
    """`hwbridge discover drive.blf --reference gnss_module.dbc --json`, cut to its first field
    and its top-level keys: the whole of it is a page long."""
    with _simulated_drive() as capture:
        report = json.loads(
            _run_hwbridge(["discover", str(capture), "--reference", str(GNSS), "--json"])
        )
    message = next(m for m in report["messages"] if m["id"] == 0x110)
    head = json.dumps({k: v for k, v in message.items() if k != "signals"})[:-1]
    rest = ", ".join(
        f'"{key}": {"[...]" if key == "notes" else json.dumps(value)}'
        for key, value in report.items()
        if key != "messages"
    )
    lines = [
        f'{{"messages": [{head}, "signals": [',
        f"  {json.dumps(message['signals'][0])},",
        "  ...]}, ...],",
        f" {rest}}}",
    ]
    return Produced("\n".join(lines) + "\n", {})


def _run_hwbridge(argv: list[str], expect: int = 0) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = hwbridge_main(argv)
    if code != expect:
        raise RuntimeError(f"hwbridge {' '.join(argv)} ended with {code}:\n{out.getvalue()}")
    return out.getvalue()


# -- the database that fits: a drive of opendbc's VW MQB database ------------------------------


@functools.cache
def _mqb_drive() -> bytes:
    """`drive.blf`: 20 simulated seconds of the simulator bringing opendbc's `vw_mqb.dbc` to
    life beside the GNSS module, as `hwbridge sim --dbc vw_mqb.dbc --gnss-can` sends them
    (the same frames on every run); kept for the other producer of this process."""
    mqb = _shared("opendbc", "vw_mqb.dbc")
    if not opendbc_available():
        raise Unavailable("the opendbc package (the opendbc extra) is not installed")
    with _recorded([mqb, GNSS], 20) as capture:
        return capture.read_bytes()


def _discover_mqb(*options: str) -> str:
    """`hwbridge discover drive.blf --match-known OPTIONS` on the drive above."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        Path("drive.blf").write_bytes(_mqb_drive())
        return _run_hwbridge(["discover", "drive.blf", "--match-known", *options])


def _match_known() -> Produced:
    """`hwbridge discover drive.blf --match-known`: the ranking and what was decoded with."""
    lines = [line.rstrip() for line in _discover_mqb().splitlines()]
    start = lines.index("known databases, best first:")
    end = next(i for i, line in enumerate(lines) if line.startswith("decoded with the reference"))
    return Produced("\n".join(lines[start : end + 1]) + "\n", {})


def _match_known_json() -> Produced:
    """`hwbridge discover drive.blf --match-known --json`: the best match of `matches`, and
    `decoded_with`."""
    report = json.loads(_discover_mqb("--json"))
    first = _wrapped(json.dumps(report["matches"][0]), '"matches": [', 13)
    lines = [
        *first[:-1],
        first[-1] + ", ...],",
        f'"decoded_with": {json.dumps(report["decoded_with"])}',
    ]
    return Produced("\n".join(lines) + "\n", {})


def _wrapped(text: str, first: str, indent: int, width: int = 92) -> list[str]:
    """`first` + `text` in lines of at most `width`, broken after the commas of its JSON (no
    string of it holds one), the next lines indented by `indent`."""
    lines, line = [], first
    for index, piece in enumerate(text.split(", ")):
        if index and len(line) + len(piece) + 3 > width:
            lines.append(line + ",")
            line = " " * indent + piece
        else:
            line += (", " if index else "") + piece
    return [*lines, line]


# -- multiplexed and float signals ------------------------------------------------------------


@functools.cache
def _paged_and_floats() -> tuple[str, str]:
    """`hwbridge discover paged.blf --json --out draft.dbc`: the report and the draft of 30 s
    of 0x321, whose bits 0-1 select three layouts (tests/discovery/test_multiplex.py: a
    temperature and a pressure; a level and a mode; a voltage; a counter and a heater flag in
    every frame), every 10 ms, beside 0x123, two float32 signals (tests/discovery/
    test_floats.py: a speed with stops, little endian, in bytes 0-3; an acceleration, big
    endian, in bytes 4-7), every 20 ms."""
    paged, floats = _mux_frames(), _floats_frames()
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        with can.Logger("paged.blf") as log:
            for i, data in enumerate(paged):
                log.on_message_received(
                    can.Message(timestamp=i * 0.01, arbitration_id=0x321, data=bytes(data),
                                is_extended_id=False)
                )  # fmt: skip
                if i % 2 == 0:
                    log.on_message_received(
                        can.Message(timestamp=i * 0.01 + 0.001, arbitration_id=0x123,
                                    data=bytes(floats[i // 2]), is_extended_id=False)
                    )  # fmt: skip
        report = _run_hwbridge(["discover", "paged.blf", "--json", "--out", "draft.dbc"])
        return report, Path("draft.dbc").read_text()


def _draft_message(frame_id: int) -> list[str]:
    """The draft's `BO_` of `frame_id` and its `SG_` lines, constant fields left out."""
    lines = _paged_and_floats()[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"BO_ {frame_id} "))
    end = lines.index("", start)
    return [line for line in lines[start:end] if not line.startswith(" SG_ CONST_")]


def _multiplexed_json() -> Produced:
    """The multiplexer of 0x321 in the report (its keys but its statistics), and the first
    three fields of a page (their name, bits and page)."""
    message = next(m for m in json.loads(_paged_and_floats()[0])["messages"] if m["id"] == 0x321)
    signals = message["signals"]
    mux = next(s for s in signals if s["is_multiplexer"])
    keys = list(mux)
    head = ", ".join(
        f"{json.dumps(k)}: {json.dumps(mux[k])}" for k in keys[: keys.index("kind") + 1]
    )
    tail = ", ".join(f"{json.dumps(k)}: {json.dumps(mux[k])}" for k in keys[-3:])
    lines = _wrapped("{" + head + ", ..., " + tail + "},", "", 1, width=100)
    for s in [s for s in signals if s["multiplexer_ids"] is not None][:3]:
        lines.append(
            f'{{"name": {json.dumps(s["name"])}, "start_bit": {s["start_bit"]}, "length": '
            f'{s["length"]}, ..., "multiplexer_ids": {json.dumps(s["multiplexer_ids"])}}},'
        )
    return Produced("\n".join(lines) + "\n", {})


def _multiplexed_draft() -> Produced:
    """0x321 in the draft DBC (`SG_` lines of constant fields left out)."""
    return Produced("\n".join(_draft_message(0x321)) + "\n", {})


def _float_draft() -> Produced:
    """0x123 in the draft DBC, and its `SIG_VALTYPE_` lines."""
    valtypes = [
        line for line in _paged_and_floats()[1].splitlines() if line.startswith("SIG_VALTYPE_ 291 ")
    ]
    return Produced("\n".join([*_draft_message(0x123), "", *valtypes]) + "\n", {})


# -- hwbridge record ----------------------------------------------------------------------------


def _record() -> Produced:
    """`hwbridge record --bus socketcand://127.0.0.1:29536/vcan0 --out drive.blf --duration 2`
    on a terminal (rich draws for one when FORCE_COLOR says so), the demo vehicle behind the
    simulator's socketcand server: what stays on the screen, the last progress line and the
    summary. The server takes any free port; the page's command names 29536, and so does the
    text made here (`--write` then leaves the page's port alone)."""
    channel = f"docs-{uuid.uuid4().hex[:10]}"
    err = io.StringIO()
    with (
        tempfile.TemporaryDirectory() as folder,
        VirtualVehicle(DEMO, channel=channel, obd=False),
        SocketcandServer({"vcan0": channel}) as server,
        _environment(FORCE_COLOR="1", COLUMNS="120"),
        contextlib.chdir(folder),
        contextlib.redirect_stderr(err),
    ):
        bus = f"socketcand://127.0.0.1:{server.port}/vcan0"
        code = hwbridge_main(["record", "--bus", bus, "--out", "drive.blf", "--duration", "2"])
    if code != 0:
        raise RuntimeError(f"hwbridge record ended with {code}:\n{err.getvalue()}")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err.getvalue())
    plain = plain.replace(f"127.0.0.1:{server.port}/", "127.0.0.1:29536/")
    progress, summary = plain.rsplit("\n", 2)[-3:-1]
    return Produced(f"{progress.rsplit(chr(13), 1)[-1].rstrip()}\n{summary}\n", {})


# -- the README's bare car, live -------------------------------------------------------------------


def _live_discovery() -> Produced:
    """`hwbridge discover --bus socketcand://127.0.0.1:29536/vcan0 --duration 20 --reference
    obd --match-known --out draft.dbc` while `hwbridge sim --socketcand 127.0.0.1:29536`
    serves the demo vehicle (its engine ECU answering OBD-II): 20 s in real time, as the
    recording polls the vehicle in real time. The speed message's first field and the
    multiplexer of 0x4F0; the page says that no database fits, and it is checked here."""
    channel = f"docs-{uuid.uuid4().hex[:10]}"
    with (
        tempfile.TemporaryDirectory() as folder,
        VirtualVehicle(DEMO, channel=channel),
        SocketcandServer({"vcan0": channel}) as server,
        contextlib.chdir(folder),
    ):
        bus = f"socketcand://127.0.0.1:{server.port}/vcan0"
        lines = _discover_lines("--bus", bus, "--duration", "20", "--reference", "obd",
                                "--match-known", "--out", "draft.dbc")  # fmt: skip

    fitted = [x for x in lines if x.startswith("decoded with ") and "the reference" not in x]
    if fitted or "known databases, best first:" not in lines:
        shown = "\n".join(lines)
        raise RuntimeError(f"README.md says opendbc's databases were ranked, none fits:\n{shown}")

    def first(ident: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"{ident}  "))
        return [*lines[start : start + 2], "  ..."]

    return Produced("\n".join([*first("0x110"), *first("0x4F0")]) + "\n", {})


# -- marked events and OBD-II as the reference: the bare car of tests/discovery ----------------


def _person_marks(changes: npt.NDArray[np.float64]) -> list[tuple[float, str]]:
    """A person's marks of the brake: 0.1-0.5 s late (one in four early), pressed then
    released (as tests/discovery/test_events.py marks them)."""
    rng = np.random.default_rng(0)
    late = np.where(rng.random(len(changes)) < 0.75, 1.0, -1.0)
    marked = changes + rng.uniform(0.1, 0.5, len(changes)) * late
    return [(float(t), "brake pressed" if i % 2 == 0 else "brake released")
            for i, t in enumerate(marked)]  # fmt: skip


@contextlib.contextmanager
def _bare_car(folder: Path) -> Iterator[tuple[Path, Path]]:
    """`drive.blf`, 60 s of a bare car whose brake was pressed five times, with a turn lamp
    blinking while braking, and `events.csv`, the marks of the person in it."""
    drive, changes = bare_car(60.0)
    events = folder / "events.csv"
    rows = "".join(f"{t:.2f},{name}\n" for t, name in _person_marks(changes))
    events.write_text("time_s,name\n" + rows)
    with contextlib.chdir(folder):
        yield drive.write(folder / "drive.blf"), events


def _discover_lines(*argv: str) -> list[str]:
    return [line.rstrip() for line in _run_hwbridge(["discover", *argv]).splitlines()]


def _events_csv() -> Produced:
    """The first marks of `events.csv`: the file the ranking below reads."""
    with tempfile.TemporaryDirectory() as folder, _bare_car(Path(folder)) as (_, events):
        return Produced("".join(events.read_text().splitlines(keepends=True)[:4]), {})


def _events_ranking() -> Produced:
    """`hwbridge discover drive.blf --events events.csv`: the first event's candidates."""
    with tempfile.TemporaryDirectory() as folder, _bare_car(Path(folder)) as (capture, events):
        lines = _discover_lines(capture.name, "--events", events.name)
    start = lines.index("event 'brake pressed', 5 mark(s):")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("event "))
    return Produced("\n".join(lines[start:end]) + "\n", {})


def _obd_reference() -> Produced:
    """`hwbridge discover drive.blf --reference obd` on the bare car with a tester polling
    five PIDs at once (`benchmarks/drives_obd.py`): the speed field and the OBD-II ids."""
    with tempfile.TemporaryDirectory() as folder:
        capture = with_obd(bare_car(60.0)[0], seed=2, multi=True).write(Path(folder) / "obd.blf")
        lines = _discover_lines(str(capture), "--reference", "obd")
    decoded = next(line for line in lines if line.startswith("decoded with the reference"))
    return Produced("\n".join([*lines[:2], "...", decoded]) + "\n", {})


# -- an interrupted decode --------------------------------------------------------------------


def _interrupted_decode() -> Produced:
    """`hwbridge decode c*.blf --dbc fleet.dbc --out ds` in this process, interrupted as Ctrl-C
    does once 8 of its 40 captures are in (each takes a tenth of a second)."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "fleet.dbc").write_text(FLEET_DBC)
        first = write_capture(folder / "c00.blf", drive(seconds=60, period=0.01))
        captures = [first, *(shutil.copy(first, folder / f"c{i:02d}.blf") for i in range(1, 40))]
        decoded = folder / "ds" / DECODED

        def interrupt_after_eight() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if decoded.is_dir() and len(list(decoded.glob("*.json"))) >= 8:
                    _thread.interrupt_main(signal.SIGINT)
                    return
                time.sleep(0.002)

        threading.Thread(target=interrupt_after_eight, daemon=True).start()
        err = io.StringIO()
        with (
            contextlib.chdir(folder),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(err),
        ):
            code = hwbridge_main(
                ["decode", *(Path(c).name for c in captures), "--dbc", "fleet.dbc", "--out", "ds"]
            )
    if code != 130:
        raise RuntimeError(f"hwbridge decode ended with {code}, not interrupted:\n{err.getvalue()}")
    return Produced(err.getvalue(), {})


# -- the real truck log, decoded -----------------------------------------------------------------


def _truck_decode() -> Produced:
    """`hwbridge decode ../shared/data/css/truck_j1939_gps.MF4 --out truck_dataset --dbc
    ../shared/data/css/canmod-gps.dbc --dbc ../shared/data/css/CSS-Electronics-SAE-J1939-
    DEMO.dbc` from a checkout with ../shared beside it, off a terminal (no progress bars).
    The summary names the dataset by its absolute path: the checkout's is left out of it, as
    the page's `--out` is relative."""
    css = ("../shared/data/css/truck_j1939_gps.MF4", "../shared/data/css/canmod-gps.dbc",
           "../shared/data/css/CSS-Electronics-SAE-J1939-DEMO.dbc")  # fmt: skip
    for path in css:
        _shared(*Path(path).parts[3:])
    if importlib.util.find_spec("asammdf") is None:
        raise Unavailable("asammdf (the captures extra) is not installed: MF4 cannot be read")
    with tempfile.TemporaryDirectory() as name:
        checkout = repository_folder(Path(name))
        with contextlib.chdir(checkout), _environment(COLUMNS="120"):
            out = _run_hwbridge(
                ["decode", css[0], "--out", "truck_dataset", "--dbc", css[1], "--dbc", css[2]]
            )
    out = out.replace(f"{checkout}/", "")
    return Produced("\n".join(line.rstrip() for line in out.splitlines()) + "\n", {})


# -- a tampered driver ---------------------------------------------------------------------------


def _tampered_driver() -> Produced:
    """`hwbridge drivers --sha256 tiny=DIGEST` once pip has installed the tiny thermostat
    driver of tests/trust (a wheel of its own, its digest pinned) and one of its files was
    changed: exit 1. The first driver's meta is shown, the other built-in ones' cut."""
    with tempfile.TemporaryDirectory() as name:
        wheel = build_wheel(Path(name))
        site = Path(name) / "site"
        pip_install(wheel, site)
        (site / "tinydriver" / "units.py").write_text("CELSIUS = 'degF'\n")
        argv = ["drivers", "--sha256", f"tiny={wheel_digest(wheel)}"]
        sys.path.insert(0, str(site))  # as if installed into this interpreter
        try:
            out = _run_hwbridge(argv, expect=1)
        finally:
            sys.path.remove(str(site))
            sys.path_importer_cache.pop(str(site), None)
    blocks: list[list[str]] = []
    first, *rest = out.rstrip("\n").splitlines()
    for line in rest:
        if line.startswith(" ") and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    shown = [first]
    for index, block in enumerate(blocks):
        whole = index == 0 or " tampered " in block[0]
        shown += block if whole or len(block) == 1 else [block[0], "  ..."]
    return Produced("\n".join([f"$ hwbridge {' '.join(argv)}", *shown]) + "\n", {})


# -- a chat session ----------------------------------------------------------------------------


def _chat_session() -> Produced:
    """`hwbridge chat --consent` against the loopback fake provider of the tests, the demo
    vehicle on `virtual:demo`, the person answering `y`."""

    server = HTTPServer(host="127.0.0.1", threaded=True)
    server.start()
    try:
        fake = FakeProvider(server, "openai")
        fake.script(
            sse(
                P.openai_stream(
                    ["Let me read that."],
                    [
                        ("call_1", "read_signals", {"signals": ["EngineSpeed", "VehicleSpeed",
                                                               "GearLever"]}),
                        ("call_2", "send_ClimateCommand", {"CabinSetpoint": 22}),
                    ],
                    usage=(1540, 41),
                )
            ),
            sse(
                P.openai_stream(
                    ["The engine idles at about 800 rpm, the car stands in P; the cabin is set",
                     " to 22 degC."],
                    usage=(84, 41),
                )
            ),
        )  # fmt: skip
        out = io.StringIO()
        question = "How is the car doing? Set the cabin to 22.\ny\n"
        with (
            VirtualVehicle(DEMO, channel="demo", drive=False),
            _environment(COLUMNS=str(CHAT_WIDTH)),
            _stdin(question),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            code = hwbridge_main(
                ["chat", "--dbc", str(DEMO), "--provider", "openai-compatible",
                 "--base-url", fake.base_url, "--model", "llama-3.1-8b", "--bus", "virtual:demo",
                 "--allow", "ClimateCommand", "--consent"]
            )  # fmt: skip
    finally:
        server.clear()
        server.stop()
    if code != 0:
        raise RuntimeError(f"hwbridge chat ended with {code}:\n{out.getvalue()}")
    return Produced(out.getvalue(), {})


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _stdin(typed: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(typed)
    try:
        yield
    finally:
        sys.stdin = saved


def _farm_session() -> Produced:
    """`hwbridge chat --remote URL --remote URL --remote-read-only read_signals` over two
    simulated benches (`python -m firmware_sim` and `hwbridge mcp --http` each), against the
    loopback fake provider, the person answering `y` to the one question."""
    benches = start_benches(2)
    server = HTTPServer(host="127.0.0.1", threaded=True)
    server.start()
    try:
        fake = FakeProvider(server, "openai")
        both = {"signals": ["EngineSpeed", "CoolantTemp"]}
        fake.script(
            sse(P.openai_stream(["Let me read both benches."],
                                [("call_1", "bench1__read_signals", both),
                                 ("call_2", "bench2__read_signals", both)], usage=(1456, 40))),
            sse(P.openai_stream(["Both engines idle at about 800 rpm; the coolant is at the",
                                 " same temperature on both."], usage=(1456, 41))),
            sse(P.openai_stream([], [("call_3", "bench2__bus_status", {})], usage=(1556, 20))),
            sse(P.openai_stream(["Bench 2's bus is active."], usage=(1556, 41))),
        )  # fmt: skip
        out = io.StringIO()
        typed = "Compare the engines of both benches.\nIs bench 2's bus healthy?\ny\n"
        with (
            _environment(COLUMNS=str(CHAT_WIDTH), HWBRIDGE_REMOTE_TOKEN=FARM_TOKEN),
            _stdin(typed),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            code = hwbridge_main(
                ["chat", "--provider", "openai-compatible", "--base-url", fake.base_url,
                 "--model", "llama-3.1-8b", "--remote", benches[0].url,
                 "--remote", benches[1].url, "--remote-read-only", "read_signals"]
            )  # fmt: skip
    finally:
        server.clear()
        server.stop()
        for bench in benches:
            bench.stop()
    if code != 0:
        raise RuntimeError(f"hwbridge chat ended with {code}:\n{out.getvalue()}")
    return Produced(out.getvalue(), {})


# -- the consent question an MCP client shows ------------------------------------------------------


def _consent_question() -> Produced:
    """The question `hwbridge mcp --consent` asks before a `send_message`, and the one box of
    its form as a client draws it."""

    call = ToolCall(
        tool="send_message",
        arguments={"message": "ClimateCommand", "signals": {"CabinSetpoint": 22.5, "FanLevel": 3}},
    )
    with CanDriver.from_dbc(
        DEMO,
        bus=f"virtual:docs-{uuid.uuid4().hex[:10]}",
        policy=SendPolicy(allow_messages=["ClimateCommand"]),
    ) as driver:
        asked = question_text(driver, call)
    return Produced(f"{asked}\n[ ] Send it\n", {})


PRODUCERS: dict[str, Producer] = {
    "demo": Producer(_demo, volatile=DEMO_VOLATILE, flatten=True),
    "first-read": Producer(_first_read, volatile=(r"(?<=EngineSpeed )[\d.]+",)),
    "can-read": Producer(
        _can_read,
        volatile=(r"(?<=a prompt of )\d+", r"(?<='value': )[\d.]+", r"(?<='age_ms': )\d+"),
    ),
    "obd-session": Producer(_obd_session, volatile=(r"(?<=coolant )\d+", r"(?<=rpm )[\d.]+")),
    "simulator-prius": Producer(_simulator_on_prius, volatile=(r"(?<=127\.0\.0\.1:)\d+",)),
    "live-discovery": Producer(
        _live_discovery,
        volatile=(
            r"[\d,]+ frames",  # real time
            # the speed's scale and offset, fitted in real time to OBD-II's whole km/h: 0.01
            # when the points allow it, 0.0099 to 0.0101 on a busy machine
            r"(?<= x)[\d.]+ [+-][\d.]+(?= km/h)",
            r"r=[\d.]+ R2=[\d.]+",  # R2 1.000 or 0.999, as the answers came
        ),
    ),
    "events-csv": Producer(_events_csv),
    "events": Producer(_events_ranking),
    "obd-reference": Producer(_obd_reference),
    "truck-decode": Producer(_truck_decode, volatile=(r"(?<= in )[\d.]+(?= s\n)",)),
    "decode-interrupted": Producer(
        _interrupted_decode, volatile=(r"(?<=captures are in )\S+(?=, each whole)",)
    ),
    "record": Producer(
        _record,
        volatile=(
            r"[\d,]+ frames",
            r"[\d.]+ (?:kB|bytes)",
            r"[━╺╸]+",
            r"\d:\d\d:\d\d",
            r"(?<=127\.0\.0\.1:)\d+",
            r"(?<= in )[\d.]+(?= s)",
        ),
    ),
    "monitor": Producer(_monitor_screen),
    "evidence": Producer(_evidence_page),
    "discover": Producer(_discover_table),
    "discover-json": Producer(_discover_json),
    "match-known": Producer(_match_known),
    "match-known-json": Producer(_match_known_json),
    "multiplexed-json": Producer(_multiplexed_json),
    "multiplexed-draft": Producer(_multiplexed_draft),
    "float-draft": Producer(_float_draft),
    "chat": Producer(
        _chat_session,
        volatile=(r'(?m)(?<=✓ read_signals \{"values": ).*$',),
    ),
    "consent": Producer(_consent_question),
    "tampered-driver": Producer(_tampered_driver),
    "farm": Producer(
        _farm_session,
        volatile=(
            r'(?m)(?<=✓ bench[12]\.read_signals \{"values": ).*$',
            r'(?m)(?<=✓ bench2\.bus_status \{"state": "connected", "bus": ).*$',
        ),
    ),
}


def marked() -> dict[str, list[tuple[str, int]]]:
    """Each producer's name: the (page, line) of the blocks marked with it."""
    found: dict[str, list[tuple[str, int]]] = {}

    for page in pages():
        for block in blocks(page):
            if block.mark == "produced" and block.reason:
                found.setdefault(block.reason, []).append((page, block.line))
    return found


def shown_block(page: str, line: int) -> str:
    """The text of the block whose fence opens at `line` of `page`."""
    code = next(b.code for b in blocks(page) if b.line == line)
    return code if code.endswith("\n") else code + "\n"  # an indented block's lines are joined


def write_block(page: str, line: int, new: str) -> None:
    lines = text(page).splitlines(keepends=True)
    end = line  # the closing fence: the first line after `line` that is only the fence
    while lines[end].strip() != "```":
        end += 1
    indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
    new = new if new.endswith("\n") else new + "\n"
    lines[line:end] = [indent + row if row.strip() else row for row in new.splitlines(True)]
    (ROOT / page).write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs_produced")
    parser.add_argument("--write", action="store_true", help="write what is stale")
    parser.add_argument("names", nargs="*", help=f"of {', '.join(PRODUCERS)} (all)")
    args = parser.parse_args(argv)
    stale = 0
    for name in args.names or list(PRODUCERS):
        producer = PRODUCERS[name]
        try:
            made = producer.make()
        except Unavailable as why:
            print(f"{name}: not made here: {why}")
            continue
        for file, content in made.files.items():
            path = STATIC / file
            if not path.exists() or path.read_text() != content:
                stale += 1
                print(f"{name}: docs/_static/{file} is stale")
                if args.write:
                    path.write_text(content)
        for index in range(len(marked().get(name, []))):
            page, line = marked()[name][index]  # again: a block written above moves the rest
            if producer.mask(shown_block(page, line)) != producer.mask(made.text):
                stale += 1
                print(f"{name}: {page}:{line} is stale")
                if args.write:
                    write_block(page, line, made.text)
    print(json.dumps({"stale": stale, "written": bool(args.write and stale)}))
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    raise SystemExit(main())
