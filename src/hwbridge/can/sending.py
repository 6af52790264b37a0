"""Send tools: one frame of a message, a raw frame, periodic sends, and their hooks.

Every transmission passes SendPolicy.check first (invariant 1); nothing reaches the adapter
when it refuses. A per-message hook may rewrite a frame before each transmission, which is
how rolling counters and checksums stay valid on periodic sends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import can
from hwbridge.can.adapter import CAN_FD_LENGTHS, CanAdapter, PeriodicHandle, build_message
from hwbridge.can.database import CanDatabase, EncodedFrame
from hwbridge.can.database_bits import extract, insert
from hwbridge.can.policy import SendPolicy, SendRequest
from hwbridge.can.reading import parse_hex, parse_id
from hwbridge.core.models import ToolError

__all__ = [
    "FrameHook",
    "HookFactory",
    "Sender",
    "counter_and_checksum",
    "xor_checksum",
]

FrameHook = Callable[[can.Message], None]
"""Rewrites `msg.data` in place before a transmission (python-can's modifier_callback)."""

HookFactory = Callable[[CanDatabase, Any], FrameHook]
"""Builds the hook of one message from the database and the cantools message."""


def xor_checksum(payload: bytes) -> int:
    """XOR of the bytes (the checksum field itself zeroed): a common simple CAN checksum."""
    value = 0
    for byte in payload:
        value ^= byte
    return value


def counter_and_checksum(
    counter: str | None = None,
    checksum: str | None = None,
    algorithm: Callable[[bytes], int] = xor_checksum,
) -> HookFactory:
    """A hook that increments a rolling counter and recomputes a checksum every frame.

    `algorithm` receives the payload with the checksum field zeroed and returns the raw
    checksum value. Give either or both signal names.
    """

    def factory(db: CanDatabase, message: Any) -> FrameHook:
        by_name = {s.name: s for s in message.signals}
        for name in (counter, checksum):
            if name is not None and name not in by_name:
                raise ValueError(f"{message.name} has no signal {name!r}")
        ctr = by_name.get(counter) if counter else None
        chk = by_name.get(checksum) if checksum else None
        modulo = 1 << ctr.length if ctr is not None else 0
        lock = threading.Lock()
        state: dict[str, int | None] = {"next": None}

        def hook(msg: can.Message) -> None:
            payload = bytearray(msg.data)
            if ctr is not None:
                with lock:
                    current = state["next"]
                    value = int(extract(ctr, bytes(payload)) or 0) if current is None else current
                    state["next"] = (value + 1) % modulo
                insert(ctr, value, payload)
            if chk is not None:
                insert(chk, 0, payload)
                insert(chk, algorithm(bytes(payload)) & ((1 << chk.length) - 1), payload)
            msg.data = payload

        return hook

    return factory


class Sender:
    """Send tools for one database over one adapter, gated by one policy."""

    def __init__(
        self,
        db: CanDatabase,
        adapter: CanAdapter | None,
        policy: SendPolicy,
        hooks: Mapping[str, HookFactory] | None = None,
        scope: str = "",
    ) -> None:
        self.db = db
        self.adapter = adapter
        self.policy = policy
        self.scope = scope  # the network's name: periodic budgets are per network
        self._factories = dict(hooks or {})
        for name in self._factories:
            db.message(name)  # fail at construction on a misspelt message
        self._hooks: dict[str, FrameHook] = {}
        self._periodic: dict[str, PeriodicHandle] = {}
        self._lock = threading.Lock()
        # one start or stop at a time: two starts of a message must not both run a task
        self._periodic_ops = threading.Lock()

    def _hook(self, message: Any) -> FrameHook | None:
        factory = self._factories.get(message.name)
        if factory is None:
            return None
        with self._lock:
            hook = self._hooks.get(message.name)
            if hook is None:
                hook = self._hooks[message.name] = factory(self.db, message)
        return hook

    def _bus(self) -> CanAdapter:
        if self.adapter is None:
            raise ToolError("NO_BUS", "No bus is attached to this driver; nothing can be sent.")
        return self.adapter

    def _encode(self, name: str, signals: Mapping[str, Any]) -> tuple[Any, EncodedFrame]:
        message = self.db.message(name)
        if not self.policy.allows_message(message.name):
            # refuse before encoding: the policy's answer matters more than a bad value
            self.policy.check(
                SendRequest(
                    "message",
                    message.frame_id,
                    b"",
                    message.frame_id > 0x7FF,
                    message.name,
                    dict(signals),
                )
            )
        if not isinstance(signals, Mapping):
            raise ToolError("INVALID_VALUE", "signals must be an object of name -> value")
        return message, self.db.encode(message, signals)

    def _frame(self, message: Any, frame: EncodedFrame) -> can.Message:
        data = frame.data
        fd = frame.is_fd or len(data) > 8  # longer than a classic frame: CAN-FD
        if fd and len(data) not in CAN_FD_LENGTHS:
            # a CAN-FD frame carries 12, 16, 20, 24, 32, 48 or 64 bytes: pad like a stack does
            size = min(n for n in CAN_FD_LENGTHS if n >= len(data))
            data = data + bytes(size - len(data))
        return build_message(frame.arbitration_id, data, extended=frame.is_extended, fd=fd)

    def _describe(self, message: Any, frame: EncodedFrame, msg: can.Message) -> dict[str, Any]:
        """The frame as it goes out: after a hook, its signals are decoded from the wire
        bytes, and what the hook rewrote (counter, checksum) is no longer called defaulted."""
        out = frame.to_dict()
        data = bytes(msg.data)
        out["data"] = data.hex(" ").upper()
        if data[: len(frame.data)] != frame.data:
            sent = self.db.decode(message, data).signals
            rewritten = [k for k, v in sent.items() if frame.signals.get(k) != v]
            out["signals"] = sent
            out["defaulted"] = [k for k in out["defaulted"] if k not in rewritten]
            out["set_by_hook"] = rewritten
        return out

    def send_message(
        self, name: str, signals: Mapping[str, Any], dry_run: bool = False, tool: str = ""
    ) -> dict[str, Any]:
        message, frame = self._encode(name, signals)
        msg = self._frame(message, frame)
        request = SendRequest(
            "message", msg.arbitration_id, bytes(msg.data), bool(msg.is_extended_id),
            message.name, frame.signals, tool=tool or "send_message", scope=self.scope,
        )  # fmt: skip
        if dry_run or self.policy.dry_run:
            self.policy.check_limits(message.name, frame.signals)  # what the real send would meet
            out = self._describe(message, frame, msg)
            out.update(sent=False, dry_run=True)
            return out
        bus = self._bus()  # before the policy spends rate budget or asks for consent
        self.policy.check(request)
        # the hook runs only for a frame that really goes out: a rolling counter the
        # receiver tracks must not skip values for refused sends or dry runs
        hook = self._hook(message)
        if hook is not None:
            hook(msg)
        bus.send(msg)
        self.policy.audit(replace(request, data=bytes(msg.data)), outcome="sent")
        out = self._describe(message, frame, msg)
        out["sent"] = True
        return out

    def send_frame(
        self, frame_id: int | str, data: str, extended: bool | None = None
    ) -> dict[str, Any]:
        aid = parse_id(frame_id)
        payload = parse_hex(data)
        is_extended = bool(extended) if extended is not None else aid > 0x7FF
        if not is_extended and aid > 0x7FF:
            raise ToolError("INVALID_VALUE", f"id 0x{aid:X} needs extended=true (29-bit)")
        request = SendRequest("raw", aid, payload, is_extended, tool="send_frame", scope=self.scope)
        msg = build_message(aid, payload, extended=is_extended)
        if self.policy.dry_run:
            self.policy.check(replace(request, kind="raw"))
            return {"sent": False, "dry_run": True, **_frame_dict(msg)}
        bus = self._bus()
        self.policy.check(request)
        bus.send(msg)
        self.policy.audit(request, outcome="sent")
        return {"sent": True, **_frame_dict(msg)}

    def start_periodic(
        self, name: str, signals: Mapping[str, Any], period_ms: float
    ) -> dict[str, Any]:
        message, frame = self._encode(name, signals)
        msg = self._frame(message, frame)
        request = SendRequest(
            "periodic", msg.arbitration_id, bytes(msg.data), bool(msg.is_extended_id),
            message.name, frame.signals, period_ms=float(period_ms), tool="start_periodic",
            scope=self.scope,
        )  # fmt: skip
        if self.policy.dry_run:
            self.policy.check_limits(message.name, frame.signals)
            described = self._describe(message, frame, msg)
            return {"started": False, "dry_run": True, "period_ms": period_ms, **described}
        with self._periodic_ops:
            bus = self._bus()
            old = self._periodic.get(message.name)
            self.policy.check(request)  # reserves this message's budget (replacing its own)
            try:
                if old is not None:
                    old.stop()
                # python-can runs the hook before every transmission, the first one included
                handle = bus.send_periodic(msg, period_ms / 1000.0, self._hook(message))
            except BaseException:
                with self._lock:
                    self._periodic.pop(message.name, None)
                self.policy.release_periodic(message.name, self.scope)
                raise
            with self._lock:
                self._periodic[message.name] = handle
        self.policy.audit(request, outcome="periodic_started")
        out = self._describe(message, frame, msg)
        out.update(started=True, period_ms=period_ms, replaced=old is not None)
        return out

    def stop_periodic(self, name: str) -> dict[str, Any]:
        message = self.db.message(name)
        with self._periodic_ops:
            with self._lock:
                handle = self._periodic.pop(message.name, None)
            if handle is None:
                running = ", ".join(self.running()) or "none"
                raise ToolError(
                    "NOT_RUNNING",
                    f"{message.name} is not being sent periodically; running: {running}",
                )
            handle.stop()
            self.policy.release_periodic(message.name, self.scope)
        self.policy.audit(
            SendRequest("periodic", message.frame_id, b"", False, message.name, scope=self.scope),
            outcome="periodic_stopped",
        )
        return {"stopped": message.name}

    def running(self) -> list[str]:
        with self._lock:
            return [name for name, h in self._periodic.items() if h.active]

    def stop_all(self) -> None:
        with self._periodic_ops:
            with self._lock:
                handles = list(self._periodic.items())
                self._periodic.clear()
            for name, handle in handles:
                handle.stop()
                self.policy.release_periodic(name, self.scope)


def _frame_dict(msg: can.Message) -> dict[str, Any]:
    width = 8 if msg.is_extended_id else 3
    return {
        "id": f"0x{msg.arbitration_id:0{width}X}",
        "extended": bool(msg.is_extended_id),
        "fd": bool(msg.is_fd),
        "data": bytes(msg.data).hex(" ").upper(),
    }
