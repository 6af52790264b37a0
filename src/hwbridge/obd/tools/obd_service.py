"""The OBD-II (SAE J1979) tools: requests built, sent through an ObdAdapter, answers decoded.

Everything an ECU says is decoded into JSON values and bounded (text is cut to printable
ASCII of a fixed length): it is data for the LLM to read, never text to follow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from hwbridge.core.models import ToolError
from hwbridge.obd.database.dtcs import decode_dtc, describe_dtc, parse_dtc
from hwbridge.obd.database.pids import PIDS, Pid, decode_monitor_status, decode_supported, find_pid
from hwbridge.obd.database.uds import nrc_name
from hwbridge.obd.transport.base import Ecu, EcuReply, ObdAdapter, UnansweredRequest
from hwbridge.policy import SendPolicy, ServiceRequest
from hwbridge.policy.outcomes import failure_outcome

__all__ = ["DtcKind", "ObdService"]

DtcKind = Literal["stored", "pending", "permanent"]
_DTC_MODES: dict[str, int] = {"stored": 0x03, "pending": 0x07, "permanent": 0x0A}
_BITMAPS = (0x00, 0x20, 0x40, 0x60, 0x80, 0xA0)
_MORE_BITMAPS = (0xC0, 0xE0)
_PIDS_PER_REQUEST = 6  # J1979 on CAN: up to six PIDs in one mode 01 request
_PAIRS_PER_REQUEST = 3  # ... and three PID/frame pairs in mode 02
_INFO_NAMES = {0x02: "vin", 0x04: "calibration_ids", 0x06: "calibration_verification_numbers",
               0x0A: "ecu_name"}  # fmt: skip


def _text(data: bytes, limit: int = 64) -> str:
    """Bus bytes as printable ASCII (anything else dropped), at most `limit` characters."""
    return "".join(chr(b) for b in data[:limit] if 0x20 <= b < 0x7F).strip()


def _refused(ecu: Ecu, reply: bytes) -> str | None:
    """'serviceNotSupported (0x11)' when `reply` is a negative response, else None."""
    if len(reply) >= 3 and reply[0] == 0x7F:
        return f"{nrc_name(reply[2])} (0x{reply[2]:02X})"
    return None


class ObdService:
    """The J1979 modes over one adapter; `supported` PIDs are cached per ECU once asked."""

    def __init__(self, adapter: ObdAdapter, policy: SendPolicy) -> None:
        self.adapter = adapter
        self.policy = policy
        self._supported: dict[Ecu, frozenset[int]] | None = None
        self._lock = threading.Lock()

    # -- helpers --------------------------------------------------------------------------

    def _ask(self, payload: bytes, ecu: Ecu | None = None) -> list[EcuReply]:
        return self.adapter.request(payload, ecu=ecu)

    @staticmethod
    def _positive(replies: Iterable[EcuReply], service: int) -> list[tuple[Ecu, bytes]]:
        return [
            (r.ecu, r.data) for r in replies if r.complete and r.data[:1] == bytes([service + 0x40])
        ]

    @staticmethod
    def _problems(replies: Iterable[EcuReply]) -> list[dict[str, str]]:
        out = []
        for r in replies:
            if not r.complete:
                out.append({"ecu": r.ecu.name, "problem": r.error or "incomplete answer"})
            elif (why := _refused(r.ecu, r.data)) is not None:
                out.append({"ecu": r.ecu.name, "problem": f"negative response: {why}"})
        return out

    def _no_answer(self, what: str) -> ToolError:
        return ToolError(
            "NO_RESPONSE",
            f"No ECU answered the {what} request. Is the ignition on and the adapter connected?",
            retryable=True,
        )

    # -- supported PIDs -------------------------------------------------------------------

    def supported(self) -> dict[Ecu, frozenset[int]]:
        """Each ECU's mode 01 PIDs, from the support bitmaps (asked once, then cached)."""
        with self._lock:
            if self._supported is None:
                found: dict[Ecu, set[int]] = {}
                for bases in (_BITMAPS, _MORE_BITMAPS):
                    if found and not any(bases[0] in pids for pids in found.values()):
                        break
                    answers = self._positive(self._ask(bytes([0x01, *bases])), 0x01)
                    for ecu, data in answers:
                        pids = found.setdefault(ecu, set())
                        for pid, value in self._split_mode01(data):
                            if pid in bases and len(value) == 4:
                                pids.update(int(h, 16) for h in decode_supported(pid, value))
                if not found:
                    raise self._no_answer("supported-PID")
                self._supported = {e: frozenset(p) for e, p in found.items()}
            return dict(self._supported)

    def supported_pids(self) -> dict[str, Any]:
        ecus = []
        for ecu, pids in sorted(self.supported().items(), key=lambda kv: kv[0].response_id):
            listed = []
            for number in sorted(p for p in pids if p % 0x20):
                pid = PIDS.get(number)
                entry: dict[str, Any] = {"pid": f"{number:02X}"}
                if pid is not None:
                    entry.update(name=pid.name, description=pid.description)
                    if pid.unit:
                        entry["unit"] = pid.unit
                listed.append(entry)
            ecus.append({"ecu": ecu.name, "address": ecu.address, "pids": listed})
        return {"ecus": ecus}

    # -- mode 01 --------------------------------------------------------------------------

    @staticmethod
    def _split_mode01(data: bytes, frame_bytes: int = 0) -> list[tuple[int, bytes]]:
        """`41 pid data pid data ...` (mode 02: `42 pid frame data ...`) as (pid, data);
        stops at a PID whose length hwbridge does not know."""
        out = []
        i = 1
        while i < len(data):
            pid = data[i]
            spec = PIDS.get(pid)
            start = i + 1 + frame_bytes
            if spec is None:
                out.append((pid, data[start:]))
                break
            out.append((pid, data[start : start + spec.length]))
            i = start + spec.length
        return out

    def _resolve(self, names: Sequence[str]) -> list[Pid | int]:
        resolved: list[Pid | int] = []
        unknown = []
        for text in names:
            found = find_pid(text) if isinstance(text, str) else None
            if found is None:
                unknown.append(str(text)[:40])
            elif found not in resolved:
                resolved.append(found)
        if unknown:
            raise ToolError(
                "INVALID_VALUE",
                f"Not a mode 01 PID: {', '.join(repr(u) for u in unknown)}. Give hex such as "
                "0C or a name such as RPM; obd_supported_pids lists what the vehicle has.",
            )
        return resolved

    @staticmethod
    def _value(pid: Pid | int, data: bytes, ecu: Ecu) -> dict[str, Any]:
        if isinstance(pid, int):
            return {"pid": f"{pid:02X}", "raw": data[:32].hex(" ").upper(), "ecu": ecu.name}
        entry: dict[str, Any] = {"pid": pid.hex, "name": pid.name, "description": pid.description}
        if len(data) < pid.length:
            entry.update(raw=data.hex(" ").upper(), problem="answer too short", ecu=ecu.name)
            return entry
        entry["value"] = pid.decode(data[: pid.length])
        if pid.unit:
            entry["unit"] = pid.unit
        entry["ecu"] = ecu.name
        return entry

    def read(self, names: Sequence[str]) -> dict[str, Any]:
        pids = self._resolve(names)
        values: list[dict[str, Any]] = []
        problems: list[dict[str, str]] = []
        answered: set[int] = set()
        known = [p for p in pids if isinstance(p, Pid)]
        batches: list[list[Pid | int]] = [
            list(known[i : i + _PIDS_PER_REQUEST]) for i in range(0, len(known), _PIDS_PER_REQUEST)
        ]
        batches += [[p] for p in pids if isinstance(p, int)]  # unknown length: one at a time
        for batch in batches:
            numbers = [p.pid if isinstance(p, Pid) else p for p in batch]
            replies = self._ask(bytes([0x01, *numbers]))
            problems += self._problems(replies)
            for ecu, data in self._positive(replies, 0x01):
                for number, value in self._split_mode01(data):
                    spec = next(
                        (p for p in batch if (p.pid if isinstance(p, Pid) else p) == number), None
                    )
                    if spec is not None:
                        values.append(self._value(spec, value, ecu))
                        answered.add(number)
        result: dict[str, Any] = {"values": values}
        missing = [f"{(p.pid if isinstance(p, Pid) else p):02X}" for p in pids]
        missing = [m for m in missing if int(m, 16) not in answered]
        if missing:
            result["not_supported"] = missing
        if problems:
            result["problems"] = problems
        return result

    def monitor_status(self) -> dict[str, Any]:
        replies = self._ask(b"\x01\x01")
        ecus = []
        for ecu, data in self._positive(replies, 0x01):
            if len(data) >= 6 and data[1] == 0x01:
                ecus.append({"ecu": ecu.name, **decode_monitor_status(data[2:6])})
        if not ecus:
            raise self._no_answer("monitor status")
        return {
            "mil": any(e["mil"] for e in ecus),
            "dtc_count": sum(e["dtc_count"] for e in ecus),
            "ecus": ecus,
        }

    # -- trouble codes --------------------------------------------------------------------

    def read_dtcs(self, kind: DtcKind) -> dict[str, Any]:
        mode = _DTC_MODES[kind]
        replies = self._ask(bytes([mode]))
        codes: list[dict[str, Any]] = []
        answered = []
        for ecu, data in self._positive(replies, mode):
            answered.append(ecu.name)
            body = data[2:]  # on CAN the answer carries the number of codes first
            for i in range(0, len(body) - 1, 2):
                pair = body[i : i + 2]
                if pair != b"\x00\x00":
                    codes.append({**describe_dtc(decode_dtc(pair)), "ecu": ecu.name})
        if not answered:
            raise self._no_answer(f"{kind} trouble code")
        result: dict[str, Any] = {"kind": kind, "count": len(codes), "codes": codes}
        result["ecus_answered"] = answered
        if problems := self._problems(replies):
            result["problems"] = problems
        return result

    def freeze_frame(self, dtc: str | None) -> dict[str, Any]:
        wanted = None
        if dtc:
            try:
                wanted = parse_dtc(dtc)
            except ValueError as exc:
                raise ToolError("INVALID_VALUE", f"{exc}.") from None
        frames = []
        replies = self._ask(b"\x02\x02\x00")
        if not any(r.complete for r in replies):  # silence says nothing about freeze frames
            raise self._no_answer("freeze frame")
        for ecu, data in self._positive(replies, 0x02):
            if len(data) >= 5 and data[1] == 0x02 and data[3:5] != b"\x00\x00":
                frames.append((ecu, decode_dtc(data[3:5])))
        if wanted is not None:
            frames = [(e, c) for e, c in frames if c == wanted]
        if not frames:
            which = f" for {wanted}" if wanted else ""
            return {"found": False, "dtc": wanted, "note": f"no ECU holds a freeze frame{which}"}
        ecu, code = frames[0]
        pids = self._frozen_pids(ecu)
        values = []
        for i in range(0, len(pids), _PAIRS_PER_REQUEST):
            batch = pids[i : i + _PAIRS_PER_REQUEST]
            payload = bytes([0x02, *[b for pid in batch for b in (pid, 0)]])
            for _, data in self._positive(self._ask(payload, ecu), 0x02):
                for number, frozen in self._split_mode01(data, frame_bytes=1):
                    if number in batch and number in PIDS:
                        values.append(self._value(PIDS[number], frozen, ecu))
        for entry in values:
            entry.pop("ecu", None)
        return {"found": True, **describe_dtc(code), "ecu": ecu.name, "frame": 0, "values": values}

    def _frozen_pids(self, ecu: Ecu) -> list[int]:
        """The PIDs ECU `ecu` froze (mode 02 support bitmaps of frame 0)."""
        supported: set[int] = set()
        for bases in ((0x00, 0x20, 0x40), (0x60, 0x80, 0xA0), (0xC0, 0xE0)):
            if supported and bases[0] not in supported:
                break
            payload = bytes([0x02, *[b for base in bases for b in (base, 0)]])
            for _, data in self._positive(self._ask(payload, ecu), 0x02):
                for number, value in self._split_mode01(data, frame_bytes=1):
                    if number in bases and len(value) == 4:
                        supported.update(int(h, 16) for h in decode_supported(number, value))
            if not supported:
                break
        return sorted(p for p in supported if p % 0x20 and p != 0x02 and p in PIDS)

    # -- mode 09 --------------------------------------------------------------------------

    def vehicle_info(self) -> dict[str, Any]:
        ecus: dict[Ecu, dict[str, Any]] = {}
        types: set[int] = set()
        for ecu, data in self._positive(self._ask(b"\x09\x00"), 0x09):
            if len(data) >= 6 and data[1] == 0x00:
                found = {int(h, 16) for h in decode_supported(0x00, data[2:6])}
                types |= found
                ecus[ecu] = {"ecu": ecu.name, "address": ecu.address}
        if not ecus:
            raise self._no_answer("vehicle information")
        vin = None
        for info in sorted(types & set(_INFO_NAMES)):
            for ecu, data in self._positive(self._ask(bytes([0x09, info])), 0x09):
                if len(data) < 3 or data[1] != info or ecu not in ecus:
                    continue
                body = data[3:]  # after the number of data items
                entry = ecus[ecu]
                if info == 0x02:
                    entry["vin"] = vin = _text(body, 17)
                elif info == 0x04:
                    entry["calibration_ids"] = [
                        _text(body[i : i + 16], 16) for i in range(0, min(len(body), 256), 16)
                    ]
                elif info == 0x06:
                    entry["calibration_verification_numbers"] = [
                        body[i : i + 4].hex().upper() for i in range(0, min(len(body), 64) - 3, 4)
                    ]
                elif info == 0x0A:
                    acronym, _, name = body[:20].partition(b"\x00")
                    entry["ecu_name"] = {
                        "acronym": _text(acronym, 4),
                        "name": _text(name.lstrip(b"-"), 16),
                    }
        return {"vin": vin, "ecus": list(ecus.values())}

    # -- mode 04 --------------------------------------------------------------------------

    def clear_dtcs(self) -> dict[str, Any]:
        request = ServiceRequest("obd_clear_dtcs", b"\x04", tool="obd_clear_dtcs")
        if self.policy.dry_run:
            self.policy.check(request)
            return {"sent": False, "dry_run": True}
        with self.policy.open_audit() as audit:  # AUDIT_FAILED here, before anything is sent
            self.policy.check(request)
            try:
                replies = self._ask(b"\x04")
            except UnansweredRequest as exc:  # it went out: the codes may be cleared
                audit_error = audit.write(request, "sent", exc.code)
                result: dict[str, Any] = {
                    "sent": True,
                    "answered": False,
                    "acknowledged_by": [],
                    "note": f"{exc.code}: the request went out but its answer did not finish; "
                    "the codes may have been cleared. Read them before asking again.",
                }
                if audit_error:
                    result["audit_error"] = audit_error
                return result
            except ToolError as exc:
                audit.write(request, failure_outcome(exc), exc.code)
                raise
            audit_error = audit.write(request, "sent")
        acknowledged = [e.name for e, _ in self._positive(replies, 0x04)]
        with self._lock:
            self._supported = None  # readiness and support may look different now
        result = {"sent": True, "acknowledged_by": acknowledged}
        if problems := self._problems(replies):
            result["refused_by"] = problems
        if not replies:
            result["note"] = "the request went out, but no ECU answered it"
        if audit_error:
            result["audit_error"] = audit_error
        return result
