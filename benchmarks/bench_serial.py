"""The serial bridge's cost: a spec command's round trip, and the streaming reader's rate.

Round trip. The simulated SCPI supply on a pty answers `MEAS:VOLT?`. (a) A bare pyserial
loop: `port.write(b"MEAS:VOLT?\\n"); port.readline()`. (b) The same question as an LLM
would ask it: `driver.process_llm_response('{"tool": "measure_voltage", ...}')` on a
SerialDriver built from devices/bench_psu.toml (detection, validation, the SendPolicy's
one-line check, the transaction, the reply regex, typed fields, the messages). Same pty,
same process, alternating, REPEATS times; the ratio is of the best runs (noise on a shared
machine only ever adds time), medians printed too. Goal: at most 1.3x.

Streaming. N NMEA sentences (GGA, RMC, GSA with valid checksums) are written into a pty as
fast as it takes them; (a) a bare pyserial `readline()` loop reads them, (b) a LineMonitor
(its reader thread, checksums checked, latest line per kind, bounded history) does. Lines
per second (the bare loop reads a tenth as many: it reads a byte at a time), against what a
115,200 baud link can carry.

    python benchmarks/bench_serial.py
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path

import serial

from firmware_sim.bench_psu import BenchPsu
from firmware_sim.gnss import GnssReceiver
from hwbridge import SerialDriver
from hwbridge.serial import LineMonitor, PySerialAdapter
from hwbridge.serial.tools.values import nmea_kind

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "devices" / "bench_psu.toml"
CALLS = int(os.environ.get("BENCH_SERIAL_CALLS", "400"))
REPEATS = int(os.environ.get("BENCH_SERIAL_REPEATS", "5"))
LINES = int(os.environ.get("BENCH_SERIAL_LINES", "60000"))
RATIO_GOAL = 1.3
WIRE_LINES_PER_S = 115_200 / 10 / 72  # 8N1, ~72-byte sentences


def bare_round_trips(path: str, n: int) -> float:
    with serial.Serial(path, 115200, timeout=1) as port:
        port.write(b"MEAS:VOLT?\n")
        assert port.readline() == b"0.000\n"
        start = time.perf_counter()
        for _ in range(n):
            port.write(b"MEAS:VOLT?\n")
            port.readline()
        return time.perf_counter() - start


def driver_round_trips(driver: SerialDriver, n: int) -> float:
    call = '{"tool": "measure_voltage", "arguments": {}}'
    first = driver.process_llm_response(call)
    assert first.tool_call_result["values"]["volts"]["value"] == 0.0, first
    start = time.perf_counter()
    for _ in range(n):
        driver.process_llm_response(call)
    elapsed = time.perf_counter() - start
    last = driver.process_llm_response(call)
    assert last.call_executed, last.call_detail  # every timed call really ran
    return elapsed


def round_trip() -> None:
    with BenchPsu() as psu:
        driver = SerialDriver.from_spec(SPEC, port=psu.port_name)
        bare: list[float] = []
        ours: list[float] = []
        with driver:
            for _ in range(REPEATS):
                bare.append(bare_round_trips(psu.port_name, CALLS))
                ours.append(driver_round_trips(driver, CALLS))
        seen = sum(1 for c in psu.commands_seen if c == "MEAS:VOLT?")
    expected = REPEATS * (2 * CALLS + 3)
    assert seen == expected, (seen, expected)  # nothing timed was skipped
    best = min(ours) / min(bare)
    median = statistics.median(ours) / statistics.median(bare)
    verdict = "ok" if best <= RATIO_GOAL else "MISSED"
    print(
        f"round trip MEAS:VOLT? on a pty, {CALLS} calls x {REPEATS}: bare pyserial "
        f"write+readline {min(bare) / CALLS * 1e6:,.0f} us, process_llm_response "
        f"{min(ours) / CALLS * 1e6:,.0f} us: {best:.2f}x (medians {median:.2f}x); "
        f"goal <= {RATIO_GOAL}x [{verdict}]"
    )


def _flood(master: int, data: bytes) -> threading.Thread:
    def write() -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(master, view[:65536]) :]

    os.set_blocking(master, True)
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _sentences(n: int) -> bytes:
    update = GnssReceiver(rate_hz=10).sentences()
    lines = [update[i % 3] for i in range(n)]
    return ("\r\n".join(lines) + "\r\n").encode()


def streaming() -> None:
    import tty

    results = {}
    for kind in ("bare", "monitor"):
        lines = LINES // 10 if kind == "bare" else LINES  # the bare loop is slow
        data = _sentences(lines)
        master, slave = os.openpty()
        tty.setraw(slave)
        path = os.ttyname(slave)
        try:
            if kind == "bare":
                with serial.Serial(path, 115200, timeout=2) as port:
                    start = time.perf_counter()
                    writer = _flood(master, data)
                    count = 0
                    while count < lines and port.readline():
                        count += 1
                    elapsed = time.perf_counter() - start
            else:
                adapter = PySerialAdapter(path, terminator="\r\n", max_frame=256)
                monitor = LineMonitor(adapter, nmea_kind, history=600).start()
                start = time.perf_counter()
                writer = _flood(master, data)
                deadline = start + 60
                while monitor.lines_total < LINES and time.perf_counter() < deadline:
                    time.sleep(0.001)
                elapsed = time.perf_counter() - start
                count = monitor.lines_total
                assert set(monitor.kinds()) == {"GGA", "RMC", "GSA"}
                assert len(monitor.history()) == 600
                monitor.close()
                adapter.close()
            writer.join(5)
            assert count == lines, (kind, count)
            results[kind] = lines / elapsed
        finally:
            os.close(master)
            os.close(slave)
    print(
        f"streaming {LINES:,} NMEA sentences through a pty: LineMonitor "
        f"{results['monitor']:,.0f} lines/s, a bare pyserial readline loop "
        f"{results['bare']:,.0f} lines/s ({results['monitor'] / results['bare']:.1f}x); "
        f"{results['monitor'] / WIRE_LINES_PER_S:,.0f}x what 115,200 baud carries "
        f"({WIRE_LINES_PER_S:.0f} lines/s)"
    )


def main() -> None:
    round_trip()
    streaming()
    print(json.dumps({"calls": CALLS, "repeats": REPEATS, "lines": LINES}))


if __name__ == "__main__":
    main()
