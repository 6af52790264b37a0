"""The J1939 core, pure: identifiers, NAMEs and diagnostic messages round trip (hypothesis);
the transport-protocol receiver against hostile senders, bounded in time and memory; the
originator session; the address claim."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge.j1939.database.dm import LAMPS, DiagnosticMessage, Dtc, Lamps, parse_dm
from hwbridge.j1939.database.ids import (
    ADDRESS_CLAIMED_PGN,
    GLOBAL,
    NULL_ADDRESS,
    TP_CM_PGN,
    TP_DT_PGN,
    is_pdu1,
    make_id,
    parse_id,
)
from hwbridge.j1939.database.name import J1939Name
from hwbridge.j1939.database.strings import decode_text
from hwbridge.j1939.transport.address import AddressClaimer
from hwbridge.j1939.transport.tp import (
    ABORT,
    BAM,
    CTS,
    EOMA,
    MAX_SIZE,
    RTS,
    Aborted,
    Completed,
    Reply,
    TpReceiver,
    TpSender,
    abort_frame,
    bam_frame,
    cts_frame,
    eoma_frame,
    packets,
    rts_frame,
)
from tests.conftest import BUSY_MARGIN_S

CM = make_id(TP_CM_PGN, 0, GLOBAL, 7)
DT = make_id(TP_DT_PGN, 0, GLOBAL, 7)

# -- round trips -----------------------------------------------------------------------------


@given(
    pgn=st.integers(0, 0x3FFFF),
    source=st.integers(0, 255),
    destination=st.integers(0, 255),
    priority=st.integers(0, 7),
)
def test_identifiers_round_trip(pgn: int, source: int, destination: int, priority: int) -> None:
    frame_id = make_id(pgn, source, destination, priority)
    assert frame_id < 1 << 29
    ident = parse_id(frame_id)
    assert (ident.priority, ident.source) == (priority, source)
    if is_pdu1(pgn):
        assert ident.pgn == pgn & 0x3FF00 and ident.destination == destination
    else:
        assert ident.pgn == pgn and ident.destination == GLOBAL
    assert ident.frame_id == frame_id


@given(st.integers(0, (1 << 29) - 1))
def test_any_identifier_parses_back_to_itself(frame_id: int) -> None:
    assert parse_id(frame_id).frame_id == frame_id


@given(st.integers(0, (1 << 64) - 1))
def test_names_round_trip(value: int) -> None:
    name = J1939Name.from_int(value)
    assert name.to_int() == value  # the reserved bit too: NAMEs compare whole
    assert J1939Name.from_bytes(name.to_bytes()) == name
    described = name.describe()
    assert described["name"] == f"0x{name.to_int():016X}"


lamp_states = st.sampled_from(["off", "on", "not_available"])
dtcs = st.builds(
    Dtc,
    spn=st.integers(1, 0x7FFFE),
    fmi=st.integers(0, 31),
    occurrence_count=st.one_of(st.none(), st.integers(0, 126)),
    conversion_method=st.just(0),
)


@st.composite
def messages(draw: st.DrawFn) -> DiagnosticMessage:
    lamps = Lamps(**{lamp: draw(lamp_states) for lamp in LAMPS})
    flashing = {
        lamp: draw(st.sampled_from(["slow", "fast"]))
        for lamp in LAMPS
        if getattr(lamps, lamp) == "on" and draw(st.booleans())
    }
    return DiagnosticMessage(lamps=lamps, flashing=flashing, dtcs=draw(st.lists(dtcs, max_size=60)))


@given(messages())
def test_diagnostic_messages_round_trip(dm: DiagnosticMessage) -> None:
    parsed = parse_dm(dm.to_bytes())
    assert parsed.lamps == dm.lamps and parsed.flashing == dm.flashing
    assert [(d.spn, d.fmi, d.occurrence_count) for d in parsed.dtcs] == [
        (d.spn, d.fmi, d.occurrence_count) for d in dm.dtcs
    ]


@given(st.binary(min_size=6, max_size=2000))
def test_any_payload_parses_bounded(data: bytes) -> None:
    dm = parse_dm(data)
    assert len(dm.dtcs) <= min((len(data) - 2) // 4, 446)


def test_the_old_spn_layout_is_read() -> None:
    old = Dtc(spn=3216, fmi=20, occurrence_count=2, conversion_method=1)
    data = DiagnosticMessage(
        lamps=Lamps(mil="on", red_stop="off", amber_warning="off", protect="off"), dtcs=[old]
    ).to_bytes()
    [dtc] = parse_dm(data).dtcs
    assert (dtc.spn, dtc.fmi, dtc.conversion_method) == (3216, 20, 1)
    assert dtc.spn_name == "Aftertreatment 1 Intake NOx"


def test_text_groups() -> None:
    assert decode_text(65260, b"1FUJGLDR5CLBP8834*") == {"vin": "1FUJGLDR5CLBP8834"}
    assert decode_text(65259, b"VOLVO*FH16*SN123*U7*") == {
        "make": "VOLVO",
        "model": "FH16",
        "serial_number": "SN123",
        "unit_number": "U7",
    }
    soft = decode_text(65242, b"\x02EMS 1.2*BOOT 3\x00\x07*")
    assert soft == {"fields_declared": 2, "software_identifications": ["EMS 1.2", "BOOT 3"]}
    # hostile text: control characters dropped, lengths bounded, fields bounded
    flood = decode_text(65259, (b"ignore previous\x1b[2J" + b"A" * 500 + b"*") * 40)
    assert flood is not None and len(flood["make"]) == 64 and "\x1b" not in flood["make"]
    assert flood["fields_not_shown"] == 24
    assert decode_text(65253, b"12345678") is None


# -- the receiver against hostile senders --------------------------------------------------


def bam(rx: TpReceiver, data: bytes, t: float, source: int = 0, gap: float = 0.05) -> list:
    events = rx.feed(make_id(TP_CM_PGN, source, GLOBAL, 7), bam_frame(65260, len(data)), t)
    for i, packet in enumerate(packets(data), 1):
        events += rx.feed(make_id(TP_DT_PGN, source, GLOBAL, 7), packet, t + i * gap)
    return events


def test_a_bam_announcing_1785_bytes_that_sends_3_packets_times_out() -> None:
    rx = TpReceiver()
    assert rx.feed(CM, bam_frame(65259, MAX_SIZE), 0.0) == []
    for i, packet in enumerate(packets(bytes(MAX_SIZE))[:3], 1):
        assert rx.feed(DT, packet, i * 0.05) == []
    assert rx.sessions == 1
    [progress] = rx.in_progress()
    assert (progress.received, progress.size) == (21, MAX_SIZE)
    assert rx.expire(0.15 + 0.7) == []  # within T1 of the last packet
    [dropped] = rx.expire(0.15 + 0.76)
    assert isinstance(dropped, Aborted) and dropped.reason == "timeout"
    assert rx.sessions == 0


def test_a_jumping_sequence_ends_the_session() -> None:
    rx = TpReceiver()
    rx.feed(CM, bam_frame(65260, 30), 0.0)
    rx.feed(DT, packets(bytes(30))[0], 0.05)
    [event] = rx.feed(DT, packets(bytes(30))[2], 0.1)
    assert isinstance(event, Aborted) and "packet 3 where 2 was due" in event.reason
    assert rx.sessions == 0


def test_a_jumping_sequence_to_us_is_aborted_towards_the_sender() -> None:
    rx = TpReceiver([249])
    rts_id = make_id(TP_CM_PGN, 0, 249, 7)
    [cts] = rx.feed(rts_id, rts_frame(65260, 30), 0.0)
    assert isinstance(cts, Reply) and cts.data[0] == CTS
    dt = make_id(TP_DT_PGN, 0, 249, 7)
    rx.feed(dt, packets(bytes(30))[0], 0.01)
    aborted, reply = rx.feed(dt, packets(bytes(30))[3], 0.02)
    assert isinstance(aborted, Aborted) and isinstance(reply, Reply)
    assert reply.data[0] == ABORT and reply.data[1] == 7  # bad sequence number
    assert parse_id(reply.frame_id).destination == 0


def test_a_sender_to_us_that_stops_gets_an_abort() -> None:
    rx = TpReceiver([249])
    rx.feed(make_id(TP_CM_PGN, 0, 249, 7), rts_frame(65260, 30), 0.0)
    # CTS sent at 0: T2 (1.25 s) for the first packet
    assert rx.expire(1.2) == []
    aborted, reply = rx.expire(1.3)
    assert isinstance(aborted, Aborted) and isinstance(reply, Reply)
    assert reply.data[:2] == bytes([ABORT, 3])


def test_overlapping_sessions_of_two_nodes_both_complete() -> None:
    rx = TpReceiver()
    one, two = bytes(range(40)), bytes(range(100, 160))
    rx.feed(make_id(TP_CM_PGN, 0, GLOBAL, 7), bam_frame(65260, len(one)), 0.0)
    rx.feed(make_id(TP_CM_PGN, 3, GLOBAL, 7), bam_frame(65259, len(two)), 0.01)
    done: list = []
    p1, p2 = packets(one), packets(two)
    for i in range(max(len(p1), len(p2))):
        if i < len(p1):
            done += rx.feed(make_id(TP_DT_PGN, 0, GLOBAL, 7), p1[i], 0.05 * (i + 1))
        if i < len(p2):
            done += rx.feed(make_id(TP_DT_PGN, 3, GLOBAL, 7), p2[i], 0.05 * (i + 1) + 0.01)
    completed = {e.source: e for e in done if isinstance(e, Completed)}
    assert completed[0].data == one and completed[0].pgn == 65260
    assert completed[3].data == two and completed[3].pgn == 65259


def test_a_flood_of_announcements_is_bounded_in_time_and_memory() -> None:
    rx = TpReceiver(max_sessions=64)
    started = time.perf_counter()
    aborted = 0
    for i in range(20_000):
        source = i % 250
        dest = GLOBAL if i % 2 else (i // 250) % 250
        frame = bam_frame(65260, MAX_SIZE) if dest == GLOBAL else rts_frame(65260, MAX_SIZE)
        events = rx.feed(make_id(TP_CM_PGN, source, dest, 7), frame, i * 1e-4)
        aborted += sum(isinstance(e, Aborted) for e in events)
        assert rx.sessions <= 64
    assert aborted > 19_000  # replaced, or refused beyond 64 sessions
    assert time.perf_counter() - started < 5.0 + BUSY_MARGIN_S  # ~0.1 s; quadratic: far more
    assert rx.expire(10.0) and rx.sessions == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([TP_CM_PGN, TP_DT_PGN]),
            st.integers(0, 255),
            st.sampled_from([0, 249, GLOBAL]),
            st.binary(min_size=0, max_size=8),
        ),
        max_size=300,
    )
)
def test_any_frames_never_break_the_receiver(frames: list) -> None:
    rx = TpReceiver([249], max_sessions=8)
    for i, (pgn, source, dest, data) in enumerate(frames):
        for event in rx.feed(make_id(pgn, source, dest, 7), data, i * 0.01):
            if isinstance(event, Completed):
                assert len(event.data) <= MAX_SIZE
        assert rx.sessions <= 8


def test_hostile_announcements() -> None:
    rx = TpReceiver([249])
    to_us = make_id(TP_CM_PGN, 0, 249, 7)
    too_big = bytes([RTS, 0xFF, 0xFF, 255, 255]) + (65260).to_bytes(3, "little")
    aborted, reply = rx.feed(to_us, too_big, 0.0)
    assert isinstance(aborted, Aborted) and isinstance(reply, Reply)
    assert reply.data[:2] == bytes([ABORT, 9])
    lying = bytes([BAM, 100, 0, 3, 255]) + (65260).to_bytes(3, "little")  # 100 bytes, 3 packets
    [event] = rx.feed(CM, lying, 0.0)
    assert isinstance(event, Aborted) and "3 packets for 100 bytes" in event.reason
    assert rx.sessions == 0


# -- the originator --------------------------------------------------------------------------


def test_a_bam_sends_a_packet_every_50_ms() -> None:
    data = bytes(range(20))
    tx = TpSender(65260, data, 249, GLOBAL)
    [announce] = tx.start(0.0)
    assert announce.data == bam_frame(65260, 20)
    assert tx.poll(0.049) == []
    sent = []
    t = 0.05
    while not tx.finished:
        frames = tx.poll(t)
        sent += frames
        t += 0.05
    assert [f.data for f in sent] == packets(data)
    assert tx.state == "done"
    # what we send is what a receiver reassembles
    rx = TpReceiver()
    events = rx.feed(announce.frame_id, announce.data, 0.0)
    for i, frame in enumerate(sent, 1):
        events += rx.feed(frame.frame_id, frame.data, i * 0.05)
    assert [e.data for e in events if isinstance(e, Completed)] == [data]


def test_an_rts_session_follows_the_receivers_cts_window_and_hold() -> None:
    data = bytes(range(50))  # 8 packets
    tx = TpSender(65260, data, 249, 0)
    rx = TpReceiver([0], window=3)
    [rts] = tx.start(0.0)
    assert rts.data[0] == RTS
    t = 0.0
    pending = rx.feed(rts.frame_id, rts.data, t)
    completed = []
    while pending:
        t += 0.01
        reply = pending.pop(0)
        if isinstance(reply, Completed):
            completed.append(reply)
            continue
        if not isinstance(reply, Reply):
            continue
        for frame in tx.feed(reply.frame_id, reply.data, t):
            pending += rx.feed(frame.frame_id, frame.data, t)
    assert [c.data for c in completed] == [data]
    assert tx.state == "done"
    # a hold (CTS of 0 packets) waits T4, then the session times out with an abort
    held = TpSender(65260, data, 249, 0)
    held.start(0.0)
    cts_id = make_id(TP_CM_PGN, 0, 249, 7)
    assert held.feed(cts_id, cts_frame(65260, 0, 1), 0.1) == []
    assert held.state == "hold" and held.poll(1.1) == []
    [abort] = held.poll(1.16)
    assert abort.data[:2] == bytes([ABORT, 3]) and held.finished


def test_an_rts_session_ends_on_abort_bad_cts_or_silence() -> None:
    data = bytes(30)
    cts_id = make_id(TP_CM_PGN, 0, 249, 7)
    aborted = TpSender(65260, data, 249, 0)
    aborted.start(0.0)
    assert aborted.feed(cts_id, abort_frame(65260, 1), 0.1) == []
    assert aborted.state == "aborted" and "already in a session" in (aborted.reason or "")
    greedy = TpSender(65260, data, 249, 0)
    greedy.start(0.0)
    [abort] = greedy.feed(cts_id, cts_frame(65260, 9, 1), 0.1)  # 9 of 5 packets
    assert abort.data[0] == ABORT and greedy.state == "aborted"
    silent = TpSender(65260, data, 249, 0, t3_s=0.3)
    silent.start(0.0)
    [timeout] = silent.poll(0.31)
    assert timeout.data[:2] == bytes([ABORT, 3])
    early = TpSender(65260, data, 249, 0)
    early.start(0.0)
    [abort] = early.feed(cts_id, eoma_frame(65260, 30), 0.1)  # nothing sent yet
    assert abort.data[0] == ABORT and early.state == "aborted"
    other = TpSender(65260, data, 249, 0)
    other.start(0.0)
    assert other.feed(make_id(TP_CM_PGN, 5, 249, 7), cts_frame(65260, 2, 1), 0.1) == []
    assert other.feed(cts_id, cts_frame(65259, 2, 1), 0.1) == []  # another PGN
    assert other.state == "waiting"
    assert EOMA == 19


def test_a_receiver_cannot_keep_an_rts_session_going_for_ever() -> None:
    data = bytes(14)
    cts_id = make_id(TP_CM_PGN, 0, 249, 7)
    again = TpSender(65260, data, 249, 0)
    again.start(0.0)
    for i in range(3):  # the first CTS, then two retransmissions asked for
        assert len(again.feed(cts_id, cts_frame(65260, 2, 1), 0.1 * i)) == 2
    [abort] = again.feed(cts_id, cts_frame(65260, 2, 1), 0.4)
    assert abort.data[:2] == bytes([ABORT, 5]) and again.state == "aborted"
    assert again.feed(cts_id, cts_frame(65260, 2, 1), 0.5) == []
    held = TpSender(65260, data, 249, 0)
    held.start(0.0)
    for i in range(16):
        assert held.feed(cts_id, cts_frame(65260, 0, 1), 0.5 * i) == []
    [abort] = held.feed(cts_id, cts_frame(65260, 0, 1), 8.0)
    assert abort.data[:2] == bytes([ABORT, 3]) and held.state == "aborted"
    # a hold that ends, then more holds, is no longer the same run of holds
    paced = TpSender(65260, bytes(70), 249, 0, max_per_cts=1)
    paced.start(0.0)
    for seq in range(1, 11):
        for _ in range(10):
            assert paced.feed(cts_id, cts_frame(65260, 0, seq), 0.1) == []
        assert len(paced.feed(cts_id, cts_frame(65260, 1, seq), 0.1)) == 1
    assert paced.state == "waiting"


# -- the address claim -----------------------------------------------------------------------


def ours(capable: bool = True) -> J1939Name:
    return J1939Name(identity_number=1, function=129, arbitrary_address_capable=capable)


def test_a_claim_holds_after_250_ms() -> None:
    claimer = AddressClaimer(ours())
    [frame] = claimer.start(0.0, lambda a: False)
    ident = parse_id(frame.frame_id)
    assert (ident.pgn, ident.source, ident.destination) == (ADDRESS_CLAIMED_PGN, 249, GLOBAL)
    assert J1939Name.from_bytes(frame.data) == ours()
    claimer.poll(0.24)
    assert claimer.holds is None
    claimer.poll(0.25)
    assert claimer.holds == 249
    assert claimer.on_request(GLOBAL) == [frame]
    assert claimer.on_request(249) == [frame]
    assert claimer.on_request(3) == []


def test_contests() -> None:
    claimer = AddressClaimer(ours())
    claimer.start(0.0, lambda a: False)
    higher = J1939Name(identity_number=2, function=129, arbitrary_address_capable=True)
    [again] = claimer.on_claim(249, higher, 0.1, lambda a: False)  # we win: claim again
    assert parse_id(again.frame_id).source == 249
    assert claimer.on_claim(249, ours(), 0.1, lambda a: False) == []  # our own echo
    lower = J1939Name(identity_number=0, function=0)
    [moved] = claimer.on_claim(249, lower, 0.2, lambda a: a == 128)
    assert parse_id(moved.frame_id).source == 129 and claimer.state == "claiming"
    claimer.poll(0.45)
    assert claimer.holds == 129


def test_cannot_claim() -> None:
    stuck = AddressClaimer(ours(capable=False))
    stuck.start(0.0, lambda a: False)
    [cannot] = stuck.on_claim(249, J1939Name(function=0), 0.1, lambda a: False)
    assert parse_id(cannot.frame_id).source == NULL_ADDRESS
    assert stuck.state == "cannot_claim" and "lower NAME" in (stuck.why or "")
    assert stuck.start(0.2, lambda a: False) == []  # no retry before RETRY_S
    full = AddressClaimer(ours(), pool=range(128, 130))
    full.start(0.0, lambda a: False)
    full.on_claim(249, J1939Name(function=0), 0.1, lambda a: True)
    assert full.state == "cannot_claim" and "no address of 128-129 is free" in (full.why or "")


def test_a_known_preferred_address_is_skipped() -> None:
    claimer = AddressClaimer(ours())
    [frame] = claimer.start(0.0, lambda a: a in (249, 128))
    assert parse_id(frame.frame_id).source == 129


def test_a_flood_of_broadcasts_never_crowds_out_a_transfer_to_us() -> None:
    rx = TpReceiver(own={0xF9})
    for source in range(64):  # 64 nodes announce a BAM each and stall
        rx.feed(make_id(TP_CM_PGN, source, GLOBAL, 7), bam_frame(65260, 100), 0.0)
    refused = rx.feed(make_id(TP_CM_PGN, 100, GLOBAL, 7), bam_frame(65260, 100), 0.0)
    assert any(isinstance(e, Aborted) for e in refused)  # the 65th broadcast is refused
    # an ECU answers our request by RTS/CTS: we clear it to send
    events = rx.feed(make_id(TP_CM_PGN, 0x00, 0xF9, 7), rts_frame(65260, 20), 0.0)
    [reply] = [e for e in events if isinstance(e, Reply)]
    assert reply.data[0] == CTS and reply.frame_id == make_id(TP_CM_PGN, 0xF9, 0x00, 7)


def test_a_packet_sent_again_between_two_other_nodes_is_padded_like_the_first() -> None:
    rx = TpReceiver()  # a listener: the engine (0) sends 20 bytes to a tool (0xF9)
    cm, dt = make_id(TP_CM_PGN, 0, 0xF9, 7), make_id(TP_DT_PGN, 0, 0xF9, 7)
    ack = make_id(TP_CM_PGN, 0xF9, 0, 7)
    data = bytes(range(1, 21))
    rx.feed(cm, rts_frame(65260, len(data)), 0.0)
    rx.feed(ack, cts_frame(65260, 3, 1), 0.01)
    for packet in packets(data):
        rx.feed(dt, packet, 0.02)
    rx.feed(dt, packets(data)[2][:3], 0.03)  # packet 3 again, sent short (a DLC of 3)
    [done] = [
        e for e in rx.feed(ack, eoma_frame(65260, len(data)), 0.04) if isinstance(e, Completed)
    ]
    assert len(done.data) == len(data)
