"""No library's log line reaches the terminal of a command: python-can's socketcand client
warns at every TCP read that ends inside a frame, and `hwbridge plot --bus`, `chat` and `mcp`
printed it (15 times in one chat turn). `--debug` shows them; hwbridge's own warnings stay."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import DEMO, REPO

pytestmark = pytest.mark.timeout(120)

SPLIT_WARNING = "Got incomplete message"


class SplittingSocketcand:
    """A socketcand server that sends every EngineData frame in two TCP writes, split inside
    the frame: python-can's client logs its warning for each."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"< hi >")
                conn.recv(1024)  # < open vcan0 >
                conn.sendall(b"< ok >")
                conn.recv(1024)  # < rawmode >
                conn.sendall(b"< ok >")
                while not self.stop.wait(0.01):
                    t = time.time()
                    frame = f"< frame 100 {t:.6f} 0033003C00020000 >".encode()
                    conn.sendall(frame[:17])
                    self.stop.wait(0.002)
                    conn.sendall(frame[17:])
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.server.close()


@pytest.fixture
def splitting() -> Iterator[SplittingSocketcand]:
    server = SplittingSocketcand()
    yield server
    server.close()


def plot(server: SplittingSocketcand, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hwbridge", "plot", "--bus",
         f"socketcand://127.0.0.1:{server.port}/vcan0", "--dbc", str(DEMO),
         "--signal", "EngineSpeed", "--duration", "1", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=90, cwd=REPO, check=False,
    )  # fmt: skip


def test_a_library_warning_stays_off_the_terminal(
    splitting: SplittingSocketcand, tmp_path: Path
) -> None:
    quiet = plot(splitting, tmp_path / "quiet.png")
    assert quiet.returncode == 0, quiet.stderr
    assert (tmp_path / "quiet.png").stat().st_size > 0
    assert SPLIT_WARNING not in quiet.stderr + quiet.stdout
    assert "WARNING" not in quiet.stderr


def test_debug_shows_what_the_libraries_say(splitting: SplittingSocketcand, tmp_path: Path) -> None:
    """The warning the test above hides is really there to hide."""
    loud = plot(splitting, tmp_path / "loud.png", "--debug")
    assert loud.returncode == 0, loud.stderr
    assert SPLIT_WARNING in loud.stderr


@pytest.mark.parametrize("debug", [False, True])
def test_only_hwbridges_own_warnings_reach_the_terminal(debug: bool) -> None:
    """Any library, not only python-can: a warning of cantools, mcp or httpx is theirs."""
    script = (
        "import logging\n"
        "from hwbridge.cli import main\n"
        f"main._configure_logging({debug})\n"
        "for name in ('cantools.database', 'mcp.server', 'httpx', 'asammdf'):\n"
        "    logging.getLogger(name).warning('%s speaks', name)\n"
        "logging.getLogger('hwbridge.can.network').warning('hwbridge speaks')\n"
        "logging.getLogger('firmware_sim.vehicle').warning('the simulator speaks')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "hwbridge speaks" in run.stderr and "the simulator speaks" in run.stderr
    for name in ("cantools.database", "mcp.server", "httpx", "asammdf"):
        assert (f"{name} speaks" in run.stderr) is debug, run.stderr
