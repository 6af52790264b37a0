"""The originator side on a virtual bus: `J1939Driver.send_pgn` under the policy, a BAM with
its 50 ms gaps, an RTS/CTS session paced by the peer (window, hold, abort, silence)."""

from __future__ import annotations

import itertools
import time

import pytest

import can
from hwbridge.core.models import ToolError
from hwbridge.j1939.database.ids import GLOBAL, TP_CM_PGN, TP_DT_PGN, make_id, parse_id
from hwbridge.j1939.transport.tp import ABORT, CTS, RTS, T3, abort_frame, cts_frame
from hwbridge.policy import SendPolicy
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.j1939.conftest import Opener, Peer

PGN = 0xEF00  # proprietary A: destination specific
DATA = bytes(range(40))  # 6 packets


def raw(**options: object) -> SendPolicy:
    return SendPolicy(allow_raw_frames=True, **options)  # type: ignore[arg-type]


def test_sending_is_refused_unless_the_policy_allows_it(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver()
    with pytest.raises(ToolError) as refused:
        driver.send_pgn(PGN, DATA, 0)
    assert refused.value.code == "SEND_NOT_ALLOWED"
    time.sleep(0.05)  # time for a frame to arrive, had one gone out
    assert not peer.frames()  # not even an address claim went out
    driver.close()
    only = open_driver(SendPolicy(allow_raw_frames=True, allow_ids=[make_id(0xFF10, 249, GLOBAL)]))
    assert only.send_pgn(0xFF10, b"\x01\x02")["transport"] == "frame"
    with pytest.raises(ToolError) as other:
        only.send_pgn(0xFF11, b"\x01\x02")
    assert other.value.code == "SEND_NOT_ALLOWED"


def test_a_bam_to_everyone_keeps_50_ms_between_packets(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(raw())
    result = driver.send_pgn(0xFF20, DATA)
    assert result["transport"] == "bam" and result["complete"] is True
    assert result["packets"] == 6 and result["from"] == 249
    assert wait_until(lambda: len(peer.completed) == 1, BUSY_MARGIN_S)
    assert peer.completed[0].data == DATA and peer.completed[0].pgn == 0xFF20
    stamps = [m.timestamp for m in peer.frames(TP_DT_PGN)]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert len(stamps) == 6 and min(gaps) >= 0.045


def test_an_rts_session_is_paced_by_the_receiver(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(raw(max_frames_per_second=1000))
    result = driver.send_pgn(PGN, DATA * 10, 0)  # 400 bytes: 58 packets, windows of 16
    assert result["transport"] == "rts" and result["complete"] is True
    assert wait_until(lambda: len(peer.completed) == 1, BUSY_MARGIN_S)
    assert peer.completed[0].data == DATA * 10
    windows = [data[1] for _, data in peer.sent if data[0] == CTS]
    assert windows == [16, 16, 16, 10]


def test_the_frame_budget_paces_the_packets(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(raw(max_frames_per_second=50))
    started = time.monotonic()
    result = driver.send_pgn(PGN, bytes(7 * 70), 0)  # 70 packets, the claim, the RTS
    took = time.monotonic() - started
    assert result["complete"] is True
    # 72 frames at 50/s after a burst of 50: never faster
    assert 0.35 <= took < (72 - 50) / 50 + BUSY_MARGIN_S


def test_a_hold_then_a_cts(peer: Peer, open_driver: Opener) -> None:
    def hold_first(p: Peer, msg: can.Message) -> bool:
        ident = parse_id(msg.arbitration_id)
        if ident.pgn == TP_CM_PGN and msg.data[0] == RTS:
            reply = make_id(TP_CM_PGN, 0, ident.source, 7)
            p.send(reply, cts_frame(PGN, 0, 1))  # hold on
            time.sleep(0.3)  # the hold (T4 allows 1.05 s)
            p.send(reply, cts_frame(PGN, 6, 1))
            return True
        if ident.pgn == TP_DT_PGN and msg.data[0] == 6:
            eoma = bytes([19, 40, 0, 6, 0xFF]) + PGN.to_bytes(3, "little")
            p.send(make_id(TP_CM_PGN, 0, ident.source, 7), eoma)
        return ident.pgn == TP_DT_PGN

    peer.on_frame = hold_first
    driver = open_driver(raw())
    started = time.monotonic()
    result = driver.send_pgn(PGN, DATA, 0)
    assert result["complete"] is True
    assert 0.3 <= time.monotonic() - started < 0.3 + BUSY_MARGIN_S  # the hold, then the rest


def test_the_receiver_aborts(peer: Peer, open_driver: Opener) -> None:
    def refuse(p: Peer, msg: can.Message) -> bool:
        ident = parse_id(msg.arbitration_id)
        if ident.pgn == TP_CM_PGN and msg.data[0] == RTS:
            p.send(make_id(TP_CM_PGN, 0, ident.source, 7), abort_frame(PGN, 2))
            return True
        return False

    peer.on_frame = refuse
    driver = open_driver(raw())
    result = driver.send_pgn(PGN, DATA, 0)
    assert result["complete"] is False
    assert "aborted by the receiver" in result["problem"]
    assert not peer.frames(TP_DT_PGN)


def test_a_silent_receiver_times_out_and_is_told(peer: Peer, open_driver: Opener) -> None:
    peer.on_frame = lambda p, msg: True  # hears everything, answers nothing
    t3_s = 2 * T3  # longer than J1939's own T3: a session that ignored t3_s ends too early
    driver = open_driver(raw(), t3_s=t3_s)
    started = time.monotonic()
    result = driver.send_pgn(PGN, DATA, 0)
    assert result["complete"] is False and "timeout" in result["problem"]
    assert t3_s <= time.monotonic() - started < t3_s + BUSY_MARGIN_S
    assert wait_until(lambda: any(m.data[0] == ABORT for m in peer.frames(TP_CM_PGN)))


@pytest.mark.parametrize(
    "policy",
    [
        raw(dry_run=True),
        raw(require_consent=True, consent=lambda request: False),
        raw(allow_ids=[make_id(0xFF10, 249, GLOBAL)]),
    ],
    ids=["dry_run", "consent_denied", "id_not_allowed"],
)
def test_nothing_goes_out_before_the_policy_said_yes(
    peer: Peer, open_driver: Opener, policy: SendPolicy
) -> None:
    driver = open_driver(policy)
    if policy.dry_run:
        assert driver.send_pgn(PGN, DATA, 0) == {"sent": False, "dry_run": True, "from": 249}
    else:
        with pytest.raises(ToolError) as refused:
            driver.send_pgn(PGN, DATA, 0)
        assert refused.value.code in ("CONSENT_DENIED", "SEND_NOT_ALLOWED")
    time.sleep(0.05)  # time for a frame to arrive, had one gone out
    assert not peer.frames()  # not even the address claim


def test_a_pdu1_group_travels_without_its_destination_byte(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(raw())
    result = driver.send_pgn(PGN | 0x05, DATA, 0)
    assert result["complete"] is True
    [rts] = [m for m in peer.frames(TP_CM_PGN) if m.data[0] == RTS]
    assert bytes(rts.data[5:8]) == PGN.to_bytes(3, "little")
    assert peer.completed[0].pgn == PGN


def test_frames_go_only_from_the_address_the_policy_judged(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(raw(allow_ids=[make_id(0xFF10, 249, GLOBAL)]))
    peer.claim(249)  # a node with a lower NAME holds 249: this tool's claim ends at 128
    assert wait_until(lambda: 249 in driver.link.nodes()["claims"], BUSY_MARGIN_S)
    with pytest.raises(ToolError) as moved:
        driver.send_pgn(0xFF10, b"\x01")
    assert moved.value.code == "NO_ADDRESS" and "128" in moved.value.message
    assert not peer.frames(0xFF10)
    with pytest.raises(ToolError) as refused:  # judged from 128 now: not an allowed id
        driver.send_pgn(0xFF10, b"\x01")
    assert refused.value.code == "SEND_NOT_ALLOWED"
    assert not peer.frames(0xFF10)
