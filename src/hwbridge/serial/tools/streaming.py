"""The commands of a streaming device's spec: the latest line of a kind, parsed on demand
(NMEA 0183 by pynmea2, other lines by the spec's patterns) into typed fields."""

from __future__ import annotations

import time
from typing import Any

import pynmea2

from hwbridge.core.models import ToolError
from hwbridge.serial.spec.models import CommandSpec, DeviceSpec
from hwbridge.serial.spec.patterns import DevicePattern
from hwbridge.serial.tools.values import bounded, nmea_kind, typed_value
from hwbridge.serial.transport.monitor import KindOf, LineMonitor, LineRecord

__all__ = ["StreamReader", "kind_function"]

MAX_WAIT_MS = 30_000


def kind_function(spec: DeviceSpec) -> KindOf:
    """How the monitor tells a line's kind for this spec."""
    stream = spec.stream
    assert stream is not None
    if stream.format == "nmea":
        return nmea_kind
    assert stream.kind is not None
    pattern = DevicePattern(stream.kind)

    def kind(line: str) -> str | None:
        match = pattern.search(line)
        return None if match is None else match.group("kind")

    return kind


class StreamReader:
    """Reads one streaming spec's commands from a LineMonitor (None: offline)."""

    def __init__(self, spec: DeviceSpec, monitor: LineMonitor | None) -> None:
        assert spec.stream is not None
        self.spec = spec
        self.monitor = monitor
        self.stale_s = spec.stream.stale_ms / 1000
        self._nmea = spec.stream.format == "nmea"
        self._patterns = {
            name: DevicePattern(c.reply) for name, c in spec.commands.items() if c.reply is not None
        }

    def read(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        command = self.spec.commands[name]
        assert command.read is not None
        monitor = self.monitor
        if monitor is None:
            raise ToolError("NO_PORT", "No serial port is attached to this driver.")
        default_ms = min(2 * self.stale_s * 1000, 5000)
        timeout_s_f = min(int(arguments.get("timeout_ms", default_ms)), MAX_WAIT_MS) / 1000
        max_age = arguments.get("max_age_ms")
        record = monitor.latest(command.read)
        now = time.monotonic()
        too_old = (
            record is not None and max_age is not None and (now - record.timestamp) * 1000 > max_age
        )
        if record is None or too_old:
            after = monitor.lines_total
            record = monitor.wait_for(
                lambda r: r.kind == command.read, after_seq=after, timeout_s=timeout_s_f
            ) or (None if too_old else monitor.latest(command.read))
        if record is None:
            if not monitor.adapter.connected:
                raise monitor.adapter.down_error()
            what = "newer than max_age_ms " if too_old else ""
            raise ToolError(
                "NOT_RECEIVED",
                f"No {command.read} line {what}arrived within {timeout_s_f * 1000:.0f} ms.",
                retryable=True,
            )
        return self._result(name, command, record)

    def _result(self, name: str, command: CommandSpec, record: LineRecord) -> dict[str, Any]:
        values = self._values(name, command, record.text)
        age_ms = round((time.monotonic() - record.timestamp) * 1000)
        out: dict[str, Any] = {
            "values": values,
            "kind": record.kind,
            "age_ms": age_ms,
            "line": bounded(record.text),
        }
        if age_ms > self.stale_s * 1000:
            out["stale"] = True
        return out

    def _values(self, name: str, command: CommandSpec, text: str) -> dict[str, Any]:
        if self._nmea:
            try:
                sentence = pynmea2.parse(text, check=True)
            except (pynmea2.ParseError, ValueError, TypeError, AttributeError) as exc:
                raise ToolError(
                    "BAD_DATA", f"The latest {command.read} line could not be read as NMEA."
                ) from exc
            values = {}
            for key, field in command.fields.items():
                try:
                    raw = getattr(sentence, field.source or key)
                except (AttributeError, ValueError, TypeError, IndexError):
                    raw = None
                values[key] = typed_value(field, raw)
            return values
        match = self._patterns[name].search(text)
        if match is None:
            raise ToolError(
                "BAD_DATA", f"The latest {command.read} line is not of the expected form."
            )
        return {k: typed_value(f, match.group(k)) for k, f in command.reply_fields().items()}
