"""Queries in a worker process that the operating system can stop: wall time, memory, result size.

`QuerySandbox.call` sends one request to the worker (`sql_worker`) and waits for its answer
until the deadline, checking the worker's resident memory every few milliseconds. Past the
deadline or the memory bound the worker is killed (SIGKILL: no function can ignore it) and a
spare worker, started beforehand, takes its place, so the next query answers at once and
normally. A worker that dies by itself (an allocation past its address-space limit, a crash)
is replaced the same way. Calls are serialised; waiting for the worker counts against the
timeout, starting one does not.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from hwbridge.captures.dataset import Table
from hwbridge.captures.sql.process import WorkerProcess
from hwbridge.core.errors import ToolError

__all__ = ["QuerySandbox", "SandboxLimits", "parse_size"]

_HEADER_BYTES = 4
_POLL_S = 0.01
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def parse_size(text: str) -> int:
    """Bytes in a DuckDB size such as '2GB', '512MiB' or '1.5 GB' (GB = 1000^3, GiB = 1024^3)."""
    match = _SIZE.match(text)
    unit = match[2].lower() if match else "?"
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (write e.g. 512MB or 2GB)")
    return int(float(match[1]) * _UNITS[unit])


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What the operating system holds a worker to, beyond DuckDB's own `memory_limit`."""

    memory_limit: str = "2GB"
    threads: int = 2
    max_rows: int = 200
    max_chars: int = 10_000
    max_columns: int = 100
    # resident memory a worker may grow by past its idle size, beyond memory_limit
    memory_margin: int = 100 * 1000**2
    # address space past the worker's size at start, beyond memory_limit (thread stacks, arenas)
    address_margin: int = 1024**3
    startup_timeout_s: float = 60.0
    spare: bool = True  # keep a started worker ready, so a kill costs the next query nothing


class _Killed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # "timeout", "memory" or "died"


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class _Worker:
    """One worker process and its pipes."""

    def __init__(
        self, init: bytes, limits: SandboxLimits, started: WorkerProcess | None = None
    ) -> None:
        self.process = started.take() if started is not None else WorkerProcess.start()
        self.proc = self.process.proc
        self._log = self.process.log
        self.limits = limits
        self.max_chars = limits.max_chars  # of the answer being waited for
        self.rss_limit: int | None = None
        self.recycle_at: int | None = None
        try:
            self._send(init)
            self._receive(time.monotonic() + limits.startup_timeout_s)
        except _Killed as killed:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)  # let it finish saying why
            words = self._last_words()
            self.kill()
            raise RuntimeError(f"{killed.reason}: {words}") from None
        except BaseException:
            self.kill()
            raise
        idle = _rss(self.proc.pid)
        if idle is not None:
            memory = parse_size(limits.memory_limit)
            self.rss_limit = idle + memory + limits.memory_margin
            self.recycle_at = idle + max(limits.memory_margin, memory // 2)

    def _last_words(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 400))
            return " ".join(self._log.read().decode("utf-8", "replace").split())
        return ""

    def worn(self) -> bool:
        """True when memory a query left behind (freed, not returned) would crowd the next."""
        rss = _rss(self.proc.pid)
        return rss is not None and self.recycle_at is not None and rss > self.recycle_at

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _send(self, payload: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(len(payload).to_bytes(_HEADER_BYTES, "big") + payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Killed("died") from None

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunks: list[bytes] = []
        wanted = size
        while wanted:
            now = time.monotonic()
            # past the deadline only what is in the pipe already is taken: a caller that ran
            # late (a busy machine) does not lose, as a timeout, an answer that came in time
            wait = min(_POLL_S, deadline - now) if now < deadline else 0.0
            ready, _, _ = select.select([fd], [], [], wait)
            if ready:
                chunk = os.read(fd, min(wanted, 1 << 20))
                if not chunk:
                    raise _Killed("died")
                chunks.append(chunk)
                wanted -= len(chunk)
            elif now >= deadline:
                raise _Killed("timeout")
            elif self.rss_limit is not None:
                rss = _rss(self.proc.pid)
                if rss is not None and rss > self.rss_limit:
                    raise _Killed("memory")
        return b"".join(chunks)

    def _receive(self, deadline: float) -> Any:
        size = int.from_bytes(self._read(_HEADER_BYTES, deadline), "big")
        if size > 16 * self.max_chars + (1 << 20):
            raise _Killed("died")  # a worker that says more than any answer holds is not trusted
        return orjson.loads(self._read(size, deadline))

    def call(self, request: bytes, deadline: float, max_chars: int) -> dict[str, Any]:
        self.max_chars = max_chars
        self._send(request)
        answer = self._receive(deadline)
        if not isinstance(answer, dict):
            raise _Killed("died")
        return answer

    def kill(self) -> None:
        self.process.kill()


class _Pool:
    """The active worker and the spare being started; kills and replacements."""

    def __init__(
        self, init: bytes, limits: SandboxLimits, started: WorkerProcess | None = None
    ) -> None:
        self.init = init
        self.limits = limits
        self.lock = threading.Lock()
        self.active: _Worker | None = None
        self.spare: _Spare | None = _Spare(init, limits, started)
        self.starting: _Spare | None = None  # the spare a call waits for, while it starts
        self.closed = False

    def take(self) -> _Worker:
        if self.active is not None:
            return self.active
        spare, self.spare = self.spare, None
        if spare is None:
            spare = _Spare(self.init, self.limits)
        self.starting = spare
        try:
            self.active = spare.result()
        finally:
            self.starting = None
            if self.limits.spare and not self.closed:
                self.spare = _Spare(self.init, self.limits)
        return self.active

    def drop(self) -> None:
        if self.active is not None:
            self.active.kill()
            self.active = None

    def stop(self) -> None:
        """SIGKILL to every worker process, without the lock (see QuerySandbox.stop)."""
        active = self.active
        if active is not None:
            active.process.stop()
        for spare in (self.starting, self.spare):
            if spare is not None:
                spare.stop()

    def close(self) -> None:
        self.closed = True
        self.drop()
        if self.spare is not None:
            self.spare.cancel()
            self.spare = None


class _Spare:
    """A worker being started in a thread of its own."""

    def __init__(
        self, init: bytes, limits: SandboxLimits, started: WorkerProcess | None = None
    ) -> None:
        self._worker: _Worker | None = None
        self._process: WorkerProcess | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()  # a cancel and a start that ends never both miss the kill
        self._thread = threading.Thread(
            target=self._start, args=(init, limits, started), name="hwbridge-sql-start", daemon=True
        )
        self._thread.start()

    def _start(self, init: bytes, limits: SandboxLimits, started: WorkerProcess | None) -> None:
        try:
            self._process = started if started is not None else WorkerProcess.start()
            worker = _Worker(init, limits, self._process)
        except BaseException as exc:
            self._error = exc
        else:
            with self._lock:
                self._worker = worker
                cancelled = self._cancelled
            if cancelled:
                worker.kill()
        finally:
            self._done.set()

    def result(self) -> _Worker:
        self._done.wait()
        if self._worker is None:
            raise ToolError(
                "QUERY_FAILED",
                f"The query worker did not start: {self._error!s}"[:600],
                retryable=True,
            )
        return self._worker

    def stop(self) -> None:
        process = self._process
        if process is not None:
            process.stop()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            worker = self._worker
        if worker is not None:
            worker.kill()


def _close_pool(pool: _Pool) -> None:
    with pool.lock:
        pool.close()


class QuerySandbox:
    """Runs requests in a killable worker over the given tables; thread-safe."""

    def __init__(
        self,
        tables: Sequence[Table],
        limits: SandboxLimits | None = None,
        *,
        worker: WorkerProcess | None = None,
    ) -> None:
        """`worker`: a process started beforehand (`WorkerProcess.start()`), which becomes
        the first worker; the sandbox owns it from here on."""
        self.limits = limits or SandboxLimits()
        parse_size(self.limits.memory_limit)  # a bad size fails here, not in the worker
        settings = {
            "memory_limit": self.limits.memory_limit,
            "threads": self.limits.threads,
            "max_rows": self.limits.max_rows,
            "max_chars": self.limits.max_chars,
            "max_columns": self.limits.max_columns,
            "address_space": parse_size(self.limits.memory_limit) + self.limits.address_margin,
        }
        init = pickle.dumps({"tables": list(tables), "settings": settings})
        self._pool = _Pool(init, self.limits, worker)
        self._finalizer = weakref.finalize(self, _close_pool, self._pool)
        self.kills = 0  # workers killed at a bound, for tests and benchmarks

    @property
    def worker_pid(self) -> int | None:
        """The active worker's process id (None before the first query)."""
        active = self._pool.active
        return active.pid if active is not None else None

    def call(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The worker's answer, or ToolError QUERY_TIMEOUT / QUERY_FAILED when it had to go."""
        pool = self._pool
        if not pool.lock.acquire(timeout=timeout_s):
            raise ToolError(
                "QUERY_TIMEOUT",
                f"Other queries kept the dataset busy for {timeout_s:g} s; try again.",
                retryable=True,
            )
        try:
            if pool.closed:
                raise ToolError("QUERY_FAILED", "The dataset is closed.")
            worker = pool.take()
            try:
                answer = worker.call(
                    pickle.dumps(request),
                    time.monotonic() + timeout_s,
                    int(request.get("max_chars") or self.limits.max_chars),
                )
            except _Killed as killed:
                pool.drop()
                self.kills += 1
                raise self._error(killed.reason, timeout_s) from None
            if answer.get("restart") or worker.worn():
                pool.drop()
            return answer
        finally:
            pool.lock.release()

    def _error(self, reason: str, timeout_s: float) -> ToolError:
        if reason == "timeout":
            return ToolError(
                "QUERY_TIMEOUT",
                f"The query was stopped after {timeout_s:g} s. Ask for less: filter on source or "
                "timestamp, aggregate (count, avg, min, max) or add LIMIT.",
                retryable=True,
            )
        if reason == "memory":
            return ToolError(
                "QUERY_FAILED",
                f"The query was stopped: it needed more than {self.limits.memory_limit} of "
                "memory. Ask for less: aggregate, filter or add LIMIT.",
            )
        return ToolError(
            "QUERY_FAILED",
            "The query stopped the query worker (it ran out of memory or crashed); it was "
            "restarted. Ask for less: aggregate, filter or add LIMIT.",
        )

    def stop(self) -> None:
        """Kill the worker now, whatever it runs, from any thread and without waiting for
        the call in progress: that call fails at once with QUERY_FAILED, and the next one
        gets a new worker. For a caller that gives up (a command on Ctrl-C); `close()`
        still follows."""
        self._pool.stop()

    def close(self) -> None:
        self._finalizer()
