"""The vectorised J1939 transport-protocol reassembly over capture chunks: the same completed
messages as the J1939 driver's TpReceiver (on the real truck log, and on generated streams of
interleaved sessions cut into chunks anywhere), and bounded on hostile streams."""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbridge.can.io.frames import FrameChunk, concat_chunks
from hwbridge.can.io.readers import open_capture
from hwbridge.j1939.database.ids import DM1_PGN, TP_CM_PGN, TP_DT_PGN, make_id
from hwbridge.j1939.transport.tp import MAX_SIZE
from hwbridge.j1939.transport.tp_chunks import J1939TpAssembler
from tests.captures.conftest import TRUCK
from tests.conftest import BUSY_MARGIN_S
from tests.j1939.tp_streams import (
    Frame,
    abort,
    bam,
    chunk_of,
    cm,
    dt,
    reassembled,
    reference,
    rts_session,
)
from tests.shared_data import needs_shared

EC1_PGN = 0xFEE3
# ticks of 1/64 s between frames: mostly a few, now and then around T1 (48: exactly 750 ms),
# T2 (80: 1,250 ms) and T4 + T2 (147, 148: either side of 2,300 ms)
NEAR = st.sampled_from([0, 1, 1, 2, 3])
FAR = st.sampled_from([16, 47, 48, 49, 79, 80, 81, 147, 148])
PGNS = st.sampled_from([DM1_PGN, EC1_PGN, 0xEF00, 0xFECB, 0x1FFFF, 0xFFFFFF])
SOURCES = st.sampled_from([0x00, 0x01, 0x21])
DESTS = st.sampled_from([0x00, 0x21, 0xF9])
MAX_SENT = 40  # packets of one generated session


def _announce(control: int, size: int, count: int, pgn: int, max_per_cts: int = 0xFF) -> bytes:
    return bytes([control, size & 0xFF, (size >> 8) & 0xFF, count & 0xFF, max_per_cts]) + (
        pgn.to_bytes(3, "little")
    )


@st.composite
def _packets(draw: Any, count: int) -> list[int]:
    """Sequence numbers as a node sends them, now and then cut short, repeated or out of line."""
    if count <= MAX_SENT:
        seqs = list(range(1, count + 1))
    else:
        seqs = list(range(1, draw(st.integers(0, 6)) + 1))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        if not seqs:
            break
        k = draw(st.integers(0, len(seqs) - 1))
        change = draw(st.sampled_from(["none", "cut", "repeat", "swap", "jump"]))
        if change == "cut":
            seqs = seqs[:k]
        elif change == "repeat":
            seqs.insert(k, seqs[k])
        elif change == "swap" and k + 1 < len(seqs):
            seqs[k], seqs[k + 1] = seqs[k + 1], seqs[k]
        elif change == "jump":
            seqs[k] = draw(st.integers(0, 255))
    return seqs


@st.composite
def _script(draw: Any) -> tuple[int, list[tuple[int, bytes]]]:
    """One node's frames: a BAM, an RTS/CTS transfer, or noise on the transport-protocol ids."""
    channel = draw(st.sampled_from([1, 2]))
    kind = draw(st.sampled_from(["bam", "bam", "rts", "noise"]))
    source, pgn = draw(SOURCES), draw(PGNS)
    if kind == "noise":
        frames = []
        for _ in range(draw(st.integers(1, 4))):
            pf = draw(st.sampled_from([TP_CM_PGN, TP_DT_PGN, 0xF004]))
            frame_id = make_id(pf, source, draw(st.sampled_from([0x00, 0x21, 0xF9, 0xFF])), 7)
            frames.append((frame_id, draw(st.binary(min_size=0, max_size=8))))
        return channel, frames
    size = draw(
        st.sampled_from(["short", "short", "short", "any", "most"]).flatmap(
            lambda k: {
                "short": st.integers(9, 60),
                "any": st.integers(0, 1800),
                "most": st.just(MAX_SIZE),
            }[k]
        )
    )
    payload = draw(st.binary(min_size=size, max_size=size))
    count = (size + 6) // 7
    announced = count if draw(st.integers(0, 5)) else draw(st.integers(0, 255))
    seqs = draw(_packets(count))
    if kind == "bam":
        dest = draw(st.sampled_from([0xFF, 0xFF, 0xFF, 0x21]))  # a BAM to one node is ignored
        out = [cm(source, dest, _announce(32, size, announced, pgn))]
        for seq in seqs:
            length = draw(st.sampled_from([8, 8, 8, 2, 5]))
            out.append(dt(source, 0xFF, seq, payload, length))
        return channel, out
    dest = draw(DESTS)
    out = [cm(source, dest, _announce(16, size, announced, pgn))]
    out.append(
        cm(dest, source, bytes([17, max(len(seqs), 1), 1, 0xFF, 0xFF]) + pgn.to_bytes(3, "little"))
    )
    out += [dt(source, dest, seq, payload) for seq in seqs]
    if seqs and draw(st.integers(0, 3)) == 0:  # the receiver asks for one packet again
        again = draw(st.sampled_from(seqs))
        hold = draw(st.sampled_from([1, 1, 0]))
        out.append(
            cm(dest, source, bytes([17, hold, again, 0xFF, 0xFF]) + pgn.to_bytes(3, "little"))
        )
        out.append(dt(source, dest, again, payload))
    if draw(st.integers(0, 4)):  # the receiver acknowledges the end of the message
        out.append(cm(dest, source, _announce(19, size, announced, pgn)))
    if draw(st.integers(0, 5)) == 0:  # one of the two gives up
        by, to = draw(st.sampled_from([(source, dest), (dest, source)]))
        at = draw(st.integers(1, len(out)))
        out.insert(at, abort(by, to, draw(st.sampled_from([pgn, pgn ^ 1]))))
    return channel, out


@st.composite
def streams(draw: Any) -> tuple[list[Frame], list[int]]:
    """Several nodes' frames interleaved in time (with other frames now and then), and where
    to cut the stream into chunks."""
    scripts = [draw(_script()) for _ in range(draw(st.integers(1, 6)))]
    late = draw(st.sampled_from([0, 0, 4, 12]))  # one frame in `late` comes late (0: none)
    cursors = [0] * len(scripts)
    frames: list[Frame] = []
    tick = 0
    while True:
        live = [i for i, (_, s) in enumerate(scripts) if cursors[i] < len(s)]
        if not live:
            break
        i = draw(st.sampled_from(live))
        tick += draw(FAR if late and draw(st.integers(0, late - 1)) == 0 else NEAR)
        channel, script = scripts[i]
        frame_id, data = script[cursors[i]]
        cursors[i] += 1
        frames.append(Frame(tick, channel, frame_id, data))
        if draw(st.integers(0, 9)) == 0:  # a frame of another protocol, 11 or 29 bits
            frames.append(Frame(tick, channel, 0x0CF00400, bytes(8), draw(st.booleans())))
    cuts = draw(st.lists(st.integers(0, len(frames)), max_size=6))
    return frames, cuts


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_the_same_messages_as_tp_receiver_on_generated_streams(
    stream: tuple[list[Frame], list[int]],
) -> None:
    frames, cuts = stream
    expected, lost = reference(frames)
    got, assembler = reassembled(frames, cuts)
    assert got == expected
    assert assembler.stats.completed == len(expected)
    assert assembler.stats.aborted == lost
    whole, _ = reassembled(frames)  # and in one chunk
    assert whole == expected


def _truck_frames() -> list[Frame]:
    chunk = concat_chunks(list(open_capture(TRUCK).chunks()))
    columns = zip(
        chunk.timestamp_us.tolist(),
        chunk.arbitration_id.tolist(),
        chunk.extended.tolist(),
        chunk.length.tolist(),
        chunk.data,
        chunk.channel.tolist(),
        strict=True,
    )
    return [
        Frame(0, channel, frame_id, data[:length].tobytes(), extended, at_us=us)
        for us, frame_id, extended, length, data, channel in columns
    ]


@pytest.mark.slow
@needs_shared
@pytest.mark.parametrize("chunk_frames", [0, 1000, 37])
def test_the_same_messages_as_tp_receiver_on_the_truck_log(chunk_frames: int) -> None:
    frames = _truck_frames()
    expected, lost = reference(frames)
    assert len(expected) == 152 and lost == 0
    assert sum(1 for m in expected if m[1] == DM1_PGN) == 127
    assert sum(1 for m in expected if m[1] == EC1_PGN and len(m[4]) == 39) == 25
    cuts = range(chunk_frames, len(frames), chunk_frames) if chunk_frames else ()
    got, assembler = reassembled(frames, cuts)
    assert got == expected
    assert (assembler.stats.frames, assembler.stats.aborted) == (683, 0)


# -- bounded on hostile streams ---------------------------------------------------------------


def test_a_bam_announcing_1785_bytes_that_sends_three_packets() -> None:
    announced = bytes(range(256)) * 7
    frames = [Frame(0, 1, *cm(0x00, 0xFF, _announce(32, MAX_SIZE, 255, DM1_PGN)))]
    frames += [Frame(1 + i, 1, *dt(0x00, 0xFF, i + 1, announced)) for i in range(3)]
    frames += [Frame(4 + i, 1, 0x0CF00400, bytes(8)) for i in range(10_000)]  # then silence
    assembler = J1939TpAssembler()
    tracemalloc.start()
    started = time.perf_counter()
    got, _ = reassembled(frames[:4], assembler=assembler)
    found = assembler.feed(chunk_of(frames[4:]))
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert got == [] and len(found) == 0
    assert assembler.stats.aborted == 1 and assembler.open_sessions == 0
    assert seconds < 1.0 + BUSY_MARGIN_S and peak < 20_000_000


def test_the_session_is_carried_between_chunks_and_times_out() -> None:
    payload = bytes(range(40))
    frames = [Frame(i, 1, *f) for i, f in enumerate(bam(0x00, EC1_PGN, payload))]
    assembler = J1939TpAssembler()
    first = assembler.feed(chunk_of(frames[:3]))
    assert len(first) == 0 and assembler.open_sessions == 1
    late = [Frame(frames[2].tick + 49, 1, f.frame_id, f.data) for f in frames[3:]]  # > T1
    assert len(assembler.feed(chunk_of(late))) == 0
    assert assembler.open_sessions == 0 and assembler.stats.aborted == 1
    done, _ = reassembled(frames, cuts=[1, 2, 3, 4, 5])  # in time: complete
    assert [m[4] for m in done] == [payload]


@pytest.mark.parametrize("control", [32, 16])
def test_a_flood_of_announcements_is_bounded(control: int) -> None:
    """262,144 announcements from every (source, destination) pair on four channels, none
    followed by a packet: each replaces the last of its pair, at most max_open are carried."""
    n = 262_144
    rng = np.random.default_rng(1)
    source = rng.integers(0, 256, n)
    dest = np.full(n, 0xFF) if control == 32 else rng.integers(0, 256, n)
    ids = (7 << 26) | (0xEC << 16) | (dest << 8) | source
    data = np.tile(np.frombuffer(_announce(control, MAX_SIZE, 255, DM1_PGN), np.uint8), (n, 1))
    chunk = FrameChunk(
        np.arange(n, dtype=np.int64),
        ids.astype(np.uint32),
        np.ones(n, np.bool_),
        np.full(n, 8, np.uint8),
        data,
        rng.integers(0, 4, n).astype(np.int16),
    )
    assembler = J1939TpAssembler(max_open=1024)
    started = time.perf_counter()
    assert len(assembler.feed(chunk)) == 0
    seconds = time.perf_counter() - started
    assert assembler.open_sessions <= 1024
    pairs = len(np.unique(chunk.channel.astype(np.int64) << 16 | dest << 8 | source))
    assert assembler.stats.aborted == n - min(pairs, 1024)
    assert seconds < 5.0 + BUSY_MARGIN_S
    assembler.finish()
    assert assembler.stats.aborted == n


def test_sequence_jumps_and_repeats_end_the_session() -> None:
    payload = bytes(range(30))  # 5 packets
    base = bam(0x00, DM1_PGN, payload)
    cases = {
        "jump": [base[0], base[1], base[3], base[4], base[5]],
        "repeat": [base[0], base[1], base[1], base[2], base[3], base[4], base[5]],
        "zero": [base[0], dt(0x00, 0xFF, 0, payload), *base[1:]],
        "beyond": [base[0], *base[1:5], dt(0x00, 0xFF, 6, payload)],
    }
    for name, script in cases.items():
        frames = [Frame(i, 1, *f) for i, f in enumerate(script)]
        got, assembler = reassembled(frames)
        assert got == [], name
        assert assembler.stats.aborted == 1, name


def test_rts_cts_between_two_nodes_and_a_broadcast_in_one_chunk() -> None:
    ec1 = bytes(range(39))
    script = rts_session(0x00, 0xF9, EC1_PGN, ec1)
    frames = [Frame(i, 1, *f) for i, f in enumerate(script)]
    frames += [Frame(100 + i, 2, *f) for i, f in enumerate(bam(0x21, DM1_PGN, bytes(18)))]
    got, assembler = reassembled(frames)
    assert [(m[0], m[1], m[2], m[3], m[4]) for m in got] == [
        (1, EC1_PGN, 0x00, 0xF9, ec1),
        (2, DM1_PGN, 0x21, 0xFF, bytes(18)),
    ]
    assert got == reference(frames)[0]
    assert assembler.stats.aborted == 0


def test_a_flood_of_rts_sessions_with_packets_is_followed_in_linear_time() -> None:
    """The frame-by-frame path's worst case: 262,144 frames, an RTS and one packet for a
    random (source, destination) pair each (about 2 us a frame on the development machine)."""
    n = 262_144
    rng = np.random.default_rng(2)
    pair = rng.integers(0, 1 << 16, n // 2).repeat(2)
    packet = np.arange(n) % 2 == 1
    ids = (7 << 26) | (np.where(packet, 0xEB, 0xEC) << 16) | pair
    data = np.tile(np.frombuffer(_announce(16, 1785, 255, DM1_PGN), np.uint8), (n, 1))
    data[packet] = np.frombuffer(bytes([1, 0, 1, 2, 3, 4, 5, 6]), np.uint8)
    chunk = FrameChunk(
        np.arange(n, dtype=np.int64) * 100,
        ids.astype(np.uint32),
        np.ones(n, np.bool_),
        np.full(n, 8, np.uint8),
        data,
        np.zeros(n, np.int16),
    )
    assembler = J1939TpAssembler()
    started = time.perf_counter()
    assert len(assembler.feed(chunk)) == 0
    assert time.perf_counter() - started < 10.0 + BUSY_MARGIN_S
    assert assembler.open_sessions <= 4096
    assembler.finish()
    assert assembler.stats.aborted == n // 2
