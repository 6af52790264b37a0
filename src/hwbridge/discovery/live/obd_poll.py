"""Asking the vehicle for its OBD-II PIDs while discovery records, within the send policy.

`ObdPoller` sends mode 01 requests (current data: read-only services, nothing else is ever
sent) over the same CAN connection discovery listens on, through an `IsoTpObdAdapter` that
shares it. It first asks which PIDs each ECU supports (01 00, 01 20, ... functionally), then,
while `polling()` is open, one PID at a time to the ECU that supports it (physically, so
each request is one frame and its answer one frame): the PIDs named for the recording, or
the ones that move with driving (`FAST`) each round and the others one per round. The
answers are not read here: they are on the bus, and discovery decodes them from what it
recorded (`obd_reference`), on the bus's own clock.

Every request spends one frame of the policy's CAN budget (`SendPolicy.take_frame`, shared
with every other send on the bus; the first, before the vehicle answered, three: the
adapter probes both addressings first) and waits for it when it is spent, so polling slows
down and never exceeds it; every request, the support requests too, also keeps to
`max_rate_hz`. A dry-run policy sends nothing. What an ECU answers is only ever decoded as a
number.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hwbridge.can.transport.adapter import CanAdapter
from hwbridge.core.lifetime import Closing
from hwbridge.core.models import ToolError
from hwbridge.discovery.live.tools import DiscoveryTools
from hwbridge.obd.database.pids import PIDS, Pid, decode_supported
from hwbridge.obd.transport.base import Ecu, ObdAdapter
from hwbridge.obd.transport.isotp_adapter import IsoTpObdAdapter
from hwbridge.policy import SendPolicy

if TYPE_CHECKING:
    from hwbridge.can.driver import CanDriver
    from hwbridge.can.network import Network

__all__ = ["FAST", "ObdPoller", "attach_obd", "reference_pids"]

FAST = ("SPEED", "RPM", "THROTTLE_POS", "ENGINE_LOAD")
"""PIDs that move with driving: asked every round of a survey."""
MAX_RATE_HZ = 10.0
"""Requests per second at most, whatever the policy allows."""
_BITMAPS = (0x00, 0x20, 0x40, 0x60, 0x80, 0xA0, 0xC0)
_RETRY_S = 2.0  # after a failed request, or when no ECU answered the support request
_UNCONNECTED_FRAMES = 3  # an 11-bit probe, a 29-bit probe, the request


def reference_pids() -> list[Pid]:
    """The mode 01 PIDs whose answer is one number (those a field can move with)."""
    numeric = []
    for pid in PIDS.values():
        if pid.pid % 0x20 == 0 or pid.unit is None:
            continue
        numeric.append(pid)
    return numeric


class ObdPoller(Closing):
    """Mode 01 requests over `can` (shared, never closed here) while `polling()` is open."""

    def __init__(
        self,
        can: CanAdapter,
        policy: SendPolicy,
        *,
        max_rate_hz: float = MAX_RATE_HZ,
        adapter: ObdAdapter | None = None,
        timeout_s: float = 0.5,
    ) -> None:
        if not max_rate_hz > 0:
            raise ValueError("max_rate_hz must be positive")
        self.policy = policy
        self.max_rate_hz = float(max_rate_hz)
        self.obd = adapter or IsoTpObdAdapter(can, timeout_s=timeout_s)
        self._lock = threading.Lock()  # one polling window at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._supported: dict[int, Ecu] | None = None  # PID -> the ECU asked for it
        self._next_at = 0.0  # monotonic time of the next request's turn
        self._closed = False
        self.requests = 0
        self.budget_waits = 0
        self.last_error: str | None = None

    # -- what it knows ---------------------------------------------------------------------

    @property
    def rate_hz(self) -> float:
        """Requests per second at most: `max_rate_hz`, or the policy's frame rate if lower."""
        return min(self.max_rate_hz, float(self.policy.max_frames_per_second))

    @property
    def supported(self) -> list[Pid]:
        """The numeric PIDs some ECU said it supports (empty until asked)."""
        known = self._supported or {}
        return [PIDS[p] for p in sorted(known) if p in PIDS]

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requests": self.requests,
            "rate_hz": self.rate_hz,
            "supported": [p.name for p in self.supported],
        }
        if self.budget_waits:
            out["waits_for_the_send_budget"] = self.budget_waits
        if self.last_error:
            out["last_error"] = self.last_error
        return out

    # -- polling ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def polling(self, pids: Sequence[Pid] | None = None) -> Iterator[None]:
        """Poll `pids` (None: FAST every round, the others one per round) until the block
        ends. A dry-run policy sends nothing."""
        with self._lock:
            if self._closed:
                raise ToolError("BUS_DOWN", "the OBD poller is closed")
            if self.policy.dry_run:
                yield
                return
            self._stop.clear()
            thread = threading.Thread(
                target=self._run, args=(pids,), name="hwbridge-obd-poll", daemon=True
            )
            self._thread = thread
            thread.start()
            try:
                yield
            finally:
                self._stop.set()
                thread.join(timeout=5.0)
                self._thread = None

    def _run(self, pids: Sequence[Pid] | None) -> None:
        rotation = 0
        while not self._stop.is_set():
            if self._supported is None and not self._ask_supported():
                self._stop.wait(_RETRY_S)
                continue
            plan = self._plan(pids, rotation)
            rotation += 1
            if not plan:
                self.last_error = "no ECU supports the PIDs asked for"
                self._stop.wait(_RETRY_S)
                continue
            for pid, ecu in plan:
                if not self._spend():
                    return
                if not self._request(bytes([0x01, pid.pid]), ecu):
                    self._stop.wait(_RETRY_S)
                    break

    def _plan(self, pids: Sequence[Pid] | None, rotation: int) -> list[tuple[Pid, Ecu]]:
        known = self._supported or {}
        if pids is not None:
            return [(p, known[p.pid]) for p in pids if p.pid in known]
        numeric = [p for p in reference_pids() if p.pid in known]
        fast = [p for p in numeric if p.name in FAST]
        slow = [p for p in numeric if p.name not in FAST]
        chosen = fast + ([slow[rotation % len(slow)]] if slow else [])
        return [(p, known[p.pid]) for p in chosen]

    def _spend(self, frames: int = 1) -> bool:
        """A request's turn (`rate_hz` at most, support requests included) and its `frames`
        of the policy's budget, waiting for both; False when stopped meanwhile."""
        wait = self._next_at - time.monotonic()
        if wait > 0 and self._stop.wait(wait):
            return False
        for _ in range(frames):
            if not self._take_frame():
                return False
        self._next_at = time.monotonic() + 1.0 / self.rate_hz
        return True

    def _take_frame(self) -> bool:
        """One frame of the policy's budget, waiting for it; False when stopped meanwhile."""
        while not self._stop.is_set():
            wait = self.policy.take_frame()
            if not wait:
                return True
            self.budget_waits += 1
            if self._stop.wait(min(wait, 1.0)):
                return False
        return False

    def _request(self, payload: bytes, ecu: Ecu | None) -> list[tuple[Ecu, bytes]] | None:
        """The positive answers to one request; None when it failed (kept in last_error)."""
        self.requests += 1
        try:
            replies = self.obd.request(payload, ecu=ecu)
        except ToolError as exc:
            self.last_error = exc.message
            return None
        positive = bytes([payload[0] + 0x40])
        return [(r.ecu, r.data) for r in replies if r.complete and r.data[:1] == positive]

    def _ask_supported(self) -> bool:
        """Ask the support bitmaps functionally (01 00, then 01 20 while the last bit says
        more follow); True when some ECU answered."""
        found: dict[int, Ecu] = {}
        for base in _BITMAPS:
            if base and base not in found:  # the last bitmap said no more follow
                break
            # before the vehicle first answered, the adapter probes (01 00) with 11-bit ids,
            # then 29-bit ones, before the request itself: up to three frames
            frames = _UNCONNECTED_FRAMES if self.obd.extended is None else 1
            if not self._spend(frames):
                return False
            answers = self._request(bytes([0x01, base]), None)
            if answers is None:
                return False
            for ecu, data in sorted(answers, key=lambda a: a[0].response_id):
                if len(data) >= 6 and data[1] == base:
                    for hex_pid in decode_supported(base, data[2:6]):
                        found.setdefault(int(hex_pid, 16), ecu)
        if not found:
            self.last_error = "no ECU answered the supported-PID request (01 00)"
            return False
        self._supported = found
        return True

    def close(self) -> None:
        """Stop polling and release the ISO-TP adapter (the CAN connection stays open)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)
        self.obd.close()


def attach_obd(driver: CanDriver, network: Network, policy: SendPolicy) -> ObdPoller:
    """Give `driver`'s discovery tools OBD-II as the reference, polled over `network`'s bus."""
    tools = driver.discovery
    if not isinstance(tools, DiscoveryTools):
        raise ValueError("OBD-II as the reference needs the discovery tools")
    if network.adapter is None:
        raise ValueError("OBD-II as the reference needs a bus to ask the vehicle on")
    poller = ObdPoller(network.adapter, policy)
    tools.attach_obd(poller)
    return poller
