"""SendPolicy: one object that governs everything that leaves hwbridge for the real world.

CAN frames, serial commands and diagnostic services each have their own rules (what may go,
within which limits), and share one mechanism for the rest: the rate budget, the consent
callback (only an explicit True approves), dry runs and the audit log. A refusal is a
ToolError with a stable code (SEND_NOT_ALLOWED, OUT_OF_RANGE, RATE_LIMITED, CONSENT_DENIED,
AUDIT_FAILED); it never counts as a success. The default policy is read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hwbridge.core.limits import TokenBucket
from hwbridge.core.models import ToolError
from hwbridge.policy.audit import AuditEntry, AuditTrail
from hwbridge.policy.can_rules import CanRules
from hwbridge.policy.command_rules import CommandRules
from hwbridge.policy.consent import ConsentCallback, ask_consent
from hwbridge.policy.requests import CommandRequest, PolicyRequest, SendRequest, ServiceRequest
from hwbridge.policy.service_rules import ServiceRules

__all__ = ["SendPolicy"]


class SendPolicy:
    """Read-only unless told otherwise.

    CAN:
    allow_messages: message names (globs allowed, e.g. "Climate*") that may be sent.
    signal_limits: {"Message.Signal": (min, max)}, narrower than the database's ranges.
    allow_raw_frames: permits `send_frame` (raw id + bytes, no database checks).
    allow_ids: when given, raw frames may only use these ids: an int is an 11-bit id (a
        29-bit one above 0x7FF); (id, extended) names the frame format explicitly.
    max_frames_per_second: for all CAN sends together, periodic ones included.

    Serial:
    allow_commands: spec commands that change a device's state and may run (names, globs).
    command_limits: {"command.parameter": (min, max)}.
    allow_raw_lines / deny_raw_lines: regular expressions; a raw line is written only when
        it matches one allow pattern and no deny pattern.

    Diagnostics:
    allow_services: services that change an ECU's state or security and may be sent
        (`obd_clear_dtcs`, `uds_0x2E`, `j1939_dm11`, `j1939_dm3`, globs allowed).
    max_commands_per_second: for serial commands and diagnostic services together.

    Shared:
    require_consent: every action asks `consent(request)`; only an explicit True approves,
        within `consent_timeout_s` (60 s): no answer in time refuses.
    dry_run: everything is checked and encoded, nothing is transmitted.
    audit_log: path of a JSON-lines file; every action and refusal is appended. A path that
        cannot be opened for appending is refused here, not after something went out.
    """

    def __init__(
        self,
        *,
        allow_messages: Iterable[str] = (),
        signal_limits: Mapping[str, tuple[float, float]] | None = None,
        allow_raw_frames: bool = False,
        max_frames_per_second: float = 20,
        require_consent: bool = False,
        dry_run: bool = False,
        audit_log: str | Path | None = None,
        allow_ids: Iterable[int | tuple[int, bool]] | None = None,
        consent: ConsentCallback | None = None,
        allow_commands: Iterable[str] = (),
        command_limits: Mapping[str, tuple[float, float]] | None = None,
        allow_raw_lines: Iterable[str] = (),
        deny_raw_lines: Iterable[str] = (),
        allow_services: Iterable[str] = (),
        max_commands_per_second: float = 5,
        consent_timeout_s: float = 60.0,
    ) -> None:
        self._can = CanRules(
            allow_messages, signal_limits, allow_raw_frames, allow_ids, max_frames_per_second
        )
        self._commands = CommandRules(
            allow_commands, command_limits, allow_raw_lines, deny_raw_lines
        )
        self._services = ServiceRules(allow_services)
        if max_commands_per_second <= 0:
            raise ValueError("max_commands_per_second must be positive")
        self._command_bucket = TokenBucket(max_commands_per_second)
        self._consent_required = require_consent
        self._consent = consent
        if not consent_timeout_s > 0:
            raise ValueError("consent_timeout_s must be positive")
        self._consent_timeout_s = float(consent_timeout_s)
        self._dry_run = dry_run
        self._audit = AuditTrail(audit_log, dry_run=dry_run)

    # -- what the tools need to know -------------------------------------------------------

    @property
    def allows_sending(self) -> bool:
        """Whether any CAN frame may be sent."""
        return self._can.allows_sending

    @property
    def allows_raw_frames(self) -> bool:
        return self._can.raw

    @property
    def allows_commands(self) -> bool:
        """Whether any serial command that changes state, or any raw line, may be written."""
        return self._commands.allows_commands

    @property
    def allows_raw_lines(self) -> bool:
        return self._commands.allows_raw_lines

    @property
    def dry_run(self) -> bool:
        return self._dry_run

    @property
    def requires_consent(self) -> bool:
        return self._consent_required

    @property
    def max_frames_per_second(self) -> float:
        return self._can.rate

    def allows_message(self, name: str) -> bool:
        return self._can.allows_message(name)

    def allows_command(self, name: str) -> bool:
        return self._commands.allows_command(name)

    def allows_service(self, service: str) -> bool:
        return self._services.allows(service)

    def limits_for(self, message: str, signal: str) -> tuple[float, float] | None:
        return self._can.limits.get(f"{message}.{signal}")

    def describe(self) -> dict[str, Any]:
        """The policy as data, for status tools and the prompt's guidance. `read_only` is
        about CAN frames; the serial and diagnostic parts say what they allow."""
        return {
            "read_only": not self.allows_sending,
            **self._can.describe(),
            **self._commands.describe(),
            "allow_services": list(self._services.allow),
            "max_commands_per_second": self._command_bucket.rate,
            "require_consent": self._consent_required,
            "dry_run": self._dry_run,
        }

    # -- the gate --------------------------------------------------------------------------

    def check(self, request: SendRequest | CommandRequest | ServiceRequest) -> None:
        """Raise ToolError unless `request` may go out now; consumes rate budget. Every
        refusal is audited."""
        try:
            self._check(request)
        except ToolError as exc:
            self.audit(request, outcome="refused", code=exc.code)
            raise

    def _check(self, request: SendRequest | CommandRequest | ServiceRequest) -> None:
        # what may go, then the user's yes, then the rate budget: the token is spent last,
        # right before the action goes out, so a slow answer cannot let two through at once
        if isinstance(request, SendRequest):
            self._can.check(request)
        elif isinstance(request, CommandRequest):
            self._commands.check(request)
            if not request.raw and not request.changes_state:
                return  # a query: nothing to approve, budget or audit
        elif isinstance(request, ServiceRequest):
            self._services.check(request)
        else:
            raise TypeError(f"the send policy cannot judge a {type(request).__name__}")
        if self._consent_required and not ask_consent(
            self._consent, request, self._consent_timeout_s
        ):
            raise ToolError(
                "CONSENT_DENIED",
                "The user did not approve this action; it was not sent.",
            )
        if isinstance(request, SendRequest):
            self._can.take(request)  # and a periodic send's budget, reserved with it
        else:
            self._take_command_token()

    def _take_command_token(self) -> None:
        wait = self._command_bucket.take()
        if wait:
            raise ToolError(
                "RATE_LIMITED",
                f"The send policy allows {self._command_bucket.rate:g} commands per second; "
                f"try again in {min(max(wait, 0.001), 60):.3f} s.",
                retryable=True,
            )

    def take_frame(self) -> float:
        """Spend one frame of the CAN budget (`max_frames_per_second`, shared with every other
        CAN send) for a frame a protocol sends on its own account: a J1939 request, an
        address claim, a transport-protocol packet. Returns 0 when spent, else the seconds
        until a frame's budget is there (nothing spent): the caller waits or refuses."""
        return self._can.take_frame()

    def check_limits(self, message: str, signals: Mapping[str, Any]) -> None:
        """OUT_OF_RANGE unless every limited signal of `message` is within its limits."""
        self._can.check_limits(message, signals)

    def check_command_limits(self, command: str, arguments: Mapping[str, Any]) -> None:
        """OUT_OF_RANGE unless every limited parameter of `command` is within its limits."""
        self._commands.check_limits(command, arguments)

    def release_periodic(self, message: str, scope: str = "") -> None:
        """Give back the rate budget of a periodic send that stopped."""
        self._can.release(message, scope)

    # -- audit -----------------------------------------------------------------------------

    def audit(self, request: PolicyRequest, *, outcome: str, code: str | None = None) -> str | None:
        """Append one JSON line (time, action, outcome) when an audit log is set.

        Returns None, or why the line could not be written: that is logged and reported,
        never raised, so it cannot turn an action that went out into a failure.
        """
        return self._audit.write(request, outcome, code)

    def open_audit(self) -> AuditEntry:
        """The audit log, opened before an action goes out, for the line written after it.

        A log that cannot be opened refuses the action (AUDIT_FAILED, nothing sent) instead
        of failing once it has happened.
        """
        return self._audit.open()
