"""`hwbridge record` through the real command line, against the simulator over socketcand.

Every recording is read back with python-can's `can.LogReader` and found, frame for frame
and in order, in what the simulated vehicle sent (its witness on the virtual channel).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

import can
from hwbridge.cli.record import Recorder, _open_writer, _size_text
from tests.cli.conftest import Run
from tests.cli.sim_bus import Frame, SimBus, contiguous_in, frame_of, hwbridge, read_back, sim_bus
from tests.conftest import wait_until

__all__ = ["sim_bus"]  # the fixture, imported for the tests below

pytestmark = pytest.mark.timeout(90)

# cycle times of the demo vehicle's frames that socketcand carries (AdasObjects is CAN FD)
CYCLE_MS = {0x100: 10, 0x110: 20, 0x120: 50, 0x2A0: 100, 0x2A1: 100, 0x3C1: 500}


def _check_every_frame(sim: SimBus, path: Path, *, absolute_times: bool) -> list[Frame]:
    messages = read_back(path)
    recorded = [frame_of(m) for m in messages]
    sent = sim.frames()
    start = contiguous_in(recorded, [f for _, f in sent])
    assert start is not None, f"{path.name}: {len(recorded)} frames, not one unbroken run"
    if absolute_times:  # BLF, MF4 and candump logs keep the bus's own timestamps
        for msg, (ts, _) in zip(messages, sent[start:], strict=False):
            assert msg.timestamp == pytest.approx(ts, abs=2e-5)
    return recorded


@pytest.mark.parametrize("ext", [".blf", ".asc", ".log", ".mf4"])
def test_a_second_of_the_simulator_read_back_frame_for_frame(
    sim_bus: SimBus, tmp_path: Path, ext: str
) -> None:
    if ext == ".mf4":
        pytest.importorskip("asammdf", reason="MF4 needs asammdf")
    out = tmp_path / f"drive{ext}"
    proc = hwbridge(
        "record", "--bus", sim_bus.url, "--out", str(out), "--duration", "1",
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "1 s recorded" in err and str(out) in err
    recorded = _check_every_frame(sim_bus, out, absolute_times=ext != ".asc")
    # about 1 s of each periodic message (never more; on a loaded 2-core machine the
    # simulator's 10 ms messages fall behind, so fewer is allowed: every frame it did send is
    # checked above)
    counts = Counter(aid for aid, _, _ in recorded)
    for aid, cycle in CYCLE_MS.items():
        expected = 1000 / cycle
        assert expected * 0.6 - 1 <= counts[aid] <= expected * 1.1 + 1, (hex(aid), counts)
    assert f"{len(recorded):,} frames" in err


def test_frames_that_arrive_after_the_duration_are_not_written(tmp_path: Path) -> None:
    """However late the main thread notices that the time is up (a loaded machine), the
    file holds what arrived within --duration of the first frame: 112 frames of a 10 ms
    message once made "1 s" of a recording."""
    path = tmp_path / "cut.log"
    ended = threading.Event()
    recorder = Recorder(_open_writer(path, ".log"), duration_s=0.3, ended=ended)
    frame = can.Message(arbitration_id=0x100, data=b"\x01", is_extended_id=False)
    recorder.on_message(frame)  # the first frame starts the clock
    recorder.start()  # the bus "opened" after it: the clock stays
    assert wait_until(lambda: recorder.timed_out, 10)
    assert not ended.is_set()
    recorder.on_message(frame)  # too late
    recorder.close()
    assert recorder.frames == 1 and ended.is_set()
    assert len(read_back(path)) == 1


def test_the_progress_says_what_the_file_holds_and_what_is_buffered(tmp_path: Path) -> None:
    """A BLF writer keeps a block of frames uncompressed until it is full (128 KiB) and
    writes it compressed: its estimate of the size, which the progress line showed as the
    file's, read 26 kB for a recording that closed as 4.3 kB."""
    frames = [
        can.Message(timestamp=i * 0.004, arbitration_id=0x100 + i % 10,
                    data=bytes([i % 256, i % 7, 0, 0, 0x12, 0x34, 0, i % 3]), is_extended_id=False)
        for i in range(540)
    ]  # fmt: skip
    blf = Recorder(_open_writer(tmp_path / "drive.blf", ".blf"))
    log = Recorder(_open_writer(tmp_path / "drive.log", ".log"))
    for msg in frames:
        blf.on_message(msg)
        log.on_message(msg)
    written, buffered = blf.sizes()
    assert written == 144  # the file's header: no block is full yet
    assert buffered > 20_000 and blf.size() == written + buffered  # what --max-size counts
    assert _size_text(written, buffered) == f"144 bytes written, {buffered / 1000:.1f} kB buffered"
    blf.close()
    assert (tmp_path / "drive.blf").stat().st_size < (written + buffered) / 3  # compressed
    assert blf.sizes() == (0, 0)
    written, buffered = log.sizes()  # a text file holds every frame as it comes
    assert buffered == 0 and _size_text(written, 0) == f"{written / 1000:.1f} kB written"
    log.close()
    assert (tmp_path / "drive.log").stat().st_size == written


@pytest.mark.parametrize(
    ("how", "word"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")]
)
def test_ctrl_c_or_sigterm_leaves_a_readable_file(
    sim_bus: SimBus, tmp_path: Path, how: signal.Signals, word: str
) -> None:
    out = tmp_path / "drive.blf"
    proc = hwbridge(
        "record", "--bus", sim_bus.url, "--out", str(out),
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert wait_until(lambda: sim_bus.server.client_count > 0, 30)
        wait_until(lambda: False, 1.5)
        proc.send_signal(how)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err.startswith(f"hwbridge: {word}: ")
    recorded = _check_every_frame(sim_bus, out, absolute_times=True)
    assert len(recorded) > 100  # about 1.5 s of ~270 frames/s


def test_max_size_stops_the_recording_at_the_limit(sim_bus: SimBus, tmp_path: Path) -> None:
    out = tmp_path / "drive.log"
    proc = hwbridge(
        "record", "--bus", sim_bus.url, "--out", str(out), "--max-size", "0.02",
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "size limit 20.0 kB reached" in err
    size = out.stat().st_size
    assert 20_000 <= size < 20_000 + 100  # stopped at the frame that reached it
    _check_every_frame(sim_bus, out, absolute_times=True)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_bus_that_does_not_answer_exits_1_and_writes_nothing(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "drive.blf"
    r = run("record", "--bus", f"socketcand://127.0.0.1:{_closed_port()}/vcan0", "--out", str(out))
    assert r.code == 1
    assert r.err.startswith("hwbridge: cannot open socketcand://") and "BUS_DOWN" in r.err
    assert r.err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--out", "drive.txt"],
            "'.txt' is not a recording format; use one of .blf, .mf4, .asc, .log",
        ),
        (["--out", "drive"], "a file without an extension is not a recording format"),
        (["--out", "drive.blf", "--bus", "nonsense"], "--bus: invalid CAN bus 'nonsense'"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    bus = [] if "--bus" in argv else ["--bus", "virtual:nobody"]
    r = run("record", *bus, *argv)
    assert r.code == 2
    assert message in r.err and r.err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--duration", "0"], "seconds must be above 0"),
        (["--duration", "-1"], "seconds must be above 0"),
        (["--max-size", "lots"], "'lots' is not a number of megabytes"),
    ],
)
def test_bad_option_values_exit_2(tmp_path: Path, option: list[str], message: str) -> None:
    proc = hwbridge(
        "record", "--bus", "virtual:x", "--out", str(tmp_path / "a.blf"), *option,
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_a_write_failure(run: Run, tmp_path: Path) -> None:
    r = run("record", "--bus", "virtual:nobody", "--out", str(tmp_path / "no" / "drive.blf"))
    assert r.code == 1
    assert "cannot write the recording there: the folder" in r.err and "does not exist" in r.err


def test_a_replayed_capture_is_converted_whole(tmp_path: Path) -> None:
    """`replay:` as the bus: the recording ends with the capture, every frame in it."""
    source = tmp_path / "drive.log"
    frames = [
        can.Message(
            timestamp=1_700_000_000 + i * 0.001,
            arbitration_id=0x100 + i % 7,
            data=bytes([i % 256, i // 256]),
            is_extended_id=False,
            channel="vcan0",
        )
        for i in range(2000)
    ]
    with can.Logger(str(source)) as log:
        for msg in frames:
            log.on_message_received(msg)
    out = tmp_path / "drive.blf"
    proc = hwbridge(
        "record", "--bus", f"replay:{source}?speed=max", "--out", str(out),
        stderr=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.startswith("hwbridge: the replay ended: 2,000 frames from 7 ids")
    assert [frame_of(m) for m in read_back(out)] == [frame_of(m) for m in frames]
