"""Devices that misbehave on purpose (review 8): a device that talks without end, a reply
pattern that backtracks, a device that stops taking bytes. Every call ends near its own
timeout, and a line is reported and audited as what really became of it."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hwbridge import SendPolicy, SerialDriver, ToolError
from hwbridge.policy import CommandRequest
from tests.conftest import BUSY_MARGIN_S

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 0.5  # the spec's timeout_ms
# The bounds below are what a call promises plus BUSY_MARGIN_S; the behaviour they guard
# against takes far longer, or for ever.

SPEC = """
[device]
name = "logger"
mode = "query"
[port]
timeout_ms = 500
[commands.read_samples]
description = "The last samples."
send = "SAMP?"
reply = '^(?P<samples>(a|aa)+)$'
"""


class Device:
    """The far end of a pty: answers `SAMP?` with `reply`, or talks without end."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.master)
        tty.setraw(self.slave)
        self.port = os.ttyname(self.slave)
        self.reply = b""
        self.reading = True
        self.spewing = False
        self.received = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            want_read = [self.master] if self.reading else []
            want_write = [self.master] if self.spewing else []
            ready, writable, _ = select.select(want_read, want_write, [], 0.02)
            try:
                if writable:
                    os.write(self.master, b"LOG noise that is not a reply\n" * 64)
                if ready:
                    data = os.read(self.master, 65536)
                    self.received += data
                    if b"SAMP?" in data and self.reply:
                        os.write(self.master, self.reply)
            except OSError:
                return

    def drain(self) -> None:
        while select.select([self.master], [], [], 0.1)[0]:
            self.received += os.read(self.master, 65536)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def device() -> Iterator[Device]:
    dev = Device()
    yield dev
    dev.close()


@contextlib.contextmanager
def spewing_socket() -> Iterator[str]:
    """A device behind socket:// (a Wi-Fi adapter) that writes log lines without pause."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while not stop.is_set():
                try:
                    conn.sendall(b"LOG noise that is not a reply\n" * 64)
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"socket://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        server.close()


def call(driver: SerialDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def timed(driver: SerialDriver, tool: str, **arguments: Any) -> tuple[Any, float]:
    started = time.monotonic()
    return call(driver, tool, **arguments), time.monotonic() - started


def test_a_reply_pattern_that_backtracks_is_cut_off_by_the_call_timeout(
    device: Device, tmp_path: Path
) -> None:
    (tmp_path / "logger.toml").write_text(SPEC)
    device.reply = b"a" * 40 + b"b\n"  # (a|aa)+$ backtracks 2^40 steps in Python's re
    with SerialDriver.from_spec(tmp_path / "logger.toml", port=device.port) as driver:
        r, took = timed(driver, "read_samples")
        assert r.call_detail.startswith("NO_REPLY")
        assert took < TIMEOUT_S + BUSY_MARGIN_S  # re would take days
        device.reply = b"aaaa\n"
        good = call(driver, "read_samples")
        assert good.tool_call_result["values"]["samples"] == {"value": "aaaa"}


def test_a_device_that_talks_without_end_cannot_hold_a_call(device: Device, tmp_path: Path) -> None:
    (tmp_path / "logger.toml").write_text(SPEC)
    device.spewing = True
    with SerialDriver.from_spec(tmp_path / "logger.toml", port=device.port) as driver:
        r, took = timed(driver, "read_samples")
        assert r.call_detail.startswith("NO_REPLY") and "another form" in r.call_detail
        assert took < TIMEOUT_S + BUSY_MARGIN_S  # the device never stops talking
    with (
        spewing_socket() as url,
        SerialDriver.from_spec(tmp_path / "logger.toml", port=url) as remote,
    ):  # pyserial's socket in_waiting is 0 or 1: the deadline must hold anyway
        r, took = timed(remote, "read_samples")
        assert r.call_detail.startswith("NO_REPLY")
        assert took < TIMEOUT_S + BUSY_MARGIN_S
    policy = SendPolicy(allow_raw_lines=[r"^PING$"])
    with SerialDriver.from_port(device.port, policy=policy) as generic:
        r, took = timed(generic, "serial_query", line="PING", expect="PONG", timeout_ms=300)
        assert r.call_executed and r.tool_call_result["reply"] is None
        assert took < 0.3 + BUSY_MARGIN_S  # its timeout_ms; PONG never comes


def test_a_device_that_stops_reading_gets_no_line_reported_wrongly(
    device: Device, tmp_path: Path
) -> None:
    device.reading = False  # the kernel buffer fills, then writes stall
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(
        allow_raw_lines=[r"^[A-Z: ?0-9]+$"], max_commands_per_second=10_000, audit_log=log
    )
    line = "MEAS:VOLT? " + "9" * 480
    with SerialDriver.from_port(device.port, policy=policy) as driver:
        sent = 0
        for _ in range(400):
            r = call(driver, "serial_query", line=line, timeout_ms=0)
            if r.call_failed:
                break
            sent += 1
        stalled = r.call_detail
        assert stalled.startswith(("WRITE_INCOMPLETE", "PORT_DOWN"))
        if stalled.startswith("WRITE_INCOMPLETE"):  # never told to just try again
            assert "Repeating the same call will fail again" in (r.retry_prompt or "")
        after = call(driver, "serial_query", line="OUTP ON", timeout_ms=0)
        device.drain()
        lines = bytes(device.received).split(b"\n")
        assert lines.count(line.encode()) == sent  # every line reported sent is there, whole
        outcomes = [json.loads(x)["outcome"] for x in log.read_text().splitlines()]
        assert outcomes.count("sent") == sent
        if stalled.startswith("WRITE_INCOMPLETE"):  # part of a line is in the device
            assert outcomes[sent] == "unconfirmed"
            assert after.call_detail.startswith("PORT_DESYNC")
            assert b"OUTP ON" not in device.received  # never glued to the fragment
            assert driver.adapter is not None
            driver.adapter.reconnect()  # the user checked the device
            device.reading = True
            again = call(driver, "serial_query", line="OUTP ON", timeout_ms=0)
            assert again.call_executed
        else:  # nothing of the line went out: safe to retry, and the next line goes
            assert outcomes[sent] == "failed"


def test_c1_control_characters_are_not_one_line() -> None:
    policy = SendPolicy(allow_raw_lines=[r".*"])
    for bad in ("VOLT 1\x85", "VOLT \x9b2J", "VOLT\x00"):
        request = CommandRequest(bad, "\n", tool="serial_query", port="pty")
        with pytest.raises(ToolError) as refused:
            policy.check(request)
        assert refused.value.code in {"SEND_NOT_ALLOWED", "INVALID_VALUE"}
