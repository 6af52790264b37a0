"""J1939Driver against a scripted ECU on a python-can virtual bus: requests answered in one
frame, by BAM and by RTS/CTS to us; NACKs and silence; the address claim and its contests;
clearing under the policy; the rate budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import can
from hwbridge import J1939Driver
from hwbridge.core.models import ToolError
from hwbridge.j1939 import J1939Name
from hwbridge.j1939.database.dm import DiagnosticMessage, Dtc, Lamps
from hwbridge.j1939.database.ids import (
    ACK_PGN,
    ADDRESS_CLAIMED_PGN,
    DM1_PGN,
    DM2_PGN,
    DM11_PGN,
    GLOBAL,
    REQUEST_PGN,
    TP_CM_PGN,
    TP_DT_PGN,
    make_id,
    parse_id,
)
from hwbridge.j1939.transport.tp import T1, bam_frame, packets
from hwbridge.policy import SendPolicy
from tests.conftest import BUSY_MARGIN_S, wait_until
from tests.j1939.conftest import FAST, Answer, Opener, Peer, call

VIN = b"1FUJGLDR5CLBP8834*"
LONG_MS = 20_000
"""The longest timeout_ms a request takes: a call that must end sooner (by its answer, its
response window, an abort) ends far before it, whatever a busy machine adds."""
DM2 = DiagnosticMessage(
    lamps=Lamps(mil="off", red_stop="off", amber_warning="on", protect="off"),
    dtcs=[Dtc(spn=110, fmi=0, occurrence_count=5, conversion_method=0)],
).to_bytes()


def test_a_vin_comes_by_bam_to_everyone(peer: Peer, open_driver: Opener) -> None:
    peer.answers[65260] = Answer(VIN)
    driver = open_driver()
    result = call(driver, "j1939_request", pgn=65260)
    assert result["sent"] is True and result["to"] == "global"
    assert result["pgn_name"] == "Vehicle Identification (VI)"
    [answer] = result["answers"]
    assert answer["source"] == 0 and answer["transport"] == "bam"
    assert answer["text"] == {"vin": "1FUJGLDR5CLBP8834"}
    assert (result["total"], result["returned"], result["truncated"]) == (1, 1, False)
    # the request went out from the claimed address 249, to everyone
    [request] = peer.frames(REQUEST_PGN)
    ident = parse_id(request.arbitration_id)
    assert (ident.source, ident.destination) == (249, GLOBAL)
    assert bytes(request.data) == (65260).to_bytes(3, "little")


def test_a_vin_to_one_node_comes_by_rts_cts_and_we_acknowledge_it(
    peer: Peer, open_driver: Opener
) -> None:
    peer.answers[65260] = Answer(VIN * 3)  # 54 bytes: 8 packets
    driver = open_driver()
    started = time.monotonic()
    result = call(driver, "j1939_request", pgn=65260, address=0, timeout_ms=LONG_MS)
    assert time.monotonic() - started < LONG_MS / 1000 / 2  # ended by the answer, not the time
    [answer] = result["answers"]
    assert answer["transport"] == "rts" and answer["size"] == 54
    assert answer["text"]["vin"] == "1FUJGLDR5CLBP8834"
    # we were the receiver: our CTS and end-of-message acknowledgement went to the ECU
    assert wait_until(lambda: len(peer.frames(TP_CM_PGN)) == 2, BUSY_MARGIN_S)
    controls = [m.data[0] for m in peer.frames(TP_CM_PGN)]
    assert controls == [17, 19]
    assert all(parse_id(m.arbitration_id).source == 249 for m in peer.frames(TP_CM_PGN))


def test_single_frame_answers_nacks_and_silence(peer: Peer, open_driver: Opener) -> None:
    peer.answers[65253] = Answer(bytes([0x10, 0x27, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]))
    peer.answers[65242] = Answer(nack=True)
    driver = open_driver()
    hours = call(driver, "j1939_request", pgn=65253, address=0)
    [answer] = hours["answers"]
    assert answer["transport"] == "frame" and answer["data"] == "10 27 00 00 FF FF FF FF"
    nacked = call(driver, "j1939_request", pgn=65242, address=0)
    assert nacked["answers"] == [] and nacked["nacked_by"] == [{"source": 0, "answer": "nack"}]
    started = time.monotonic()
    with pytest.raises(ToolError) as silent:
        call(driver, "j1939_request", pgn=65131, address=0, timeout_ms=LONG_MS)
    assert silent.value.code == "NO_RESPONSE" and silent.value.retryable
    assert "went out" in silent.value.message
    # the response window, not the request's timeout
    assert 0.2 <= time.monotonic() - started < FAST["response_s"] + BUSY_MARGIN_S


def test_arguments_are_bounded(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver()
    for text in (
        '{"tool": "j1939_request", "arguments": {"pgn": 262144}}',
        '{"tool": "j1939_request", "arguments": {"pgn": -1}}',
        '{"tool": "j1939_dm2", "arguments": {"address": 254}}',
        '{"tool": "j1939_request", "arguments": {"pgn": 65260, "timeout_ms": 60000}}',
    ):
        response = driver.process_llm_response(text)
        assert response.call_failed and not response.call_executed
        assert (response.call_detail or "").startswith("INVALID_ARGUMENTS")
    for pgn in (REQUEST_PGN, TP_CM_PGN, TP_DT_PGN, ACK_PGN):
        with pytest.raises(ToolError) as protocol:
            call(driver, "j1939_request", pgn=pgn)
        assert protocol.value.code == "INVALID_VALUE"
    with pytest.raises(ToolError) as clearing:  # a request that clears is not a read
        call(driver, "j1939_request", pgn=DM11_PGN)
    assert clearing.value.code == "SEND_NOT_ALLOWED"
    assert not peer.frames(REQUEST_PGN)  # none of these went out


def test_dm2_to_everyone_and_to_one(peer: Peer, open_driver: Opener) -> None:
    peer.answers[DM2_PGN] = Answer(DM2)
    driver = open_driver()
    for address in (None, 0):
        result = call(driver, "j1939_dm2", **({} if address is None else {"address": address}))
        [source] = result["sources"]
        assert source["source"] == 0 and source["preferred_for"] == "Engine #1"
        assert source["lamps"]["amber_warning"] == "on"
        assert source["dtcs"] == [
            {
                "spn": 110,
                "spn_name": "Engine Coolant Temperature",
                "fmi": 0,
                "fmi_text": "Data valid but above normal operational range - most severe level",
                "occurrence_count": 5,
            }
        ]


def test_dm1_single_frame_with_a_flashing_lamp(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver()
    dm1 = DiagnosticMessage(
        lamps=Lamps(mil="off", red_stop="on", amber_warning="off", protect="off"),
        flashing={"red_stop": "fast"},
        dtcs=[Dtc(spn=100, fmi=1, occurrence_count=3, conversion_method=0)],
    )
    peer.send(make_id(DM1_PGN, 3, GLOBAL), dm1.to_bytes())
    result = call(driver, "j1939_dm1")
    [source] = result["sources"]
    assert source["source"] == 3 and source["transport"] == "frame"
    assert source["flashing"] == {"red_stop": "fast"}
    assert source["dtcs"][0]["spn_name"] == "Engine Oil Pressure"
    # nothing new within the window: not current any more, and said so
    time.sleep(0.35)
    quiet = call(driver, "j1939_dm1")
    assert quiet["sources"] == [] and quiet["total"] == 0
    assert quiet["not_current"][0]["source"] == 3
    assert "note" in quiet


def test_nodes_from_claims_and_sources(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver()
    peer.send(make_id(65262, 17, GLOBAL), bytes(8))  # a source that never claims
    result = call(driver, "j1939_nodes")
    assert result["request_sent"] is True
    nodes = {n["address"]: n for n in result["nodes"]}
    assert nodes[0]["claimed"] is True
    assert nodes[0]["name"]["function_name"] == "Engine"
    assert nodes[0]["name"]["identity_number"] == 7
    assert nodes[17]["claimed"] is False and nodes[17]["preferred_for"] == "Cruise Control"
    ours = nodes[249]
    assert ours["this_tool"] is True and ours["name"]["function"] == 129
    assert ours["name"]["arbitrary_address_capable"] is True
    assert ours["preferred_for"] == "Off Board Diagnostic-Service Tool #1"


def test_a_lost_claim_moves_to_a_free_address(peer: Peer, open_driver: Opener) -> None:
    def contest(p: Peer, msg: object) -> bool:
        ident = parse_id(msg.arbitration_id)  # type: ignore[attr-defined]
        if ident.pgn == ADDRESS_CLAIMED_PGN and ident.source == 249:
            p.claim(249)  # our NAME (function 0, not arbitrary) is lower: 249 is ours
            return True
        return False

    peer.on_frame = contest
    peer.answers[65253] = Answer(bytes(8))
    driver = open_driver()
    result = call(driver, "j1939_request", pgn=65253, address=0)
    assert result["answers"]
    requests = [parse_id(m.arbitration_id) for m in peer.frames(REQUEST_PGN)]
    assert [r.source for r in requests] == [128]  # the first free self-configurable one
    assert driver.healthcheck().details["address"] == 128


def test_no_address_sends_nothing_and_says_why(peer: Peer, open_driver: Opener) -> None:
    def always_lower(p: Peer, msg: object) -> bool:
        ident = parse_id(msg.arbitration_id)  # type: ignore[attr-defined]
        if ident.pgn == ADDRESS_CLAIMED_PGN and ident.source < 254:
            p.claim(ident.source)  # every address we try is taken by a lower NAME
            return True
        return False

    peer.on_frame = always_lower
    driver = open_driver(name=J1939Name(function=129, arbitrary_address_capable=False))
    with pytest.raises(ToolError) as refused:
        call(driver, "j1939_request", pgn=65260, timeout_ms=200)
    # a read answers from what was heard when it cannot ask: here nothing, and it says why
    assert refused.value.code == "NO_RESPONSE"
    assert refused.value.message.startswith("Nothing was sent: This tool could not claim")
    assert "lower NAME" in refused.value.message
    assert not peer.frames(REQUEST_PGN)
    # Cannot Claim went out from the null address
    assert wait_until(lambda: any(parse_id(m.arbitration_id).source == 254 for m in peer.frames(ADDRESS_CLAIMED_PGN)), BUSY_MARGIN_S)  # fmt: skip
    health = driver.healthcheck()
    assert any("no address" in p for p in health.problems)


def test_clearing_is_refused_by_default_and_allowed_by_policy(
    peer: Peer, open_driver: Opener, tmp_path: Path
) -> None:
    def acknowledge(p: Peer, msg: object) -> bool:
        ident = parse_id(msg.arbitration_id)  # type: ignore[attr-defined]
        data = bytes(msg.data)  # type: ignore[attr-defined]
        if ident.pgn == REQUEST_PGN and int.from_bytes(data[:3], "little") == DM11_PGN:
            ack = bytes([0, 0xFF, 0xFF, 0xFF, ident.source]) + DM11_PGN.to_bytes(3, "little")
            p.send(make_id(ACK_PGN, p.address, GLOBAL), ack)
            return True
        return False

    peer.on_frame = acknowledge
    read_only = open_driver()
    assert "j1939_clear_dtcs" not in {t.name for t in read_only.list_tools()}
    response = read_only.process_llm_response(
        '{"tool": "j1939_clear_dtcs", "arguments": {"which": "active"}}'
    )
    assert "SEND_NOT_ALLOWED" in json.dumps(response.messages)
    assert not peer.frames(REQUEST_PGN)
    read_only.close()

    audit = tmp_path / "audit.jsonl"
    allowed = open_driver(SendPolicy(allow_services=["j1939_dm11"], audit_log=audit))
    assert "j1939_dm11" in allowed.get_driver_system_message()
    result = call(allowed, "j1939_clear_dtcs", which="active", address=0)
    assert result == {
        "which": "active",
        "service": "j1939_dm11",
        "to": 0,
        "sent": True,
        "acknowledged_by": [0],
    }
    with pytest.raises(ToolError) as dm3:  # only DM11 is allowed
        call(allowed, "j1939_clear_dtcs", which="previously_active")
    assert dm3.value.code == "SEND_NOT_ALLOWED"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [line["outcome"] for line in lines] == ["sent", "refused"]
    assert lines[0]["service"] == "j1939_dm11" and lines[0]["ecu"] == "address 0"


def test_a_dry_run_clears_nothing(peer: Peer, open_driver: Opener) -> None:
    driver = open_driver(SendPolicy(allow_services=["j1939_dm3"], dry_run=True))
    result = call(driver, "j1939_clear_dtcs", which="previously_active")
    assert result["sent"] is False and result["dry_run"] is True
    time.sleep(0.05)  # time for a frame to arrive, had one gone out
    assert not peer.frames(REQUEST_PGN) and not peer.frames(ADDRESS_CLAIMED_PGN)


def test_a_flood_of_calls_does_not_flood_the_bus(peer: Peer, open_driver: Opener) -> None:
    peer.answers[65253] = Answer(bytes(8))
    driver = open_driver(SendPolicy(max_frames_per_second=5))
    outcomes = []
    for _ in range(12):
        try:
            call(driver, "j1939_request", pgn=65253, address=0)
            outcomes.append("ok")
        except ToolError as exc:
            outcomes.append(exc.code)
    assert "RATE_LIMITED" in outcomes
    # the claim took one frame of the burst of 5, the requests the rest
    assert len(peer.frames(REQUEST_PGN)) == outcomes.count("ok") <= 5


def test_a_stalled_answer_is_reported_not_taken(peer: Peer, open_driver: Opener) -> None:
    def stall(p: Peer, msg: object) -> bool:
        ident = parse_id(msg.arbitration_id)  # type: ignore[attr-defined]
        if ident.pgn == REQUEST_PGN:
            p.send(make_id(TP_CM_PGN, 0, GLOBAL, 7), bam_frame(65259, 1785))
            for packet in packets(bytes(1785))[:3]:
                p.send(make_id(TP_DT_PGN, 0, GLOBAL, 7), packet)
            return True
        return False

    peer.on_frame = stall
    driver = open_driver()
    started = time.monotonic()
    result = call(driver, "j1939_request", pgn=65259, timeout_ms=LONG_MS)
    assert result["answers"] == []
    # the BAM announced 1,785 bytes and stopped after 3 packets: T1 (750 ms) ended it,
    # not the request's timeout
    assert result["aborted"] == [{"source": 0, "problem": "timeout"}]
    assert 0.7 < time.monotonic() - started < T1 + BUSY_MARGIN_S


def test_the_driver_is_shared_with_a_can_driver(channel: str, peer: Peer) -> None:
    from hwbridge import CanDriver

    peer.answers[65260] = Answer(VIN)
    with CanDriver.from_dbc("dbc/demo_vehicle.dbc", bus=f"virtual:{channel}") as can_driver:
        j1939 = J1939Driver.from_can(can_driver, response_s=0.25, claim_wait_s=0.05)
        result = call(j1939, "j1939_request", pgn=65260)
        assert result["answers"][0]["text"]["vin"] == "1FUJGLDR5CLBP8834"
        # the CAN driver's monitor heard the same frames
        assert can_driver.healthcheck().parts["can"].details["frames_total"] >= 4
        j1939.close()  # the shared bus stays open
        adapter = can_driver.networks["can"].adapter
        assert adapter is not None and adapter.connected


def test_acknowledgements_for_another_requester_are_not_ours(
    peer: Peer, open_driver: Opener
) -> None:
    def someone_else(p: Peer, msg: can.Message) -> bool:
        ident = parse_id(msg.arbitration_id)
        if ident.pgn == REQUEST_PGN and int.from_bytes(msg.data[:3], "little") == 65242:
            other = bytes([1, 0xFF, 0xFF, 0xFF, 0x20]) + (65242).to_bytes(3, "little")
            p.send(make_id(ACK_PGN, 0, GLOBAL), other)  # a NACK for the node at 0x20
            return True
        return False

    peer.on_frame = someone_else
    driver = open_driver()
    with pytest.raises(ToolError) as silent:
        call(driver, "j1939_request", pgn=65242, address=0, timeout_ms=300)
    assert silent.value.code == "NO_RESPONSE"


def test_a_pdu1_group_is_asked_without_its_destination_byte(
    peer: Peer, open_driver: Opener
) -> None:
    peer.answers[0xEF00] = Answer(b"\x01\x02\x03")
    driver = open_driver()
    result = call(driver, "j1939_request", pgn=0xEF12, address=0)
    assert result["pgn"] == 0xEF00 and result["answers"][0]["data"] == "01 02 03"


@pytest.mark.parametrize(
    "pgn", [REQUEST_PGN | 0x12, TP_CM_PGN | 0xF9, ACK_PGN | 0x01, TP_DT_PGN | 0xFF]
)
def test_a_protocol_group_with_a_destination_byte_is_still_refused(
    peer: Peer, open_driver: Opener, pgn: int
) -> None:
    driver = open_driver()
    with pytest.raises(ToolError) as caught:
        call(driver, "j1939_request", pgn=pgn)
    assert caught.value.code == "INVALID_VALUE" and "part of the protocol" in caught.value.message
    time.sleep(0.05)  # time for a frame to arrive, had one gone out
    assert not peer.frames(REQUEST_PGN)
