"""The engine ECU's diagnostics that change things, as bytes on a simulated clock (no bus):
sessions and S3, security access, the idle target write, the self test, reset."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_sim import demo_security_key
from firmware_sim.clock import SimulatedClock
from firmware_sim.model import VehicleModel
from firmware_sim.obd import DEFAULT_VIN, ENGINE, answer
from firmware_sim.uds_server import UdsServer


class Engine:
    """The engine ECU's UDS server on a simulated clock, asked in hex like a trace reads."""

    def __init__(self, seed: int = 7) -> None:
        self.clock = SimulatedClock()
        self.model = VehicleModel(seed=1, driving=False)
        self.server = UdsServer(
            clock=self.clock,
            identity=ENGINE.identity,
            vin=DEFAULT_VIN,
            pids=ENGINE.pids,
            idle=self.model,
            rng=random.Random(seed),
        )

    def reply(self, request: bytes, functional: bool = False) -> bytes | None:
        state = self.model.snapshot()
        return self.server.answer(
            request,
            state,
            functional,
            lambda: answer(request, state, vin=DEFAULT_VIN, functional=functional, ecu=ENGINE),
        )

    def ask(self, request: str, functional: bool = False) -> str | None:
        reply = self.reply(bytes.fromhex(request), functional)
        return reply.hex(" ").upper() if reply is not None else None

    def seed(self) -> bytes:
        reply = self.reply(b"\x27\x01")
        assert reply is not None and reply[:2] == b"\x67\x01", reply
        return reply[2:]

    def unlock(self) -> None:
        assert self.ask("10 03") == "50 03 00 32 01 F4"
        key = demo_security_key(self.seed(), 1)
        assert self.ask("27 02 " + key.hex()) == "67 02"


@pytest.fixture
def ecu() -> Engine:
    return Engine()


def test_the_demo_key_is_the_seed_xor_5aa53cc3() -> None:
    assert demo_security_key(bytes.fromhex("11223344"), 1) == bytes.fromhex("4B870F87")
    assert demo_security_key(bytes.fromhex("11223344"), 2) == bytes.fromhex("4B870F87")
    with pytest.raises(ValueError, match="level 1 only"):
        demo_security_key(bytes(4), 3)
    with pytest.raises(ValueError, match="4 bytes"):
        demo_security_key(bytes(3), 1)


def test_extended_session_is_entered_and_ends_after_five_silent_seconds(ecu: Engine) -> None:
    assert ecu.ask("22 F1 86") == "62 F1 86 01"
    assert ecu.ask("10 03") == "50 03 00 32 01 F4"  # P2 50 ms, P2* 5000 ms
    assert ecu.ask("22 F1 86") == "62 F1 86 03"
    for _ in range(4):  # TesterPresent every 4 s keeps it
        ecu.clock.advance(4.0)
        assert ecu.ask("3E 80") is None
    assert ecu.server.session == 0x03
    ecu.clock.advance(5.01)
    assert ecu.server.session == 0x01  # S3 ran out
    assert ecu.ask("22 F1 86") == "62 F1 86 01"
    assert ecu.ask("10 02") == "7F 10 22"  # programming: conditions not correct
    assert ecu.ask("10 04") == "7F 10 12"
    assert ecu.ask("10 04", functional=True) is None
    assert ecu.ask("10 83") is None and ecu.server.session == 0x03  # suppressed, done


def test_security_access_unlocks_with_the_demo_key_in_the_extended_session(
    ecu: Engine,
) -> None:
    assert ecu.ask("27 01") == "7F 27 7F"  # not in the default session
    assert ecu.ask("10 03") is not None
    assert ecu.ask("27 02 00 00 00 00") == "7F 27 24"  # a key before any seed
    seed = ecu.seed()
    assert len(seed) == 4 and any(seed) and ecu.seed() != seed  # a new random seed each time
    seed = ecu.seed()
    assert ecu.ask("27 02 " + demo_security_key(seed, 1).hex()) == "67 02"
    assert ecu.ask("27 01") == "67 01 00 00 00 00"  # already unlocked: a seed of zeros
    assert ecu.ask("27 03") == "7F 27 12"
    assert ecu.ask("27 01 00") == "7F 27 13"


def test_three_wrong_keys_lock_requests_for_a_seed_out_for_ten_seconds(ecu: Engine) -> None:
    assert ecu.ask("10 03") is not None
    for answer_ in ("7F 27 35", "7F 27 35", "7F 27 36"):
        ecu.seed()
        assert ecu.ask("27 02 DE AD BE EF") == answer_
    for _ in range(4):
        assert ecu.ask("27 01") == "7F 27 37"
        ecu.clock.advance(2.4)  # requests (keeping the session) do not shorten the delay
    assert ecu.ask("27 01") == "7F 27 37"  # 9.6 s
    ecu.clock.advance(0.5)
    ecu.unlock()  # after 10 s: a seed again, and the right key unlocks


def test_a_session_change_or_a_reset_locks_again(ecu: Engine) -> None:
    ecu.unlock()
    assert ecu.ask("10 03") is not None  # extended again: a transition locks
    assert ecu.ask("27 01") != "67 01 00 00 00 00"
    ecu.unlock()
    assert ecu.ask("11 01") == "51 01"
    ecu.clock.advance(0.2)
    assert ecu.ask("22 F1 86") == "62 F1 86 01"
    assert ecu.ask("10 03") is not None
    assert ecu.ask("2E 01 01 03 84") == "7F 2E 33"


def test_the_idle_target_is_written_unlocked_in_the_extended_session_only(ecu: Engine) -> None:
    assert ecu.ask("22 01 01") == "62 01 01 03 20"  # 800 rpm, readable in any session
    assert ecu.ask("2E 01 01 03 84") == "7F 2E 7F"  # default session
    assert ecu.ask("10 03") is not None
    assert ecu.ask("2E 01 01 03 84") == "7F 2E 33"  # locked
    assert ecu.ask("2E F1 90 41") == "7F 2E 31"  # not a writable DID
    assert ecu.ask("2E 01") == "7F 2E 13"
    ecu.unlock()
    assert ecu.ask("2E 01 01 03") == "7F 2E 13"
    assert ecu.ask("2E 01 01 02 57") == "7F 2E 31"  # 599 rpm
    assert ecu.ask("2E 01 01 03 E9") == "7F 2E 31"  # 1001 rpm
    assert ecu.model.idle_rpm == 800.0
    assert ecu.ask("2E 01 01 03 B6") == "6E 01 01"  # 950 rpm
    assert ecu.model.idle_rpm == 950.0
    assert ecu.ask("22 01 01 F1 86") == "62 01 01 03 B6 F1 86 03"
    assert ecu.ask("2E 01 01 02 58") == "6E 01 01" and ecu.model.idle_rpm == 600.0
    assert ecu.ask("2E 01 01 03 E8") == "6E 01 01" and ecu.model.idle_rpm == 1000.0


def test_the_self_test_has_a_result_two_seconds_after_it_started(ecu: Engine) -> None:
    assert ecu.ask("31 03 02 03") == "7F 31 24"  # not started
    assert ecu.ask("31 02 02 03") == "7F 31 24"
    assert ecu.ask("10 03") is not None
    assert ecu.ask("31 01 02 03") == "71 01 02 03 00"
    ecu.clock.advance(1.9)
    assert ecu.ask("31 03 02 03") == "71 03 02 03 01"  # in progress
    ecu.clock.advance(0.1)
    assert ecu.ask("31 03 02 03") == "71 03 02 03 00"  # passed
    assert ecu.ask("31 02 02 03") == "7F 31 24"  # it has ended
    assert ecu.ask("31 01 02 03") == "71 01 02 03 00"
    ecu.clock.advance(0.5)
    assert ecu.ask("31 02 02 03") == "71 02 02 03 02"  # stopped
    assert ecu.ask("31 03 02 03") == "71 03 02 03 02"
    assert ecu.ask("31 01 FF 00") == "7F 31 31"
    assert ecu.ask("31 04 02 03") == "7F 31 12"
    assert ecu.ask("10 01") is not None
    assert ecu.ask("31 03 02 03") == "7F 31 24"  # a session change ends routines


def test_a_reset_answers_then_the_ecu_is_silent_for_200_ms(ecu: Engine) -> None:
    assert ecu.ask("11 01") == "7F 11 7F"  # resets need the extended session
    for kind in ("01", "02", "03"):
        assert ecu.ask("10 03") is not None
        assert ecu.ask(f"11 {kind}") == f"51 {kind}"
        assert ecu.ask("3E 00") is None and ecu.ask("01 0C") is None  # rebooting
        ecu.clock.advance(0.19)
        assert ecu.ask("22 F1 90") is None
        ecu.clock.advance(0.01)
        assert ecu.ask("3E 00") == "7E 00"
        assert ecu.server.session == 0x01
    assert ecu.ask("10 03") is not None
    assert ecu.ask("11 04") == "7F 11 12"
    assert ecu.ask("11") == "7F 11 13"


def test_identification_dids_are_readable_ascii(ecu: Engine) -> None:
    expected = {
        0xF180: "HWB-BOOT-2.3.1",
        0xF187: "HWB-0417-ECM",
        0xF18C: "ECM0000817",
        0xF190: DEFAULT_VIN,
        0xF191: "HWB-0417-H02",
        0xF195: "4.1.7",
        0xF197: "HWB ECM 2.0 MHEV",
        0xF19E: "HWB_ECM_0417.pdx",
    }
    for did, text in expected.items():
        request = b"\x22" + did.to_bytes(2, "big")
        assert ecu.reply(request) == b"\x62" + did.to_bytes(2, "big") + text.encode()
    assert ecu.ask("22 F1 A0") == "7F 22 31"


_NRCS = {0x11, 0x12, 0x13, 0x22, 0x24, 0x31, 0x33, 0x35, 0x36, 0x37, 0x7F}
_SERVICES = [0x01, 0x09, 0x10, 0x11, 0x19, 0x22, 0x27, 0x2E, 0x31, 0x3E, 0x85]
_requests = st.one_of(
    st.binary(max_size=12),
    st.tuples(st.sampled_from(_SERVICES), st.binary(max_size=6)).map(
        lambda t: bytes([t[0]]) + t[1]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_requests, st.booleans(), st.sampled_from([0.0, 0.0, 0.1, 2.5, 6.0])),
        max_size=25,
    )
)
def test_any_request_gets_a_positive_answer_a_known_nrc_or_silence(
    steps: list[tuple[bytes, bool, float]],
) -> None:
    ecu = Engine()
    ecu.unlock()
    for request, functional, wait in steps:
        reply = ecu.reply(request, functional)
        if reply is not None:
            assert request, reply
            if reply[0] == 0x7F:
                assert reply[1] == request[0] and len(reply) == 3, (request, reply)
                assert reply[2] in _NRCS, (request, reply)
            else:
                assert reply[0] == request[0] + 0x40, (request, reply)
        assert ecu.server.session in (0x01, 0x03)
        assert 600.0 <= ecu.model.idle_rpm <= 1000.0
        ecu.clock.advance(wait)
