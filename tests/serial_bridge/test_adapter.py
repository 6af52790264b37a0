"""PySerialAdapter against real ports: the simulated supply on a pty, loop://, socket://.

Every read ends within its timeout, whatever the device does (silence, garbage, half a
line, a line longer than any buffer, going away); the port comes back on its own."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from firmware_sim.bench_psu import IDENTITY, BenchPsu
from hwbridge import ToolError
from hwbridge.serial import Framing, PySerialAdapter
from tests.conftest import BUSY_MARGIN_S, wait_until


def code_of(call: object) -> str:
    assert callable(call)
    with pytest.raises(ToolError) as caught:
        call()
    return caught.value.code


def test_a_query_round_trip_on_a_pty(psu: BenchPsu) -> None:
    with PySerialAdapter(str(psu.link)) as port:
        assert port.query("*IDN?") == IDENTITY
        port.write_line("VOLT 5;CURR 1;OUTP ON")
        assert port.query("MEAS:VOLT?") == "5.000"
        assert port.query("MEAS:CURR?") == "0.5000"  # the 10 ohm load
        status = port.status()
        assert status.connected and status.frames_in == 3 and status.bytes_out > 20


@pytest.mark.parametrize("fault", ["silence", "partial", "overlong"])
def test_a_device_that_misbehaves_gives_no_reply_within_the_timeout(
    psu: BenchPsu, fault: str
) -> None:
    with PySerialAdapter(str(psu.link)) as port:
        psu.inject_fault(fault)
        started = time.monotonic()
        with pytest.raises(ToolError) as caught:
            port.query("*IDN?", timeout_s=0.25)
        assert caught.value.code == "NO_REPLY" and caught.value.retryable
        assert 0.2 <= time.monotonic() - started < 0.25 + BUSY_MARGIN_S
        if fault == "overlong":  # 70,000 bytes in one line: dropped, never buffered
            assert "longer than 4096 bytes" in caught.value.message
            assert port.status().overlong_frames == 1
        psu.inject_fault(None)
        assert port.query("*IDN?") == IDENTITY  # the next exchange is clean


def test_garbage_is_skipped_by_an_expectation_and_then_gives_no_reply(psu: BenchPsu) -> None:
    with PySerialAdapter(str(psu.link)) as port:
        psu.inject_fault("garbage")
        assert len(port.query("*IDN?", timeout_s=0.5)) > 0  # some line: it is data
        with pytest.raises(ToolError) as caught:
            port.query("*IDN?", expect=r"^HWBRIDGE,", timeout_s=0.25)
        assert caught.value.code == "NO_REPLY"
        assert "1 other line(s)" in caught.value.message


def test_a_line_split_across_writes_is_put_back_together() -> None:
    with PySerialAdapter("loop://", terminator="\r\n") as port:
        port.write(b"12.3")
        port.write(b"45\r")
        port.write(b"\nnext\r\n")
        assert port.read_line(timeout_s=0.5) == "12.345"
        assert port.read_line(timeout_s=0.5) == "next"
        port.write(b"unfinished")
        assert code_of(lambda: port.read_line(timeout_s=0.1)) == "NO_REPLY"


def test_framing_by_regex_and_by_length() -> None:
    with PySerialAdapter("loop://") as port:
        port.write(b"41 0C 1A F8\r\r>SEARCHING...\r>")
        prompt = Framing.regex(rb">")
        assert port.read_frame(prompt, timeout_s=0.5) == b"41 0C 1A F8\r\r>"
        assert port.read_frame(prompt, timeout_s=0.5) == b"SEARCHING...\r>"
        port.write(b"\x01\x02\x03\x04\x05")
        assert port.read_frame(Framing.fixed(2), timeout_s=0.5) == b"\x01\x02"
        assert port.read_frames(Framing.fixed(2), timeout_s=0.5) == [b"\x03\x04"]
        with pytest.raises(ValueError, match="exactly one"):
            Framing(terminator=b"\n", length=3)


def test_a_stream_longer_than_any_buffer_keeps_memory_bounded() -> None:
    with PySerialAdapter("loop://", max_frame=256) as port:
        for _ in range(8):  # 16 KB without a terminator (loop:// holds 4 KB at a time)
            port.write(b"x" * 2000)
            assert code_of(lambda: port.read_line(timeout_s=0.02)) == "NO_REPLY"
            assert len(port._buffer) <= 256
        port.write(b"tail of the long line\nshort\n")
        assert port.read_line(timeout_s=0.5) == "short"  # resynchronised at the terminator
        assert port.status().overlong_frames >= 1


def test_a_device_that_goes_away_gives_port_down_and_comes_back(psu: BenchPsu) -> None:
    with PySerialAdapter(str(psu.link), backoff_initial_s=0.02, backoff_max_s=0.1) as port:
        assert port.query("*IDN?") == IDENTITY
        first = port.generation
        psu.stop()  # unplugged: the pty and its symlink are gone
        started = time.monotonic()
        assert code_of(lambda: port.query("*IDN?", timeout_s=20.0)) == "PORT_DOWN"
        assert time.monotonic() - started < 20.0 / 2  # at once, not after the query's timeout
        assert code_of(lambda: port.query("*IDN?")) == "PORT_DOWN"  # at once while down
        assert wait_until(lambda: port.status().reconnecting, BUSY_MARGIN_S)
        psu.start()  # plugged back: a new pty under the same name
        assert port.wait_connected(3.0)
        assert port.query("*IDN?") == IDENTITY
        status = port.status()
        assert status.reconnects == 1 and port.generation > first


def test_a_port_that_cannot_open_says_so_or_waits_for_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "nothing")
    assert code_of(lambda: PySerialAdapter(missing)) == "PORT_DOWN"
    with pytest.raises(ValueError, match="cannot open"):
        PySerialAdapter("nosuchscheme://x")
    device = BenchPsu(link=tmp_path / "later")
    port = PySerialAdapter(
        str(tmp_path / "later"), require_connection=False, backoff_initial_s=0.02
    )
    try:
        assert not port.connected
        device.start()
        assert port.wait_connected(3.0)
        assert port.query("*IDN?") == IDENTITY
    finally:
        port.close()
        device.stop()


def test_sixteen_threads_share_one_port_without_reading_each_others_replies(
    psu: BenchPsu,
) -> None:
    with PySerialAdapter(str(psu.link)) as port:
        port.write_line("VOLT 4;OUTP ON")
        expected = {"*IDN?": IDENTITY, "MEAS:VOLT?": "4.000", "MEAS:CURR?": "0.4000"}
        wrong: list[tuple[str, str]] = []

        def work(i: int) -> None:
            for n in range(20):
                question = list(expected)[(i + n) % 3]
                answer = port.query(question, timeout_s=5.0)
                if answer != expected[question]:
                    wrong.append((question, answer))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert not wrong


def test_socket_url(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    host, number = server.getsockname()

    def echo_upper() -> None:
        conn, _ = server.accept()
        with conn:
            data = conn.recv(100)
            conn.sendall(data.upper())

    thread = threading.Thread(target=echo_upper, daemon=True)
    thread.start()
    try:
        with PySerialAdapter(f"socket://{host}:{number}") as port:
            assert port.query("meas:volt?", timeout_s=2.0) == "MEAS:VOLT?"
    finally:
        server.close()
        thread.join(2)


def test_spy_url_writes_a_trace_of_both_directions(psu: BenchPsu, tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    with PySerialAdapter(f"spy://{psu.link}?file={trace}") as port:
        assert port.query("*IDN?") == IDENTITY
    text = trace.read_text()
    assert " TX " in text and "2A 49 44 4E 3F" in text  # *IDN?
    assert " RX " in text  # the reply, in as many pieces as it was read


def test_reconnecting_while_another_thread_reads_never_deadlocks(psu: BenchPsu) -> None:
    # a reader in a loop (as the line monitor reads) takes the read lock again the moment it
    # lets it go: a reconnect that waited its turn waited for ever (and, taking the locks in
    # the other order, the two waited for each other)
    with PySerialAdapter(str(psu.link)) as port:
        stop = threading.Event()
        reads = 0

        def read() -> None:
            nonlocal reads
            while not stop.is_set():
                try:
                    port.read_frames(timeout_s=0.005)
                except ToolError:
                    pass  # NO_REPLY while quiet, PORT_DOWN between close and open
                reads += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        done = threading.Event()

        def reconnect_many() -> None:
            for _ in range(100):
                port.reconnect()
            done.set()

        threading.Thread(target=reconnect_many, daemon=True).start()
        finished = done.wait(20.0)
        stop.set()
        reader.join(2.0)
        assert finished, "a reconnect and a read waited for each other"
        assert reads > 0 and not reader.is_alive()
        assert port.query("*IDN?") == IDENTITY
