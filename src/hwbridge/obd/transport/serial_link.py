"""The ELM327 adapter's port: the serial bridge's PySerialAdapter, framed at the prompt.

The ELM327 needs two things from a port: write a command, and read what the chip prints up
to its `>` prompt within a deadline (all at once, or line by line while it may still be
waiting for an ECU). PySerialAdapter does both with the serial bridge's
promises (bounded reads, PORT_DOWN when the device goes away, reopening with backoff), so
there is one serial mechanism in hwbridge.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

from hwbridge.core.models import ToolError
from hwbridge.serial.transport.adapter import PySerialAdapter
from hwbridge.serial.transport.framing import Framing

__all__ = ["AdapterLink", "PortSpec", "SerialLink"]

_LINE = Framing.regex(rb"[\r>]")  # a line the chip prints, or its prompt

PortSpec: TypeAlias = "str | PySerialAdapter"
"""A device path (/dev/ttyUSB0, COM3, /dev/pts/N), a pyserial URL (socket://HOST:PORT,
rfc2217://..., loop://), or an open PySerialAdapter."""


class SerialLink(Protocol):
    """What the ELM327 adapter needs from a port."""

    @property
    def description(self) -> str: ...

    def write(self, data: bytes) -> None: ...

    def read_until(self, marker: bytes, timeout_s: float, limit: int) -> bytes:
        """Bytes up to and including `marker`; b"" when it does not come by the deadline."""
        ...

    def read_line(self, timeout_s: float) -> bytes:
        """The next line up to and including its CR, or up to and including the prompt;
        b"" when neither comes by the deadline."""
        ...

    def discard_input(self) -> None: ...

    def close(self) -> None: ...


class AdapterLink:
    """`SerialLink` on a PySerialAdapter (opened here from a `PortSpec`, or given)."""

    def __init__(self, port: PortSpec, *, baudrate: int = 38400, max_reply: int = 4096) -> None:
        if isinstance(port, PySerialAdapter):
            self._adapter, self._own = port, False
        else:
            self._adapter = PySerialAdapter(
                port, baudrate=baudrate, terminator=b">", encoding="ascii", max_frame=max_reply
            )
            self._own = True
        self.description = self._adapter.description

    def write(self, data: bytes) -> None:
        self._adapter.write(data)

    def read_until(self, marker: bytes, timeout_s: float, limit: int) -> bytes:
        try:
            return self._adapter.read_frame(Framing.line(marker), timeout_s=timeout_s) + marker
        except ToolError as exc:
            if exc.code == "NO_REPLY":
                return b""
            raise

    def read_line(self, timeout_s: float) -> bytes:
        try:
            return self._adapter.read_frame(_LINE, timeout_s=timeout_s)
        except ToolError as exc:
            if exc.code == "NO_REPLY":
                return b""
            raise

    def discard_input(self) -> None:
        self._adapter.reset_input()

    def close(self) -> None:
        if self._own:
            self._adapter.close()
