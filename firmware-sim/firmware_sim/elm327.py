"""An ELM327 OBD-II interface on a pty, bridged to a python-can `virtual` channel.

So the serial OBD path (pyserial, a terminal program, python-OBD style clients) is tested
with no adapter: the client opens the pty and types what it would type to a real ELM327.

Behaviour follows the ELM327 datasheet: commands end in CR; case, spaces and control
characters are ignored; a lone CR repeats the last command; every answer ends with a blank
line and the `>` prompt; lines end in CR (CR LF after ATL1); echo is on after ATZ. An OBD
request typed as hex (`010C`, `01 0D`, `0902`, an optional last digit = how many responses
to wait for) goes out as an ISO-TP single frame to 0x7DF (or the ATSH header), and every
response from 0x7E8-0x7EF (18DAF1xx on 29-bit protocols; ATCRA narrows it) is printed as it
arrives, the ELM way: `41 0C 1A F8`, a multi-frame answer as `014` / `0: ..` / `1: ..`,
raw frames with ATH1 or ATCAF0. First frames are answered with flow control on the
response ID - 8. `NO DATA` when nothing answers within ATST, `?` for what is not a command,
`STOPPED` when the client types while a request is pending. In automatic protocol mode
(ATSP0, the default) the first request prints `SEARCHING...` while 0100 probes CAN 11/500
then 29/500. Only the CAN protocols (6-9) reach the bus; 1-5 and A-C fail as a real ELM
with no such bus would.

An ECU's "response pending" (`7F xx 78`) is printed like any answer. Before v2.1 (the
default `version`, 1.5, what most adapters report) the chip does not look into it: it counts
as a response, and the chip returns to its prompt after ATST of silence (at once when it was
the one response asked for). From v2.1 on (`version` 2.1) the chip does what the datasheet
("Response Pending Messages", PP 2A b2, on by default) says: its timeout becomes 5 s, again
after every pending, so the final answer is printed before the prompt. Whether a pending
counts toward the response count digit the datasheet does not say; here it does not (a
client must cope with both: hwbridge listens on with ATMA when the chip returned early).

Run on its own with `python -m firmware_sim.elm327 --channel vcan0`.
"""

from __future__ import annotations

import argparse
import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import can
from firmware_sim.elm327_can import (
    FLOW_CONTROL,
    Addressing,
    Display,
    FrameKind,
    ResponseTracker,
    Tracked,
    frame_lines,
)
from firmware_sim.pty_device import PtyDevice, serve_forever

__all__ = ["IDENTITY", "PROTOCOLS", "Elm327Device", "main"]

log = logging.getLogger(__name__)

IDENTITY = "ELM327 v1.5"
DESCRIPTION = "OBDII to RS232 Interpreter"
PROTOCOLS = {
    "1": "SAE J1850 PWM",
    "2": "SAE J1850 VPW",
    "3": "ISO 9141-2",
    "4": "ISO 14230-4 (KWP 5BAUD)",
    "5": "ISO 14230-4 (KWP FAST)",
    "6": "ISO 15765-4 (CAN 11/500)",
    "7": "ISO 15765-4 (CAN 29/500)",
    "8": "ISO 15765-4 (CAN 11/250)",
    "9": "ISO 15765-4 (CAN 29/250)",
    "A": "SAE J1939 (CAN 29/250)",
    "B": "USER1 (CAN 11/125)",
    "C": "USER2 (CAN 11/50)",
}
_CAN_EXTENDED = {"6": False, "7": True, "8": False, "9": True}  # protocol -> 29-bit IDs
_CAN_BITRATE = {"6": 500_000, "7": 500_000, "8": 250_000, "9": 250_000}
_NO_BUS = {"3": "BUS INIT: ...ERROR", "4": "BUS INIT: ...ERROR", "5": "BUS INIT: ...ERROR"}
_SEARCH_ORDER = ("6", "8", "7", "9")
_SEARCH_REQUEST = bytes([0x01, 0x00])

_PENDING_WAIT_S = 5.0  # v2.1+: the timeout after a "response pending" (SAE J1979)
_VERSION = re.compile(r"(\d)\.(\d)[a-z]?")
_MAX_LINE = 128
_SLICE_S = 0.01  # while waiting for responses, the port is checked this often
_DEFAULT_ST = 0x32  # ATST units of 4 ms: 200 ms
_ADAPTIVE = {1: (4.0, 0.05), 2: (2.0, 0.025)}  # ATAT n: (x first-response time, floor s)
_CR, _LF = 0x0D, 0x0A

_FLAGS = {
    "E": "echo",
    "L": "linefeeds",
    "S": "spaces",
    "H": "headers",
    "D": "dlc",
    "CAF": "caf",
    "CFC": "cfc",
    "R": "responses",
    "M": None,  # memory: nothing is stored beyond the object's life anyway
}
_FLAG = re.compile(r"(E|L|S|H|D|CAF|CFC|R|M)([01])")
_HEXRUN = re.compile(r"[0-9A-F]+")
_NO_OPS = frozenset({"AL", "NL", "PC", "BI", "FE", "SS", "KW0", "KW1", "V0", "V1", "CSM0", "CSM1"})
_MONITOR_SLICE_S = 0.2

_Show = Callable[[can.Message, Tracked | None], None]


@dataclass
class _Settings:
    """What ATZ / ATD restore; only the pty thread touches it."""

    echo: bool = True
    linefeeds: bool = False
    spaces: bool = True
    headers: bool = False
    dlc: bool = False
    caf: bool = True
    cfc: bool = True
    responses: bool = True
    adaptive: int = 1
    timeout: int = _DEFAULT_ST
    header: str | None = None
    receive: str | None = None
    priority: int = 0x18  # ATCP: the first byte of a 29-bit header set with 6 digits


class _Stopped(Exception):
    """The client typed while a request was pending (or the device is stopping)."""


class Elm327Device(PtyDevice):
    """A simulated ELM327 (v1.5 unless `version` says otherwise); `start()` returns the pty a
    client opens.

    `no_data_timeout_ms` is the ATST value the chip starts with and ATZ/ATD restore
    (programmable parameter 03 of a real chip, 200 ms as shipped): how long it waits for an
    ECU before `NO DATA`. A test that compares answers, not timing, lengthens it so that an
    ECU thread starved of CPU by a busy machine is still heard. `adaptive_floor_ms` is the
    least adaptive timing (ATAT1, ATAT2) waits for another ECU after a response (50 and 25 ms
    as the datasheet's chip does): on a busy machine a second ECU's answer can come later than
    that, and a test that compares answers raises it.
    """

    kind = "elm327"

    def __init__(
        self,
        channel: str,
        *,
        protocol: str = "0",
        voltage: float = 12.6,
        bitrate: int = 500_000,
        version: str = "1.5",
        no_data_timeout_ms: int = _DEFAULT_ST * 4,
        adaptive_floor_ms: int | None = None,
    ) -> None:
        super().__init__(channel)
        if not 4 <= no_data_timeout_ms <= 1020 or no_data_timeout_ms % 4:
            raise ValueError(
                "no_data_timeout_ms must be a multiple of 4 from 4 to 1020,"
                f" not {no_data_timeout_ms}"
            )
        # programmable parameter 03 of a real chip: the ATST value that ATZ and ATD restore
        self._default_st = no_data_timeout_ms // 4
        if adaptive_floor_ms is not None and not 0 < adaptive_floor_ms <= no_data_timeout_ms:
            raise ValueError(
                f"adaptive_floor_ms must be above 0 and at most no_data_timeout_ms, not"
                f" {adaptive_floor_ms}"
            )
        self._adaptive_floor_s = None if adaptive_floor_ms is None else adaptive_floor_ms / 1000
        self.bitrate = bitrate  # the vehicle bus's: a CAN protocol at another rate hears nothing
        if _parse_protocol(protocol) is None:
            raise ValueError(f"protocol must be 0-9, A-C or A1-AC, not {protocol!r}")
        number = _VERSION.fullmatch(version)
        if number is None:
            raise ValueError(f"version must look like 1.5, 2.1 or 1.4b, not {version!r}")
        self.identity = f"ELM327 v{version}"
        self.waits_on_pending = (int(number[1]), int(number[2])) >= (2, 1)
        self.voltage = voltage
        self._stored_protocol = protocol.upper()
        self._protocol = self._stored_protocol
        self._detected: str | None = None
        self._settings = _Settings(timeout=self._default_st)
        self._line = bytearray()
        self._overflow = False
        self._pending = bytearray()
        self._out = bytearray()
        self._last = ""
        self._listening = threading.Event()
        self._listen_after: can.Message | None = None  # the mark before a request
        self._frames: queue.SimpleQueue[can.Message] = queue.SimpleQueue()

    def _reset(self) -> None:
        self._power_on()
        self._line.clear()
        self._pending.clear()
        self._out.clear()
        self._last = ""
        self._overflow = False

    def _power_on(self) -> None:
        self._settings = _Settings(timeout=self._default_st)
        self._protocol = self._stored_protocol
        self._detected = None

    @property
    def protocol(self) -> str:
        """The protocol setting as ATDPN shows it (`A6` once automatic search found 6)."""
        return self._describe_protocol(number=True)

    # -- input --------------------------------------------------------------------------

    def _on_input(self, data: bytes) -> None:
        self._pending += data
        while self._pending:
            byte = self._pending[0]
            del self._pending[0]
            if byte == _CR:
                self._echo(b"\r\n" if self._settings.linefeeds else b"\r")
                line, overflow = self._line.decode("ascii", errors="replace"), self._overflow
                self._line.clear()
                self._overflow = False
                self._run_line(line, overflow)
            elif byte < 0x20 or byte == 0x7F:
                continue  # the ELM327 ignores control characters
            else:
                self._echo(bytes([byte]))
                if len(self._line) < _MAX_LINE:
                    self._line.append(byte)
                else:
                    self._overflow = True
        self._flush()

    def _echo(self, data: bytes) -> None:
        if self._settings.echo:
            self._out += data

    def _flush(self) -> None:
        if self._out:
            self._write(bytes(self._out))
            self._out.clear()

    def _emit_line(self, text: str) -> None:
        self._out += text.encode("ascii") + self._eol()
        self._flush()

    def _eol(self) -> bytes:
        return b"\r\n" if self._settings.linefeeds else b"\r"

    def _run_line(self, line: str, overflow: bool) -> None:
        command = "".join(line.split()).upper()
        if not command and not overflow:
            command = self._last  # a lone CR repeats the last command
        if not command:
            self._prompt()
            return
        if not overflow:
            self._last = command
        try:
            if overflow:
                self._emit_line("?")
            elif command.startswith("AT"):
                for text in self._at(command[2:]):
                    self._emit_line(text)
            else:
                self._request(command)
        except _Stopped:
            self._pending.clear()  # what interrupted is consumed, as on the real chip
            self._line.clear()
            self._emit_line("STOPPED")
        except Exception:  # a simulator bug: log it, but give the client its prompt back
            log.exception("elm327: command %r failed", command)
            self._emit_line("?")
        self._prompt()

    def _prompt(self) -> None:
        self._out += self._eol() + b">"
        self._flush()

    # -- AT commands --------------------------------------------------------------------

    def _at(self, body: str) -> list[str]:
        """Run `AT<body>`; the lines to print."""
        s = self._settings
        if body in ("Z", "WS"):
            self._power_on()
            return ["", "", self.identity] if body == "Z" else ["", self.identity]
        if body == "D":
            self._power_on()
            return ["OK"]
        if body == "I":
            return [self.identity]
        if body == "@1":
            return [DESCRIPTION]
        if body == "RV":
            return [f"{self.voltage:.1f}V"]
        if body in ("DP", "DPN"):
            return [self._describe_protocol(number=body == "DPN")]
        if match := _FLAG.fullmatch(body):
            name = _FLAGS[match[1]]
            if name is not None:
                setattr(s, name, match[2] == "1")
            return ["OK"]
        if body in _NO_OPS:
            return ["OK"]
        if body == "MA":
            self._monitor()
            return []
        if body[:2] == "CP" and len(body) == 4 and _HEXRUN.fullmatch(body[2:]):
            s.priority = int(body[2:], 16) & 0x1F
            return ["OK"]
        if len(body) == 3 and body[:2] == "AT" and body[2] in "012":
            s.adaptive = int(body[2])
            return ["OK"]
        if body[:2] == "ST" and len(body) == 4 and _HEXRUN.fullmatch(body[2:]):
            s.timeout = int(body[2:], 16) or self._default_st
            return ["OK"]
        if body[:2] in ("SP", "TP") and (setting := _parse_protocol(body[2:])) is not None:
            self._protocol, self._detected = setting, None
            if body[:2] == "SP":
                self._stored_protocol = setting  # SP is kept across ATZ, TP is not
            return ["OK"]
        if body[:2] == "SH" and len(body) - 2 in (3, 6, 8) and _HEXRUN.fullmatch(body[2:]):
            s.header = body[2:]
            return ["OK"]
        if body[:3] == "CRA" and len(body) - 3 in (0, 3, 8) and _HEXRUN.fullmatch(body[3:] or "0"):
            s.receive = body[3:] or None
            return ["OK"]
        return ["?"]

    def _describe_protocol(self, *, number: bool) -> str:
        setting = self._protocol
        if setting != "0" and len(setting) == 1:
            return setting if number else PROTOCOLS[setting]
        if number:
            return "A" + (self._detected or setting[-1])
        return "AUTO" + (f", {PROTOCOLS[self._detected]}" if self._detected else "")

    # -- OBD requests -------------------------------------------------------------------

    def _request(self, command: str) -> None:
        parsed = _parse_request(command, self._settings.caf)
        if parsed is None:
            self._emit_line("?")
            return
        payload, wanted = parsed
        protocol = self._protocol
        if protocol == "0" or len(protocol) == 2:
            if self._detected is None:
                self._emit_line("SEARCHING...")
                self._detected = self._search(protocol[1] if len(protocol) == 2 else None)
                if self._detected is None:
                    self._emit_line("UNABLE TO CONNECT")
                    return
            protocol = self._detected
        if protocol not in _CAN_EXTENDED:
            self._emit_line(_NO_BUS.get(protocol, "NO DATA"))
            return
        if _CAN_BITRATE[protocol] != self.bitrate:
            self._emit_line("CAN ERROR")  # at the wrong bit rate the chip sees only errors
            return
        s = self._settings
        addressing = Addressing.for_protocol(
            _CAN_EXTENDED[protocol], s.header, s.receive, s.priority
        )
        frame = (bytes([len(payload)]) + payload).ljust(8, b"\x00") if s.caf else payload
        display = Display(s.headers, s.spaces, s.caf, s.dlc)
        answered = self._exchange(addressing, frame, wanted, self._print_frame(display))
        if answered is None:
            self._emit_line("CAN ERROR")
        elif answered == 0 and s.responses:
            self._emit_line("NO DATA")

    def _monitor(self) -> None:
        """ATMA: print every frame on the bus until the client types (then STOPPED)."""
        s = self._settings
        setting = self._protocol
        protocol = self._detected or (setting[-1] if setting != "0" else _SEARCH_ORDER[0])
        if protocol not in _CAN_EXTENDED:
            self._emit_line(_NO_BUS.get(protocol, "NO DATA"))
            return
        if _CAN_BITRATE[protocol] != self.bitrate:
            self._emit_line("CAN ERROR")
            return
        receive = int(s.receive, 16) if s.receive else None
        display = Display(s.headers, s.spaces, False, s.dlc)
        overflows = self.overflows
        self._listen_from_now()
        try:
            while True:
                msg = self._next_frame(time.monotonic() + _MONITOR_SLICE_S)
                if msg is None or msg.is_error_frame or msg.is_remote_frame:
                    continue
                if receive is not None and msg.arbitration_id != receive:
                    continue
                for text in frame_lines(msg, None, display):
                    self._emit_line(text)
                if self.overflows != overflows:  # the client does not keep up
                    self._emit_line("BUFFER FULL")
                    return
        finally:
            self._listening.clear()

    def _print_frame(self, display: Display) -> _Show:
        def show(msg: can.Message, tracked: Tracked | None) -> None:
            for text in frame_lines(msg, tracked, display):
                self._emit_line(text)

        return show

    def _search(self, preferred: str | None) -> str | None:
        """Automatic protocol search: the first CAN protocol on which 0100 is answered."""
        order = [p for p in (preferred, *_SEARCH_ORDER) if p in _CAN_EXTENDED]
        frame = (bytes([len(_SEARCH_REQUEST)]) + _SEARCH_REQUEST).ljust(8, b"\x00")
        for protocol in dict.fromkeys(order):
            if _CAN_BITRATE[protocol] != self.bitrate:
                continue  # nothing to hear at this rate
            addressing = Addressing.for_protocol(_CAN_EXTENDED[protocol])
            # Wait for every ECU (no response count), or late answers to this probe would
            # be taken for answers to the request that follows.
            if self._exchange(addressing, frame, None, None, force=True):
                return protocol
        return None

    def _exchange(
        self,
        addressing: Addressing,
        frame: bytes,
        wanted: int | None,
        show: _Show | None,
        *,
        force: bool = False,
    ) -> int | None:
        """Send one request, show what comes back; frames received, None if unsent."""
        s = self._settings
        tracker = ResponseTracker()
        self._listen_from_now()
        try:
            request = can.Message(
                arbitration_id=addressing.request_id,
                is_extended_id=addressing.extended,
                data=frame,
            )
            if not self._send(request):
                return None
            if not s.responses and not force:
                return 0
            sent = time.monotonic()
            timeout = s.timeout * 0.004
            deadline = sent + timeout
            received = complete = 0
            first_response: float | None = None
            while (msg := self._next_frame(deadline)) is not None:
                if not addressing.accepts(msg):
                    continue
                tracked = tracker.feed(msg)
                if tracked is None and s.caf:
                    continue  # not ISO-TP, or out of sequence: formatting hides it
                if tracked is not None and tracked.kind is FrameKind.FIRST and s.cfc:
                    fc_id = addressing.flow_control_id(msg.arbitration_id)
                    self._send(
                        can.Message(
                            arbitration_id=fc_id,
                            is_extended_id=addressing.extended,
                            data=FLOW_CONTROL,
                        )
                    )
                if show is not None:
                    show(msg, tracked)
                received += 1
                now = time.monotonic()
                if self.waits_on_pending and _pending(msg, tracked):
                    deadline = now + _PENDING_WAIT_S  # not counted: the answer is to come
                    continue
                if tracked is not None and tracked.complete:
                    complete += 1
                    first_response = first_response or max(now - sent, 1e-4)
                    if wanted is not None and complete >= wanted:
                        break
                deadline = now + self._idle_window(timeout, first_response, tracker.busy)
            return received
        finally:
            self._listening.clear()

    def _idle_window(self, timeout: float, first_response: float | None, busy: bool) -> float:
        """How long to wait for another frame (ATST, shortened by adaptive timing)."""
        if busy or first_response is None or self._settings.adaptive not in _ADAPTIVE:
            return timeout
        factor, floor = _ADAPTIVE[self._settings.adaptive]
        if self._adaptive_floor_s is not None:
            floor = self._adaptive_floor_s
        return min(timeout, max(floor, factor * first_response))

    def _next_frame(self, deadline: float) -> can.Message | None:
        """The next frame before `deadline`, or None; raises _Stopped if the client typed."""
        while True:
            if any(b not in (_LF, 0) for b in self._pending):
                raise _Stopped
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                return self._frames.get(timeout=min(remaining, _SLICE_S))
            except queue.Empty:
                pass
            data = self._read_input(0.0)
            if data is None:
                raise _Stopped  # the device is stopping
            self._pending += data

    def _listen_from_now(self) -> None:
        """Take the frames that reach the bus from now on, and none from before.

        A real chip hears only what follows its request. On a busy machine the bus thread
        may still be handing over frames sent earlier (another tester's traffic, an ECU's
        answers to it): taken as the answer, they made a freeze frame `not found`. So
        listening starts when the bus thread reaches a mark put in the queue now."""
        self._listening.clear()
        while not self._frames.empty():
            self._frames.get_nowait()
        self._listen_after = self._mark()

    def _on_mark(self, mark: can.Message) -> None:
        if mark is self._listen_after:
            self._listening.set()

    def _on_frame(self, msg: can.Message) -> None:
        if self._listening.is_set():
            self._frames.put(msg)


def _pending(msg: can.Message, tracked: Tracked | None) -> bool:
    """Whether a frame is a "response pending" (a single frame `7F xx 78`)."""
    data = bytes(msg.data)
    return (
        tracked is not None
        and tracked.kind is FrameKind.SINGLE
        and tracked.length >= 3
        and data[1] == 0x7F
        and data[3] == 0x78
    )


def _parse_protocol(text: str) -> str | None:
    """`6`, `0` (automatic) or `A6` (automatic, try 6 first); None if not a protocol."""
    text = text.upper()
    if len(text) == 1 and text in "0" + "".join(PROTOCOLS):
        return text
    if len(text) == 2 and text[0] == "A" and text[1] in PROTOCOLS:
        return text
    return None


def _parse_request(command: str, formatting: bool) -> tuple[bytes, int | None] | None:
    """Hex digits as (payload, responses to wait for); None when the ELM would say `?`."""
    if not _HEXRUN.fullmatch(command):
        return None
    wanted: int | None = None
    if len(command) % 2:
        wanted = int(command[-1], 16)
        command = command[:-1]
        if wanted == 0:
            return None
    payload = bytes.fromhex(command)
    if not 1 <= len(payload) <= (7 if formatting else 8):
        return None
    return payload, wanted


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; prints `elm327 on /dev/pts/N` once the pty exists."""
    parser = argparse.ArgumentParser(prog="python -m firmware_sim.elm327")
    parser.add_argument("--channel", default="vcan0", help="python-can virtual channel")
    parser.add_argument("--protocol", default="0", help="stored protocol (ATSP), default auto")
    args = parser.parse_args(argv)
    serve_forever(Elm327Device(args.channel, protocol=args.protocol))


if __name__ == "__main__":
    main()
