"""Which data identifiers an ECU answers: ReadDataByIdentifier (0x22) once per DID of a range.

A scan only reads, yet it puts many requests on a bus: each takes a frame of the send policy's
CAN budget (`max_frames_per_second`, shared with every other send), a call covers at most
MAX_SCAN_DIDS identifiers and `budget_s` seconds, and a cancelled call (an abandoned await, an
MCP cancel) stops before its next request. The result is a summary: the DIDs that answered
with their length and first bytes, how many the ECU does not support, and where a scan that
stopped early would go on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from hwbridge.core.aio import CURRENT_JOB
from hwbridge.core.models import ToolError
from hwbridge.obd.database.uds import decode_did, nrc_name
from hwbridge.obd.tools.did_values import MAX_SCAN_DIDS
from hwbridge.obd.transport.base import Ecu, ObdAdapter, UnansweredRequest
from hwbridge.policy import SendPolicy

__all__ = ["DidScanner"]

_SHOWN_BYTES: Final = 32  # of each DID's data, in the result
_OUT_OF_RANGE: Final = 0x31  # requestOutOfRange: the ECU has no such DID
_LISTED: Final = 32  # DIDs listed by name per kind of silence or refusal


class DidScanner:
    """Scans DID ranges of one ECU at a time, within the policy's frame budget."""

    def __init__(
        self,
        adapter: ObdAdapter,
        policy: SendPolicy,
        *,
        per_did_s: float = 0.3,
        budget_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.adapter = adapter
        self.policy = policy
        self.per_did_s = per_did_s
        self.budget_s = budget_s
        self._clock = clock

    def scan(self, ecu: Ecu, dids: range) -> dict[str, Any]:
        if len(dids) > MAX_SCAN_DIDS:  # parse_did_range says so first; this is the guard
            raise ToolError("INVALID_VALUE", f"A scan covers at most {MAX_SCAN_DIDS} DIDs.")
        stop = threading.Event()
        job = CURRENT_JOB.get()
        withdraw = job.on_abandon(stop.set) if job is not None else None
        try:
            return self._scan(ecu, dids, stop)
        finally:
            if withdraw is not None:
                withdraw()

    def _scan(self, ecu: Ecu, dids: range, stop: threading.Event) -> dict[str, Any]:
        deadline = self._clock() + self.budget_s
        answered: list[dict[str, Any]] = []
        refused: list[dict[str, str]] = []
        silent: list[str] = []
        unsupported = 0
        asked = 0
        stopped: str | None = None
        for did in dids:
            why = self._why_stop(stop, deadline)
            if why is not None:
                stopped = f"{why}; the next DID would have been {did:04X}"
                break
            request = bytes([0x22, did >> 8, did & 0xFF])
            asked += 1
            try:
                replies = self.adapter.request(request, ecu=ecu, timeout_s=self.per_did_s)
            except UnansweredRequest:
                replies = []
            reply = replies[0] if replies else None
            if reply is None or not reply.complete:
                silent.append(f"{did:04X}")
                continue
            data = reply.data
            if data[:3] == b"\x62" + request[1:3]:
                answered.append(self._found(did, data[3:]))
            elif len(data) >= 3 and data[0] == 0x7F and data[2] == _OUT_OF_RANGE:
                unsupported += 1
            elif len(data) >= 3 and data[0] == 0x7F:
                nrc = f"{nrc_name(data[2])} (0x{data[2]:02X})"
                refused.append({"did": f"{did:04X}", "nrc": nrc})
            else:
                refused.append({"did": f"{did:04X}", "nrc": "an answer that is not for this DID"})
        return {
            "ecu": ecu.name,
            "range": f"{dids.start:04X}-{dids.stop - 1:04X}",
            "asked": asked,
            "answered": answered,
            "not_supported": unsupported,
            "refused": refused[:_LISTED],
            "refused_count": len(refused),
            "no_answer": silent[:_LISTED],
            "no_answer_count": len(silent),
            "complete": stopped is None,
            **({"stopped": stopped} if stopped else {}),
            "limits": f"at most {MAX_SCAN_DIDS} DIDs and {self.budget_s:g} s a call, one "
            f"request per DID within the send policy's {self.policy.max_frames_per_second:g} "
            "frames per second",
        }

    def _why_stop(self, stop: threading.Event, deadline: float) -> str | None:
        """Wait for a frame of the policy's budget; why the scan must stop instead, if so."""
        while True:
            if stop.is_set():
                return "the call was cancelled"
            left = deadline - self._clock()
            if left <= 0:
                return f"the scan's {self.budget_s:g} s ran out"
            wait = self.policy.take_frame()
            if not wait:
                return None
            if wait > left:
                return f"the scan's {self.budget_s:g} s ran out (the frame budget is spent)"
            stop.wait(wait)

    @staticmethod
    def _found(did: int, data: bytes) -> dict[str, Any]:
        decoded = decode_did(did, data[:_SHOWN_BYTES])
        found: dict[str, Any] = {"did": f"{did:04X}", "length": len(data), "raw": decoded["raw"]}
        if len(data) > _SHOWN_BYTES:
            found["raw_cut"] = f"the first {_SHOWN_BYTES} of {len(data)} bytes"
        if "name" in decoded:
            found["name"] = decoded["name"]
        if "value" in decoded and len(data) <= _SHOWN_BYTES:
            found["value"] = decoded["value"]
        return found
