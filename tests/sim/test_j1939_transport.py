"""The truck's transport protocol (J1939-21) on a hand-moved clock: no bus, no waiting."""

from __future__ import annotations

import itertools

import pytest

import can
from firmware_sim.j1939.transport import BAM_GAP_S, T3_S, T4_S, Transport, packets
from tests.sim.j1939_peer import (
    ABORT,
    BAM,
    CTS,
    EOMA,
    GLOBAL,
    RTS,
    TP_CM,
    TP_DT,
    ManualTimers,
    split,
    tp_pgn,
)

ENGINE, TOOL = 0x00, 0xF9
PGN = 65259
DATA = bytes(range(1, 34))  # 33 bytes: 5 packets, the last with 2 bytes and 5 of padding


class Wire:
    """Collects what the transport sends, stamped with the manual clock."""

    def __init__(self, timers: ManualTimers) -> None:
        self.timers = timers
        self.frames: list[tuple[float, can.Message]] = []

    def __call__(self, msg: can.Message) -> None:
        self.frames.append((self.timers.now(), msg))

    def take(self) -> list[tuple[float, int, int, int, bytes]]:
        """(time, pgn, sa, da, data) of what was sent since the last take."""
        out = []
        for stamp, msg in self.frames:
            assert msg.is_extended_id
            assert len(msg.data) == 8
            ident = split(msg.arbitration_id)
            assert ident.priority == 7
            out.append((stamp, ident.pgn, ident.sa, ident.da, bytes(msg.data)))
        self.frames.clear()
        return out


@pytest.fixture
def timers() -> ManualTimers:
    return ManualTimers()


@pytest.fixture
def wire(timers: ManualTimers) -> Wire:
    return Wire(timers)


@pytest.fixture
def tp(wire: Wire, timers: ManualTimers) -> Transport:
    return Transport(wire, timers)


def cts(count: int, first: int, pgn: int = PGN) -> bytes:
    return bytes([CTS, count, first, 0xFF, 0xFF]) + pgn.to_bytes(3, "little")


def test_packets_are_numbered_and_padded() -> None:
    out = packets(DATA)
    assert [p[0] for p in out] == [1, 2, 3, 4, 5]
    assert all(len(p) == 8 for p in out)
    assert out[-1] == bytes([5, 29, 30, 31, 32, 33, 0xFF, 0xFF])
    assert b"".join(p[1:] for p in out)[:33] == DATA


def test_bam_announces_then_sends_the_packets_at_least_50_ms_apart(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.broadcast(ENGINE, PGN, DATA)
    (announce,) = wire.take()
    stamp, pgn, sa, da, data = announce
    assert (pgn, sa, da) == (TP_CM, ENGINE, GLOBAL)
    assert data == bytes([BAM, 33, 0, 5, 0xFF]) + PGN.to_bytes(3, "little")
    timers.advance(0.049)
    assert wire.take() == []  # not before 50 ms
    timers.advance(1.0)
    sent = wire.take()
    assert [(p, s, d) for _, p, s, d, _ in sent] == [(TP_DT, ENGINE, GLOBAL)] * 5
    assert [f[4][0] for f in sent] == [1, 2, 3, 4, 5]
    stamps = [stamp] + [f[0] for f in sent]
    assert all(b - a >= 0.050 for a, b in itertools.pairwise(stamps))
    assert all(b - a <= 0.200 for a, b in itertools.pairwise(stamps))
    assert b"".join(f[4][1:] for f in sent) == DATA + b"\xff" * 2
    assert tp.counts["bam"] == 1
    assert not tp.busy()


def test_a_second_bam_from_the_same_sender_waits_for_the_first(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.broadcast(ENGINE, PGN, DATA)
    tp.broadcast(ENGINE, 65260, b"5HWTK1J39R0001939*")
    tp.broadcast(0x03, 65242, b"\x01TCM 2.7.1*")  # another sender runs alongside
    first = wire.take()
    assert [(f[1], f[2], f[4][0]) for f in first] == [(TP_CM, ENGINE, BAM), (TP_CM, 0x03, BAM)]
    timers.advance(2.0)
    sent = wire.take()
    announcements = [f for f in sent if f[1] == TP_CM]
    assert [tp_pgn(f[4]) for f in announcements] == [65260]
    engine = [f for f in sent if f[2] == ENGINE]
    # the second BAM is announced only after the first one's last packet, 50 ms on
    last_of_first = max(i for i, f in enumerate(engine) if f[1] == TP_DT and f[4][0] == 5)
    assert engine[last_of_first + 1][1] == TP_CM
    assert engine[last_of_first + 1][0] - engine[last_of_first][0] >= 0.050
    assert tp.counts["bam"] == 3


def test_rts_cts_waits_for_the_cts_and_sends_what_it_asks(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    ((_, pgn, sa, da, rts),) = wire.take()
    assert (pgn, sa, da) == (TP_CM, ENGINE, TOOL)
    assert rts == bytes([RTS, 33, 0, 5, 0xFF]) + PGN.to_bytes(3, "little")
    timers.advance(1.0)
    assert wire.take() == []  # nothing without a CTS
    tp.on_cm(TOOL, ENGINE, cts(2, 1))
    block = wire.take()
    assert [(f[1], f[2], f[3], f[4][0]) for f in block] == [
        (TP_DT, ENGINE, TOOL, 1),
        (TP_DT, ENGINE, TOOL, 2),
    ]
    timers.advance(1.0)
    tp.on_cm(TOOL, ENGINE, cts(2, 3))
    assert [f[4][0] for f in wire.take()] == [3, 4]
    tp.on_cm(TOOL, ENGINE, cts(2, 5))  # more than is left: only packet 5
    assert [f[4][0] for f in wire.take()] == [5]
    tp.on_cm(TOOL, ENGINE, bytes([EOMA, 33, 0, 5, 0xFF]) + PGN.to_bytes(3, "little"))
    timers.advance(5.0)
    assert wire.take() == []  # done: no abort
    assert tp.counts["rts_cts"] == 1
    assert not tp.busy()


def test_the_next_packet_number_of_a_cts_is_honoured(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    wire.take()
    tp.on_cm(TOOL, ENGINE, cts(3, 1))
    assert [f[4][0] for f in wire.take()] == [1, 2, 3]
    tp.on_cm(TOOL, ENGINE, cts(2, 2))  # the receiver wants 2 and 3 again
    assert [f[4][0] for f in wire.take()] == [2, 3]
    tp.on_cm(TOOL, ENGINE, cts(1, 9))  # no such packet: ignored
    assert wire.take() == []


def test_no_cts_after_the_rts_aborts_with_timeout_after_t3(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    wire.take()
    timers.advance(T3_S - 0.001)
    assert wire.take() == []
    timers.advance(0.002)
    ((stamp, pgn, sa, da, data),) = wire.take()
    assert (pgn, sa, da) == (TP_CM, ENGINE, TOOL)
    assert data == bytes([ABORT, 3, 0xFF, 0xFF, 0xFF]) + PGN.to_bytes(3, "little")
    assert stamp == pytest.approx(1.250, abs=0.002)
    assert tp.counts["aborts_sent"] == 1
    assert not tp.busy()


def test_no_cts_after_a_block_aborts_after_t3(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    timers.advance(0.3)
    tp.on_cm(TOOL, ENGINE, cts(2, 1))
    wire.take()
    timers.advance(T3_S - 0.001)
    assert wire.take() == []
    timers.advance(0.002)
    assert [f[4][:2] for f in wire.take()] == [bytes([ABORT, 3])]


def test_no_end_of_message_ack_aborts_after_t3(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    tp.on_cm(TOOL, ENGINE, cts(5, 1))
    wire.take()
    timers.advance(T3_S + 0.001)
    assert [f[4][:2] for f in wire.take()] == [bytes([ABORT, 3])]


def test_a_cts_of_zero_holds_the_connection_until_t4(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    wire.take()
    tp.on_cm(TOOL, ENGINE, cts(0, 1))
    timers.advance(1.0)  # past nothing: T4 is 1.05 s
    assert wire.take() == []
    tp.on_cm(TOOL, ENGINE, cts(0, 1))  # holding again (J1939-21: every 0.5 s)
    timers.advance(T4_S - 0.001)
    assert wire.take() == []
    tp.on_cm(TOOL, ENGINE, cts(5, 1))  # resumes
    assert [f[4][0] for f in wire.take()] == [1, 2, 3, 4, 5]
    tp.on_cm(TOOL, ENGINE, cts(0, 1))
    timers.advance(T4_S + 0.001)
    assert [f[4][:2] for f in wire.take()] == [bytes([ABORT, 3])]


def test_an_abort_from_the_receiver_ends_the_transfer(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    tp.on_cm(TOOL, ENGINE, cts(1, 1))
    wire.take()
    tp.on_cm(TOOL, ENGINE, bytes([ABORT, 1, 0xFF, 0xFF, 0xFF]) + PGN.to_bytes(3, "little"))
    tp.on_cm(TOOL, ENGINE, cts(1, 2))  # too late: the session is gone
    timers.advance(5.0)
    assert wire.take() == []  # no packet, no abort back
    assert tp.counts["aborts_received"] == 1
    assert not tp.busy()


def test_a_second_transfer_to_the_same_node_waits_for_the_first(
    tp: Transport, wire: Wire, timers: ManualTimers
) -> None:
    tp.send_to(ENGINE, TOOL, PGN, DATA)
    tp.send_to(ENGINE, TOOL, 65242, b"\x02ECM 4.12.0*CAL 2024-03A*")
    assert [tp_pgn(f[4]) for f in wire.take()] == [PGN]
    timers.advance(T3_S + 0.01)  # the first times out; the second starts
    sent = wire.take()
    assert [(f[4][0], tp_pgn(f[4])) for f in sent] == [(ABORT, PGN), (RTS, 65242)]


def test_an_rts_to_the_simulator_is_refused(tp: Transport, wire: Wire) -> None:
    tp.on_cm(TOOL, ENGINE, bytes([RTS, 20, 0, 3, 0xFF]) + (0xEF00).to_bytes(3, "little"))
    ((_, pgn, sa, da, data),) = wire.take()
    assert (pgn, sa, da) == (TP_CM, ENGINE, TOOL)
    assert data[:2] == bytes([ABORT, 2])
    assert tp_pgn(data) == 0xEF00


def test_cts_and_acks_of_unknown_sessions_are_ignored(tp: Transport, wire: Wire) -> None:
    tp.on_cm(TOOL, ENGINE, cts(1, 1))
    tp.on_cm(TOOL, ENGINE, bytes([EOMA, 33, 0, 5, 0xFF]) + PGN.to_bytes(3, "little"))
    tp.on_cm(TOOL, ENGINE, b"\x11")  # short
    assert wire.take() == []


def test_sizes_outside_the_protocol_are_refused(tp: Transport) -> None:
    with pytest.raises(ValueError, match="9 to 1785"):
        tp.broadcast(ENGINE, PGN, b"12345678")
    with pytest.raises(ValueError, match="9 to 1785"):
        tp.send_to(ENGINE, TOOL, PGN, bytes(1786))
    with pytest.raises(ValueError, match="one destination"):
        tp.send_to(ENGINE, GLOBAL, PGN, DATA)
    with pytest.raises(ValueError, match="50 ms"):
        Transport(lambda m: None, ManualTimers(), bam_gap_s=0.02)
    assert BAM_GAP_S >= 0.050
