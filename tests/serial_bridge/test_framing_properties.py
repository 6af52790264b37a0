"""Framing whatever the chunking: a stream cut anywhere gives back exactly its lines, and
frames of another framing in between never hide one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbridge import ToolError
from hwbridge.serial import Framing, PySerialAdapter

LINE = st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


@settings(max_examples=40, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=8), st.lists(st.integers(1, 30), max_size=10))
def test_lines_come_back_whatever_the_chunks(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\r\n" for line in lines)
    with PySerialAdapter("loop://", terminator="\r\n", max_frame=64) as port:
        got: list[bytes] = []
        position = 0
        for size in [*cuts, len(stream)]:
            port.write(stream[position : position + size])
            position += size
            while True:
                try:
                    got += port.read_frames(timeout_s=0)
                except Exception:
                    break
            if position >= len(stream):
                break
        assert got == lines


def test_a_terminator_searched_for_another_framing_is_still_found() -> None:
    with PySerialAdapter("loop://", terminator="\r") as port:
        port.write(b"41 0C\r")
        with pytest.raises(ToolError):  # no ">" yet: the bytes stay buffered
            port.read_frame(Framing.line(b">"), timeout_s=0.05)
        assert port.read_frame(timeout_s=0.5) == b"41 0C"  # its "\r" was not searched for
