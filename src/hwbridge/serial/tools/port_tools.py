"""The generic tools of a port without a spec: `serial_query` writes one raw line (only what
the policy's allow patterns admit and its deny patterns do not) and returns the reply;
`serial_read` listens. Both look at the port's LineMonitor, so unsolicited output is never
lost between calls and a reply is the first line after the write.

`expect` and `until` are plain text, not patterns: a regular expression written by an LLM
could take exponential time on a hostile line; a substring search cannot.
"""

from __future__ import annotations

import time
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.policy import CommandRequest, SendPolicy
from hwbridge.policy.outcomes import failure_outcome
from hwbridge.serial.tools.values import bounded
from hwbridge.serial.transport.monitor import LineMonitor

__all__ = ["MAX_LINES", "MAX_READ_MS", "PortTools"]

MAX_READ_MS = 10_000
MAX_LINES = 100
MAX_CHARS = 8_000  # all lines of one serial_read together
DEFAULT_QUERY_MS = 1_000
DEFAULT_READ_MS = 1_000


class PortTools:
    """serial_query and serial_read over one monitored port."""

    def __init__(self, monitor: LineMonitor, policy: SendPolicy) -> None:
        self.monitor = monitor
        self.adapter = monitor.adapter
        self.policy = policy
        self.terminator = self.adapter.decode(self.adapter.write_terminator)

    def query(self, line: str, expect: str | None, timeout_ms: int | None) -> dict[str, Any]:
        request = CommandRequest(
            line, self.terminator, tool="serial_query", port=self.adapter.description
        )
        if self.policy.dry_run:
            self.policy.check(request)
            return {"line": line, "sent": False, "dry_run": True}
        timeout_s = (timeout_ms if timeout_ms is not None else DEFAULT_QUERY_MS) / 1000
        data = self.adapter.encode(line) + self.adapter.write_terminator
        if not self.adapter.connected:
            raise self.adapter.down_error()  # before the policy spends budget or asks consent
        with self.policy.open_audit() as audit:
            self.policy.check(request)
            after = self.monitor.lines_total
            started = time.monotonic()
            try:
                self.adapter.write(data)
            except ToolError as exc:  # after consent: the log says what became of it
                audit.write(request, failure_outcome(exc), exc.code)
                raise
            audit_error = audit.write(request, "sent")
        skipped = 0

        def accept(record: Any) -> bool:
            nonlocal skipped
            if expect is None or expect in record.text:
                return True
            skipped += 1
            return False

        reply = self.monitor.wait_for(accept, after_seq=after, timeout_s=timeout_s)
        result: dict[str, Any] = {"line": line, "sent": True}
        if reply is None:
            result.update(reply=None, note="no reply of the expected form within timeout_ms")
        else:
            result.update(
                reply=bounded(reply.text), elapsed_ms=round((reply.timestamp - started) * 1000)
            )
        if skipped:
            result["skipped_lines"] = skipped
        if audit_error:
            result["audit_error"] = audit_error
        return result

    def read(self, duration_ms: int | None, until: str | None) -> dict[str, Any]:
        wait_s = (duration_ms if duration_ms is not None else DEFAULT_READ_MS) / 1000
        after = self.monitor.lines_total
        met = None
        if until is not None:
            met = self.monitor.wait_for(
                lambda r: until in r.text, after_seq=after, timeout_s=wait_s
            )
        else:
            self.monitor.wait_for(lambda r: False, after_seq=after, timeout_s=wait_s)
        records = self.monitor.history(after, limit=MAX_LINES + 1)
        # lines are numbered as they arrive: the window's count, even past what is kept
        total = (met.seq if met is not None else self.monitor.lines_total) - after
        if met is not None:
            records = [r for r in records if r.seq <= met.seq]
        lines: list[str] = []
        used = 0
        truncated = len(records) > MAX_LINES
        for record in records[:MAX_LINES]:
            text = bounded(record.text)
            if used + len(text) > MAX_CHARS:
                truncated = True
                break
            lines.append(text)
            used += len(text)
        if not lines and not self.adapter.connected:
            raise self.adapter.down_error()
        out: dict[str, Any] = {
            "lines": lines,
            "count": len(lines),
            "total": total,
            "returned": len(lines),
            "truncated": truncated,
        }
        if until is not None:
            out["until_met"] = met is not None
        return out


def require_monitor(monitor: LineMonitor | None) -> LineMonitor:
    if monitor is None:
        raise ToolError("NO_PORT", "No serial port is attached to this driver.")
    return monitor
