"""A serial port for the ELM327 adapter: write a line, read up to the prompt. Internal.

The serial bridge (hwbridge.serial, issue 9) is being built at the same time; until it lands
this tiny interface over pyserial's `serial_for_url` is all the ELM327 adapter needs, and it
is the one place to switch to the bridge's PySerialAdapter later.
"""

from __future__ import annotations

import contextlib
import time
from typing import Protocol, TypeAlias

import serial

from hwbridge.core.models import ToolError

__all__ = ["PortSpec", "PySerialLink", "SerialLink"]

PortSpec: TypeAlias = "str | serial.SerialBase"
"""A device path (/dev/ttyUSB0, COM3, /dev/pts/N), a pyserial URL (socket://HOST:PORT,
rfc2217://..., loop://), or an open pyserial port."""

_POLL_S = 0.02


class SerialLink(Protocol):
    """What the ELM327 adapter needs from a port."""

    @property
    def description(self) -> str: ...

    def write(self, data: bytes) -> None: ...

    def read_until(self, marker: bytes, timeout_s: float, limit: int) -> bytes:
        """Bytes up to and including `marker`; what arrived by the deadline (or the limit)
        otherwise."""
        ...

    def discard_input(self) -> None: ...

    def close(self) -> None: ...


def _down(description: str, exc: BaseException) -> ToolError:
    return ToolError("ADAPTER_DOWN", f"The serial port {description} failed: {exc}", retryable=True)


class PySerialLink:
    """`SerialLink` on a pyserial port (opened here from a `PortSpec`, or given)."""

    def __init__(self, port: PortSpec, *, baudrate: int = 38400) -> None:
        if isinstance(port, serial.SerialBase):
            self._port = port
            self._own = False
            self.description = str(port.name or port.port)
        else:
            self.description = str(port)
            try:
                self._port = serial.serial_for_url(port, baudrate=baudrate, timeout=_POLL_S)
            except (serial.SerialException, OSError, ValueError) as exc:
                raise ToolError(
                    "ADAPTER_DOWN", f"Cannot open the serial port {port}: {exc}", retryable=True
                ) from exc
            self._own = True
        self._port.timeout = _POLL_S

    def write(self, data: bytes) -> None:
        try:
            self._port.write(data)
            self._port.flush()
        except (serial.SerialException, OSError) as exc:
            raise _down(self.description, exc) from exc

    def read_until(self, marker: bytes, timeout_s: float, limit: int) -> bytes:
        deadline = time.monotonic() + timeout_s
        buffer = bytearray()
        try:
            while time.monotonic() < deadline and len(buffer) < limit:
                chunk = self._port.read(max(1, min(self._port.in_waiting, limit - len(buffer))))
                if chunk:
                    buffer += chunk
                    if marker in chunk or buffer.endswith(marker):
                        break
        except (serial.SerialException, OSError) as exc:
            raise _down(self.description, exc) from exc
        return bytes(buffer)

    def discard_input(self) -> None:
        try:
            self._port.reset_input_buffer()
        except (serial.SerialException, OSError) as exc:
            raise _down(self.description, exc) from exc

    def close(self) -> None:
        if self._own:
            with contextlib.suppress(serial.SerialException, OSError):
                self._port.close()
