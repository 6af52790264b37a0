"""BusMonitor: latest, history, stats and waiting, fed by real python-can messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import can
from hwbridge.can.transport.adapter import PythonCanAdapter, build_message
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord, estimate_frame_time_s
from tests.conftest import BUSY_MARGIN_S, wait_until

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("no_thread_leaks")]


class Clock:
    """A settable clock so time windows are exact."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def frame(aid: int, data: bytes, ts: float, *, extended: bool = False) -> can.Message:
    msg = build_message(aid, data, extended=extended)
    msg.timestamp = ts
    return msg


@pytest.fixture
def wired(channel: str) -> Iterator[tuple[PythonCanAdapter, BusMonitor]]:
    monitor = BusMonitor()
    with PythonCanAdapter(f"virtual:{channel}") as adapter:
        monitor.attach(adapter)
        yield adapter, monitor


def test_latest_counts_and_periods() -> None:
    clock = Clock(1010.0)
    monitor = BusMonitor(clock=clock)
    for i in range(11):
        monitor.on_message(frame(0x100, bytes([i]), 1000.0 + i * 0.1))
    for i in range(3):
        monitor.on_message(frame(0x18FF0001, b"\xaa", 1000.0 + i, extended=True))
    latest = monitor.latest(0x100)
    assert latest is not None and latest.data == b"\x0a" and latest.timestamp == 1001.0
    assert monitor.latest(0x999) is None
    assert monitor.ids_seen() == [0x100, 0x18FF0001]
    stats = monitor.stats()
    assert stats.frames_total == 14 and stats.error_frames == 0
    assert stats.ids[0x100].count == 11
    assert stats.ids[0x100].mean_period_s == pytest.approx(0.1)
    assert stats.ids[0x18FF0001].mean_period_s == pytest.approx(1.0)
    assert set(monitor.latest_frames()) == {(0x100, False), (0x18FF0001, True)}
    assert stats.to_dict()["ids"][0x100]["count"] == 11


def test_frame_record_is_detached_from_the_message() -> None:
    monitor = BusMonitor()
    msg = frame(0x10, b"\x01\x02", 5.0)
    monitor.on_message(msg)
    record = monitor.latest(0x10)
    assert record == FrameRecord(5.0, 0x10, b"\x01\x02", False, dlc=2)
    assert isinstance(record.data, bytes)
    back = record.to_message()
    assert back.equals(msg)


def test_error_and_remote_frames_do_not_replace_data() -> None:
    monitor = BusMonitor()
    monitor.on_message(frame(0x10, b"\x01", 1.0))
    monitor.on_message(
        can.Message(
            timestamp=2.0, arbitration_id=0x10, is_remote_frame=True, dlc=1, is_extended_id=False
        )
    )
    monitor.on_message(can.Message(timestamp=3.0, is_error_frame=True, is_extended_id=False))
    record = monitor.latest(0x10)
    assert record is not None and record.data == b"\x01"
    assert monitor.error_frames == 1 and monitor.frames_total == 3
    assert monitor.stats().ids[0x10].count == 2


def test_history_window_ids_and_limit() -> None:
    clock = Clock(1100.0)
    monitor = BusMonitor(clock=clock, history_s=100.0)
    for i in range(100):
        monitor.on_message(frame(0x200 + i % 2, bytes([i]), 1000.0 + i))
    assert len(monitor.history()) == 100
    recent = monitor.history(since_s=10.0)  # 1090 .. 1100
    assert [r.data[0] for r in recent] == list(range(90, 100))
    window = monitor.history(start=1010.0, end=1019.0, ids=[0x201])
    assert [r.data[0] for r in window] == [11, 13, 15, 17, 19]
    assert [r.data[0] for r in monitor.history(limit=3)] == [97, 98, 99]
    assert monitor.history(limit=0) == []


def test_history_is_trimmed_by_time_on_the_receive_path() -> None:
    monitor = BusMonitor(history_s=1.0)
    for i in range(10_000):
        monitor.on_message(frame(0x1, b"", i * 0.001))  # 10 s of traffic
    kept = monitor.history()
    # Trimming runs every 4096 frames, so at most one batch older than the window stays.
    assert len(kept) <= 1000 + 4096
    assert kept[-1].timestamp == pytest.approx(9.999)
    assert monitor.frames_total == 10_000


def test_history_stays_bounded_under_a_flood(
    wired: tuple[PythonCanAdapter, BusMonitor], channel: str
) -> None:
    adapter, _ = wired
    monitor = BusMonitor(max_frames=5_000)
    monitor.attach(adapter)
    flood = can.Bus(interface="virtual", channel=channel)
    try:
        for i in range(100_000):
            flood.send(
                can.Message(arbitration_id=i % 64, data=i.to_bytes(4, "big"), is_extended_id=False)
            )
        assert wait_until(lambda: monitor.frames_total == 100_000, timeout_s=20.0)
    finally:
        flood.shutdown()
    kept = monitor.history()
    assert len(kept) == 5_000
    assert int.from_bytes(kept[-1].data, "big") == 99_999
    assert int.from_bytes(kept[0].data, "big") == 95_000
    assert len(monitor.ids_seen()) == 64
    assert sum(s.count for s in monitor.stats().ids.values()) == 100_000


def test_multiplexed_messages_keep_one_latest_per_mux_value() -> None:
    monitor = BusMonitor(mux={0x300: lambda data: data[0]})
    monitor.on_message(frame(0x300, b"\x00\x10", 1.0))
    monitor.on_message(frame(0x300, b"\x01\x20", 2.0))
    monitor.on_message(frame(0x300, b"\x00\x11", 3.0))
    monitor.on_message(frame(0x300, b"", 4.0))  # too short for the extractor: ignored
    monitor.on_message(frame(0x301, b"\x05", 5.0))
    assert monitor.latest(0x300, key=0) == FrameRecord(3.0, 0x300, b"\x00\x11", False, dlc=2)
    latest_one = monitor.latest(0x300, key=1)
    assert latest_one is not None and latest_one.data == b"\x01\x20"
    latest_any = monitor.latest(0x300)
    assert latest_any is not None and latest_any.timestamp == 4.0
    assert monitor.latest(0x301, key=5) is None
    assert monitor.keys_seen(0x300) == [0, 1]


def test_key_function_form() -> None:
    monitor = BusMonitor(mux=lambda aid, data: data[0] & 0x0F if aid == 0x18DAF1 else None)
    monitor.on_message(frame(0x18DAF1, b"\x21\x00", 1.0, extended=True))
    monitor.on_message(frame(0x18DAF1, b"\x22\x00", 2.0, extended=True))
    assert monitor.keys_seen(0x18DAF1) == [1, 2]
    record = monitor.latest(0x18DAF1, key=2)
    assert record is not None and record.timestamp == 2.0


def test_rate_and_bus_load_over_the_last_second() -> None:
    clock = Clock(2000.0)
    monitor = BusMonitor(bitrate=500_000, clock=clock)
    for i in range(1000):  # 1000 frames/s for 2 s, 8-byte standard frames
        monitor.on_message(frame(0x100, bytes(8), 1998.0 + i * 0.002))
    stats = monitor.stats()
    assert stats.bus_load_percent is not None
    assert stats.frames_per_s == pytest.approx(500, abs=1)
    per_frame = estimate_frame_time_s(8, extended=False, bitrate=500_000)
    assert stats.bus_load_percent == pytest.approx(100 * 500 * per_frame, rel=0.01)
    assert 11 < stats.bus_load_percent < 13  # ~121 bits x 500 frames / 500 kbit/s
    faster = monitor.stats(bitrate=1_000_000).bus_load_percent
    assert faster == pytest.approx(stats.bus_load_percent / 2, rel=0.01)
    assert BusMonitor().stats().bus_load_percent is None


def test_frame_time_estimates_match_wire_limits() -> None:
    # ~8,300 8-byte standard frames/s at 1 Mbit/s (shared/data/README.md)
    assert 1 / estimate_frame_time_s(8, extended=False, bitrate=1_000_000) == pytest.approx(
        8300, rel=0.03
    )
    assert estimate_frame_time_s(8, extended=True, bitrate=1e6) > estimate_frame_time_s(
        8, extended=False, bitrate=1e6
    )
    # 64-byte CAN-FD at 500k/2M: about 2,750 frames/s
    fd = estimate_frame_time_s(
        64, extended=False, fd=True, bitrate_switch=True, bitrate=500_000, data_bitrate=2_000_000
    )
    assert 1 / fd == pytest.approx(2750, rel=0.1)


def test_wait_for_a_frame_that_arrives_later(
    wired: tuple[PythonCanAdapter, BusMonitor], peer: can.BusABC
) -> None:
    _, monitor = wired

    def later() -> None:
        time.sleep(0.05)  # the scenario: the frames come after the wait has begun
        for value in range(10):
            peer.send(build_message(0x123, bytes([value])))

    sender = threading.Thread(target=later)
    sender.start()
    got = monitor.wait_for(0x123, lambda r: r.data[0] == 7, timeout_s=2.0)
    sender.join()
    assert got is not None and got.data == b"\x07"
    assert monitor.wait_for(0x123, timeout_s=0.0, accept_latest=True) is not None
    anything = monitor.wait_for(
        lambda r: r.arbitration_id == 0x123, timeout_s=0.0, accept_latest=True
    )
    assert anything is None  # accept_latest needs an ID; nothing new arrived


def test_wait_for_times_out_without_spinning() -> None:
    monitor = BusMonitor()
    cpu, wall = time.process_time(), time.monotonic()
    assert monitor.wait_for(0x1, timeout_s=0.3) is None
    assert 0.3 - 0.15 <= time.monotonic() - wall < 0.3 + BUSY_MARGIN_S
    assert time.process_time() - cpu < 0.1


def test_wait_for_mux_key_and_predicate_errors() -> None:
    monitor = BusMonitor(mux={0x10: lambda d: d[0]})
    results: list[FrameRecord | None] = []
    waiter = threading.Thread(
        target=lambda: results.append(monitor.wait_for(0x10, timeout_s=2.0, key=2))
    )
    waiter.start()
    assert wait_until(lambda: bool(monitor._waiters))
    monitor.on_message(frame(0x10, b"\x01\x00", 1.0))
    monitor.on_message(frame(0x10, b"\x02\x09", 2.0))
    waiter.join()
    assert results[0] is not None and results[0].data == b"\x02\x09"

    def broken(record: FrameRecord) -> bool:
        raise KeyError("no such signal")

    timer = threading.Timer(0.05, lambda: monitor.on_message(frame(0x10, b"\x01", 3.0)))
    timer.start()
    with pytest.raises(KeyError):
        monitor.wait_for(0x10, broken, timeout_s=2.0)
    with pytest.raises(ValueError, match="arbitration_id"):
        monitor.wait_for(key=1, timeout_s=0.1)
    with pytest.raises(ValueError, match="once"):
        monitor.wait_for(broken, broken, timeout_s=0.1)
    timer.join()


def test_readers_run_while_the_writer_floods(
    wired: tuple[PythonCanAdapter, BusMonitor], peer: can.BusABC
) -> None:
    _, monitor = wired
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                monitor.history(since_s=1.0, ids=[1, 2])
                monitor.stats(bitrate=500_000)
                monitor.latest(1)
                monitor.ids_seen()
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    for i in range(10_000):
        peer.send(can.Message(arbitration_id=i % 50, data=b"\x00", is_extended_id=False))
    assert wait_until(lambda: monitor.frames_total == 10_000, timeout_s=10.0)
    stop.set()
    for reader in readers:
        reader.join()
    assert errors == []


def test_clear_and_detach(wired: tuple[PythonCanAdapter, BusMonitor], peer: can.BusABC) -> None:
    adapter, monitor = wired
    peer.send(build_message(0x1, b""))
    assert wait_until(lambda: monitor.frames_total == 1)
    monitor.clear()
    assert monitor.frames_total == 0 and monitor.latest(0x1) is None and monitor.history() == []
    monitor.detach(adapter)
    peer.send(build_message(0x2, b""))
    time.sleep(0.1)  # time for a frame to arrive, were the monitor still attached
    assert monitor.frames_total == 0


def test_bad_configuration() -> None:
    with pytest.raises(ValueError, match="positive"):
        BusMonitor(max_frames=0)
    with pytest.raises(TypeError):
        BusMonitor(mux=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        BusMonitor().stats(window_s=0)


def test_unknown_ids_are_bounded_and_database_ids_always_kept() -> None:
    known = {(0x100, False), (0x18FEF100, True)}
    monitor = BusMonitor(known=lambda aid, ext: (aid, ext) in known, max_unknown_ids=100)
    for i in range(5_000):  # a flood of invented 29-bit ids
        monitor.on_message(frame(0x100000 + i, b"\x01", 1.0 + i * 1e-4, extended=True))
    monitor.on_message(frame(0x100, b"\x02", 2.0))
    monitor.on_message(frame(0x18FEF100, b"\x03", 2.1, extended=True))
    stats = monitor.stats()
    assert len(stats.ids) == 102 and len(monitor.frame_ids()) == 102
    assert (0x100, False) in stats.ids and (0x18FEF100, True) in stats.ids
    assert stats.unknown_ids_tracked == 100
    assert stats.frames_of_dropped_ids == 4_900
    assert stats.unknown_ids_dropped == pytest.approx(4_900, rel=0.05)
    latest = monitor.latest(0x100)
    assert latest is not None and latest.data == b"\x02"
    assert monitor.latest(0x100000 + 4_999, extended=True) is None  # dropped: no per-id state
    assert len(monitor.history()) == 5_002  # every frame is still in the history
    assert monitor.frames_total == 5_002
    monitor.clear()
    assert monitor.stats().frames_of_dropped_ids == 0 and monitor.frame_ids() == []


def test_history_records_round_trip_every_kind_of_frame() -> None:
    monitor = BusMonitor(max_frames=4)
    sent = [
        frame(0x10, b"\x01\x02", 1.0),
        frame(0x18DAF110, bytes(range(8)), 2.0, extended=True),
        can.Message(
            timestamp=3.0, arbitration_id=0x20, data=bytes(range(64)), is_fd=True,
            bitrate_switch=True, is_extended_id=False,
        ),
        can.Message(
            timestamp=4.0, arbitration_id=0x30, is_remote_frame=True, dlc=3, is_extended_id=False
        ),
        can.Message(timestamp=5.0, is_error_frame=True, is_extended_id=False),
        frame(0x40, b"", 6.0),
    ]  # fmt: skip
    for msg in sent:
        monitor.on_message(msg)
    kept = monitor.history()
    assert kept == [FrameRecord.from_message(m) for m in sent[-4:]]  # four slots: oldest gone
    for i in range(10):  # CAN-FD payloads beside the ring are forgotten with their records
        monitor.on_message(
            can.Message(timestamp=7.0 + i, arbitration_id=0x50, data=bytes([i]) * 12, is_fd=True)
        )
    assert [r.data for r in monitor.history()] == [bytes([i]) * 12 for i in range(6, 10)]
    assert len(monitor._spilled) <= 5


def test_odd_messages_are_kept_without_breaking_the_receive_path() -> None:
    monitor = BusMonitor()
    odd = can.Message(timestamp=1.0, arbitration_id=0x10, data=b"\x01", is_extended_id=False)
    odd.dlc = 300  # out of a byte's range: stored clamped, not lost
    monitor.on_message(odd)
    monitor.on_message(frame(0x11, b"\x02", 2.0))
    assert [r.arbitration_id for r in monitor.history()] == [0x10, 0x11]
