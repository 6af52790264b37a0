"""How fast BusMonitor ingests frames, against a bare python-can receive loop; what its
history and per-id state cost in memory.

A sender bus queues N frames on a python-can virtual channel before timing starts, so only
the receive side is measured: (a) a bare `bus.recv()` loop on one receiving bus, and (b) a
receiving bus handed to PythonCanAdapter (its Notifier thread) with a BusMonitor attached.
Both runs see the same N frames, alternately, several times; the ratio is of the best runs
(noise from other processes on a shared machine only ever adds time), the medians are
printed too. For reference, (c) the same monitor behind python-can's stock Notifier.

Memory, with tracemalloc: a flood of 2x the history cap (bytes per kept frame, against a
deque of the same `can.Message` objects), and a flood of 400,000 distinct invented 29-bit
ids (per-id state stays bounded; `stats()`, what bus_status reads, stays fast).

    python benchmarks/bench_monitor.py         # N = 200,000 (BENCH_MONITOR_FRAMES overrides)
"""

from __future__ import annotations

import gc
import os
import statistics
import time
import tracemalloc
import uuid
from collections import deque

import can
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.can.transport.monitor import BusMonitor

FRAMES = int(os.environ.get("BENCH_MONITOR_FRAMES", "200000"))
REPEATS = int(os.environ.get("BENCH_MONITOR_REPEATS", "5"))
RATIO_GOAL = 1.3
BYTES_GOAL = 64  # per kept classic frame
UNKNOWN_IDS = 400_000
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


def _frame(i: int, base: float) -> can.Message:
    return can.Message(
        timestamp=base + i * 1e-5,
        arbitration_id=0x100 + i % 50,
        data=i.to_bytes(8, "little"),
        is_extended_id=False,
    )


def flood_memory(n: int, cap: int) -> tuple[int, float, float, float]:
    """(history length, peak MB, bytes per kept frame held, at peak) after `n` frames.

    Each frame is built just before it is fed, as a receive thread would hand it over, so
    what is traced is the monitor: its ring (grown by doubling, so the peak includes one
    copy during growth), per-id state and the latest message of each id.
    """
    monitor = BusMonitor(max_frames=cap)
    base = time.time()
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            monitor.on_message(_frame(i, base))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept = len(monitor.history())
    return kept, peak / 1e6, held / kept, peak / kept


def deque_memory(n: int, cap: int) -> float:
    """Bytes per kept frame of the obvious alternative: a deque of the messages."""
    history: deque[can.Message] = deque(maxlen=cap)
    base = time.time()
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            history.append(_frame(i, base))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / len(history)


def unknown_id_flood(n: int) -> tuple[float, float, int, int]:
    """(peak MB, stats() ms, ids tracked, ids dropped) after `n` distinct 29-bit ids."""
    known = {(0x100 + i, False) for i in range(50)}  # a 50-message database
    monitor = BusMonitor(max_frames=n, known=lambda aid, ext: (aid, ext) in known)
    base = time.time()
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(n):
            monitor.on_message(
                can.Message(
                    timestamp=base + i * 1e-5,
                    arbitration_id=0x10000000 + i,
                    data=b"\x00" * 8,
                    is_extended_id=True,
                )
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    started = time.perf_counter()
    stats = monitor.stats()
    elapsed = time.perf_counter() - started
    return peak / 1e6, elapsed * 1000, len(stats.ids), stats.unknown_ids_dropped


def main() -> None:
    n = FRAMES
    print(f"frames per run: {n:,} (8-byte classic, 50 IDs), {REPEATS} repeats each, alternating")
    bare_times: list[float] = []
    monitor_times: list[float] = []
    stock_times: list[float] = []
    bare_loop(min(n, 20_000))  # warm-up
    monitor_ingest(min(n, 20_000))
    for _ in range(REPEATS):
        bare_times.append(bare_loop(n))
        monitor_times.append(monitor_ingest(n))
        stock_times.append(stock_notifier_ingest(n))
    bare, mon = min(bare_times), min(monitor_times)
    bare_rate, mon_rate = n / bare, n / mon
    ratio = mon / bare
    median_ratio = statistics.median(monitor_times) / statistics.median(bare_times)
    print(
        f"monitor ingest: {mon_rate:,.0f} frames/s (bare python-can loop {bare_rate:,.0f} "
        f"frames/s): cost ratio {ratio:.2f}x, best runs (goal <= {RATIO_GOAL}x) "
        f"[{'ok' if ratio <= RATIO_GOAL else 'MISSED'}]; medians {median_ratio:.2f}x"
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
    stock = min(stock_times)
    print(
        f"reference: same monitor behind python-can's stock can.Notifier: "
        f"{n / stock:,.0f} frames/s, cost ratio {stock / bare:.2f}x"
    )
    cap = 100_000
    kept, peak_mb, held, per_frame = flood_memory(2 * cap, cap)
    per_message = deque_memory(2 * cap, cap)
    print(
        f"history memory: {2 * cap:,} frames into a {cap:,}-frame history: kept {kept:,} "
        f"(cap {cap:,}) [{'ok' if kept <= cap else 'MISSED'}], tracemalloc peak "
        f"{peak_mb:.1f} MB: {per_frame:.0f} bytes per kept frame at the peak, {held:.0f} "
        f"held after (goal <= {BYTES_GOAL}) [{'ok' if per_frame <= BYTES_GOAL else 'MISSED'}]; "
        f"a deque of the can.Message objects: {per_message:.0f} bytes per frame "
        f"({per_message / per_frame:.1f}x)"
    )
    mb, stats_ms, tracked, dropped = unknown_id_flood(UNKNOWN_IDS)
    print(
        f"unknown-id flood: {UNKNOWN_IDS:,} distinct 29-bit ids (history cap {UNKNOWN_IDS:,}): "
        f"tracemalloc peak {mb:.1f} MB (of which history {UNKNOWN_IDS * 24 / 1e6:.1f} MB), "
        f"{tracked:,} ids tracked, ~{dropped:,} reported dropped, stats() {stats_ms:.1f} ms"
    )


if __name__ == "__main__":
    main()
