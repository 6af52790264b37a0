"""OBD-II and UDS over ISO 15765-4 on a CAN bus: can-isotp on hwbridge's CAN adapter.

The adapter does not open a second reader on the bus: it registers one listener with the
`CanAdapter` (whose single notifier also feeds a CanDriver's monitor on the same connection),
and that listener only queues OBD responses (0x7E8-0x7EF, 18DAF1xx) while a request is in
flight. Each responding ECU gets a can-isotp `TransportLayer` run in its v1 style: the
requesting thread calls `process()` itself, so flow control, consecutive frames and
reassembly are can-isotp's while no thread runs between requests.

A functional request (0x7DF, or 0x18DB33F1 with 29-bit ids) is a single frame; answers are
collected until every ECU known from the connection answered, or `p2_s` passed with nothing
in progress. A physical request goes through the ECU's own ISO-TP link (so it may span
several frames) and waits up to `timeout_s` for that ECU. A "response pending" (7F xx 78)
extends the wait to `p2_star_s`, as ISO 14229 allows, within the request's budget
(`pending.PendingClock`); an ECU that pended and never finished is an incomplete reply that
says so.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import isotp

import can
from hwbridge.can.transport.adapter import CanAdapter, build_message
from hwbridge.core.models import ToolError
from hwbridge.obd.transport.base import (
    FUNCTIONAL_11,
    FUNCTIONAL_29,
    Addressing,
    Ecu,
    EcuReply,
    ObdAdapter,
    is_response_id,
)
from hwbridge.obd.transport.pending import (
    PendingClock,
    another_service_note,
    for_another_request,
    is_pending,
)

__all__ = ["IsoTpObdAdapter"]

log = logging.getLogger(__name__)

_PROBE = b"\x01\x00"
_INBOX_LIMIT = 4096  # frames queued during one request; a flood beyond it is dropped
_TX_SLICE_S = 0.001  # how often the link is processed while it sends consecutive frames
_RX_SLICE_S = 0.02  # ... and while it receives (so can-isotp sees its timeouts)

# can-isotp logs every error it meets as a warning, one line per frame: a flood of stray
# frames would flood the application's log. The errors reach `_Link` anyway; its log says
# only what is worse than that.
_ISOTP_LOGGER = "hwbridge.obd.isotp"
logging.getLogger(_ISOTP_LOGGER).setLevel(logging.ERROR)
# Stray frames while nothing is received or sent (another tester's traffic, a sender's
# leftovers): can-isotp ignores them, and so does the reply.
_NOISE = (isotp.errors.UnexpectedConsecutiveFrameError, isotp.errors.UnexpectedFlowControlError)
# The ECU's flow control stopped our multi-frame request: the rest of it never went out.
_TX_STOPPED = (
    isotp.errors.OverflowError,
    isotp.errors.FlowControlTimeoutError,
    isotp.errors.UnsupportedWaitFrameError,
    isotp.errors.MaximumWaitFrameReachedError,
)


def _frames(size: int) -> int:
    """How many CAN frames a request of `size` bytes takes (classic CAN, 8-byte frames)."""
    return 1 if size <= 7 else 1 + -(-(size - 6) // 7)


def _cut(link: _Link) -> bool:
    """Whether only part of a multi-frame request went out: the ECU's flow control stopped
    it, or it was still being sent when the time ran out."""
    return link.tx_stopped or link.layer.transmitting()


class _Link:
    """One ECU's ISO-TP link: can-isotp's state machine, fed by the request thread."""

    def __init__(self, ecu: Ecu, send: Callable[[can.Message], None], params: dict[str, Any]):
        self.ecu = ecu
        self.frames: collections.deque[isotp.CanMessage] = collections.deque()
        self.errors: list[str] = []
        self.sent_frames = 0  # frames of the request sent so far
        self.tx_stopped = False  # the ECU's flow control stopped the request part way
        mode = (
            isotp.AddressingMode.Normal_29bits
            if ecu.extended
            else isotp.AddressingMode.Normal_11bits
        )

        def tx(msg: isotp.CanMessage) -> None:
            self.sent_frames += 1
            send(build_message(msg.arbitration_id, bytes(msg.data), extended=ecu.extended))

        self.layer = isotp.TransportLayer(
            rxfn=self._rx,
            txfn=tx,
            address=isotp.Address(mode, txid=ecu.request_id, rxid=ecu.response_id),
            error_handler=self._error,
            params={**params, "logger_name": _ISOTP_LOGGER},
        )

    def _rx(self, timeout: float) -> isotp.CanMessage | None:
        return self.frames.popleft() if self.frames else None

    def _error(self, error: Exception) -> None:
        if isinstance(error, _NOISE):
            return
        if isinstance(error, _TX_STOPPED):
            self.tx_stopped = True
        if len(self.errors) < 16:
            self.errors.append(str(error))

    def process(self) -> list[bytes]:
        self.layer.process()
        out = []
        while self.layer.available():
            data = self.layer.recv()
            if data is not None:
                out.append(bytes(data))
        return out

    @property
    def busy(self) -> bool:
        """In the middle of a multi-frame message, either way."""
        layer = self.layer
        return bool(layer.rx_state != layer.RxState.IDLE or layer.transmitting())

    def received(self) -> str:
        """How much of a multi-frame answer came, while one is being received."""
        layer = self.layer
        if layer.rx_state == layer.RxState.IDLE or not layer.rx_frame_length:
            return "part"
        return f"{len(layer.rx_buffer)} of {layer.rx_frame_length} bytes"

    def reset(self) -> None:
        self.frames.clear()
        self.errors.clear()
        self.sent_frames = 0
        self.tx_stopped = False
        self.layer.reset()


class IsoTpObdAdapter(ObdAdapter):
    """Diagnostic requests over ISO 15765-4 on `can` (a CanAdapter, shared or owned).

    `addressing` "auto" tries 11-bit ids first, then 29-bit, on the first request (as an
    ELM327's protocol search does). `own_adapter=True` closes `can` with this adapter.
    """

    def __init__(
        self,
        can_adapter: CanAdapter,
        *,
        addressing: Addressing = "auto",
        timeout_s: float = 1.0,
        p2_s: float = 0.1,
        p2_star_s: float = 5.0,
        cf_timeout_ms: int = 1000,
        padding: int = 0x00,
        own_adapter: bool = False,
    ) -> None:
        if addressing not in ("auto", "11bit", "29bit"):
            raise ValueError(f"addressing must be auto, 11bit or 29bit, not {addressing!r}")
        self.can = can_adapter
        self._addressing = addressing
        self._extended: bool | None = {"11bit": False, "29bit": True}.get(addressing)
        self.timeout_s = timeout_s
        self.p2_s = p2_s
        self.p2_star_s = p2_star_s
        self._own = own_adapter
        self._params: dict[str, Any] = {
            "tx_padding": padding,
            "tx_data_min_length": 8,  # ISO 15765-4: every frame carries 8 bytes
            "blocksize": 0,
            "stmin": 0,
            "rx_flowcontrol_timeout": 1000,
            "rx_consecutive_frame_timeout": int(cf_timeout_ms),
        }
        self._lock = threading.Lock()  # one request at a time
        self._wake = threading.Event()
        self._inbox: collections.deque[can.Message] = collections.deque(maxlen=_INBOX_LIMIT)
        self._active = False
        self._links: dict[tuple[int, bool], _Link] = {}
        self._known: dict[tuple[int, bool], Ecu] = {}
        self._requests = 0
        self._last_error: str | None = None
        self._closed = False
        can_adapter.add_listener(self._on_frame)

    # -- the shared listener (the CAN adapter's receive thread) ---------------------------

    def _on_frame(self, msg: can.Message) -> None:
        if not self._active or msg.is_error_frame or msg.is_remote_frame:
            return
        if is_response_id(msg.arbitration_id, bool(msg.is_extended_id)):
            self._inbox.append(msg)
            self._wake.set()

    # -- requests -------------------------------------------------------------------------

    @property
    def extended(self) -> bool | None:
        return self._extended

    def ecus(self) -> list[Ecu]:
        return sorted(self._known.values(), key=lambda e: (e.extended, e.response_id))

    def _link(self, ecu: Ecu) -> _Link:
        key = (ecu.response_id, ecu.extended)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = _Link(ecu, self._send, self._params)
        return link

    def _send(self, msg: can.Message) -> None:
        self.can.send(msg)

    def _connect(self) -> None:
        """Find the addressing the vehicle answers (auto), once; caller holds the lock."""
        if self._extended is not None and self._known:
            return
        choices = [self._extended] if self._extended is not None else [False, True]
        for extended in choices:
            replies = self._exchange(_PROBE, None, extended, self.timeout_s)
            if replies:
                self._extended = extended
                return

    suppressed_wait_s = 0.1  # a negative answer comes within P2 (50 ms)

    def request(
        self, payload: bytes, *, ecu: Ecu | None = None, timeout_s: float | None = None
    ) -> list[EcuReply]:
        if not 1 <= len(payload) <= 4095:
            raise ToolError("INVALID_VALUE", "A diagnostic request carries 1 to 4095 bytes.")
        if ecu is None and len(payload) > 7:
            raise ToolError("INVALID_VALUE", "A functional request is one frame: at most 7 bytes.")
        with self._lock:
            if self._closed:
                raise ToolError("BUS_DOWN", "The diagnostic adapter is closed.")
            if ecu is None:
                self._connect()
                if self._extended is None:
                    return []  # nothing answers in either addressing: no vehicle (yet)
            extended = ecu.extended if ecu is not None else bool(self._extended)
            return self._exchange(payload, ecu, extended, timeout_s or self.timeout_s)

    def _exchange(
        self, payload: bytes, ecu: Ecu | None, extended: bool, timeout_s: float
    ) -> list[EcuReply]:
        self._requests += 1
        self._inbox.clear()
        self._wake.clear()
        for link in self._links.values():
            link.reset()
        self._active = True
        try:
            if ecu is None:
                ident = FUNCTIONAL_29 if extended else FUNCTIONAL_11
                frame = (bytes([len(payload)]) + payload).ljust(
                    8, bytes([self._params["tx_padding"]])
                )
                self.can.send(build_message(ident, frame, extended=extended))
            else:
                self._link(ecu).layer.send(payload)
            return self._collect(payload, ecu, extended, timeout_s)
        except ToolError as exc:
            self._last_error = exc.message
            raise
        finally:
            self._active = False

    def _collect(
        self, payload: bytes, ecu: Ecu | None, extended: bool, timeout_s: float
    ) -> list[EcuReply]:
        first_s = timeout_s if ecu is not None else self.p2_s
        clock = PendingClock(first_s, self.p2_star_s, max(timeout_s, self.p2_star_s))
        service = payload[0]
        replies: dict[tuple[int, bool], EcuReply] = {}
        foreign: dict[tuple[int, bool], bytes] = {}  # answers to other requests
        involved: dict[tuple[int, bool], _Link] = {}
        if ecu is not None:
            involved[(ecu.response_id, ecu.extended)] = self._link(ecu)
        wanted = {k for k, e in self._known.items() if e.extended == extended}
        out_of_time = False
        while True:
            self._deliver(ecu, extended, involved)
            for key, link in involved.items():
                for data in link.process():
                    if is_pending(data, service):
                        clock.pending(key[0])
                        continue
                    if for_another_request(data, payload):
                        foreign[key] = data  # another request's answer (the last)
                        continue
                    if key not in replies:
                        replies[key] = EcuReply(link.ecu, data)
                        self._known.setdefault(key, link.ecu)
            now = time.monotonic()
            busy = any(link.busy for link in involved.values())
            if ecu is not None and replies:
                break
            if ecu is None and wanted and wanted <= set(replies) and not busy:
                break
            if now >= clock.deadline and not busy:
                break
            if now >= clock.end:
                out_of_time = True  # a link still busy at the end of the budget
                break
            sending = any(link.layer.transmitting() for link in involved.values())
            if sending:
                wait = _TX_SLICE_S
            elif busy:
                wait = _RX_SLICE_S  # frames wake us; this only runs can-isotp's timers
            else:
                wait = clock.left(now)
            self._wake.wait(min(wait, max(clock.end - now, 0.0)))
            self._wake.clear()
        self._missing(
            payload,
            ecu,
            clock,
            out_of_time=out_of_time,
            involved=involved,
            replies=replies,
            foreign=foreign,
        )
        return list(replies.values())

    def _deliver(
        self, ecu: Ecu | None, extended: bool, involved: dict[tuple[int, bool], _Link]
    ) -> None:
        """The frames queued by the listener, each to its ECU's link."""
        while self._inbox:
            msg = self._inbox.popleft()
            key = (int(msg.arbitration_id), bool(msg.is_extended_id))
            if key[1] != extended or (ecu is not None and key != (ecu.response_id, extended)):
                continue
            link = involved.get(key)
            if link is None:
                link = involved[key] = self._link(Ecu.from_response(*key))
            link.frames.append(
                isotp.CanMessage(
                    arbitration_id=msg.arbitration_id,
                    data=bytes(msg.data),
                    extended_id=bool(msg.is_extended_id),
                )
            )

    @staticmethod
    def _missing(
        payload: bytes,
        ecu: Ecu | None,
        clock: PendingClock,
        *,
        out_of_time: bool,
        involved: dict[tuple[int, bool], _Link],
        replies: dict[tuple[int, bool], EcuReply],
        foreign: dict[tuple[int, bool], bytes],
    ) -> None:
        """Why each ECU involved that gave no answer has none, into `replies`."""
        for key, link in involved.items():
            if key in replies:
                continue
            asked = ecu is not None and key == (ecu.response_id, ecu.extended)
            if asked and _cut(link):
                why = link.errors[-1] if link.errors else "the time ran out while sending it"
                problem = (
                    f"only {link.sent_frames} of the request's {_frames(len(payload))} "
                    f"frames went out: {why}"
                )
                replies[key] = EcuReply(link.ecu, b"", error=problem, request_cut=True)
                link.reset()
            elif link.busy and out_of_time:
                problem = (
                    f"the answer stopped part way: {link.received()} had come when the "
                    f"request's {clock.budget_s:g} s ran out"
                )
                replies[key] = EcuReply(link.ecu, b"", error=problem)
                link.reset()
            elif link.errors or link.busy:
                problem = link.errors[-1] if link.errors else "the answer stopped part way"
                replies[key] = EcuReply(link.ecu, b"", error=problem)
                link.reset()
            elif key[0] in clock.pendings:
                replies[key] = EcuReply(link.ecu, b"", error=clock.unanswered(key[0]))
            elif key in foreign:
                note = another_service_note(foreign[key], payload[0])
                replies[key] = EcuReply(link.ecu, b"", error=note)

    # -- state ----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        status = self.can.status()
        return {
            "transport": "ISO 15765-4 (can-isotp)",
            "bus": status.bus,
            "connected": status.connected and not self._closed,
            "addressing": self._addressing,
            "ids": None if self._extended is None else ("29-bit" if self._extended else "11-bit"),
            "ecus": [e.describe() for e in self.ecus()],
            "requests": self._requests,
            "last_error": self._last_error or status.last_error,
        }

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.can.remove_listener(self._on_frame)
        if self._own:
            self.can.close()
