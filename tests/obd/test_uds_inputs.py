"""What a model can write for the tools that change an ECU is accepted or refused cleanly:
values, DIDs, ranges, routines, sessions and levels, parsed without a bus."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbridge.core.models import ToolError
from hwbridge.obd.tools.did_values import (
    MAX_SCAN_DIDS,
    HexDidValues,
    parse_did_range,
    parse_routine,
)
from hwbridge.obd.tools.security_access import parse_level
from hwbridge.obd.tools.session_keeper import parse_session
from hwbridge.policy import ServiceRequest

anything = st.one_of(
    st.text(max_size=60),
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=3),
)
hex_text = st.text(alphabet="0123456789abcdefABCDEF xX\t", max_size=40)


def accepted_or_invalid(parse: Any, *args: Any) -> Any:
    """What `parse` makes of `args`, or None when it refused them with INVALID_VALUE."""
    try:
        return parse(*args)
    except ToolError as exc:
        refusal = exc
    assert refusal.code == "INVALID_VALUE" and refusal.message
    return None


@given(st.one_of(anything, hex_text))
def test_a_write_value_is_bytes_or_a_clear_refusal(text: Any) -> None:
    data = accepted_or_invalid(HexDidValues().encode, 0x0101, text)
    if data is not None:
        assert isinstance(data, bytes) and 1 <= len(data) <= 4093
        digits = "".join(text.split())
        assert data.hex() == digits.lower().removeprefix("0x")


def test_write_values_as_a_model_writes_them() -> None:
    assert HexDidValues().encode(0x0101, "02BC") == b"\x02\xbc"
    assert HexDidValues().encode(0x0101, "0x02 bc") == b"\x02\xbc"
    for bad in ("", "2BC", "02BG", 700, None):
        with pytest.raises(
            ToolError, match=r"value (must be hex bytes|is hex bytes|needs at least)"
        ):
            HexDidValues().encode(0x0101, bad)


@given(st.one_of(anything, hex_text), st.one_of(anything, hex_text))
def test_a_scan_range_is_bounded_or_a_clear_refusal(start: Any, end: Any) -> None:
    dids = accepted_or_invalid(parse_did_range, start, end)
    if dids is not None:
        assert 1 <= len(dids) <= MAX_SCAN_DIDS
        assert dids.start >= 0 and dids.stop - 1 <= 0xFFFF


def test_scan_ranges_as_a_model_writes_them() -> None:
    assert parse_did_range("F180", "0xF19F") == range(0xF180, 0xF1A0)
    assert len(parse_did_range("0000", "00FF")) == 256
    with pytest.raises(ToolError, match="at most 256 DIDs"):
        parse_did_range("0000", "0100")
    with pytest.raises(ToolError, match="swap"):
        parse_did_range("F19F", "F180")


@given(anything)
def test_routines_sessions_and_levels_are_parsed_or_refused(text: Any) -> None:
    routine = accepted_or_invalid(parse_routine, text)
    assert routine is None or 0 <= routine <= 0xFFFF
    session = accepted_or_invalid(parse_session, text)
    assert session is None or 1 <= session <= 0x7F
    level = accepted_or_invalid(parse_level, text)
    assert level is None or (level % 2 == 1 and 1 <= level <= 125)


def test_sessions_by_name_and_number() -> None:
    assert [parse_session(s) for s in ("default", " Extended ", "programming", "3", "0x40")] == [
        1, 3, 2, 3, 0x40,
    ]  # fmt: skip
    for bad in ("0", "128", "0x81", "sport", ""):
        with pytest.raises(ToolError, match="Not a diagnostic session"):
            parse_session(bad)
    with pytest.raises(ToolError, match="requestSeed level 1"):
        parse_level(2)


@given(st.binary(min_size=3, max_size=40))
def test_a_key_is_never_described(data: bytes) -> None:
    request = ServiceRequest("uds_0x27", b"\x27\x02" + data, "engine", "uds_unlock", 2)
    shown = repr(request) + str(request.describe())
    assert data.hex(" ").upper() not in shown and "key sent" in shown
