"""The query worker's process, started before its tables are known.

A worker spends most of its start importing DuckDB and pyarrow; only then does it read the
tables it is to serve (the first frame on its stdin). `WorkerProcess.start()` launches that
process and returns at once, so a command that knows it will query a dataset (`hwbridge
plot --dataset`) can start it first and let those imports run on the other core while it
imports and opens the dataset itself; `SqlEngine(..., worker=...)` then hands the process its
tables. The process is the one `sql_sandbox` would start (same interpreter, module,
environment and pipes), so every bound holds as before. This module imports only the
standard library: starting a worker costs the caller nothing to import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

__all__ = ["WorkerProcess", "site_flags"]


def site_flags(path: list[str] | None = None) -> list[str]:
    """["-S"] when the worker can skip `site` (20 ms of its start): when this hwbridge is
    found on the search path handed to it, as an install or a plain editable one puts it.
    An install that reaches hwbridge only through an import hook that `site` sets up (a
    setuptools editable install in strict mode) keeps `site`."""
    home = os.path.realpath(Path(__file__).resolve().parents[3])  # the folder of hwbridge/
    entries = sys.path if path is None else path
    return ["-S"] if any(p and os.path.realpath(p) == home for p in entries) else []


class WorkerProcess:
    """A started `hwbridge.captures.sql.worker` process and the file its stderr goes to."""

    def __init__(self, proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
        self.proc = proc
        self.log = log  # what the worker says when it cannot start
        self.taken = False  # handed to a sandbox, which owns it from then on

    @classmethod
    def start(cls) -> WorkerProcess:
        env = dict(os.environ)
        # the worker imports the same hwbridge as this process, wherever that came from
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["MALLOC_ARENA_MAX"] = "2"  # few malloc arenas: address space tracks real memory
        log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [sys.executable, *site_flags(), "-m", "hwbridge.captures.sql.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                close_fds=True,
                start_new_session=True,  # a terminal's Ctrl-C is the parent's to handle
            )
        except BaseException:
            log.close()
            raise
        return cls(proc, log)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def take(self) -> WorkerProcess:
        """This process for a sandbox (once: a worker serves one set of tables)."""
        if self.taken:
            raise RuntimeError("this worker process was handed to a sandbox already")
        self.taken = True
        return self

    def stop(self) -> None:
        """SIGKILL to the process's group, now, from any thread: whoever waits on its pipe
        sees it end. Closing the pipes and reaping it stay `kill()`'s."""
        with contextlib.suppress(ProcessLookupError, OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.kill()

    def kill(self) -> None:
        """End the process (SIGKILL to its group) and close its pipes and log; idempotent."""
        self.stop()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.log.close()

    def discard(self) -> None:
        """Kill the process unless a sandbox took it (the sandbox ends it when it closes)."""
        if not self.taken:
            self.kill()
