"""Send tools: one frame of a message, a raw frame, periodic sends, and their hooks.

The policy judges the frame that goes out (invariant 1). A message is encoded, its hook
(rolling counter, checksum) applied, and the final payload decoded again: that decoded
frame is what the database's ranges, the policy's limits, the consent callback, the result
and the audit log all see. Nothing reaches the adapter when any of them refuses.

A hook is a pure function of the encoded payload and the number of the message's frames
that went out before, so a frame can be built and judged before it is sent, and the count
advances only once it has been. Periodic sends build and judge every transmission the same
way, and stop at the first one that would break a limit.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import can
from hwbridge.can.database.bits import extract, insert, overlap, raw_bits, signal_bits
from hwbridge.can.database.database import CanDatabase, EncodedFrame, JsonValue
from hwbridge.can.database.values import format_number
from hwbridge.can.tools.reading import parse_frame_id, parse_hex
from hwbridge.can.transport.adapter import CAN_FD_LENGTHS, CanAdapter, PeriodicHandle, build_message
from hwbridge.can.transport.monitor import frame_id_text
from hwbridge.core.models import ToolError
from hwbridge.policy import SendPolicy, SendRequest

__all__ = [
    "FrameHook",
    "HookFactory",
    "Sender",
    "counter_and_checksum",
    "xor_checksum",
]

log = logging.getLogger(__name__)

HookValues = Callable[[bytes, int], Mapping[str, int | float]]
"""(encoded payload, frames of this message sent before) -> raw values of declared signals."""


@dataclass(frozen=True, slots=True)
class FrameHook:
    """What a hook writes into every frame of one message, and how.

    `signals` are the signals it may write (name -> the cantools signal); `values(payload,
    sequence)` returns raw values for them from the payload as encoded and `sequence`, the
    number of this message's frames that went out before (0 for the first). It must be a
    pure function of the two. A hook may not write a signal the policy limits.
    """

    message: str
    signals: Mapping[str, Any]
    values: HookValues

    def apply(self, payload: bytes, sequence: int) -> bytes:
        """`payload` with the hook's values written in (only its declared signals' bits)."""
        out = bytearray(payload)
        for name, raw in self.values(bytes(payload), sequence).items():
            signal = self.signals.get(name)
            if signal is None:
                raise ValueError(f"the hook of {self.message} wrote {name!r}, not one it declares")
            insert(signal, raw, out)
        return bytes(out)


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

    The counter of the n-th frame sent is the payload's own counter value plus n (modulo
    its range). `algorithm` receives the payload with the new counter and the checksum
    field zeroed and returns the raw checksum value. Give either or both signal names.
    """

    def factory(db: CanDatabase, message: Any) -> FrameHook:
        by_name = {s.name: s for s in message.signals}
        for name in (counter, checksum):
            if name is not None and name not in by_name:
                raise ValueError(f"{message.name} has no signal {name!r}")
        ctr = by_name.get(counter) if counter else None
        chk = by_name.get(checksum) if checksum else None
        modulo = 1 << ctr.length if ctr is not None else 0

        def values(payload: bytes, sequence: int) -> dict[str, int]:
            work = bytearray(payload)
            out: dict[str, int] = {}
            if ctr is not None:
                start = int(extract(ctr, payload) or 0)
                out[ctr.name] = (start + sequence) % modulo
                insert(ctr, out[ctr.name], work)
            if chk is not None:
                insert(chk, 0, work)
                out[chk.name] = algorithm(bytes(work)) & ((1 << chk.length) - 1)
            return out

        declared = {s.name: s for s in (ctr, chk) if s is not None}
        return FrameHook(message.name, declared, values)

    return factory


@dataclass(frozen=True, slots=True)
class _Outgoing:
    """One frame of a message as it will go out, with what it carries on the wire."""

    message: Any
    encoded: EncodedFrame  # what the caller's values encode to, before any hook
    base: bytes  # the encoded payload, padded to a valid frame length
    data: bytes  # the final payload: what goes out
    sequence: int | None  # the hook's sequence number used (None: no hook)
    signals: dict[str, JsonValue]  # decoded from `data`
    physical: dict[str, float]  # decoded from `data`, by physical value
    set_by_hook: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def _padded(frame: EncodedFrame) -> bytes:
    data = frame.data
    if (frame.is_fd or len(data) > 8) and len(data) not in CAN_FD_LENGTHS:
        # a CAN-FD frame carries 12, 16, 20, 24, 32, 48 or 64 bytes: pad like a stack does
        size = min(n for n in CAN_FD_LENGTHS if n >= len(data))
        data = data + bytes(size - len(data))
    return data


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
        self._hooks: dict[str, FrameHook] = {}
        for name, factory in (hooks or {}).items():
            message = db.message(name)  # fail at construction on a misspelt message
            self._hooks[message.name] = self._checked_hook(message, factory(db, message))
        # frames of each hooked message that went out: the hooks' sequence numbers
        self._sequences: dict[str, int] = dict.fromkeys(self._hooks, 0)
        self._sequence_locks = {name: threading.Lock() for name in self._hooks}
        self._periodic: dict[str, PeriodicHandle] = {}
        self._ended: dict[str, str] = {}  # periodic sends that stopped on their own, and why
        self._lock = threading.Lock()
        # one start or stop at a time: two starts of a message must not both run a task
        self._periodic_ops = threading.Lock()

    def _checked_hook(self, message: Any, hook: object) -> FrameHook:
        if not isinstance(hook, FrameHook):
            raise TypeError(
                f"the hook factory of {message.name} returned {type(hook).__name__}, not a"
                " FrameHook (see counter_and_checksum)"
            )
        names = {s.name for s in message.signals}
        unknown = sorted(set(hook.signals) - names)
        if unknown:
            raise ValueError(f"the hook of {message.name} declares unknown signals {unknown}")
        limited = sorted(n for n in hook.signals if self.policy.limits_for(message.name, n))
        if limited:
            raise ValueError(
                f"the hook of {message.name} writes {', '.join(limited)}, which signal_limits"
                " limit; a hook may only write unlimited signals (counters, checksums)"
            )
        return hook

    def _bus(self) -> CanAdapter:
        if self.adapter is None:
            raise ToolError("NO_BUS", "No bus is attached to this driver; nothing can be sent.")
        return self.adapter

    # -- building and judging a frame ------------------------------------------------------

    def _encode(self, name: str, signals: Mapping[str, Any]) -> tuple[Any, EncodedFrame]:
        message = self.db.message(name)
        if not self.policy.allows_message(message.name):
            # refuse before encoding: the policy's answer matters more than a bad value
            self.policy.check(
                SendRequest(
                    "message",
                    message.frame_id,
                    b"",
                    bool(message.is_extended_frame),
                    message.name,
                    dict(signals),
                )
            )
        if not isinstance(signals, Mapping):
            raise ToolError("INVALID_VALUE", "signals must be an object of name -> value")
        return message, self.db.encode(message, signals)

    def _prepare(self, name: str, signals: Mapping[str, Any]) -> _Outgoing:
        """Encode, apply the hook at the current sequence, and judge the result."""
        message, encoded = self._encode(name, signals)
        hook = self._hooks.get(message.name)
        sequence = self._sequences.get(message.name) if hook is not None else None
        return self._build(message, encoded, _padded(encoded), sequence)

    def _build(
        self, message: Any, encoded: EncodedFrame, base: bytes, sequence: int | None
    ) -> _Outgoing:
        """The frame with the hook applied at `sequence`, decoded from its final bytes.

        INVALID_VALUE when a value given is not what the frame would carry (two signals
        given share bits), OUT_OF_RANGE when a signal that shares bits with one given
        would leave the database's range. The policy's limits are checked by the caller.
        """
        hook = self._hooks.get(message.name)
        data = base if hook is None or sequence is None else hook.apply(base, sequence)
        specs = {spec.name: spec for spec in self.db.signals(message)}
        raw = self.db.decode_raw(message, data)
        signals: dict[str, JsonValue] = {}
        physical: dict[str, float] = {}
        for name, value in raw.items():
            spec = specs[name]
            signals[name] = spec.to_json(value)[0]
            physical[name] = float(spec.physical(value))
        hooked = set(hook.signals) if hook is not None else set()
        defaulted = set(encoded.defaulted)
        notes: list[str] = []
        if set(signals) != set(encoded.raw):
            raise ToolError(
                "INVALID_VALUE",
                f"the values given for {message.name} overlap its multiplexer: the frame would"
                f" carry {', '.join(sorted(signals))}",
            )
        for name, intended in encoded.raw.items():
            spec = specs[name]
            value = raw[name]
            if name in hooked or _same_bits(spec.signal, value, intended):
                continue
            on_wire = _text(signals[name])
            sharing = self._sharing(message, name, len(data), encoded)
            if name not in defaulted:
                raise ToolError(
                    "INVALID_VALUE",
                    f"{name} shares bits with {sharing or 'another signal'} in {message.name}:"
                    f" the frame would carry {name} = {on_wire}, not"
                    f" {_text(encoded.signals[name])}. Give only one of them.",
                )
            labelled = float(value).is_integer() and int(value) in spec.choices
            if not labelled and not spec.low <= physical[name] <= spec.high:
                raise ToolError(
                    "OUT_OF_RANGE",
                    f"{name} shares bits with {sharing or 'another signal'} in {message.name}:"
                    f" the frame would carry {name} = {on_wire}, outside its range"
                    f" {format_number(spec.low)} to {format_number(spec.high)}.",
                )
            notes.append(f"{name} is {on_wire} on the wire: it shares bits with {sharing}")
        set_by_hook = tuple(n for n in hooked if n in signals and signals[n] != encoded.signals[n])
        return _Outgoing(
            message, encoded, base, data, sequence, signals, physical, set_by_hook, tuple(notes)
        )

    def _sharing(self, message: Any, name: str, size: int, encoded: EncodedFrame) -> str:
        """The signals whose bits overlap `name`'s, for an error message."""
        by_name = {s.name: s for s in message.signals}
        mine = signal_bits(by_name[name], size)
        others = [
            other
            for other in encoded.raw
            if other != name and overlap(mine, signal_bits(by_name[other], size))
        ]
        return ", ".join(others)

    def _judge(self, out: _Outgoing) -> None:
        """The policy's limits on the frame as it goes out (for dry runs and every periodic
        transmission; `SendPolicy.check` does the same for the first)."""
        self.policy.check_limits(out.message.name, out.physical)

    def _request(
        self, kind: Literal["message", "periodic"], out: _Outgoing, **extra: Any
    ) -> SendRequest:
        frame = out.encoded
        return SendRequest(
            kind,
            frame.arbitration_id,
            out.data,
            frame.is_extended,
            out.message.name,
            out.signals,
            physical=out.physical,
            scope=self.scope,
            **extra,
        )

    def _message(self, out: _Outgoing, data: bytes | None = None) -> can.Message:
        payload = out.data if data is None else data
        fd = out.encoded.is_fd or len(payload) > 8  # longer than a classic frame: CAN-FD
        return build_message(
            out.encoded.arbitration_id, payload, extended=out.encoded.is_extended, fd=fd
        )

    def _describe(self, out: _Outgoing) -> dict[str, Any]:
        """The frame as it goes out: signals decoded from the wire bytes; what a hook
        rewrote (counter, checksum) is no longer called defaulted."""
        result = out.encoded.to_dict()
        result["data"] = out.data.hex(" ").upper()
        result["signals"] = dict(out.signals)
        if out.data[: len(out.encoded.data)] != out.encoded.data:
            result["defaulted"] = [k for k in result["defaulted"] if k not in out.set_by_hook]
            result["set_by_hook"] = list(out.set_by_hook)
        if out.notes:
            result["notes"] = [*result.get("notes", []), *out.notes]
        return result

    # -- one-shot sends --------------------------------------------------------------------

    def send_message(
        self, name: str, signals: Mapping[str, Any], dry_run: bool = False, tool: str = ""
    ) -> dict[str, Any]:
        out = self._prepare(name, signals)
        if dry_run or self.policy.dry_run:
            self._judge(out)  # what the real send would meet
            result = self._describe(out)
            result.update(sent=False, dry_run=True)
            return result
        bus = self._bus()  # before the policy spends rate budget or asks for consent
        request = self._request("message", out, tool=tool or "send_message")
        with self.policy.open_audit() as audit:  # AUDIT_FAILED here, before anything is sent
            self.policy.check(request)
            out, request = self._transmit(bus, out, request)
            audit_error = audit.write(request, "sent")
        result = self._describe(out)
        result["sent"] = True
        if audit_error:
            result["audit_error"] = audit_error
        return result

    def _transmit(
        self, bus: CanAdapter, out: _Outgoing, request: SendRequest
    ) -> tuple[_Outgoing, SendRequest]:
        """Send `out`; with a hook, at the sequence current now (rebuilt and judged again
        if a periodic transmission took the one it was built with), then advance it."""
        lock = self._sequence_locks.get(out.message.name)
        if lock is None or out.sequence is None:
            bus.send(self._message(out))
            return out, request
        with lock:
            sequence = self._sequences[out.message.name]
            if sequence != out.sequence:
                try:
                    rebuilt = self._build(out.message, out.encoded, out.base, sequence)
                    self._judge(rebuilt)
                    if self.policy.requires_consent and rebuilt.data != out.data:
                        # the user approved other bytes: never send what was not approved
                        raise ToolError(
                            "CONSENT_STALE",
                            f"While the user was asked, a periodic send of {out.message.name}"
                            " moved its counter, so the approved frame is no longer the one"
                            " that would go out; nothing was sent. Ask again.",
                            retryable=True,
                        )
                except ToolError as exc:
                    self.policy.audit(request, outcome="refused", code=exc.code)
                    raise
                out = rebuilt
                request = self._request("message", out, tool=request.tool)
            bus.send(self._message(out))
            self._sequences[out.message.name] = sequence + 1
        return out, request

    def send_frame(
        self, frame_id: int | str, data: str, extended: bool | None = None
    ) -> dict[str, Any]:
        aid, written_extended = parse_frame_id(frame_id)
        payload = parse_hex(data)
        is_extended = bool(extended) if extended is not None else written_extended
        if not is_extended and aid > 0x7FF:
            raise ToolError("INVALID_VALUE", f"id 0x{aid:X} needs extended=true (29-bit)")
        request = SendRequest("raw", aid, payload, is_extended, tool="send_frame", scope=self.scope)
        message = self.db.message_for_frame(aid, is_extended)
        if message is not None:
            # a raw frame of a database message carries its signals: the policy's limits
            # hold on them as on any frame of that message
            decoded = self.db.decode(message, payload).signals
            request = replace(request, message=message.name, signals=decoded)
        msg = build_message(aid, payload, extended=is_extended)
        if self.policy.dry_run:
            self.policy.check(request)
            return {"sent": False, "dry_run": True, **_frame_dict(msg)}
        bus = self._bus()
        with self.policy.open_audit() as audit:
            self.policy.check(request)
            bus.send(msg)
            audit_error = audit.write(request, "sent")
        result = {"sent": True, **_frame_dict(msg)}
        if audit_error:
            result["audit_error"] = audit_error
        return result

    # -- periodic sends --------------------------------------------------------------------

    def _modifier(self, out: _Outgoing) -> Callable[[can.Message], None] | None:
        """Builds and judges every periodic transmission of a hooked message.

        Raising stops the task before the frame goes out (python-can skips it): a hook
        whose bits overlap a limited signal cannot walk it out of its limits.
        """
        name = out.message.name
        lock = self._sequence_locks.get(name)
        if lock is None:
            return None  # no hook: every transmission is the frame judged at the start

        def modify(msg: can.Message) -> None:
            with lock:
                sequence = self._sequences[name]
                frame = None
                try:
                    frame = self._build(out.message, out.encoded, out.base, sequence)
                    self._judge(frame)
                except ToolError as exc:
                    log.warning("periodic send of %s stopped: %s", name, exc)
                    self.policy.audit(
                        self._request("periodic", frame or out, tool="start_periodic"),
                        outcome="periodic_stopped",
                        code=exc.code,
                    )
                    raise
                msg.data = bytearray(frame.data)
                self._sequences[name] = sequence + 1

        return modify

    def start_periodic(
        self, name: str, signals: Mapping[str, Any], period_ms: float
    ) -> dict[str, Any]:
        out = self._prepare(name, signals)
        message = out.message
        if self.policy.dry_run:
            self._judge(out)
            described = self._describe(out)
            return {"started": False, "dry_run": True, "period_ms": period_ms, **described}
        request = self._request("periodic", out, period_ms=float(period_ms), tool="start_periodic")
        self._bus()  # before the policy spends rate budget or asks for consent
        with self.policy.open_audit() as audit:
            # reserves this message's budget (replacing its own) and a token for the first
            # frame, which goes out at once; asked outside the lock below, so a pending
            # consent never holds up stop_periodic or close()
            self.policy.check(request)
            with self._periodic_ops:
                old = None
                try:
                    self._reap()
                    bus = self._bus()  # closed while the user was asked: BUS_CLOSED
                    old = self._periodic.get(message.name)
                    with self._lock:
                        self._ended.pop(message.name, None)
                    if old is not None:
                        old.stop()
                    handle = bus.send_periodic(
                        self._message(out), period_ms / 1000.0, self._modifier(out)
                    )
                except BaseException:
                    with self._lock:
                        self._periodic.pop(message.name, None)
                    self.policy.release_periodic(message.name, self.scope)
                    raise
                with self._lock:
                    self._periodic[message.name] = handle
                audit_error = audit.write(request, "periodic_started")
        result = self._describe(out)
        result.update(started=True, period_ms=period_ms, replaced=old is not None)
        if audit_error:
            result["audit_error"] = audit_error
        return result

    def _reap(self) -> None:
        """Give back the budget of periodic sends that ended on their own (a transmission
        refused by the limits, a failed hook); the caller holds `_periodic_ops`."""
        with self._lock:
            ended = [(n, h) for n, h in self._periodic.items() if not h.active]
            for name, handle in ended:
                del self._periodic[name]
                self._ended[name] = handle.last_error or "it ended"
        for name, _ in ended:
            self.policy.release_periodic(name, self.scope)

    def ended(self) -> dict[str, str]:
        """Periodic sends that stopped on their own since they were started, and why."""
        self.running()  # reaps
        with self._lock:
            return dict(self._ended)

    def stop_periodic(self, name: str) -> dict[str, Any]:
        message = self.db.message(name)
        with self._periodic_ops:
            self._reap()
            with self._lock:
                handle = self._periodic.pop(message.name, None)
                reason = self._ended.pop(message.name, None)
            if handle is None:
                if reason is not None:
                    raise ToolError(
                        "NOT_RUNNING",
                        f"{message.name} is no longer being sent periodically: it stopped"
                        f" ({reason}).",
                    )
                running = ", ".join(self.running()) or "none"
                raise ToolError(
                    "NOT_RUNNING",
                    f"{message.name} is not being sent periodically; running: {running}",
                )
            handle.stop()
            self.policy.release_periodic(message.name, self.scope)
        self.policy.audit(
            SendRequest(
                "periodic",
                message.frame_id,
                b"",
                bool(message.is_extended_frame),
                message.name,
                scope=self.scope,
            ),
            outcome="periodic_stopped",
        )
        return {"stopped": message.name}

    def running(self) -> list[str]:
        if self._periodic_ops.acquire(blocking=False):  # a start or stop reaps anyway
            try:
                self._reap()
            finally:
                self._periodic_ops.release()
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


def _same_bits(signal: Any, a: float, b: float) -> bool:
    """Whether two raw values put the same bits on the wire (floats after rounding)."""
    try:
        return raw_bits(signal, a) == raw_bits(signal, b)
    except (OverflowError, ValueError, struct.error):
        return a == b


def _text(value: JsonValue) -> str:
    if isinstance(value, dict):
        label, number = value.get("label"), value.get("value")
        return f"{label} ({number})" if label is not None else str(number)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format_number(value)


def _frame_dict(msg: can.Message) -> dict[str, Any]:
    return {
        "id": frame_id_text(msg.arbitration_id, bool(msg.is_extended_id)),
        "extended": bool(msg.is_extended_id),
        "fd": bool(msg.is_fd),
        "data": bytes(msg.data).hex(" ").upper(),
    }
