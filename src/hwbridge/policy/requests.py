"""What the send policy judges: one request type per kind of action, each describing
exactly what goes out (a frame's final bytes, a command's final line, a service's bytes).

A consent callback and the audit log see the same objects, through `describe()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["CommandRequest", "PolicyRequest", "SendKind", "SendRequest", "ServiceRequest"]

SendKind = Literal["message", "raw", "periodic"]


class PolicyRequest(Protocol):
    """Anything the policy judges: it says what it is, and describes itself as data."""

    @property
    def tool(self) -> str | None: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class SendRequest:
    """One intended CAN transmission.

    For a database message, `data` is the payload that goes out (after any hook),
    `signals` its signals decoded from `data` as JSON values, and `physical` each of them
    as a physical number (a label resolved to its raw value, then through scale and
    offset): what `signal_limits` are checked against.
    """

    kind: SendKind
    arbitration_id: int
    data: bytes
    is_extended: bool = False
    message: str | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    period_ms: float | None = None
    tool: str | None = None
    scope: str = ""  # the network: periodic budgets are per (network, message)
    physical: Mapping[str, float] = field(default_factory=dict)

    @property
    def periodic_key(self) -> str:
        return f"{self.scope}/{self.message or hex(self.arbitration_id)}"

    def describe(self) -> dict[str, Any]:
        frame = {
            "id": f"0x{self.arbitration_id:X}",
            "extended": self.is_extended,
            "data": self.data.hex(" ").upper(),
        }
        out: dict[str, Any] = {"kind": self.kind, "frame": frame}
        if self.message:
            out["message"] = self.message
        if self.signals:
            out["signals"] = dict(self.signals)
        if self.period_ms is not None:
            out["period_ms"] = self.period_ms
        if self.tool:
            out["tool"] = self.tool
        return out


@dataclass(frozen=True, slots=True)
class CommandRequest:
    """One line for a serial device: a spec command (`command` and its `arguments`) or a
    raw line (`command` None). `line` is the exact text that goes out, terminator
    excluded; `terminator` is what the port appends."""

    line: str
    terminator: str = "\n"
    command: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    changes_state: bool = True
    tool: str | None = None
    port: str = ""

    @property
    def raw(self) -> bool:
        return self.command is None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "raw_line" if self.raw else "command", "line": self.line}
        if self.command:
            out["command"] = self.command
        if self.arguments:
            out["arguments"] = dict(self.arguments)
        if self.port:
            out["port"] = self.port
        if self.tool:
            out["tool"] = self.tool
        return out


@dataclass(frozen=True, slots=True)
class ServiceRequest:
    """One diagnostic service that changes an ECU's state or security: `service` is its
    policy name (`obd_clear_dtcs`, `uds_0x2E`...), `data` the request bytes that go out.

    `secret_from`: the bytes from that offset on are a secret (a SecurityAccess key): the
    policy judges them like any others, but `describe()` and `repr()` (what a consent prompt,
    the audit log and a log line show) say only "key sent"."""

    service: str
    data: bytes = b""
    ecu: str | None = None
    tool: str | None = None
    secret_from: int | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "service", "service": self.service}
        shown = self.data if self.secret_from is None else self.data[: self.secret_from]
        if shown:
            out["data"] = shown.hex(" ").upper()
        if self.secret_from is not None:
            out["secret"] = "key sent"
        if self.ecu:
            out["ecu"] = self.ecu
        if self.tool:
            out["tool"] = self.tool
        return out

    def __repr__(self) -> str:
        return f"ServiceRequest({self.describe()!r})"
