"""What may be written to a serial device: state-changing spec commands by name, their
parameter limits, and raw lines by pattern. Whatever is written is one line: text that would
smuggle a second command in (a terminator or another control character inside it) is
refused for every line, read-only queries included."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.policy.bounds import check_bounds, parse_bounds
from hwbridge.policy.requests import CommandRequest

__all__ = ["CommandRules"]

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # C0, DEL, C1; tab is allowed


class CommandRules:
    """The serial part of a SendPolicy (see SendPolicy for the meaning of each argument)."""

    def __init__(
        self,
        allow_commands: Iterable[str],
        command_limits: Mapping[str, tuple[float, float]] | None,
        allow_raw_lines: Iterable[str],
        deny_raw_lines: Iterable[str],
    ) -> None:
        for name, value in (
            ("allow_commands", allow_commands),
            ("allow_raw_lines", allow_raw_lines),
            ("deny_raw_lines", deny_raw_lines),
        ):
            if isinstance(value, str):
                raise TypeError(f"{name} takes a list, e.g. [{value!r}]")
        self.allow = tuple(allow_commands)
        self.limits = parse_bounds("command_limits", "command.parameter", command_limits)
        self.allow_lines = tuple(_compile("allow_raw_lines", p) for p in allow_raw_lines)
        self.deny_lines = tuple(_compile("deny_raw_lines", p) for p in deny_raw_lines)

    @property
    def allows_commands(self) -> bool:
        return bool(self.allow) or bool(self.allow_lines)

    @property
    def allows_raw_lines(self) -> bool:
        return bool(self.allow_lines)

    def allows_command(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow)

    def describe(self) -> dict[str, Any]:
        return {
            "allow_commands": list(self.allow),
            "command_limits": {k: list(v) for k, v in self.limits.items()},
            "allow_raw_lines": [p.pattern for p in self.allow_lines],
            "deny_raw_lines": [p.pattern for p in self.deny_lines],
        }

    def check(self, request: CommandRequest) -> None:
        """Raise ToolError unless the line may be written."""
        inside = _CONTROL.search(request.line)
        if inside is not None or (request.terminator and request.terminator in request.line):
            raise ToolError(
                "SEND_NOT_ALLOWED",
                "The line holds a line break or another control character, so it would carry "
                "more than one command; it was not sent.",
            )
        if request.raw:
            self._check_raw(request.line)
            return
        if not request.changes_state:
            return  # a query: only the line itself is judged
        assert request.command is not None
        if not self.allows_command(request.command):
            allowed = ", ".join(self.allow) or "none (read-only)"
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"{request.command} changes the device's state and is not allowed by the send "
                f"policy. Commands that may run: {allowed}.",
            )
        self.check_limits(request.command, request.arguments)

    def check_limits(self, command: str, arguments: Mapping[str, Any]) -> None:
        check_bounds(self.limits, command, arguments)

    def _check_raw(self, line: str) -> None:
        if not self.allow_lines:
            raise ToolError(
                "SEND_NOT_ALLOWED",
                "Raw lines are not allowed by the send policy; use the device's own tools.",
            )
        denied = next((p for p in self.deny_lines if p.search(line)), None)
        if denied is not None or not any(p.search(line) for p in self.allow_lines):
            allowed = ", ".join(p.pattern for p in self.allow_lines)
            raise ToolError(
                "SEND_NOT_ALLOWED",
                f"The line {line[:80]!r} is not allowed by the send policy; raw lines must "
                f"match one of: {allowed}"
                + (
                    f" and none of: {', '.join(p.pattern for p in self.deny_lines)}."
                    if self.deny_lines
                    else "."
                ),
            )


def _compile(option: str, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{option}: {pattern!r} is not a valid regular expression: {exc}") from exc
