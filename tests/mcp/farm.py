"""Simulated benches for the farm tests: each one `python -m firmware_sim` (a car on a
socketcand server) and `hwbridge mcp --http` in front of it with a bearer token, on loopback,
as a validation team would run a row of HIL benches."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tests.mcp.conftest import ROOT, start_http, stop

TOKEN = "farm-token-7d1c"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_sim() -> tuple[subprocess.Popen[str], str]:
    """`python -m firmware_sim`: the demo car on a socketcand server; (process, bus string)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "firmware_sim"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    timer = threading.Timer(20.0, process.kill)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            found = re.match(r"socketcand: (\S+)", line)
            if found:
                return process, found.group(1)
    finally:
        timer.cancel()
    process.kill()
    raise RuntimeError("python -m firmware_sim did not start")


@dataclass
class Bench:
    """One bench: its simulator, its MCP server, and the server's URL (a fixed port, so a
    restarted server is found where it was)."""

    sim: subprocess.Popen[str] | None  # None: the simulator is another bench's
    bus: str
    port: int
    server: subprocess.Popen[str] | None = None
    url: str = ""
    options: tuple[str, ...] = field(default=())

    def serve(self) -> None:
        self.server, self.url = start_http(
            "--bus",
            self.bus,
            "--token-env",
            "HWB_FARM_TOKEN",
            *self.options,
            env={"HWB_FARM_TOKEN": TOKEN},
            address=f"127.0.0.1:{self.port}",
        )

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.kill()
        self.server.wait(10)

    def freeze(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.server is not None:
            self.thaw()
            stop(self.server)
        if self.sim is not None:
            stop(self.sim)


def start_bench(*options: str, beside: Bench | None = None) -> Bench:
    """A bench with a simulator of its own, or a second server on the simulator of
    `beside` (a server that can be killed and restarted without starting another car)."""
    sim, bus = (None, beside.bus) if beside is not None else start_sim()
    bench = Bench(sim, bus, free_port(), options=options)
    try:
        bench.serve()
    except BaseException:
        if sim is not None:
            stop(sim)
        raise
    return bench


def start_benches(count: int) -> list[Bench]:
    """`count` benches started side by side (each takes a second or two to come up)."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: start_bench(), range(count)))
