"""Read tools: latest values, whole messages, waiting for a condition, decoding bytes.

Values come from the BusMonitor's latest frames and are decoded only here, on demand. Every
wait is bounded by the call's timeout; what the bus says is returned as data.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Iterable
from typing import Any

from hwbridge.can.database.database import CanDatabase, SignalSpec
from hwbridge.can.transport.adapter import CanAdapter
from hwbridge.can.transport.monitor import BusMonitor, FrameRecord, frame_id_text
from hwbridge.core.models import ToolError

__all__ = ["Reader", "compare", "parse_frame_id", "parse_hex", "parse_id"]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
OPS = tuple(_OPS)
DEFAULT_TIMEOUT_MS = 1000
_SLICE_S = 0.1  # how often a long wait checks that the bus is still up
MAX_TIMEOUT_MS = 30_000
_SUGGESTED = 3  # unknown names per call that get close-name suggestions


def parse_id(value: int | str) -> int:
    """An arbitration id given as a number or as text (0x1A0, 1A0h, 416)."""
    if isinstance(value, int) and not isinstance(value, bool):
        frame_id = value
    else:
        text = str(value).strip().lower().removesuffix("h")
        try:
            frame_id = int(text, 16) if text.startswith("0x") else int(text, 0)
        except ValueError:
            try:
                frame_id = int(text, 16)
            except ValueError:
                raise ToolError(
                    "INVALID_VALUE", f"{value!r} is not an arbitration id (e.g. 0x1A0)"
                ) from None
    if not 0 <= frame_id <= 0x1FFFFFFF:
        shown = f"0x{frame_id:X}" if frame_id >= 0 else str(frame_id)
        raise ToolError(
            "INVALID_VALUE", f"id {shown} is outside 0..0x1FFFFFFF, the ids a CAN frame can have"
        )
    return frame_id


_HEX_DIGITS = frozenset("0123456789abcdef")


def parse_frame_id(value: int | str) -> tuple[int, bool]:
    """An arbitration id and whether it is a 29-bit one: above 0x7FF, or written with eight
    hex digits (0x00000100), as read results, candump and most tools write 29-bit ids."""
    aid = parse_id(value)
    if isinstance(value, str):
        digits = value.strip().lower().removesuffix("h").removeprefix("0x")
        if len(digits) == 8 and set(digits) <= _HEX_DIGITS:
            return aid, True
    return aid, aid > 0x7FF


def parse_hex(text: str, *, max_len: int = 64) -> bytes:
    """Frame bytes from hex text: '01 A2 FF', '01A2FF', '0x01,0xA2'."""
    cleaned = text.replace("0x", "").replace("0X", "")
    for sep in " ,:-_\t\n":
        cleaned = cleaned.replace(sep, "")
    try:
        data = bytes.fromhex(cleaned)
    except ValueError:
        raise ToolError("INVALID_VALUE", f"{text!r} is not hex bytes (e.g. 01 A2 FF)") from None
    if len(data) > max_len:
        raise ToolError("INVALID_VALUE", f"{len(data)} bytes is more than a frame carries")
    return data


def numeric(value: Any) -> float | None:
    """The physical number in a decoded value, labelled or not ({"value": 3, "label": "D"}
    -> 3; {"value": -125, "raw": 0, "label": "Off"} -> -125)."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def compare(spec: SignalSpec, op: str, target: float | int | str) -> Callable[[Any], bool]:
    """A predicate on a decoded value, by physical value: a label target resolves to its raw
    value, then through scale and offset; a number is physical."""
    fn = _OPS.get(op)
    if fn is None:
        raise ToolError("INVALID_VALUE", f"op must be one of {', '.join(OPS)}; got {op!r}")
    if isinstance(target, str):
        raw = spec.raw_of_label(target)
        if raw is None:
            try:
                number = float(target)
            except ValueError:
                known = ", ".join(spec.choices.values()) if spec.choices else "none"
                raise ToolError(
                    "INVALID_VALUE",
                    f"{spec.qualified} has no label {target!r}; its labels are: {known}",
                ) from None
        else:
            number = float(spec.physical(raw))
    else:
        number = float(target)

    def check(value: Any) -> bool:
        got = numeric(value)
        return got is not None and fn(got, number)

    return check


class Reader:
    """Read tools over one database and one monitor (None: no bus attached)."""

    def __init__(
        self,
        database: CanDatabase,
        monitor: BusMonitor | None,
        adapter: CanAdapter | None = None,
    ) -> None:
        self.db = database
        self.monitor = monitor
        self.adapter = adapter

    def require_bus(self) -> BusMonitor:
        """The monitor, or ToolError NO_BUS (offline) / BUS_DOWN (values would be stale)."""
        self._check_alive()
        if self.monitor is None:
            raise ToolError(
                "NO_BUS",
                "No bus is attached to this driver, so live values cannot be read; "
                "list_messages, describe_message, search_signals and decode_frame still work.",
            )
        return self.monitor

    def _check_alive(self) -> None:
        if self.adapter is None:
            return
        status = self.adapter.status()
        if status.bus_state == "closed":
            raise ToolError("BUS_CLOSED", "This driver has been closed; open a new one.")
        if not status.connected and status.bus_state != "finished":  # a finished replay reads on
            reason = status.last_error or status.bus_state
            raise ToolError(
                "BUS_DOWN",
                f"The bus is not connected ({reason}), so values would be stale. "
                "It is being reopened; try again in a few seconds.",
                retryable=True,
            )

    def _wait_for(
        self, predicate: Callable[[FrameRecord], bool], timeout_s: float
    ) -> FrameRecord | None:
        """monitor.wait_for in slices, so a bus that dies meanwhile ends the wait at once."""
        monitor = self.require_bus()
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            rec = monitor.wait_for(None, predicate, timeout_s=max(0.0, min(remaining, _SLICE_S)))
            if rec is not None or remaining <= _SLICE_S:
                return rec
            self._check_alive()

    # -- frames of a message ---------------------------------------------------------------

    def _matches(self, message: Any) -> Callable[[FrameRecord], bool]:
        """Frames of `message`: its own id, or (J1939) any frame the database maps to it."""
        db = self.db
        frame_id = message.frame_id
        extended = bool(message.is_extended_frame)
        by_pgn = message.protocol == "j1939" and extended

        def match(rec: FrameRecord) -> bool:
            if rec.arbitration_id == frame_id and rec.is_extended_id == extended:
                return True
            return (
                by_pgn
                and rec.is_extended_id
                and db.message_for_frame(rec.arbitration_id, True) is message
            )

        return match

    def _latest(self, message: Any, mux_ids: Iterable[int] = ()) -> FrameRecord | None:
        """The newest frame of `message` (within one of `mux_ids` when given)."""
        monitor = self.require_bus()
        ids: list[tuple[int, bool]]
        if message.protocol == "j1939" and message.is_extended_frame:
            ids = [
                (aid, ext)
                for aid, ext in monitor.frame_ids()
                if ext and self.db.message_for_frame(aid, True) is message
            ]
        else:
            ids = [(message.frame_id, bool(message.is_extended_frame))]
        best: FrameRecord | None = None
        keys = tuple(mux_ids)
        for frame in ids:
            for key in keys or (None,):
                rec = monitor.latest(frame, key)
                if rec is not None and (best is None or rec.timestamp > best.timestamp):
                    best = rec
        return best

    def _frames_of(self, message: Any, mux_ids: tuple[int, ...]) -> Callable[[FrameRecord], bool]:
        """Frames of `message` (within one of `mux_ids` when given)."""
        match = self._matches(message)
        wanted = frozenset(mux_ids)
        mux_spec = _multiplexer_spec(self.db, message) if wanted else None

        def predicate(rec: FrameRecord) -> bool:
            if not match(rec):
                return False
            if mux_spec is None:
                return True
            value = self.db.decode(message, rec.data).signals.get(mux_spec.name)
            number = numeric(value)
            return number is not None and int(number) in wanted

        return predicate

    def _fresh(
        self, message: Any, mux_ids: tuple[int, ...], max_age_s: float | None, deadline: float
    ) -> FrameRecord | None:
        """The newest frame of `message` no older than `max_age_s`, waiting until `deadline`.

        The latest frame is looked at again after every slice of the wait, so a frame that
        arrives between the first look and the waiter being registered is not missed.
        """
        monitor = self.require_bus()
        of_message = self._frames_of(message, mux_ids)
        while True:
            rec = self._latest(message, mux_ids)
            now = monitor.now()
            if rec is not None and (max_age_s is None or now - rec.timestamp <= max_age_s):
                return rec
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            newer_than = -math.inf if max_age_s is None else now - max_age_s

            def fresh(rec: FrameRecord, newer_than: float = newer_than) -> bool:
                return rec.timestamp > newer_than and of_message(rec)

            got = monitor.wait_for(None, fresh, timeout_s=min(remaining, _SLICE_S))
            if got is not None:
                return got
            self._check_alive()

    # -- tools -----------------------------------------------------------------------------

    def read_signals(
        self, names: list[str], max_age_ms: float | None = None, timeout_ms: float | None = None
    ) -> dict[str, Any]:
        monitor = self.require_bus()
        specs: dict[str, SignalSpec] = {}
        failures: dict[str, ToolError] = {}
        for name in dict.fromkeys(names):
            try:
                # close names are looked for the first few unknown names only: bounded work
                specs[name] = self.db.resolve_signal(name, suggest=len(failures) < _SUGGESTED)
            except ToolError as exc:
                failures[name] = exc
        errors = {name: f"{exc.code}: {exc.message}" for name, exc in failures.items()}
        if not specs:
            codes = {exc.code for exc in failures.values()}
            code = codes.pop() if len(codes) == 1 else "UNKNOWN_SIGNAL"
            raise ToolError(code, "; ".join(exc.message for exc in failures.values()))
        timeout_s = _timeout_s(timeout_ms)
        deadline = time.monotonic() + timeout_s
        max_age_s = None if max_age_ms is None else max_age_ms / 1000.0
        values: dict[str, Any] = {}
        missing: dict[str, Any] = {}
        decoded: dict[tuple[int, int], tuple[FrameRecord, dict[str, Any]]] = {}
        for name, spec in specs.items():
            message = self.db.message(spec.message)
            rec = self._fresh(message, spec.multiplexer_ids, max_age_s, deadline)
            if rec is None:
                missing[name] = _not_received(message, spec, timeout_s, max_age_ms)
                continue
            key = (id(message), id(rec))
            if key not in decoded:
                decoded[key] = (rec, self.db.decode(message, rec.data).signals)
            rec, signals = decoded[key]
            values[name] = _value_entry(spec, signals.get(spec.name), rec, monitor.now())
        out: dict[str, Any] = {"values": values}
        if missing:
            out["not_received"] = missing
        if errors:
            out["errors"] = errors
        return out

    def read_message(self, name: str | int, timeout_ms: float | None = None) -> dict[str, Any]:
        monitor = self.require_bus()
        message = self.db.message(name)
        timeout_s = _timeout_s(timeout_ms)
        rec = self._fresh(message, (), None, time.monotonic() + timeout_s)
        if rec is None:
            cycle = message.cycle_time
            raise ToolError(
                "NOT_RECEIVED",
                f"{message.name} was not received within {timeout_s * 1000:.0f} ms"
                + (f" (its cycle time is {cycle} ms)" if cycle else " (it has no cycle time)"),
                retryable=True,
            )
        frame = self.db.decode(message, rec.data)
        out: dict[str, Any] = {
            "message": message.name,
            "id": frame_id_text(rec.arbitration_id, rec.is_extended_id),
            "age_ms": _age_ms(monitor.now(), rec.timestamp),
            "data": rec.data.hex(" ").upper(),
            "signals": frame.signals,
        }
        if frame.notes:
            out["notes"] = list(frame.notes)
        return out

    def wait_for_signal(
        self, name: str, op: str, target: float | int | str, timeout_ms: float
    ) -> dict[str, Any]:
        monitor = self.require_bus()
        spec = self.db.resolve_signal(name)
        message = self.db.message(spec.message)
        check = compare(spec, op, target)
        timeout_s = min(max(timeout_ms, 0), MAX_TIMEOUT_MS) / 1000.0
        started = monitor.now()
        current = self._latest(message, spec.multiplexer_ids)
        last_value: Any = None
        if current is not None:
            last_value = self.db.decode(message, current.data).signals.get(spec.name)
            if check(last_value):
                return _met(spec, last_value, current, started, already=True)
        match = self._matches(message)
        seen: list[Any] = []

        def predicate(rec: FrameRecord) -> bool:
            if not match(rec):
                return False
            value = self.db.decode(message, rec.data).signals.get(spec.name)
            if value is None:
                return False  # another multiplexer branch
            seen.append(value)
            return check(value)

        rec = self._wait_for(predicate, timeout_s)
        if rec is not None:
            value = self.db.decode(message, rec.data).signals.get(spec.name)
            return _met(spec, value, rec, started, already=False)
        if seen:
            last_value = seen[-1]
        return {
            "met": False,
            "signal": spec.qualified,
            "condition": f"{spec.name} {op} {target}",
            "waited_ms": round(timeout_s * 1000),
            "last_value": last_value,
            "unit": spec.unit,
        }

    def decode_frame(self, frame_id: int | str, data: str) -> dict[str, Any]:
        aid, extended = parse_frame_id(frame_id)
        payload = parse_hex(data)
        message = self.db.message_for_frame(aid, extended)
        notes: list[str] = []
        if message is None and not extended:
            # a short number may name a 29-bit message: decode it, saying so
            message = self.db.message_for_frame(aid, True)
            if message is not None:
                extended = True
                notes.append(
                    f"no 11-bit message has id {frame_id_text(aid, False)}; decoded as the 29-bit"
                    f" frame {frame_id_text(aid, True)}"
                )
        if message is None:
            raise ToolError(
                "UNKNOWN_MESSAGE",
                f"no message of the database has the {'29' if extended else '11'}-bit id"
                f" {frame_id_text(aid, extended)}; list_messages shows the ids it has",
            )
        frame = self.db.decode(message, payload)
        out: dict[str, Any] = {
            "message": message.name,
            "id": frame_id_text(aid, extended),
            "extended": extended,
            **frame.to_dict(),
        }
        if notes:
            out["notes"] = [*notes, *out.get("notes", [])]
        return out


def _multiplexer_spec(db: CanDatabase, message: Any) -> SignalSpec | None:
    for spec in db.signals(message):
        if spec.is_multiplexer and spec.multiplexer_signal is None:
            return spec
    return None


def _timeout_s(timeout_ms: float | None) -> float:
    if timeout_ms is not None:
        return min(max(float(timeout_ms), 0.0), MAX_TIMEOUT_MS) / 1000.0
    return DEFAULT_TIMEOUT_MS / 1000.0


def _age_ms(now: float, timestamp: float) -> int:
    return max(0, round((now - timestamp) * 1000))


def _value_entry(spec: SignalSpec, value: Any, rec: FrameRecord, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = dict(value) if isinstance(value, dict) else {"value": value}
    if spec.unit:
        entry["unit"] = spec.unit
    entry["age_ms"] = _age_ms(now, rec.timestamp)
    entry["message"] = spec.message
    return entry


def _met(
    spec: SignalSpec, value: Any, rec: FrameRecord, started: float, *, already: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {"met": True, "signal": spec.qualified, "value": value}
    if spec.unit:
        out["unit"] = spec.unit
    out["after_ms"] = 0 if already else max(0, round((rec.timestamp - started) * 1000))
    if already:
        out["already_met"] = True
    return out


def _not_received(
    message: Any, spec: SignalSpec, timeout_s: float, max_age_ms: float | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "message": message.name,
        "waited_ms": round(timeout_s * 1000),
        "cycle_time_ms": message.cycle_time,
    }
    if max_age_ms is not None:
        out["reason"] = f"no value newer than {max_age_ms:g} ms"
    elif spec.multiplexer_ids:
        out["reason"] = (
            f"no frame with {spec.multiplexer_signal} in {list(spec.multiplexer_ids)} received"
        )
    else:
        out["reason"] = "not received"
    return out
