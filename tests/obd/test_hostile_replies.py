"""Hostile replies after a request went out (review 9): a chip that floods while the adapter
listens for a final answer, adapter errors once the request was sent, a negative response
that names another service, a multi-frame answer that trickles past the budget, a flood of
stray frames, an ECU whose flow control stops a multi-frame request. Real transports: a pty
for the ELM327, python-can's virtual bus for ISO-TP."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import can
from hwbridge.can.transport.adapter import PythonCanAdapter
from hwbridge.obd import IsoTpObdAdapter, ObdDriver
from hwbridge.obd.tools.uds_service import UdsService
from hwbridge.obd.transport.base import Ecu
from hwbridge.obd.transport.elm327_reply import parse_reply
from hwbridge.obd.transport.pending import for_another_request, is_pending
from hwbridge.policy import SendPolicy
from tests.obd.conftest import ScriptedElm

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("no_thread_leaks")]

FOUND = {"0100": b"7E8 06 41 00 98 18 00 13 00"}
ROUTINE = "310102031"  # 31 01 02 03 to one ECU, as the ELM327 adapter types it
ENGINE = Ecu.from_response(0x7E8, False)


def run(driver: ObdDriver, tool: str, **arguments: Any) -> Any:
    return driver.process_llm_response(json.dumps({"tool": tool, "arguments": arguments}))


def audited(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines()]


def forever(chunk: bytes) -> Callable[[], Iterator[bytes]]:
    def stream() -> Iterator[bytes]:
        while True:
            yield chunk

    return stream


# -- the ELM327 -----------------------------------------------------------------------------


def test_a_chip_flooding_while_listening_for_the_final_answer_is_cut_short(
    scripted: Any, tmp_path: Path
) -> None:
    """An old chip takes the pending for the answer and returns to its prompt; while ATMA
    listens it streams lines without end. Each line is read once, the reading stops at a
    line limit (or the deadline), and the reason says what happened, not a made-up wait."""
    elm: ScriptedElm = scripted({**FOUND, ROUTINE: b"7E8037F3178", "ATMA": forever(b"Z\r" * 64)})
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_services=["uds_0x31"], audit_log=log)
    with ObdDriver.from_elm327(elm.port, policy, timeout_s=0.5) as driver:
        started = time.monotonic()
        r = run(driver, "uds_request", ecu="engine", request="31 01 02 03")
        took = time.monotonic() - started
        after = run(driver, "obd_read", pids=["0C"])  # the script answers it with `?`
    assert after.call_detail.startswith("ADAPTER_ERROR")  # the chip is at its prompt again
    assert took < 5.0 + 4.0  # the budget is 5 s (plus a busy machine's margin); it took 30 s
    result = r.tool_call_result
    assert result["sent"] is True and result["answered"] is False
    assert "may have taken effect" in result["note"]
    assert "printed more than 2048 lines" in result["problem"]
    assert "within 5.0 s" not in result["problem"]
    assert [x["outcome"] for x in audited(log)] == ["sent"]


@pytest.mark.parametrize(
    ("printed", "code"),
    [
        (b"7E8101471010203AA\rBUFFER FULL", "ADAPTER_OVERFLOW"),  # the answer had begun
        (b"7E8 <RX ERROR", "BUS_ERROR"),
        (b"STOPPED", "ADAPTER_STOPPED"),
        (b"CAN ERROR", "BUS_ERROR"),
        (b"Z\rZ", "ADAPTER_ERROR"),  # lines that are not frames
    ],
)
def test_an_adapter_error_after_the_request_went_out_is_sent_never_failed(
    scripted: Any, tmp_path: Path, printed: bytes, code: str
) -> None:
    elm: ScriptedElm = scripted({**FOUND, ROUTINE: printed})
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_services=["uds_0x31"], audit_log=log)
    with ObdDriver.from_elm327(elm.port, policy, timeout_s=0.5) as driver:
        r = run(driver, "uds_request", ecu="engine", request="31 01 02 03")
    assert ROUTINE in elm.commands
    assert r.call_executed and not r.call_failed  # never "failed, try again"
    result = r.tool_call_result
    assert result["sent"] is True and result["answered"] is False
    assert result["note"].startswith(f"{code}: ") and "may have taken effect" in result["note"]
    [line] = audited(log)
    assert (line["outcome"], line["code"]) == ("sent", code)


def test_a_command_the_chip_refuses_did_not_go_out(scripted: Any, tmp_path: Path) -> None:
    elm: ScriptedElm = scripted({**FOUND, ROUTINE: b"?"})
    log = tmp_path / "audit.jsonl"
    policy = SendPolicy(allow_services=["uds_0x31"], audit_log=log)
    with ObdDriver.from_elm327(elm.port, policy, timeout_s=0.5) as driver:
        r = run(driver, "uds_request", ecu="engine", request="31 01 02 03")
    assert r.call_failed and r.call_detail.startswith("ADAPTER_ERROR")
    assert [(x["outcome"], x["code"]) for x in audited(log)] == [("failed", "ADAPTER_ERROR")]


def test_a_read_that_meets_a_bus_error_is_still_a_retryable_failure(scripted: Any) -> None:
    elm: ScriptedElm = scripted({**FOUND, "010C": b"CAN ERROR"})
    with ObdDriver.from_elm327(elm.port, timeout_s=0.5) as driver:
        r = run(driver, "obd_read", pids=["0C"])
    assert r.call_failed and r.call_detail.startswith("BUS_ERROR")


def test_a_negative_answer_to_another_service_is_not_this_requests_answer_elm327(
    scripted: Any, tmp_path: Path
) -> None:
    elm: ScriptedElm = scripted({**FOUND, ROUTINE: b"7E8037F2278\r7E8037F2231"})
    policy = SendPolicy(allow_services=["uds_0x31"], audit_log=tmp_path / "audit.jsonl")
    with ObdDriver.from_elm327(elm.port, policy, timeout_s=0.5) as driver:
        r = run(driver, "uds_request", ecu="engine", request="31 01 02 03")
    result = r.tool_call_result
    assert result["sent"] is True and result["answered"] is False
    assert "nrc" not in result
    assert result["problem"].startswith(
        "it sent only a negative response to another service (0x22: 7F 22 31)"
    )
    assert "may have taken effect" in result["note"]


def test_a_pending_names_the_service_it_is_for() -> None:
    assert is_pending(b"\x7f\x31\x78", 0x31)
    assert not is_pending(b"\x7f\x22\x78", 0x31)
    reply = parse_reply("7E8037F2278\r7E8037F3178", extended=False, service=0x31)
    assert reply.pending == {0x7E8: 1} and reply.messages == {}
    assert reply.foreign == {0x7E8: b"\x7f\x22\x78"}


# -- ISO-TP on a virtual bus ----------------------------------------------------------------


class HostileEcu:
    """An ECU at 0x7E0/0x7E8 on a virtual bus: `behave(send, request_frame, stop)` runs
    for each frame the tester sends to it (flow control included)."""

    def __init__(self, channel: str, behave: Callable[..., None]) -> None:
        self.bus = can.Bus(interface="virtual", channel=channel)
        self.seen: list[bytes] = []
        self.behave = behave
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="hostile-ecu")
        self.thread.start()

    def send(self, data: list[int]) -> None:
        frame = bytes(data).ljust(8, b"\x00")
        self.bus.send(can.Message(arbitration_id=0x7E8, data=frame, is_extended_id=False))

    def _run(self) -> None:
        while not self.stop.is_set():
            msg = self.bus.recv(0.02)
            if msg is None or msg.arbitration_id != 0x7E0:
                continue
            self.seen.append(bytes(msg.data))
            self.behave(self.send, bytes(msg.data), self.stop)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(3)
        self.bus.shutdown()


@pytest.fixture
def hostile(channel: str) -> Iterator[Callable[[Callable[..., None]], HostileEcu]]:
    made: list[HostileEcu] = []

    def make(behave: Callable[..., None]) -> HostileEcu:
        made.append(HostileEcu(channel, behave))
        return made[-1]

    yield make
    for ecu in made:
        ecu.close()


@pytest.fixture
def isotp_adapter(channel: str) -> Iterator[Callable[..., IsoTpObdAdapter]]:
    made: list[IsoTpObdAdapter] = []

    def make(timeout_s: float = 0.5, p2_star_s: float = 5.0) -> IsoTpObdAdapter:
        bus = PythonCanAdapter(f"virtual:{channel}")
        adapter = IsoTpObdAdapter(bus, timeout_s=timeout_s, p2_star_s=p2_star_s, own_adapter=True)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


def test_a_negative_answer_to_another_service_is_not_this_requests_answer_isotp(
    hostile: Any, isotp_adapter: Any, tmp_path: Path
) -> None:
    """Pendings for another service do not move the deadline either."""

    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 == 3:
            return
        for _ in range(200):  # 20 s of pendings for ReadDataByIdentifier
            send([3, 0x7F, 0x22, 0x78])
            if stop.wait(0.1):
                return
        send([3, 0x7F, 0x22, 0x31])

    hostile(behave)
    adapter = isotp_adapter(timeout_s=0.5, p2_star_s=0.5)
    service = UdsService(adapter, SendPolicy(allow_services=["uds_0x31"]), timeout_s=0.5)
    started = time.monotonic()
    result = service.request(ENGINE, "31 01 02 03")
    took = time.monotonic() - started
    assert took < 0.5 + 4.0  # the budget: max(0.5, P2* 0.5), plus a busy machine's margin
    assert result["sent"] is True and result["answered"] is False and "nrc" not in result
    assert "negative response to another service (0x22: 7F 22 78)" in result["problem"]


def test_a_late_answer_of_another_request_is_passed_over_isotp(
    hostile: Any, isotp_adapter: Any
) -> None:
    """An earlier request's answer still on its way (or another tester's on the same bus)
    is not this request's: it waits for its own (two testers on one bus under load got a
    ReadDataByIdentifier answer to ReadDTCInformation, and "will fail again")."""

    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 == 3:
            return
        send([5, 0x62, 0xF1, 0x90, 0x35, 0x48])  # ReadDataByIdentifier's (late) answer
        send([3, 0x59, 0x02, 0xFF])  # ReadDTCInformation's own: no DTC

    hostile(behave)
    adapter = isotp_adapter(timeout_s=2.0)
    replies = adapter.request(bytes([0x19, 0x02, 0xFF]), ecu=ENGINE)
    assert [(r.ecu.response_id, r.data, r.error) for r in replies] == [
        (0x7E8, bytes([0x59, 0x02, 0xFF]), None)
    ]


def test_only_another_requests_answer_is_no_answer_and_says_so(
    hostile: Any, isotp_adapter: Any
) -> None:
    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 != 3:
            send([5, 0x62, 0xF1, 0x90, 0x35, 0x48])

    hostile(behave)
    service = UdsService(isotp_adapter(timeout_s=0.5), SendPolicy(), timeout_s=0.5)
    result = service.request(ENGINE, "19 02 FF")
    assert result["answered"] is False
    assert result["problem"].startswith(
        "it sent only an answer to another service (0x22: 62 F1 90 35 48)"
    )


def test_a_positive_answer_names_the_service_it_is_for() -> None:
    reply = parse_reply("7E8 05 62 F1 90 35 48\r7E8 03 59 02 FF", extended=False, service=0x19)
    assert reply.messages == {0x7E8: bytes([0x59, 0x02, 0xFF])}
    assert reply.foreign == {0x7E8: bytes([0x62, 0xF1, 0x90, 0x35, 0x48])}
    # the answer of the request's own service, and any answer when the service is not known
    assert parse_reply("7E8 03 59 02 FF", extended=False, service=0x19).foreign == {}
    assert parse_reply("7E8 05 62 F1 90 35 48", extended=False).messages == {
        0x7E8: bytes([0x62, 0xF1, 0x90, 0x35, 0x48])
    }


@pytest.mark.parametrize(
    ("request_hex", "answer_hex", "foreign"),
    [
        ("01 0C", "41 0C 1A F8", False),
        ("01 0C", "41 0D 32", True),  # the speed's late answer while the rpm is asked
        ("01 0C 0D", "41 0D 32 0C 1A F8", False),
        ("02 0C 00", "42 0C 00 1A F8", False),
        ("02 0C 00", "42 05 00 7B", True),
        ("09 02", "49 02 01 35 48 57", False),
        ("09 02", "49 0A 01 45 43 4D", True),
        ("22 F1 90", "62 F1 90 35 48", False),
        ("22 F1 90", "62 F1 8C 30 31", True),
        ("22 F1 8C F1 90", "62 F1 90 35 48", False),
        ("19 02 FF", "59 02 FF", False),
        ("19 02 FF", "59 0A FF 01 17 00 09", True),
        ("10 83", "50 03 00 32 01 F4", False),  # the suppress bit is not echoed
        ("31 01 02 03", "71 01 02 03 00", False),
        ("31 01 02 03", "71 01 FF 00 00", True),
        ("14 FF FF FF", "54", False),  # echoes nothing: judged by service
        ("19 02 FF", "62 F1 90 35 48", True),  # another service
        ("19 02 FF", "7F 22 31", True),
        ("19 02 FF", "7F 19 31", False),  # a refusal of this request
    ],
)
def test_an_answer_is_matched_to_what_its_request_asked(
    request_hex: str, answer_hex: str, foreign: bool
) -> None:
    answer, request = bytes.fromhex(answer_hex), bytes.fromhex(request_hex)
    assert for_another_request(answer, request) is foreign


@given(
    service=st.sampled_from([0x01, 0x06, 0x09, 0x10, 0x11, 0x19, 0x22, 0x27, 0x2E, 0x31, 0x3E]),
    params=st.binary(min_size=1, max_size=6),
    data=st.binary(max_size=16),
)
def test_an_answer_that_echoes_its_request_is_never_another_requests(
    service: int, params: bytes, data: bytes
) -> None:
    request = bytes([service]) + params
    echo = (
        bytes([params[0] & 0x7F]) + params[1:]
        if service not in (0x01, 0x06, 0x09, 0x22)
        else params
    )
    answer = bytes([service + 0x40]) + echo + data
    assert not for_another_request(answer, request)
    assert for_another_request(bytes([0x7F, service ^ 0x01, 0x31]), request)


def test_a_multi_frame_answer_trickling_past_the_budget_stops_at_the_budget(
    hostile: Any, isotp_adapter: Any
) -> None:
    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 == 3:
            return
        send([0x1F, 0xFF, 0x71, 1, 2, 3, 0, 0])  # 4095 bytes announced
        sequence = 1
        while not stop.wait(0.3):  # within the 1 s consecutive frame timeout, forever
            send([0x20 | sequence, 1, 2, 3, 4, 5, 6, 7])
            sequence = (sequence + 1) & 0x0F

    hostile(behave)
    adapter = isotp_adapter(timeout_s=0.5, p2_star_s=1.0)  # budget: 1 s
    started = time.monotonic()
    [reply] = adapter.request(b"\x31\x01\x02\x03", ecu=ENGINE)
    took = time.monotonic() - started
    assert took < 1.3  # today: the budget plus the timeout again (1.5 s)
    assert reply.error is not None
    assert reply.error.startswith("the answer stopped part way: ")
    assert reply.error.endswith(" of 4095 bytes had come when the request's 1 s ran out")


def test_a_flood_of_stray_frames_neither_floods_the_log_nor_becomes_the_reason(
    hostile: Any, isotp_adapter: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 == 3:
            return
        end = time.monotonic() + 0.5
        while time.monotonic() < end and not stop.is_set():
            send([0x21, 1, 2, 3, 4, 5, 6, 7])  # consecutive frames, no first frame

    hostile(behave)
    adapter = isotp_adapter(timeout_s=0.5, p2_star_s=0.5)
    with caplog.at_level(logging.DEBUG):
        replies = adapter.request(b"\x31\x01\x02\x03", ecu=ENGINE)
    assert all("ConsecutiveFrame" not in (r.error or "") for r in replies)
    isotp_lines = [r for r in caplog.records if "isotp" in r.name and r.levelno >= logging.WARNING]
    assert isotp_lines == []


@pytest.mark.parametrize("flow_control", [[0x32, 0, 0], [0x31, 0, 0]])  # overflow, wait
def test_a_multi_frame_request_the_ecu_stops_says_only_part_of_it_went_out(
    hostile: Any, isotp_adapter: Any, tmp_path: Path, flow_control: list[int]
) -> None:
    def behave(send: Callable[[list[int]], None], frame: bytes, stop: threading.Event) -> None:
        if frame[0] >> 4 == 1:  # the first frame of the request
            send(flow_control)

    ecu = hostile(behave)
    adapter = isotp_adapter(timeout_s=0.5, p2_star_s=0.5)
    log = tmp_path / "audit.jsonl"
    service = UdsService(adapter, SendPolicy(allow_services=["uds_0x31"], audit_log=log), 0.5)
    result = service.request(ENGINE, "31 01 02 03 04 05 06 07 08 09 0A")
    assert len(ecu.seen) == 1  # only the first frame went out
    assert result["sent"] is True and result["answered"] is False
    assert result["problem"].startswith("only 1 of the request's 2 frames went out: ")
    assert result["note"].startswith("only part of the request went out")
    assert "may have taken effect" not in result["note"]
    assert [x["outcome"] for x in audited(log)] == ["sent"]


@pytest.fixture
def channel() -> str:
    return f"hostile-{uuid.uuid4().hex[:12]}"
