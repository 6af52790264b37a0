"""The commands of a query device's spec: a line rendered from typed parameters, judged by
the SendPolicy, written, and its reply parsed into typed fields.

Every line that goes out passes `policy.check(CommandRequest(...))`, read-only queries and
the identity query included, so no line can carry a second command. A parameter value may
not hold the spec's command separators (SCPI `;`) either. A command that changes the
device's state runs only after the device has identified itself as the spec's device (once
per connection), is audited (the log opened before the write, the line written after), and
is followed by a look at the device's error queue when the spec names one. What went out is
never reported as not sent: after the write, a missing confirmation is said in the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

from hwbridge.core.models import ToolError
from hwbridge.policy import CommandRequest, SendPolicy
from hwbridge.policy.outcomes import failure_outcome
from hwbridge.serial.spec.loader import LoadedSpec
from hwbridge.serial.spec.models import CommandSpec, ParamSpec
from hwbridge.serial.spec.patterns import DevicePattern
from hwbridge.serial.tools.values import bounded, typed_value
from hwbridge.serial.transport.adapter import PySerialAdapter

__all__ = ["CommandRunner"]

_ERROR_QUERY_S = 0.5  # time kept for asking the error queue after a command
_MAX_STALE_ERRORS = 8  # errors read out of the queue before a command that changes state


class CommandRunner:
    """Runs one spec's commands on one port (None: offline) under one policy."""

    def __init__(
        self, loaded: LoadedSpec, adapter: PySerialAdapter | None, policy: SendPolicy
    ) -> None:
        self.spec = loaded.spec
        self.adapter = adapter
        self.policy = policy
        self.port_name = adapter.description if adapter is not None else ""
        port = self.spec.port
        self.write_terminator = port.write_terminator or port.terminator
        self.timeout_s = port.timeout_ms / 1000
        self._replies = {
            name: DevicePattern(c.reply) for name, c in self.spec.commands.items() if c.reply
        }
        self._fields = {name: c.reply_fields() for name, c in self.spec.commands.items()}
        errors = self.spec.errors
        self._error_reply = DevicePattern(errors.reply) if errors else None
        self._error_ok = DevicePattern(errors.ok) if errors and errors.ok else None
        identity = self.spec.identity
        self._identity = DevicePattern(identity.expect) if identity else None
        self.identified_generation: int | None = None  # the connection the identity held for
        self.identity_reply: str | None = None

    # -- rendering and judging ---------------------------------------------------------------

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        """The line a command sends with these arguments (terminator excluded)."""
        command = self.spec.commands[name]
        assert command.send is not None
        values = {}
        separators = self.spec.port.separators
        for param_name, param in command.params.items():
            if param_name not in arguments:
                raise ToolError("INVALID_VALUE", f"{name} needs {param_name}.")
            values[param_name] = _written(param, arguments[param_name])
            text = str(values[param_name])
            if any(s and s in text for s in separators):
                request = self.request(name, text, arguments)
                self.policy.audit(request, outcome="refused", code="SEND_NOT_ALLOWED")
                raise ToolError(
                    "SEND_NOT_ALLOWED",
                    f"The value of {param_name} holds a command separator, so the line would "
                    "carry more than one command; it was not sent.",
                )
        try:
            return command.send.format(**values)
        except (ValueError, TypeError) as exc:
            raise ToolError(
                "INVALID_VALUE", f"{name}: the arguments do not fit the line ({exc})."
            ) from exc

    def request(self, name: str, line: str, arguments: dict[str, Any]) -> CommandRequest:
        command = self.spec.commands[name]
        return CommandRequest(
            line,
            self.write_terminator,
            name,
            {k: v for k, v in arguments.items() if k in command.params},
            command.changes_state,
            name,
            self.port_name,
        )

    def _port(self) -> PySerialAdapter:
        if self.adapter is None:
            raise ToolError(
                "NO_PORT", "No serial port is attached to this driver; nothing can be sent."
            )
        return self.adapter

    # -- running -----------------------------------------------------------------------------

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        command = self.spec.commands[name]
        args = dict(arguments)
        dry_run = bool(args.pop("dry_run", False))
        timeout_s = (command.timeout_ms / 1000) if command.timeout_ms else self.timeout_s
        if command.changes_state:
            return self._change(name, command, args, dry_run, timeout_s)
        line = self.render(name, args)
        self.policy.check(self.request(name, line, args))  # one line, nothing else
        port = self._port()
        deadline = time.monotonic() + timeout_s
        with port.transaction(timeout_s):
            port.reset_input()
            port.write_line(line)
            return self._reply(name, command, deadline, timeout_s)

    def _change(
        self,
        name: str,
        command: CommandSpec,
        args: dict[str, Any],
        dry_run: bool,
        timeout_s: float,
    ) -> dict[str, Any]:
        if not self.policy.allows_command(name):
            self.policy.check(self.request(name, "", args))  # SEND_NOT_ALLOWED, audited
        line = self.render(name, args)
        request = self.request(name, line, args)
        if dry_run or self.policy.dry_run:
            # judged as it would be, without spending rate budget or asking consent
            self.policy.check(dataclasses.replace(request, changes_state=False))
            self.policy.check_command_limits(name, request.arguments)
            return {"command": name, "line": line, "sent": False, "dry_run": True}
        port = self._port()
        deadline = time.monotonic() + timeout_s
        self.identify(port, deadline)  # before the policy asks anyone: a wrong device ends here
        with self.policy.open_audit() as audit:  # AUDIT_FAILED here, before anything is sent
            self.policy.check(request)
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(port.transaction(max(0.0, deadline - time.monotonic())))
                except ToolError as exc:  # PORT_BUSY after consent: nothing went out
                    audit.write(request, "failed", exc.code)
                    raise
                try:
                    self.identify(port, deadline)  # the port may have reopened meanwhile
                except ToolError as exc:
                    self.policy.audit(request, outcome="refused", code=exc.code)
                    raise
                earlier = self._stale_errors(deadline)
                try:
                    port.reset_input()
                    port.write_line(line)
                except ToolError as exc:  # after consent: the log says what became of it
                    audit.write(request, failure_outcome(exc), exc.code)
                    raise
                audit_error = audit.write(request, "sent")
                result = self._confirm(name, command, request, line, deadline)
                if earlier:
                    result["earlier_device_errors"] = earlier
        if audit_error:
            result["audit_error"] = audit_error
        return result

    def _confirm(
        self,
        name: str,
        command: CommandSpec,
        request: CommandRequest,
        line: str,
        deadline: float,
    ) -> dict[str, Any]:
        """After the write: the reply the spec expects, or the error queue. Never raises
        except DEVICE_ERROR (the device said it refused the command)."""
        result: dict[str, Any] = {"command": name, "line": line, "sent": True}
        try:
            if command.reply is not None:
                reply = self._reply(name, command, deadline, None, after_write=True)
                result.update({k: v for k, v in reply.items() if k not in result})
            elif self.spec.errors is not None and self.spec.errors.query:
                code = self._error_queue(max(deadline, time.monotonic() + _ERROR_QUERY_S))
                if code is not None:
                    self.policy.audit(request, outcome="device_refused", code=code)
                    raise _device_error(name, code, written=True)
                result["confirmed"] = True
        except ToolError as exc:
            if exc.code == "DEVICE_ERROR":
                raise
            result["confirmed"] = False
            result["note"] = f"{exc.code}: the line was written; {exc.message}"
        return result

    def _reply(
        self,
        name: str,
        command: CommandSpec,
        deadline: float,
        timeout_s: float | None,
        *,
        after_write: bool = False,
    ) -> dict[str, Any]:
        port = self._port()
        pattern = self._replies.get(name)
        skipped = 0
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0 and skipped:  # a device that talks without end: time is up
                    raise ToolError("NO_REPLY", "the deadline passed")
                text = port.read_line(max(0.0, left))
            except ToolError as exc:
                if exc.code != "NO_REPLY":
                    raise
                if not after_write and self.spec.errors and self.spec.errors.query:
                    wait = timeout_s if timeout_s is not None else self.timeout_s
                    try:
                        code = self._error_queue(time.monotonic() + min(_ERROR_QUERY_S, wait))
                    except ToolError as queue_exc:  # the command's own NO_REPLY says more
                        if queue_exc.code != "NO_REPLY":
                            raise
                        code = None
                    if code is not None:
                        raise _device_error(name, code, written=False) from exc
                note = f" ({skipped} line(s) of another form arrived)" if skipped else ""
                wait = timeout_s if timeout_s is not None else self.timeout_s
                raise ToolError(
                    "NO_REPLY",
                    f"{name}: no reply from the device within {wait * 1000:.0f} ms{note}.",
                    retryable=True,
                ) from exc
            if pattern is None:
                return {"command": name, "reply": bounded(text)}
            match = pattern.search(text)
            if match is not None:
                fields = self._fields[name]
                values = {k: typed_value(f, match.group(k)) for k, f in fields.items()}
                return {"command": name, "values": values, "reply": bounded(text)}
            code = self._error_code(text)
            if code is not None:
                raise _device_error(name, code, written=after_write)
            skipped += 1

    def _error_code(self, text: str) -> str | None:
        """The device's error code when `text` is an error reply, else None."""
        if self._error_reply is None:
            return None
        match = self._error_reply.search(text)
        if match is None or (self._error_ok is not None and self._error_ok.search(text)):
            return None
        return bounded(match.group("code"), 16)

    def _stale_errors(self, deadline: float) -> list[str]:
        """Errors already waiting in the device's queue before a command that changes state
        (a trip, an earlier command): read out first, so that the error read after the
        write is this command's own and a command that took effect is never reported as
        refused. Bounded; a queue that does not answer leaves the check to after the write."""
        errors = self.spec.errors
        if errors is None or not errors.query:
            return []
        found: list[str] = []
        for _ in range(_MAX_STALE_ERRORS):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                code = self._error_queue(time.monotonic() + min(_ERROR_QUERY_S, left))
            except ToolError as exc:
                if exc.code != "NO_REPLY":
                    raise
                break
            if code is None:
                break
            found.append(code)
        return found

    def _error_queue(self, deadline: float) -> str | None:
        """Ask the error queue once (the caller holds the transaction)."""
        errors = self.spec.errors
        assert errors is not None
        assert errors.query is not None
        port = self._port()
        self.policy.check(
            CommandRequest(
                errors.query,
                self.write_terminator,
                "error_queue",
                changes_state=False,
                tool="error_queue",
                port=self.port_name,
            )
        )
        pattern = self._error_reply
        reply = port.query(
            errors.query,
            timeout_s=max(0.05, deadline - time.monotonic()),
            expect=None if pattern is None else (lambda line: pattern.search(line) is not None),
        )
        return self._error_code(reply)

    def identify(self, port: PySerialAdapter, deadline: float) -> None:
        """WRONG_DEVICE unless the device on the port answers the identity query as the
        spec expects (asked once per connection; nothing is sent before it held)."""
        identity = self.spec.identity
        if identity is None or self._identity is None:
            return
        generation = port.generation
        if self.identified_generation == generation:
            return
        self.policy.check(
            CommandRequest(
                identity.send,
                self.write_terminator,
                "identity",
                changes_state=False,
                tool="identity",
                port=self.port_name,
            )
        )
        timeout_s = (
            identity.timeout_ms / 1000
            if identity.timeout_ms
            else max(0.05, deadline - time.monotonic())
        )
        with port.transaction(timeout_s):
            try:
                reply = port.query(identity.send, timeout_s=timeout_s)
            except ToolError as exc:
                raise ToolError(
                    exc.code,
                    f"The device did not answer the identity query, so nothing was sent "
                    f"({exc.message})",
                    retryable=exc.retryable,
                ) from exc
        self.identity_reply = bounded(reply)
        if self._identity.search(reply) is None:
            self.identified_generation = None
            raise ToolError(
                "WRONG_DEVICE",
                f"The device on {self.port_name} does not identify as "
                f"{self.spec.device.name} (its identity reply does not match the spec); "
                "nothing was sent.",
            )
        self.identified_generation = generation


def _written(param: ParamSpec, value: Any) -> Any:
    """A parameter's value as the template formats it."""
    if param.type == "boolean":
        return param.true if value else param.false
    if param.type == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if param.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _device_error(name: str, code: str, *, written: bool) -> ToolError:
    if written:
        return ToolError(
            "DEVICE_ERROR",
            f"{name} was written to the device, which refused it (error {code}).",
        )
    return ToolError(
        "DEVICE_ERROR", f"The device answered {name} with error {code}.", retryable=False
    )
