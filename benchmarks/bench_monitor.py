"""How fast BusMonitor ingests frames, against a bare python-can receive loop.

A sender bus queues N frames on a python-can virtual channel before timing starts, so only
the receive side is measured: (a) a bare `bus.recv()` loop on one receiving bus, and (b) a
receiving bus handed to PythonCanAdapter (its Notifier thread) with a BusMonitor attached.
Both runs see the same N frames; each figure is the median of several repeats, run
alternately. For reference, (c) the same monitor behind python-can's stock Notifier.
Then a flood of 2x the history cap checks that memory stays bounded.

    python benchmarks/bench_monitor.py         # N = 200,000 (BENCH_MONITOR_FRAMES overrides)
"""

from __future__ import annotations

import gc
import os
import statistics
import time
import tracemalloc
import uuid

import can
from hwbridge.can.adapter import PythonCanAdapter
from hwbridge.can.monitor import BusMonitor

FRAMES = int(os.environ.get("BENCH_MONITOR_FRAMES", "200000"))
REPEATS = int(os.environ.get("BENCH_MONITOR_REPEATS", "3"))
RATIO_GOAL = 1.3
WIRE_LIMIT = 8_300  # 8-byte classic frames/s at 1 Mbit/s (shared/data/README.md)
RATE_GOAL = 10 * WIRE_LIMIT


def _queued_bus(n: int) -> can.BusABC:
    """A receiving virtual bus with `n` frames (50 IDs, 8 bytes) already waiting in it."""
    channel = f"bench-{uuid.uuid4().hex}"
    receiver = can.Bus(interface="virtual", channel=channel)
    sender = can.Bus(interface="virtual", channel=channel)
    try:
        for i in range(n):
            sender.send(
                can.Message(
                    arbitration_id=0x100 + i % 50,
                    data=i.to_bytes(8, "little"),
                    is_extended_id=False,
                )
            )
    finally:
        sender.shutdown()
    return receiver


def bare_loop(n: int) -> float:
    """Seconds a plain `bus.recv()` loop takes to take `n` queued frames."""
    bus = _queued_bus(n)
    try:
        gc.collect()
        start = time.perf_counter()
        received = 0
        recv = bus.recv
        while received < n:
            if recv(1.0) is not None:
                received += 1
        return time.perf_counter() - start
    finally:
        bus.shutdown()


def monitor_ingest(n: int) -> float:
    """Seconds adapter + notifier + monitor take to ingest `n` queued frames."""
    bus = _queued_bus(n)
    monitor = BusMonitor(max_frames=n)
    gc.collect()
    start = time.perf_counter()
    adapter = PythonCanAdapter(bus, own_bus=True, listeners=[monitor.on_message])
    try:
        while monitor.frames_total < n:
            time.sleep(0.001)
        elapsed = time.perf_counter() - start
    finally:
        adapter.close()
    if len(monitor.ids_seen()) != 50 or monitor.frames_total != n:
        raise RuntimeError("monitor did not see every frame")
    return elapsed


def stock_notifier_ingest(n: int) -> float:
    """The same monitor behind python-can's stock Notifier, for reference."""
    bus = _queued_bus(n)
    monitor = BusMonitor(max_frames=n)
    gc.collect()
    start = time.perf_counter()
    notifier = can.Notifier(bus, [monitor.on_message], timeout=0.1)
    try:
        while monitor.frames_total < n:
            time.sleep(0.001)
        elapsed = time.perf_counter() - start
    finally:
        notifier.stop()
        bus.shutdown()
    return elapsed


def flood_memory(n: int, cap: int) -> tuple[int, float, float]:
    """(history length, peak MB, MB per 1,000 kept frames) after feeding `n` frames."""
    monitor = BusMonitor(max_frames=cap)
    gc.collect()
    tracemalloc.start()
    try:
        base = time.time()
        for i in range(n):
            msg = can.Message(
                timestamp=base + i * 1e-5,
                arbitration_id=0x100 + i % 50,
                data=i.to_bytes(8, "little"),
                is_extended_id=False,
            )
            monitor.on_message(msg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept = len(monitor.history())
    return kept, peak / 1e6, peak / 1e6 / (kept / 1000)


def main() -> None:
    n = FRAMES
    print(f"frames per run: {n:,} (8-byte classic, 50 IDs), {REPEATS} repeats, median")
    bare_times: list[float] = []
    monitor_times: list[float] = []
    stock_times: list[float] = []
    bare_loop(min(n, 20_000))  # warm-up
    monitor_ingest(min(n, 20_000))
    for _ in range(REPEATS):
        bare_times.append(bare_loop(n))
        monitor_times.append(monitor_ingest(n))
        stock_times.append(stock_notifier_ingest(n))
    bare = statistics.median(bare_times)
    mon = statistics.median(monitor_times)
    bare_rate, mon_rate = n / bare, n / mon
    ratio = mon / bare
    print(
        f"monitor ingest: {mon_rate:,.0f} frames/s (bare python-can loop {bare_rate:,.0f} "
        f"frames/s): cost ratio {ratio:.2f}x (goal <= {RATIO_GOAL}x) "
        f"[{'ok' if ratio <= RATIO_GOAL else 'MISSED'}]"
    )
    print(
        f"monitor ingest vs wire: {mon_rate / WIRE_LIMIT:.1f}x the 1 Mbit/s classic-CAN limit "
        f"of {WIRE_LIMIT:,} frames/s (goal >= 10x, {RATE_GOAL:,} frames/s) "
        f"[{'ok' if mon_rate >= RATE_GOAL else 'MISSED'}]"
    )
    print(
        f"per frame: bare {bare / n * 1e6:.2f} us, monitor {mon / n * 1e6:.2f} us "
        f"(all repeats, bare: {', '.join(f'{n / t:,.0f}' for t in bare_times)}; "
        f"monitor: {', '.join(f'{n / t:,.0f}' for t in monitor_times)} frames/s)"
    )
    stock = statistics.median(stock_times)
    print(
        f"reference: same monitor behind python-can's stock can.Notifier: "
        f"{n / stock:,.0f} frames/s, cost ratio {stock / bare:.2f}x"
    )
    cap = 100_000
    kept, peak_mb, per_k = flood_memory(2 * cap, cap)
    print(
        f"flood memory: {2 * cap:,} frames into a {cap:,}-frame history: kept {kept:,} "
        f"(cap {cap:,}) [{'ok' if kept <= cap else 'MISSED'}], tracemalloc peak "
        f"{peak_mb:.1f} MB ({per_k * 1000:.0f} bytes per kept frame)"
    )


if __name__ == "__main__":
    main()
