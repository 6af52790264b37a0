"""OBD-II and UDS through an ELM327 (or compatible) interface on a serial port.

The adapter sets the chip up the way diagnostic programs do (ATZ, echo and linefeeds off,
spaces off, headers on so every answer names its ECU, adaptive timing, the protocol), finds
the vehicle's protocol on the first request (the chip's own search, then ATDPN tells 11-bit
from 29-bit ids) and reassembles what it prints per ECU (`elm327_reply`). Physical requests
set the header and the receive filter (ATSH 7E0 / ATCRA 7E8) only when they change.

Every reply a real adapter gives is handled: NO DATA is an empty answer; `?`, CAN ERROR,
BUS INIT: ...ERROR, UNABLE TO CONNECT, BUFFER FULL, STOPPED become ToolErrors with stable
codes; SEARCHING... is skipped; lines that are not frames are counted, never guessed at. A
reply that does not end in the `>` prompt in time fails with ADAPTER_TIMEOUT, and the next
command first brings the chip back to its prompt.

A "response pending" (7F xx 78) is waited through as over ISO-TP (`pending.PendingClock`):
the reply is read line by line, and each pending line gives the ECU P2* (5 s) more, within
the request's budget. From v2.1 the chip itself waits for the final answer and prints it
before its prompt (datasheet, "Response Pending Messages"). Older chips, and most clones,
take the pending for the answer and return to the prompt; the final answer of a physical
request is then awaited with ATMA (the ATCRA filter lets only that ECU through), which sends
nothing to the vehicle, and a key press ends the monitoring. An ECU that pended without a
final answer is an incomplete reply that says so, never a silent empty one.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple, Self

from hwbridge.core.models import ToolError
from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter, UnansweredRequest
from hwbridge.obd.transport.elm327_reply import Reply, ReplyReader, parse_reply
from hwbridge.obd.transport.pending import PendingClock, another_service_note
from hwbridge.obd.transport.serial_link import AdapterLink, PortSpec, SerialLink

__all__ = ["Elm327Adapter"]

log = logging.getLogger(__name__)

_PROMPT = b">"
_MAX_REPLY = 64 * 1024
_MAX_LINES = 2048  # lines read for one request (more than any answer needs: a flood)
_CAN_PROTOCOLS = {"6": False, "7": True, "8": False, "9": True}  # number -> 29-bit ids
_SETUP = ("ATE0", "ATL0", "ATS0", "ATH1", "ATAT1", "ATCAF1")
_PROTOCOLS = frozenset("0123456789ABC")
_MESSAGES = {
    "ADAPTER_ERROR": "The ELM327 did not accept the request ({line}).",
    "BUS_ERROR": "The ELM327 reports a bus problem ({line}): check the connection to the "
    "vehicle and the protocol (a CAN bit rate that does not match the car's gives CAN ERROR).",
    "NO_VEHICLE": "The ELM327 found no vehicle bus ({line}): is the ignition on?",
    "ADAPTER_OVERFLOW": "The ELM327's buffer overflowed ({line}); ask for less at once.",
    "ADAPTER_STOPPED": "The ELM327 stopped the request ({line}); try again.",
}
_RETRYABLE = frozenset({"BUS_ERROR", "NO_VEHICLE", "ADAPTER_OVERFLOW", "ADAPTER_STOPPED"})
_STOPPED_EARLY = (
    "it answered 'response pending' (0x78) and the ELM327 stopped listening before its final answer"
)


class _Read(NamedTuple):
    """How a reading of the chip's lines ended."""

    prompt: bool  # it came back to its prompt
    size: int  # bytes read
    flooded: str | None = None  # why it was cut short: it printed more than a reply holds


def _bare(line: str) -> str:
    return line.strip().upper().replace(" ", "")


class Elm327Adapter(ObdAdapter):
    """Diagnostic requests through an ELM327 on `link`; `open()` builds one from a port."""

    def __init__(
        self,
        link: SerialLink,
        *,
        protocol: str = "0",
        timeout_s: float = 5.0,
        reset_timeout_s: float = 3.0,
        p2_star_s: float = 5.0,
    ) -> None:
        text = str(protocol).upper().removeprefix("A")
        if text not in _PROTOCOLS:
            raise ValueError(f"protocol must be 0 (automatic) or 1-9, A-C, not {protocol!r}")
        self.link = link
        self.protocol = text
        self.timeout_s = timeout_s
        self.reset_timeout_s = reset_timeout_s
        self.p2_star_s = p2_star_s
        self._lock = threading.Lock()
        self._extended: bool | None = _CAN_PROTOCOLS.get(text)
        self._detected: str | None = None
        self._header: tuple[str, str] | None = None  # (ATSH value, ATCRA value) now set
        self._known: dict[int, Ecu] = {}
        self._identity: str | None = None
        self._voltage: str | None = None
        self._requests = 0
        self._garbage = 0
        self._last_error: str | None = None
        self._resync = False
        self._cut: str | None = None  # why the last request's reading was cut short
        self._closed = False

    @classmethod
    def open(
        cls,
        port: PortSpec,
        *,
        baudrate: int = 38400,
        protocol: str = "0",
        timeout_s: float = 5.0,
        p2_star_s: float = 5.0,
    ) -> Self:
        """Open `port`, reset the ELM327 and set it up; PORT_DOWN or ADAPTER_TIMEOUT if it does
        not answer."""
        link = AdapterLink(port, baudrate=baudrate, max_reply=_MAX_REPLY)
        adapter = cls(link, protocol=protocol, timeout_s=timeout_s, p2_star_s=p2_star_s)
        try:
            adapter.initialize()
        except BaseException:
            link.close()
            raise
        return adapter

    # -- talking to the chip --------------------------------------------------------------

    def _command(self, command: str, timeout_s: float) -> str:
        """Type one command; what the chip printed before its prompt (echo removed)."""
        if self._resync:
            self._bring_back_prompt()
        self.link.discard_input()
        self.link.write(command.encode("ascii") + b"\r")
        raw = self.link.read_until(_PROMPT, timeout_s, _MAX_REPLY)
        if not raw.endswith(_PROMPT):
            self._resync = True
            got = "nothing" if not raw else f"{len(raw)} bytes without a prompt"
            raise ToolError(
                "ADAPTER_TIMEOUT",
                f"The ELM327 on {self.link.description} did not finish {command} within "
                f"{timeout_s:g} s ({got}).",
                retryable=True,
            )
        text = raw[:-1].decode("ascii", "replace")
        lines = text.replace("\n", "\r").split("\r")
        if lines and lines[0].strip().upper().replace(" ", "") == command.upper():
            lines = lines[1:]  # the echo (before ATE0 took effect)
        return "\r".join(lines)

    def _bring_back_prompt(self) -> None:
        """After a timeout the chip may still be busy: any character stops it."""
        self._resync = False
        self.link.write(b"X")
        self.link.read_until(_PROMPT, 1.0, _MAX_REPLY)
        self.link.discard_input()

    def _ask(self, command: str, reader: ReplyReader, clock: PendingClock) -> bool:
        """Send a request and read the reply line by line up to the prompt (True); each
        "response pending" moves the deadline. When the deadline passes (or the chip floods)
        after a pending, the chip is stopped and what it printed counts; without one,
        UnansweredRequest (it went out)."""
        if self._resync:
            self._bring_back_prompt()
        self.link.discard_input()
        self.link.write(command.encode("ascii") + b"\r")
        read = self._read_lines(reader, clock, echo=command)
        if read.prompt:
            return True
        if read.flooded:
            self._cut = read.flooded
        if clock.pendings:
            self._bring_back_prompt()  # the ECU is still at work: stop waiting for it
            return False
        self._resync = True
        where = f"on {self.link.description}"
        if read.flooded:
            raise UnansweredRequest(
                "ADAPTER_ERROR",
                f"The ELM327 {where} {read.flooded} after {command} was sent, without "
                f"finishing its reply; it was stopped after {clock.waited():.1f} s.",
                retryable=True,
            )
        got = f"{read.size} bytes without a prompt" if read.size else "nothing"
        raise UnansweredRequest(
            "ADAPTER_TIMEOUT",
            f"The ELM327 {where} did not finish {command} within {clock.waited():.1f} s ({got}).",
            retryable=True,
        )

    def _read_lines(
        self,
        reader: ReplyReader,
        clock: PendingClock,
        until: int | None = None,
        echo: str | None = None,
    ) -> _Read:
        """Lines as they come, each read once into `reader`, until the prompt, the clock's
        deadline, `until`'s answer (complete or begun) or more than a reply can hold (a
        flood); pending lines move the deadline. The clock is looked at before every line:
        lines that already arrived never keep the reading past the deadline."""
        size = count = 0
        while True:
            if size >= _MAX_REPLY or count >= _MAX_LINES:
                why = f"printed more than {_MAX_LINES} lines ({size} bytes)"
                return _Read(False, size, why)
            left = clock.left()
            if left <= 0:
                return _Read(False, size)
            raw = self.link.read_line(left)
            if not raw:
                return _Read(False, size)  # the deadline passed
            count += 1
            size += len(raw)
            line = raw.decode("ascii", "replace")
            prompt = line.endswith(">")
            text = line[:-1] if prompt else line
            if echo is not None and count == 1 and _bare(text) == echo:
                text = ""  # the echo (before ATE0 took effect)
            if (ident := reader.feed(text)) is not None:
                clock.pending(ident)
            if prompt:
                return _Read(True, size)
            if until is not None and reader.began(until):
                return _Read(False, size)

    def _listen(self, ecu: Ecu, reader: ReplyReader, clock: PendingClock) -> None:
        """The chip went back to its prompt after a "response pending" (before v2.1 it takes
        one for the answer): monitor the asked ECU (ATCRA lets only its frames through) for
        the final answer, sending nothing to the vehicle. Monitoring sends no flow control,
        so a multi-frame answer shows as begun, not complete."""
        self.link.write(b"ATMA\r")
        read = self._read_lines(reader, clock, until=ecu.response_id)
        if read.flooded:
            self._cut = f"{read.flooded} while listening"
        if not read.prompt:
            self._bring_back_prompt()  # a key press ends the monitoring

    def _at(self, command: str, timeout_s: float = 1.0) -> str:
        lines = [x.strip() for x in self._command(command, timeout_s).split("\r") if x.strip()]
        answer = lines[-1] if lines else ""
        if answer == "?":
            raise ToolError("ADAPTER_ERROR", f"The ELM327 did not accept {command}.")
        return answer

    def initialize(self) -> None:
        """Reset and set up the chip (what diagnostic programs send at connection)."""
        with self._lock:
            identity = self._command("ATZ", self.reset_timeout_s)
            named = next(
                (x for x in identity.split("\r") if "ELM" in x.upper() or "STN" in x.upper()),
                identity,
            )
            # device text: printable ASCII, a name's length (it reaches health and the LLM)
            self._identity = "".join(c for c in named if " " <= c <= "~").strip()[:40] or None
            for command in _SETUP:
                self._at(command)
            self._at(f"ATSP{self.protocol}")
            self._voltage = self._at("ATRV")[:12] or None
            self._header = None
            self._detected = None

    # -- requests -------------------------------------------------------------------------

    @property
    def extended(self) -> bool | None:
        return self._extended

    def ecus(self) -> list[Ecu]:
        return sorted(self._known.values(), key=lambda e: e.response_id)

    def _set_header(self, ecu: Ecu | None, extended: bool) -> None:
        if ecu is None:
            wanted = ("DB33F1" if extended else "7DF", "")
        elif extended:
            wanted = (f"{ecu.request_id & 0xFFFFFF:06X}", f"{ecu.response_id:08X}")
        else:
            wanted = (f"{ecu.request_id:03X}", f"{ecu.response_id:03X}")
        if self._header == wanted:
            return
        self._header = None
        self._at(f"ATSH{wanted[0]}")
        self._at(f"ATCRA{wanted[1]}")
        self._header = wanted

    def _detect(self) -> None:
        """The first request: the chip searches (if automatic); ATDPN says what it found."""
        reply_text = self._command("0100", max(self.timeout_s, 10.0))
        reply = parse_reply(reply_text, extended=False, service=0x01)
        if reply.errors and not (reply.messages or reply.order):
            code, line = reply.errors[0]
            self._raise(code, line)  # UNABLE TO CONNECT, BUS INIT: ...ERROR, CAN ERROR...
        number = self._at("ATDPN").removeprefix("A")
        if number not in _CAN_PROTOCOLS:
            raise ToolError(
                "UNSUPPORTED",
                f"The vehicle speaks ELM327 protocol {number or '?'}, not CAN (ISO 15765-4): "
                "hwbridge's diagnostics need a CAN vehicle.",
            )
        self._detected = number
        self._extended = _CAN_PROTOCOLS[number]
        # with 29-bit ids the answer must be read again with the right header width
        for ident in parse_reply(reply_text, self._extended, service=0x01).messages:
            self._known.setdefault(ident, Ecu.from_response(ident, self._extended))

    def _raise(self, code: str, line: str) -> None:
        template = _MESSAGES.get(code, "The ELM327 reported {line}.")
        raise ToolError(code, template.format(line=line), retryable=code in _RETRYABLE)

    def request(
        self, payload: bytes, *, ecu: Ecu | None = None, timeout_s: float | None = None
    ) -> list[EcuReply]:
        if not 1 <= len(payload) <= 7:
            raise ToolError(
                "INVALID_VALUE", "An ELM327 sends requests of 1 to 7 bytes (one CAN frame)."
            )
        with self._lock:
            if self._closed:
                raise ToolError("ADAPTER_DOWN", "The ELM327 adapter is closed.")
            self._requests += 1
            try:
                return self._request(payload, ecu, timeout_s or self.timeout_s)
            except ToolError as exc:
                self._last_error = exc.message
                raise

    def _request(self, payload: bytes, ecu: Ecu | None, timeout_s: float) -> list[EcuReply]:
        if self._detected is None:
            self._detect()
        extended = bool(self._extended)
        if ecu is not None and ecu.extended != extended:
            raise ToolError(
                "UNKNOWN_ECU",
                f"{ecu.address} is a {'29' if ecu.extended else '11'}-bit address; the vehicle "
                f"uses {'29' if extended else '11'}-bit ids.",
            )
        self._set_header(ecu, extended)
        command = payload.hex().upper()
        if ecu is not None:
            command += "1"  # one ECU answers: the chip returns as soon as it has (v1.3+)
        budget = max(timeout_s, self.p2_star_s)
        clock = PendingClock(max(timeout_s, 1.0), self.p2_star_s, budget)
        reader = ReplyReader(extended, request=payload)
        self._cut = None
        # from here on the request is out: an error is no proof that it did not act
        prompted = self._ask(command, reader, clock)
        reply = reader.result()
        if ecu is not None and prompted and self._left_waiting(reply, ecu.response_id, clock):
            self._listen(ecu, reader, clock)
            reply = reader.result()
        self._garbage += reply.garbage
        return self._replies(reply, extended, ecu, clock, command)

    @staticmethod
    def _left_waiting(reply: Reply, ident: int, clock: PendingClock) -> bool:
        """Whether the chip returned to its prompt on a pending, with time left to listen."""
        final = ident in reply.messages or ident in reply.incomplete
        return ident in reply.pending and not final and clock.left() > 0

    def _replies(
        self, reply: Reply, extended: bool, asked: Ecu | None, clock: PendingClock, command: str
    ) -> list[EcuReply]:
        """The ECUs' answers; to a physical request only the asked ECU's (the chip's
        receive filter may let another ECU's frames through). The request went out: an
        error the chip prints now is UnansweredRequest (it may have acted), except a lone
        `?`, the chip refusing the command itself."""
        if reply.errors and not reply.messages and not reply.pending:
            code, line = reply.errors[0]
            refused = line == "?" and len(reply.errors) == 1 and not (reply.order or reply.garbage)
            if refused:
                self._raise(code, line)  # nothing went to the vehicle
            template = _MESSAGES.get(code, "The ELM327 reported {line}.")
            raise UnansweredRequest(
                code,
                f"{template.format(line=line)} ({command} had been sent: it may have reached "
                "the vehicle.)",
                retryable=code in _RETRYABLE,
            )
        if reply.garbage and not (
            reply.messages or reply.incomplete or reply.pending or reply.foreign
        ):
            raise UnansweredRequest(
                "ADAPTER_ERROR",
                f"The ELM327 answered {command} with {reply.garbage} line(s) that are not "
                "CAN frames.",
                retryable=True,
            )
        out = []
        for ident in reply.order:
            if asked is not None and ident != asked.response_id:
                continue
            ecu = self._known.get(ident) or Ecu.from_response(ident, extended)
            if ident in reply.messages:
                self._known.setdefault(ident, ecu)
                out.append(EcuReply(ecu, reply.messages[ident]))
            elif ident in reply.incomplete:
                out.append(EcuReply(ecu, b"", error=reply.incomplete[ident]))
            elif ident in reply.pending:
                if self._cut:
                    why = f"{clock.unanswered(ident)}: the ELM327 {self._cut}"
                elif clock.left() == 0:
                    why = clock.unanswered(ident)
                else:
                    why = _STOPPED_EARLY
                out.append(EcuReply(ecu, b"", error=why))
            elif ident in reply.foreign:
                out.append(
                    EcuReply(
                        ecu,
                        b"",
                        error=another_service_note(reply.foreign[ident], int(command[:2], 16)),
                    )
                )
        return out

    # -- state ----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        protocol = self._detected or self.protocol
        return {
            "transport": "ELM327",
            "port": self.link.description,
            "connected": not self._closed,
            "adapter": self._identity,
            "voltage": self._voltage,
            "protocol": protocol,
            "ids": None if self._extended is None else ("29-bit" if self._extended else "11-bit"),
            "ecus": [e.describe() for e in self.ecus()],
            "requests": self._requests,
            "unreadable_lines": self._garbage,
            "last_error": self._last_error,
        }

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.link.close()
