"""Which diagnostic session each ECU is in, and keeping a non-default one open.

An ECU drops a non-default session after S3 (5 s by ISO 14229-2) without a request, and on a
reset. While hwbridge holds one open, a thread sends TesterPresent with the positive answer
suppressed (`3E 80`) every `period_s`, so the session outlives a model's pauses. What hwbridge
says about a session is what it knows, never what it assumes: a session is reported `lost`
(with why) when the ECU refused tester present, answered a request with "not in this session",
reported another session (DID F186, read before a tool that changes the ECU), when tester
present could not reach it for S3, or after a reset. Closing the keeper returns every ECU it
held to the default session (`10 01`, which the send policy lets through: it only ends one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from hwbridge.core.models import ToolError
from hwbridge.obd.database.uds import nrc_name
from hwbridge.obd.transport.base import Ecu, ObdAdapter

__all__ = [
    "DEFAULT_SESSION",
    "SESSION_NAMES",
    "TESTER_PRESENT",
    "SessionKeeper",
    "parse_session",
    "session_name",
]

log = logging.getLogger(__name__)

DEFAULT_SESSION: Final = 0x01
SESSION_NAMES: Final = {"default": 0x01, "programming": 0x02, "extended": 0x03, "safety": 0x04}
TESTER_PRESENT: Final = b"\x3e\x80"
_TO_DEFAULT: Final = b"\x10\x01"
_ACTIVE_SESSION_DID: Final = b"\x22\xf1\x86"
_NOT_IN_SESSION: Final = frozenset({0x7E, 0x7F})


def session_name(session: int) -> str:
    for name, number in SESSION_NAMES.items():
        if number == session:
            return name
    return f"0x{session:02X}"


def parse_session(text: str | int) -> int:
    """A session from `default`, `extended`, `programming`, `safety` or a number 1-127
    (decimal, or hex with 0x); INVALID_VALUE otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        number: int | None = text
    elif isinstance(text, str):
        key = text.strip().lower()
        number = SESSION_NAMES.get(key)
        if number is None:
            try:
                number = int(key, 16) if key.startswith("0x") else int(key, 10)
            except ValueError:
                number = None
    else:
        number = None
    if number is None or not 0x01 <= number <= 0x7F:
        raise ToolError(
            "INVALID_VALUE",
            f"Not a diagnostic session: {str(text)[:40]!r}. Give default, extended, "
            "programming, safety or a number from 1 to 127 (0x01-0x7F).",
        )
    return number


@dataclass
class _Held:
    session: int
    last_kept: float


class SessionKeeper:
    """Sessions hwbridge opened, kept with tester present until they end or it closes."""

    def __init__(
        self,
        adapter: ObdAdapter,
        *,
        period_s: float = 2.0,
        s3_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < period_s < s3_s:
            raise ValueError("tester_present_s must be positive and shorter than S3 (5 s)")
        self.adapter = adapter
        self.period_s = period_s
        self.s3_s = s3_s
        self._clock = clock
        self._held: dict[Ecu, _Held] = {}
        self._lost: dict[Ecu, str] = {}
        self._unlocked: dict[Ecu, set[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- what the tools tell it -----------------------------------------------------------

    def entered(self, ecu: Ecu, session: int) -> None:
        """The ECU confirmed `session` (a positive answer to 10 xx); security is locked."""
        with self._lock:
            self._lost.pop(ecu, None)
            self._unlocked.pop(ecu, None)
            if session == DEFAULT_SESSION:
                self._held.pop(ecu, None)
                return
            self._held[ecu] = _Held(session, self._clock())
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="hwbridge-tester-present", daemon=True
                )
                self._thread.start()

    def lost(self, ecu: Ecu, why: str) -> None:
        """The ECU's non-default session ended (`why` says how we know)."""
        with self._lock:
            self._unlocked.pop(ecu, None)
            held = self._held.pop(ecu, None)
            if held is not None:
                self._lost[ecu] = f"the {session_name(held.session)} session ended: {why}"

    def unlocked(self, ecu: Ecu, level: int) -> None:
        with self._lock:
            self._unlocked.setdefault(ecu, set()).add(level)

    def answered(self, ecu: Ecu, code: int) -> None:
        """A negative answer `code` from the ECU: "not in this session" ends the one held."""
        if code in _NOT_IN_SESSION:
            self.lost(ecu, f"the ECU answered {nrc_name(code)} (0x{code:02X})")

    def holds(self, ecu: Ecu) -> bool:
        self._expire()
        with self._lock:
            return ecu in self._held

    def confirm(self, ecu: Ecu, timeout_s: float) -> None:
        """Ask the ECU which session it is in (DID F186) when one is held; another answer
        than the held session ends it. An ECU that does not report its session leaves it."""
        if not self.holds(ecu):
            return
        try:
            replies = self.adapter.request(_ACTIVE_SESSION_DID, ecu=ecu, timeout_s=timeout_s)
        except ToolError:
            return  # it could not be asked: the tool's own request will tell
        for reply in replies:
            data = reply.data
            if reply.complete and data[:3] == b"\x62\xf1\x86" and len(data) >= 4:
                with self._lock:
                    held = self._held.get(ecu)
                    now_in = data[3] & 0x7F
                    if held is None or held.session == now_in:
                        return
                self.lost(ecu, f"the ECU reports the {session_name(now_in)} session (F186)")

    # -- what the tools report -------------------------------------------------------------

    def state(self, ecu: Ecu) -> dict[str, Any]:
        """The ECU's session and security as hwbridge knows them."""
        self._expire()
        with self._lock:
            held = self._held.get(ecu)
            levels = ", ".join(str(level) for level in sorted(self._unlocked.get(ecu, ())))
            security = f"unlocked (level {levels})" if levels else "locked"
            if held is not None:
                return {
                    "session": session_name(held.session),
                    "kept_by": f"tester present (3E 80) every {self.period_s:g} s",
                    "security": security,
                }
            out: dict[str, Any] = {"session": "default", "security": security}
            if ecu in self._lost:
                out["note"] = self._lost[ecu]
            return out

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Every ECU hwbridge opened a session on, or whose session it saw end."""
        with self._lock:
            ecus = {*self._held, *self._lost, *self._unlocked}
        return {ecu.name: self.state(ecu) for ecu in sorted(ecus, key=lambda e: e.name)}

    # -- keeping ----------------------------------------------------------------------------

    def _expire(self) -> None:
        """Sessions that tester present has not reached for S3 are over, as the ECU sees it."""
        now = self._clock()
        with self._lock:
            late = [e for e, h in self._held.items() if now - h.last_kept > self.s3_s]
        for ecu in late:
            self.lost(ecu, f"no tester present reached the ECU for over {self.s3_s:g} s (S3)")

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            with self._lock:
                ecus = list(self._held)
            for ecu in ecus:
                if self._stop.is_set():
                    return
                self._keep(ecu)

    def _keep(self, ecu: Ecu) -> None:
        try:
            wait = self.adapter.suppressed_wait_s
            replies = self.adapter.request(TESTER_PRESENT, ecu=ecu, timeout_s=wait)
        except ToolError as exc:  # not sent, or the adapter failed: S3 decides
            log.warning("tester present to the %s ECU failed: %s", ecu.name, exc.code)
            return
        for reply in replies:
            data = reply.data
            if reply.complete and len(data) >= 3 and data[:2] == b"\x7f\x3e":
                self.lost(ecu, f"the ECU refused tester present: {nrc_name(data[2])}")
                return
        with self._lock:
            held = self._held.get(ecu)
            if held is not None:
                held.last_kept = self._clock()

    def close(self) -> None:
        """Stop keeping, and return every ECU held to the default session; idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            held, self._held = list(self._held), {}
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5)
        for ecu in held:
            try:
                self.adapter.request(_TO_DEFAULT, ecu=ecu, timeout_s=1.0)
            except ToolError as exc:
                log.warning("the %s ECU could not be returned to the default session: %s",
                            ecu.name, exc.code)  # fmt: skip
